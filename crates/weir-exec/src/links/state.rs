//! Saving and restoring the state of fused chains: scoped snapshot entries and the codecs of
//! state types.
//!
//! A chain's links write into one [`SnapshotWriter`]. Each link's entries are scoped by its
//! depth in the chain (the head is depth 0, its first link 1, ...), so two stateful links in
//! one chain never mix their keys. The scope is the first byte of every key.
//!
//! State types need serde only where state must survive: stream stages ask for
//! [`Durable`] on their keys, accumulators and buffered items, and build their links with a
//! [`StateCodec`]. Batch stages ask for nothing; a batch link in a job that takes snapshots
//! has no codec, and saving it fails the job naming the stage.

use std::collections::HashMap;

use serde::Serialize;
use serde::de::DeserializeOwned;
use weir_core::snapshot::{Guarantee, SnapshotHold};
use weir_core::{
    BoxError, Inbox, Outbox, PartitionKey, Partitioner, Processor, ProcessorContext,
    ProcessorResult, SnapshotEntry, SnapshotWriter, Watermark,
};

/// A type whose values can be saved in a snapshot: serde both ways, encoded with postcard.
/// Implemented for every such type.
pub trait Durable: Serialize + DeserializeOwned + Send + 'static {}
impl<T: Serialize + DeserializeOwned + Send + 'static> Durable for T {}

/// Encodes and decodes `T` without the code that uses it knowing `T: Durable`: a pair of
/// function pointers made where the bound holds (a stream stage's builder) and carried by
/// the link. Cost: two words; one postcard pass per value saved or restored.
pub struct StateCodec<T> {
    /// Appends the encoding of a value to the buffer.
    pub encode: fn(&T, &mut Vec<u8>) -> Result<(), BoxError>,
    /// Decodes a value [`encode`](Self::encode) wrote.
    pub decode: fn(&[u8]) -> Result<T, BoxError>,
}

impl<T> Clone for StateCodec<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for StateCodec<T> {}

impl<T: Durable> StateCodec<T> {
    /// The postcard codec of `T`.
    pub fn postcard() -> Self {
        StateCodec {
            encode: |value, out| {
                let bytes = postcard::to_extend(value, std::mem::take(out))?;
                *out = bytes;
                Ok(())
            },
            decode: |bytes| Ok(postcard::from_bytes(bytes)?),
        }
    }
}

impl<T> StateCodec<T> {
    /// `value` as a new byte vector.
    pub fn to_bytes(self, value: &T) -> Result<Vec<u8>, BoxError> {
        let mut out = Vec::new();
        (self.encode)(value, &mut out)?;
        Ok(out)
    }
}

/// The error of a stateful link that cannot be saved: it was built without a codec (a batch
/// stage in a job that takes snapshots).
pub fn not_durable(stage: &str) -> BoxError {
    format!(
        "{stage} keeps state that cannot be saved in a snapshot: only stream stages save their state; run this job without snapshots"
    )
    .into()
}

/// Fails a save that would leave out what `held` says is still held (items, a window
/// being emitted, closed sessions not sent): the snapshot protocol empties these before it
/// saves, so this is a bug, and the job fails rather than take a snapshot that loses them.
/// Cost: one branch per save.
pub fn refuse_save_if(held: bool, what: &str) -> ProcessorResult<()> {
    if held {
        return Err(format!(
            "saved with {what}: the snapshot would lose them (a bug in the snapshot protocol)"
        )
        .into());
    }
    Ok(())
}

/// Where one link of a chain saves: the shared writer, and the link's scope.
pub struct LinkWriter<'a> {
    writer: &'a mut SnapshotWriter,
    scope: u8,
}

impl<'a> LinkWriter<'a> {
    /// The writer of the chain's head (scope 0).
    pub fn head(writer: &'a mut SnapshotWriter) -> Self {
        LinkWriter { writer, scope: 0 }
    }

    /// The writer of the next link.
    // The scope of the next link in the chain, not an iterator step.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> LinkWriter<'_> {
        LinkWriter {
            writer: self.writer,
            scope: self.scope + 1,
        }
    }

    fn scoped(&self, key: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(key.len() + 1);
        k.push(self.scope);
        k.extend_from_slice(key);
        k
    }

    /// Saves state of this instance's own (a position, a counter).
    pub fn put(&mut self, key: &[u8], value: Vec<u8>) {
        let key = self.scoped(key);
        self.writer.put(key, value);
    }

    /// Saves state of `partition` (`0..271`): on restore it goes to the instance that owns
    /// that partition then.
    pub fn put_in_partition(&mut self, partition: u16, key: &[u8], value: Vec<u8>) {
        let key = self.scoped(key);
        self.writer.put_keyed(partition, key, value);
    }

    /// Saves the state of one key: it goes to the key's partition, and on restore to the
    /// instance that owns that partition then.
    pub fn put_keyed<K: PartitionKey + ?Sized>(
        &mut self,
        key: &K,
        encoded_key: &[u8],
        value: Vec<u8>,
    ) {
        let partition = Partitioner::default().partition_of(key) as u16;
        self.put_in_partition(partition, encoded_key, value);
    }
}

