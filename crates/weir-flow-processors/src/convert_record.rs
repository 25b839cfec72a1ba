//! ConvertRecord: its spec and its processor.

use super::records::{RecordConfig, record_properties};
use super::spec::{Dynamic, ProcessorSpec};
use super::{BATCH, BuildError, BuiltIn, ProcessError, Processor, Trigger};
use std::sync::Arc;
use weir_flow_api::component::Component;
use weir_flow_api::session::{FlowFileRef, Session};

/// The ConvertRecord type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(ConvertRecord::new(c)?)),
};

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "ConvertRecord",
    description: "Reads each flow file's records with the Record Reader and writes them with the Record Writer (JSON and CSV), converting each value to the schema's type.",
    properties: record_properties!(),
    relationships: &["success", "failure"],
    dynamic: Dynamic::None,
    source: false,
};

/// The attribute a flow file routed to `failure` carries: why, and at which record.
pub(crate) const FAILURE_REASON: &str = "failure.reason";

/// ConvertRecord: rewrites each flow file's records in another format (CONTENT_MODIFIED),
/// setting `record.count` and `mime.type`. A flow file whose records cannot be read, or do
/// not fit the schema, goes to `failure` unchanged with `failure.reason` naming the record
/// and field. The content is held in memory while it is converted, with its records.
pub struct ConvertRecord {
    config: RecordConfig,
}

impl ConvertRecord {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let config = RecordConfig::from_properties(|name| c.property(name))
            .map_err(|e| BuildError::Invalid(e.to_string()))?;
        Ok(ConvertRecord { config })
    }

    fn convert(&self, session: &mut dyn Session, ff: FlowFileRef) -> Result<(), ProcessError> {
        let converted = session.read_with(ff, |content| {
            self.config.read(content).map(|set| {
                let mut out = Vec::with_capacity(content.len());
                self.config.write(&set.schema, &set.records, &mut out);
                (out, set.records.len())
            })
        })?;
        match converted {
            Ok((out, count)) => {
                session.write_owned(ff, out)?;
                session.put_attribute(ff, "record.count", count.to_string());
                session.put_attribute(ff, "mime.type", self.config.mime_type());
                session.transfer(ff, "success")?;
            }
            Err(e) => {
                tracing::warn!(
                    "ConvertRecord `{}`: cannot convert {}: {e}",
                    session.component_name(),
                    session.flowfile(ff).uuid()
                );
                session.put_attribute(ff, FAILURE_REASON, e.to_string());
                session.transfer(ff, "failure")?;
            }
        }
        Ok(())
    }
}

impl Processor for ConvertRecord {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let ffs = session.get_batch(BATCH)?;
        for &ff in &ffs {
            self.convert(session, ff)?;
        }
        Ok(Trigger::worked_if(!ffs.is_empty()))
    }
}
