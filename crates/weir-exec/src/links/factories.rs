//! The type-erased factories a plan joins: each is built while a stage's, a source's or a
//! sink's types are known, and called once per processor instance when the job starts.
//!
//! Connectors hand the planner a [`SourceHeadFactory`] or a [`SinkTerminalFactory`]; the
//! Pipeline API records [`WrapFn`]s and [`HeadFn`]s for its stages. The planner then fuses
//! them into vertices without knowing the types; the joins are checked by item type.

use std::sync::Arc;

use weir_core::{Edge, Item, Processor, ProcessorContext};

use crate::links::link::{ErasedLink, Link, erase, unerase};

/// Wraps the downstream chain into a chain one link longer. Called once per instance.
pub type WrapFn = Arc<dyn Fn(ErasedLink) -> ErasedLink + Send + Sync>;
/// Builds a head processor around its chain. Called once per instance.
pub type HeadFn = Arc<dyn Fn(ErasedLink) -> Box<dyn Processor> + Send + Sync>;
/// Builds a terminal link. Called once per instance.
pub type TerminalFn = Arc<dyn Fn() -> ErasedLink + Send + Sync>;
/// Makes an edge partitioned by the stage's key.
pub type RouteFn = Arc<dyn Fn(Edge) -> Edge + Send + Sync>;
/// Builds the head processor of a source vertex around the chain that follows it.
pub type SourceHeadFactory =
    Arc<dyn Fn(&ProcessorContext, ErasedLink) -> Box<dyn Processor> + Send + Sync>;
/// Builds the terminal link of a sink for one instance.
pub type SinkTerminalFactory = Arc<dyn Fn(&ProcessorContext) -> ErasedLink + Send + Sync>;

/// How a sink that writes bytes has its records formatted before they travel to it, when it
/// cannot run in the vertex of the stages before it (see [`crate::links::format`]).
#[derive(Clone)]
pub struct Preformat {
    /// Wraps a chain taking [`FormattedRecords`](crate::links::format::FormattedRecords) into
    /// a link taking the sink's items: fused into the vertex before the sink.
    pub format: WrapFn,
    /// The sink's terminal, taking the formatted blocks.
    pub terminal: SinkTerminalFactory,
}

/// How a sink wants its input partitioned.
#[derive(Clone)]
pub struct SinkRoute {
    /// Makes the partitioned edge into the sink.
    pub route: RouteFn,
    /// The route sends a pair `(K, _)` by the default partition of `K`: a stage whose output
    /// is already so partitioned needs no edge.
    pub by_pair_key: bool,
}

/// Wraps a typed link constructor into the planner's erased form: `make` receives the typed
/// downstream chain (of `R`s) and returns a chain taking `T`s.
pub fn wrap_with<T: Item, R: Item>(
    make: impl Fn(Box<dyn Link<R>>) -> Box<dyn Link<T>> + Send + Sync + 'static,
) -> WrapFn {
    Arc::new(move |next: ErasedLink| erase::<T>(make(unerase::<R>(next))))
}