/// What a chain restores from: the entries the instance received, by scope.
#[derive(Default)]
pub struct ChainEntries {
    by_scope: HashMap<u8, Vec<SnapshotEntry>>,
}

impl ChainEntries {
    /// Sorts entries by the scope in their first key byte, removing it.
    pub fn new(entries: Vec<SnapshotEntry>) -> Self {
        let mut by_scope: HashMap<u8, Vec<SnapshotEntry>> = HashMap::new();
        for mut e in entries {
            if e.key.is_empty() {
                continue;
            }
            let scope = e.key.remove(0);
            by_scope.entry(scope).or_default().push(e);
        }
        ChainEntries { by_scope }
    }

    /// The reader for the chain's head (scope 0).
    pub fn head(&mut self) -> LinkEntries<'_> {
        LinkEntries {
            entries: self,
            scope: 0,
        }
    }
}

/// One link's entries, and the way to the next link's.
pub struct LinkEntries<'a> {
    entries: &'a mut ChainEntries,
    scope: u8,
}

impl LinkEntries<'_> {
    /// The next link's entries.
    // The scope of the next link in the chain, not an iterator step.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> LinkEntries<'_> {
        LinkEntries {
            entries: self.entries,
            scope: self.scope + 1,
        }
    }

    /// Takes this link's entries (key without the scope byte).
    pub fn take(&mut self) -> Vec<SnapshotEntry> {
        self.entries
            .by_scope
            .remove(&self.scope)
            .unwrap_or_default()
    }
}

/// Where an instance sits, and what its job guarantees: what a link needs to restore times
/// saved per instance (a watermark, the next window to emit). Set at `init`.
#[derive(Debug, Clone, Copy)]
pub struct InstancePlace {
    /// The instance's index among its vertex's instances.
    pub index: u32,
    /// How many instances the vertex has.
    pub parallelism: u32,
    /// What the job's snapshots guarantee.
    pub guarantee: Guarantee,
}

impl Default for InstancePlace {
    fn default() -> Self {
        InstancePlace {
            index: 0,
            parallelism: 1,
            guarantee: Guarantee::None,
        }
    }
}

impl InstancePlace {
    /// The place of the instance `ctx` describes.
    pub fn of(ctx: &ProcessorContext) -> Self {
        InstancePlace {
            index: ctx.global_index() as u32,
            parallelism: ctx.total_parallelism().max(1) as u32,
            guarantee: ctx.guarantee(),
        }
    }
}

/// Which time a rescaled instance keeps when several old instances' come to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rescaled {
    /// The greatest: after a shuffle, aligned barriers mean every instance had seen the same
    /// watermarks, so the greatest never emits a window twice.
    Greatest,
    /// The least: never drops a replayed item as late.
    Least,
}

/// Saves a time of this instance's (`name` plus its index).
pub fn put_instance_time(state: &mut LinkWriter<'_>, place: InstancePlace, name: &[u8], time: i64) {
    let mut key = name.to_vec();
    key.extend(place.index.to_le_bytes());
    state.put(&key, time.to_le_bytes().to_vec());
}

/// Collects the times saved under `name` by [`put_instance_time`].
#[derive(Debug, Default)]
pub struct InstanceTimes {
    times: Vec<(u32, i64)>,
}

impl InstanceTimes {
    /// Takes `e` if it is a time saved under `name`; returns whether it was.
    pub fn take(&mut self, name: &[u8], e: &SnapshotEntry) -> bool {
        if e.partition.is_some()
            || e.key.len() != name.len() + 4
            || !e.key.starts_with(name)
            || e.value.len() != 8
        {
            return false;
        }
        let index = u32::from_le_bytes(e.key[name.len()..].try_into().expect("4 bytes"));
        let time = i64::from_le_bytes(e.value[..8].try_into().expect("8 bytes"));
        self.times.push((index, time));
        true
    }

