//! The head processor of a source vertex: runs a [`SourceReader`] into the fused chain.
//!
//! # Snapshots
//!
//! A source head saves, at scope 0 of its chain's entries, its reader's position (after the
//! last item handed to the chain: see [`crate::links::read_ahead`]), whether the input was
//! exhausted, and for a stream source its event-time state. Its backlog goes out first, and a
//! stream source hands its pending watermark down before it saves. The entry is keyed by the
//! instance's index; entries of unkeyed state reach every instance on restore, and each takes
//! its own. Positions are per instance's share of the input, so a source restored at another
//! parallelism than it was saved at is refused, naming the vertex.
//!
//! A reader that cannot replay ([`SourceReader::position`] is `None`) refuses a job with
//! exactly-once at submit (in `init`); with at-least-once it logs that it gives at most once.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use weir_core::snapshot::Guarantee;
use weir_core::{
    BoxError, InstanceMetrics, Outbox, Processor, ProcessorContext, ProcessorResult, SnapshotEntry,
    SnapshotWriter,
};

use crate::connector::SourceReader;
use crate::links::link::{ErasedLink, Link, save_chain, unerase};
use crate::links::read_ahead::{BATCH, ReadOutcome, SourceFeed};
use crate::links::state::{ChainEntries, LinkWriter};

/// The head processor of a batch source: it takes the batches its reader filled (on a
/// read-ahead thread when the reader may block) and pushes them down its chain.
pub struct SourceHead<R: SourceReader> {
    feed: SourceFeed<R>,
    chain: Box<dyn Link<R::Item>>,
    batch: Vec<R::Item>,
    exhausted: bool,
    /// A read failure, raised once the items read before it are down the chain.
    failed: Option<BoxError>,
    place: SourcePlace,
    /// Where the items read are counted; set in `init`.
    metrics: Option<Arc<InstanceMetrics>>,
}

/// A source head reading with `reader` into `chain`.
pub fn source_head<R: SourceReader>(reader: R, chain: ErasedLink) -> Box<dyn Processor> {
    Box::new(SourceHead {
        feed: SourceFeed::new(reader),
        chain: unerase::<R::Item>(chain),
        batch: Vec::with_capacity(BATCH),
        exhausted: false,
        failed: None,
        place: SourcePlace::default(),
        metrics: None,
    })
}

/// A source instance's name and place, for its snapshot entry and its messages.
#[derive(Debug, Clone, Default)]
pub struct SourcePlace {
    vertex: String,
    instance: usize,
    parallelism: usize,
}

impl SourcePlace {
    /// The vertex name.
    pub fn vertex(&self) -> &str {
        &self.vertex
    }

    /// Takes the place from `ctx` and checks that the reader suits the job's guarantee:
    /// exactly-once needs a reader that can replay.
    pub fn init(ctx: &ProcessorContext, replayable: bool) -> ProcessorResult<Self> {
        let place = SourcePlace {
            vertex: ctx.vertex().to_owned(),
            instance: ctx.global_index(),
            parallelism: ctx.total_parallelism().max(1),
        };
        if !replayable {
            match ctx.guarantee() {
                Guarantee::ExactlyOnce => {
                    return Err(format!(
                        "source '{}' cannot replay its input, so it cannot give exactly-once: run the job with at-least-once (this source then gives at most once) or without snapshots",
                        place.vertex
                    )
                    .into());
                }
                Guarantee::AtLeastOnce if place.instance == 0 => tracing::warn!(
                    job = ctx.job_name(),
                    vertex = %place.vertex,
                    "source '{}' cannot replay its input: after a restore, what it read since the last snapshot is lost (at most once for this source)",
                    place.vertex
                ),
                _ => {}
            }
        }
        Ok(place)
    }

    /// Saves `state` at scope 0, keyed by this instance's index.
    pub fn save(&self, head: &mut LinkWriter<'_>, mut state: SavedSource) {
        state.instance = self.instance as u64;
        state.parallelism = self.parallelism as u64;
        let value = postcard::to_stdvec(&state).expect("a source state always encodes");
        head.put(&(self.instance as u64).to_le_bytes(), value);
    }

    /// This instance's state among the restored entries (scope 0 of the chain's): `None`
    /// when the snapshot holds none for it.
    ///
    /// # Errors
    /// An entry does not decode, or the source was saved at another parallelism.
    pub fn restore(&self, entries: &mut ChainEntries) -> Result<Option<SavedSource>, BoxError> {
        let mut mine = None;
        for e in entries.head().take() {
            let state: SavedSource = postcard::from_bytes(&e.value).map_err(|err| {
                format!(
                    "source '{}': a damaged read position in the snapshot ({err})",
                    self.vertex
                )
            })?;
            if state.parallelism != self.parallelism as u64 {
                return Err(format!(
                    "source '{}' was saved with {} instances and now runs {}: its read positions belong to the old instances' shares of the input; run it with parallelism {} to resume",
                    self.vertex, state.parallelism, self.parallelism, state.parallelism
                )
                .into());
            }
            if state.instance == self.instance as u64 {
                mine = Some(state);
            }
        }
        Ok(mine)
    }

