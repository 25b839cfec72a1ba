//! Funnel, and the ports of process groups: pass-throughs that send each flow file on
//! unchanged.

use super::spec::{Dynamic, ProcessorSpec};
use super::{BATCH, BuiltIn};
use super::{ProcessError, Processor, Trigger};
use std::sync::Arc;
use weir_flow_api::session::Session;

/// The Funnel type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |_| Ok(Arc::new(PassThrough)),
};

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "Funnel",
    description: "Passes every flow file on unchanged.",
    properties: &[],
    relationships: &["success"],
    dynamic: Dynamic::None,
    source: false,
};

/// Ports and funnels: every flow file goes on to `success`.
pub struct PassThrough;

impl Processor for PassThrough {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let ffs = session.get_batch(BATCH)?;
        for &ff in &ffs {
            session.transfer(ff, "success")?;
        }
        Ok(Trigger::worked_if(!ffs.is_empty()))
    }
}