    /// The time this instance resumes with: its own when the parallelism is unchanged;
    /// otherwise, with exactly-once, the old instances' by `rescaled`, and with at-least-once
    /// the least (unaligned barriers: the instances had not seen the same watermarks, and a
    /// replayed item must not be dropped). `None` when nothing was saved.
    pub fn resolve(&self, place: InstancePlace, rescaled: Rescaled) -> Option<i64> {
        let old_parallelism = self.times.iter().map(|(i, _)| i + 1).max()?;
        if old_parallelism == place.parallelism
            && let Some(&(_, own)) = self.times.iter().find(|(i, _)| *i == place.index)
        {
            return Some(own);
        }
        let times = self.times.iter().map(|(_, t)| *t);
        match (place.guarantee, rescaled) {
            (Guarantee::ExactlyOnce, Rescaled::Greatest) => times.max(),
            _ => times.min(),
        }
    }
}

/// Wraps the processor of a vertex whose stages keep state that snapshots cannot save (a
/// batch aggregation, a sort, a hash join's table, a batch `map_stateful`): from `init` until
/// `complete` is done it holds the job's snapshots back
/// ([`ProcessorContext::hold_snapshots`]), so that no snapshot is asked of it while it holds
/// that state. A batch job therefore snapshots only before and after such stages (for most,
/// its terminal snapshot only), and a restart starts them over; its transactional sinks
/// still commit exactly once.
///
/// Cost: one virtual call per hook; nothing per item.
pub struct HoldingSnapshots {
    inner: Box<dyn Processor>,
    hold: Option<SnapshotHold>,
}

impl HoldingSnapshots {
    /// Wraps `inner`, which keeps state between snapshots.
    pub fn new(inner: Box<dyn Processor>) -> Self {
        HoldingSnapshots { inner, hold: None }
    }
}

impl Processor for HoldingSnapshots {
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        if ctx.guarantee() != Guarantee::None && ctx.global_index() == 0 {
            tracing::info!(
                job = ctx.job_name(),
                vertex = ctx.vertex(),
                "keeps state that snapshots cannot save: the job takes no snapshot until it completes"
            );
        }
        self.hold = Some(ctx.hold_snapshots());
        self.inner.init(ctx)
    }
    fn process(
        &mut self,
        ordinal: usize,
        inbox: &mut Inbox,
        outbox: &mut Outbox,
    ) -> ProcessorResult<()> {
        self.inner.process(ordinal, inbox, outbox)
    }
    fn try_process(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.inner.try_process(outbox)
    }
    fn try_process_watermark(
        &mut self,
        wm: Watermark,
        outbox: &mut Outbox,
    ) -> ProcessorResult<bool> {
        self.inner.try_process_watermark(wm, outbox)
    }
    fn try_process_idle(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.inner.try_process_idle(outbox)
    }
    fn complete_edge(&mut self, ordinal: usize, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.inner.complete_edge(ordinal, outbox)
    }
    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        let done = self.inner.complete(outbox)?;
        if done {
            // Its state is all out: later snapshots may be taken.
            self.hold = None;
        }
        Ok(done)
    }
    fn is_cooperative(&self) -> bool {
        self.inner.is_cooperative()
    }
    fn save_to_snapshot(
        &mut self,
        outbox: &mut Outbox,
        writer: &mut SnapshotWriter,
    ) -> ProcessorResult<bool> {
        self.inner.save_to_snapshot(outbox, writer)
    }
    fn snapshot_commit_finish(&mut self, success: bool) -> ProcessorResult<bool> {
        self.inner.snapshot_commit_finish(success)
    }
    fn restore_from_snapshot(&mut self, entries: Vec<SnapshotEntry>) -> ProcessorResult<()> {
        self.inner.restore_from_snapshot(entries)
    }
    fn close(&mut self) -> ProcessorResult<()> {
        self.hold = None;
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_keep_links_apart_and_keyed_entries_carry_their_partition() {
        let mut writer = SnapshotWriter::new();
        let mut head = LinkWriter::head(&mut writer);
        head.put(b"pos", vec![1]);
        head.next().put_keyed(&7u64, b"k", vec![2]);
        head.next().next().put(b"pos", vec![3]);
        let entries = writer.into_entries();
        assert_eq!(
            entries[1].partition,
            Some(Partitioner::default().partition_of(&7u64) as u16)
        );
        let mut chain = ChainEntries::new(entries);
        let mut head = chain.head();
        assert_eq!(head.take()[0].value, vec![1]);
        let mut first = head.next();
        let keyed = first.take();
        assert_eq!(
            (keyed[0].key.as_slice(), keyed[0].value.as_slice()),
            (&b"k"[..], &[2u8][..])
        );
        assert_eq!(first.next().take()[0].value, vec![3]);
    }

    #[test]
    fn the_postcard_codec_round_trips() {
        let codec = StateCodec::<(String, Vec<u64>)>::postcard();
        let value = ("a".to_string(), vec![1, 2, 3]);
        let bytes = codec.to_bytes(&value).unwrap();
        assert_eq!((codec.decode)(&bytes).unwrap(), value);
    }
}
