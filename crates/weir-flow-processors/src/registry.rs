//! Custom processor types, as NiFi loads processors from extension bundles.
//!
//! A [`ProcessorRegistry`] adds types to the flow format: each has a [`ProcessorSpec`]
//! (properties, relationships, whether it is a source), which validation reads exactly as it
//! reads the built-in table, and a factory that makes the processor for a validated
//! component. A flow parsed with `weir_flow::definition::Flow::parse_with` keeps its
//! registry, so the engines build custom processors like built-in ones and runs them under the same rules: a trigger that fails
//! or panics rolls its session back with its inputs penalized, and the engine goes on.
//!
//! ```
//! use std::sync::Arc;
//! use weir_flow_api::spec::{Dynamic, ProcessorSpec};
//! use weir_flow_api::{ProcessError, Processor, Session, Trigger};
//! use weir_flow_processors::registry::ProcessorRegistry;
//!
//! /// Drops every flow file it gets.
//! struct Sink;
//! impl Processor for Sink {
//!     fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
//!         let Some(ff) = session.get()? else { return Ok(Trigger::Idle) };
//!         session.remove(ff);
//!         Ok(Trigger::Worked)
//!     }
//! }
//! static SINK: ProcessorSpec = ProcessorSpec {
//!     kind: "Sink",
//!     description: "Drops every flow file it gets.",
//!     properties: &[],
//!     relationships: &[],
//!     dynamic: Dynamic::None,
//!     source: false,
//! };
//! let mut registry = ProcessorRegistry::default();
//! registry.register(&SINK, |_| Ok(Arc::new(Sink))).unwrap();
//! assert_eq!(registry.spec("Sink").map(|s| s.kind), Some("Sink"));
//! assert!(registry.register(&SINK, |_| Ok(Arc::new(Sink))).is_err(), "taken");
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use super::spec::{self, ProcessorSpec};
use super::{BuildError, Processor, build};
use weir_flow_api::component::{Component, ComponentKind};

/// Makes a processor for a validated component of a custom type (its properties are
/// checked against the type's spec already).
pub type ProcessorFactory =
    dyn Fn(&Component) -> Result<Arc<dyn Processor>, BuildError> + Send + Sync + 'static;

/// Why a type cannot be registered.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The name is taken by a built-in type, a type of the next engine issue, or a type
    /// registered before.
    #[error("processor type `{0}` already exists")]
    Taken(String),
}

/// Processor types added to the built-in ones. Cheap to clone (shared). See the
/// [module docs](self).
#[derive(Clone, Default)]
pub struct ProcessorRegistry {
    types: Arc<BTreeMap<&'static str, Custom>>,
}

#[derive(Clone)]
struct Custom {
    spec: &'static ProcessorSpec,
    factory: Arc<ProcessorFactory>,
}

impl std::fmt::Debug for ProcessorRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.types.keys()).finish()
    }
}

impl ProcessorRegistry {
    /// Adds the type `spec.kind`, made by `factory`.
    ///
    /// # Errors
    /// [`RegistryError::Taken`] when a built-in or registered type has that name.
    pub fn register<F>(
        &mut self,
        spec: &'static ProcessorSpec,
        factory: F,
    ) -> Result<(), RegistryError>
    where
        F: Fn(&Component) -> Result<Arc<dyn Processor>, BuildError> + Send + Sync + 'static,
    {
        if spec::spec(spec.kind).is_some() || self.types.contains_key(spec.kind) {
            return Err(RegistryError::Taken(spec.kind.to_string()));
        }
        Arc::make_mut(&mut self.types).insert(
            spec.kind,
            Custom {
                spec,
                factory: Arc::new(factory),
            },
        );
        Ok(())
    }

    /// The spec of `kind`: a built-in type first, then a registered one.
    pub fn spec(&self, kind: &str) -> Option<&'static ProcessorSpec> {
        spec::spec(kind).or_else(|| self.types.get(kind).map(|c| c.spec))
    }

    /// Every type's name, built-in ones first (for error messages).
    pub fn kinds(&self) -> Vec<&'static str> {
        spec::specs()
            .map(|s| s.kind)
            .chain(self.types.keys().copied())
            .collect()
    }

    /// Builds the processor of a validated component: a registered type's factory, or the
    /// built-in processor.
    ///
    /// # Errors
    /// The factory's or the built-in constructor's [`BuildError`].
    pub fn build(&self, c: &Component) -> Result<Arc<dyn Processor>, BuildError> {
        if let ComponentKind::Processor(s) = c.kind
            && let Some(custom) = self.types.get(s.kind)
        {
            return (custom.factory)(c);
        }
        build(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Dynamic;

    static GET_FILE_AGAIN: ProcessorSpec = ProcessorSpec {
        kind: "GetFile",
        description: "Drops every flow file it gets.",
        properties: &[],
        relationships: &["success"],
        dynamic: Dynamic::None,
        source: true,
    };

    #[test]
    fn a_built_in_name_cannot_be_taken() {
        let mut r = ProcessorRegistry::default();
        let err = r
            .register(&GET_FILE_AGAIN, |_| Err("unused".into()))
            .unwrap_err();
        assert!(err.to_string().contains("`GetFile` already exists"));
    }
}