    /// Seeks `feed` to the saved position, and returns whether the input is still to be
    /// taken as exhausted. A reader that saved a position is sought even if it had reached
    /// its end: it checks that its input is the one the position belongs to, and reports at
    /// its next read whether anything was added since (files appended to a file source's
    /// listing); reading on from its end yields nothing more otherwise. A reader that cannot
    /// replay starts again where it is (at-least-once only: exactly-once was refused in
    /// `init`).
    ///
    /// # Errors
    /// The reader's own seek error, with the vertex ([`SourceSeekError`]); the reader's
    /// error stays the error's source, so callers can tell a changed input (the file
    /// sources' `SourceError::InputChanged`) from other failures.
    pub fn seek<R: SourceReader>(
        &self,
        feed: &mut SourceFeed<R>,
        state: &SavedSource,
    ) -> Result<bool, BoxError> {
        match &state.position {
            Some(position) => {
                feed.seek(position).map_err(|source| SourceSeekError {
                    vertex: self.vertex.clone(),
                    source,
                })?;
                Ok(false)
            }
            None => Ok(state.exhausted),
        }
    }
}

/// A source could not resume at its saved position.
#[derive(Debug, thiserror::Error)]
#[error("source '{vertex}': {source}")]
pub struct SourceSeekError {
    vertex: String,
    #[source]
    source: BoxError,
}

/// What a source instance saves. See the [module docs](self).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SavedSource {
    /// The instance that saved this.
    pub instance: u64,
    /// How many instances the source had when it saved.
    pub parallelism: u64,
    /// The reader's position; `None` when it cannot replay.
    pub position: Option<Vec<u8>>,
    /// Whether the reader had read everything.
    pub exhausted: bool,
    /// A stream source's event-time state.
    pub event_time: Option<SavedEventTime>,
}

/// A stream source's event-time state: the highest timestamp per partition, which are idle,
/// and the last watermark it sent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SavedEventTime {
    /// The highest timestamp seen per partition; `None` where none arrived yet.
    pub highest: Vec<Option<i64>>,
    /// Which partitions were idle.
    pub idle: Vec<bool>,
    /// The last watermark the instance sent.
    pub sent: i64,
}

impl<R: SourceReader> Processor for SourceHead<R> {
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.feed.open(ctx)?;
        self.place = SourcePlace::init(ctx, self.feed.replayable())?;
        self.metrics = Some(Arc::clone(ctx.metrics()));
        self.chain.init(ctx)
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        if !self.chain.flush(outbox)? {
            return Ok(false);
        }
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        if !self.exhausted {
            match self.feed.read(&mut self.batch, None) {
                ReadOutcome::More => {}
                ReadOutcome::Exhausted => self.exhausted = true,
                ReadOutcome::Failed(e) => self.failed = Some(e),
            }
            if !self.batch.is_empty() || self.exhausted || self.failed.is_some() {
                // The chain may have only accumulated: still real work.
                outbox.report_progress();
            }
            if let Some(m) = &self.metrics {
                m.record_items_read(self.batch.len());
            }
            self.chain.push_batch(&mut self.batch);
            if !self.chain.flush(outbox)? {
                return Ok(false);
            }
            if let Some(e) = self.failed.take() {
                return Err(e);
            }
            if !self.exhausted {
                return Ok(false);
            }
        }
        self.chain.complete(outbox)
    }

    /// Always the chain's say: a reader that may block reads ahead on an I/O thread.
    fn is_cooperative(&self) -> bool {
        self.chain.is_cooperative()
    }

    fn save_to_snapshot(
        &mut self,
        outbox: &mut Outbox,
        writer: &mut SnapshotWriter,
    ) -> ProcessorResult<bool> {
        let state = SavedSource {
            position: self.feed.position(),
            exhausted: self.exhausted,
            ..SavedSource::default()
        };
        let place = &self.place;
        save_chain(&mut *self.chain, outbox, writer, |head| {
            place.save(head, state);
            Ok(())
        })
    }

    fn restore_from_snapshot(&mut self, entries: Vec<SnapshotEntry>) -> ProcessorResult<()> {
        let mut entries = ChainEntries::new(entries);
        if let Some(state) = self.place.restore(&mut entries)? {
            self.exhausted = self.place.seek(&mut self.feed, &state)?;
        }
        self.chain.restore(&mut entries.head().next())
    }

    fn snapshot_commit_finish(&mut self, _success: bool) -> ProcessorResult<bool> {
        self.chain.commit()
    }

    fn close(&mut self) -> ProcessorResult<()> {
        self.feed.close()
    }
}
