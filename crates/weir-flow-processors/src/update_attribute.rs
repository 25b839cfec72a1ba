//! UpdateAttribute: its spec and its processor.

use super::spec::{Dynamic, ProcessorSpec};
use super::{BATCH, BuiltIn, dynamic_templates};
use super::{BuildError, ProcessError, Processor, Trigger, eval};
use std::sync::Arc;
use weir_flow_api::component::Component;
use weir_flow_api::expression::Template;
use weir_flow_api::flowfile::SmolStr;
use weir_flow_api::session::Session;

/// The UpdateAttribute type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(UpdateAttribute::new(c)?)),
};

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "UpdateAttribute",
    description: "Sets attributes from expressions, one per dynamic property.",
    properties: &[],
    relationships: &["success"],
    dynamic: Dynamic::Attributes,
    source: false,
};

/// UpdateAttribute: each extra property sets the attribute of its name to its value.
pub struct UpdateAttribute {
    rules: Vec<(SmolStr, Template)>,
}

impl UpdateAttribute {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        Ok(UpdateAttribute {
            rules: dynamic_templates(c)?,
        })
    }
}

impl Processor for UpdateAttribute {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let ffs = session.get_batch(BATCH)?;
        // One vector for the batch, emptied per flow file.
        let mut values = Vec::with_capacity(self.rules.len());
        for &ff in &ffs {
            // Every value is computed from the attributes before the update, as in NiFi.
            let mut failed = None;
            for (name, t) in &self.rules {
                match eval(t, session, ff) {
                    // Made a name's value now: the text may borrow the flow file's map.
                    Ok(v) => values.push((name, SmolStr::new(v))),
                    Err(e) => failed = Some(e),
                }
            }
            if let Some(e) = failed {
                // UpdateAttribute has only `success`: a failing expression is the processor's
                // failure (rolled back and penalized).
                return Err(ProcessError::Other(e.to_string()));
            }
            for (name, v) in values.drain(..) {
                session.put_attribute(ff, name.clone(), v);
            }
            session.transfer(ff, "success")?;
        }
        Ok(Trigger::worked_if(!ffs.is_empty()))
    }
}
