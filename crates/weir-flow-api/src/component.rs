//! One processor (or port) of a validated flow, as its processor is built from it: its
//! type's spec, its properties (declared defaults filled in), its schedule and relationships.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::spec::ProcessorSpec;

/// When a processor runs.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// Every period; a period of zero is "as fast as possible".
    Timer(Duration),
    /// On a Quartz-style CRON expression with seconds.
    Cron(Box<croner::Cron>),
}

/// What a component is.
#[derive(Debug, Clone, Copy)]
pub enum ComponentKind {
    /// A processor of a built-in type or of a type registered with the flow.
    Processor(&'static ProcessorSpec),
    /// A group's port: a pass-through with one relationship, `success`.
    Port,
}

/// One processor (or port) of the flow, validated.
#[derive(Debug, Clone)]
pub struct Component {
    /// Unique name in the flow: the processor's name, or `GROUP/PORT` for a port.
    pub name: String,
    /// The group it belongs to.
    pub group: String,
    /// Its type.
    pub kind: ComponentKind,
    /// Properties as written (declared defaults are filled in).
    pub properties: BTreeMap<String, String>,
    /// When it runs.
    pub schedule: Schedule,
    /// Concurrent tasks.
    pub concurrency: usize,
    /// How long one task may keep its session open, triggering again, before committing.
    pub run_duration: Duration,
    /// How long a penalized flow file waits.
    pub penalty: Duration,
    /// How long the processor rests after yielding.
    pub yield_duration: Duration,
    /// Relationships that drop their flow files.
    pub auto_terminate: BTreeSet<String>,
    /// Every relationship it has (fixed and dynamic).
    pub relationships: Vec<String>,
    /// An output port marked `failure: true` (the stateless engine rolls back on reaching it).
    pub failure_port: bool,
    /// The timeout of the stateless group it belongs to; `None` in a traditional group.
    /// Processors that wait on outside services bound their waits by it, and MergeContent
    /// keeps its bins in the group's transaction rather than in held sessions.
    pub group_timeout: Option<Duration>,
    /// The line where it is defined.
    pub line: Option<usize>,
}

impl Component {
    /// The type's name (`Port` for ports).
    pub fn type_name(&self) -> &'static str {
        match self.kind {
            ComponentKind::Processor(s) => s.kind,
            ComponentKind::Port => "Port",
        }
    }

    /// A property's value, or its declared default.
    pub fn property(&self, name: &str) -> Option<&str> {
        self.properties.get(name).map(String::as_str)
    }
}
