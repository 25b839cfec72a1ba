//! Sinks: where a pipeline's results go.
//!
//! A [`Sink`] describes a sink; each of its processor instances runs its own [`SinkWriter`].
//! The planner fuses a sink into the vertex before it when it can, so writing costs no extra
//! queue hop.
//!
//! | sink | module | with snapshots |
//! |---|---|---|
//! | an in-memory collection | [`collection`] | at-least-once |
//! | standard output or the log | [`stdout`] | at-least-once |
//! | text files: one part file per instance, or a single file | [`files`] | exactly-once |
//! | JSON Lines | [`json`] | exactly-once |
//! | CSV | [`csv`] | exactly-once |
//! | an async `Stream` (bounded channel), or a blocking iterator | [`reactive`] | at-least-once |
//! | a partitioned map (`weir_maps`) | `weir::sinks::map` | exactly-once |
//!
//! # Guarantees after a restore
//!
//! In a job that takes snapshots, the file sinks are transactional: each snapshot epoch is a
//! part file, made durable in phase 1 and renamed into place in phase 2, and the parts are
//! joined into the output file when the job ends (see [`files`](files#atomic-output)). The
//! output then holds every result exactly once, whatever restores happened on the way
//! (with [`Guarantee::ExactlyOnce`](weir_core::snapshot::Guarantee::ExactlyOnce)).
//!
//! The map sink holds each snapshot interval's writes until the snapshot is durable, and
//! saves the partitions it wrote in the snapshot, so a restore (also in a new process, whose
//! map starts empty) puts them back (see `weir::sinks::map`).
//!
//! The other sinks hand out what they receive at once: a collection, standard output and a
//! channel cannot take back what they delivered, so after a restore the results produced
//! since the last snapshot are delivered again (at-least-once).

pub mod collection;
pub mod csv;
mod epochs;
pub mod files;
pub mod json;
pub mod reactive;
pub mod stdout;

use std::sync::Arc;

use weir_core::{Item, ProcessorContext};

use weir_exec::links::factories::{Preformat, SinkRoute, SinkTerminalFactory};
use weir_exec::links::sink::sink_terminal;

pub use weir_exec::connector::SinkWriter;

/// A destination for `T`s. Pass it to `weir::BatchStage::write_to`.
pub struct Sink<T> {
    name: String,
    parallelism: Option<usize>,
    terminal: SinkTerminalFactory,
    /// For a sink that writes bytes: how the stages before it format its records when it
    /// does not run in their vertex.
    preformat: Option<Preformat>,
    route: Option<SinkRoute>,
    _item: std::marker::PhantomData<fn(T)>,
}

/// What the planner takes from a [`Sink`] (see [`Sink::into_parts`]).
pub struct SinkParts {
    /// The sink's name, the name of its vertex.
    pub name: String,
    /// A fixed instance count, or `None` for one instance per worker.
    pub parallelism: Option<usize>,
    /// Builds an instance's terminal link.
    pub terminal: SinkTerminalFactory,
    /// For a sink that writes bytes: how the stages before it format its records when it
    /// does not run in their vertex.
    pub preformat: Option<Preformat>,
    /// Set when each instance must receive the items of the partitions it owns.
    pub route: Option<SinkRoute>,
}

impl<T: Item> Sink<T> {
    /// Takes the sink apart for the planner.
    pub fn into_parts(self) -> SinkParts {
        SinkParts {
            name: self.name,
            parallelism: self.parallelism,
            terminal: self.terminal,
            preformat: self.preformat,
            route: self.route,
        }
    }

    /// A sink named `name` whose instances each write with the writer `factory` makes.
    ///
    /// `parallelism` fixes the instance count (`Some(1)` for a single output file); `None`
    /// runs one instance per worker.
    pub fn new<W, F>(name: impl Into<String>, parallelism: Option<usize>, factory: F) -> Self
    where
        W: SinkWriter<Item = T>,
        F: Fn(&ProcessorContext) -> W + Send + Sync + 'static,
    {
        let terminal: SinkTerminalFactory = Arc::new(move |ctx| sink_terminal(factory(ctx)));
        Sink {
            name: name.into(),
            parallelism,
            terminal,
            preformat: None,
            route: None,
            _item: std::marker::PhantomData,
        }
    }

    /// The same sink, with its records formatted as `preformat` says where they are made.
    pub(crate) fn with_preformat(mut self, preformat: Preformat) -> Self {
        self.preformat = Some(preformat);
        self
    }

    /// A sink whose instances end their chain in the terminal `terminal` makes.
    pub fn from_terminal(
        name: impl Into<String>,
        parallelism: Option<usize>,
        terminal: SinkTerminalFactory,
    ) -> Self {
        Sink {
            name: name.into(),
            parallelism,
            terminal,
            preformat: None,
            route: None,
            _item: std::marker::PhantomData,
        }
    }

    /// The same sink, fed over a partitioned edge made by `route`, so that each instance
    /// receives the items of the partitions it owns.
    pub fn routed(mut self, route: SinkRoute) -> Self {
        self.route = Some(route);
        self
    }

    /// The sink's name, as it appears in the plan.
    pub fn name(&self) -> &str {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use weir_core::Item;
    use weir_core::test_support::verify_processor;

    use weir_exec::links::link::{Emit, ErasedLink, erase, inbox_head};

    fn emit<T: Item>() -> ErasedLink {
        erase::<T>(Box::new(Emit::new()))
    }

    #[test]
    fn sink_terminal_writes_everything() {
        let (sink, collected) = crate::sinks::collection::list::<u32>();
        verify_processor(move |ctx| inbox_head::<u32>((sink.terminal)(ctx)))
            .input((0..100u32).collect())
            .expect_output::<()>(vec![]);
        // Four harness runs, each writing all 100 items.
        assert_eq!(collected.take().len(), 400);
    }

    #[test]
    fn heads_of_blocking_readers_and_file_sinks_are_cooperative() {
        // A file read may block: the reader runs on a read-ahead thread, and the head, with the
        // chain's CPU work, stays on the cooperative workers. So does a file sink's formatting.
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.txt");
        std::fs::write(&input, "a\nb\n").unwrap();
        let source = crate::sources::files::text(&input).unwrap();
        let ctx = weir_core::ProcessorContext::new("read", 0, 1, 0);
        let head = (source.into_parts().head)(&ctx, emit::<String>());
        assert!(head.is_cooperative());
        let sink = crate::sinks::files::text::<String>(dir.path().join("out.txt"));
        let terminal = weir_exec::links::link::unerase::<String>((sink.terminal)(&ctx));
        assert!(terminal.is_cooperative());
    }
}
