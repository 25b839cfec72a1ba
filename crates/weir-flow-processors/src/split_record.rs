//! SplitRecord: its spec and its processor.

use super::convert_record::FAILURE_REASON;
use super::records::{RecordConfig, record_properties};
use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BuildError, BuiltIn, ProcessError, Processor, Trigger, props};
use std::sync::Arc;
use weir_flow_api::component::Component;
use weir_flow_api::session::{FlowFileRef, Session};

/// The SplitRecord type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(SplitRecord::new(c)?)),
};

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "SplitRecord",
    description: "Splits each flow file's records into flow files of at most Records Per Split records each, written with the Record Writer.",
    properties: record_properties!(
        p("Records Per Split", true, None, K::Count)
            .about("The most records one split holds (at least 1)."),
    ),
    relationships: &["splits", "original", "failure"],
    dynamic: Dynamic::None,
    source: false,
};

/// How many flow files one trigger splits: each may make many splits.
const SPLIT_BATCH: usize = 10;

/// SplitRecord: splits a flow file's records into children of `Records Per Split` records
/// (FORK), each written with the Record Writer and carrying `record.count`, `mime.type`,
/// `fragment.identifier`, `fragment.index` (from 0, as NiFi's SplitRecord), `fragment.count`
/// and `segment.original.filename`; the original goes to `original` with
/// `fragment.identifier` and `fragment.count`. Records that cannot be read send the
/// original to `failure` with `failure.reason`, and no split. The content and its records
/// are held in memory while it is split.
pub struct SplitRecord {
    config: RecordConfig,
    per_split: usize,
}

impl SplitRecord {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let config = RecordConfig::from_properties(|name| c.property(name))
            .map_err(|e| BuildError::Invalid(e.to_string()))?;
        let per_split = props::count(c, "Records Per Split")?;
        if per_split == 0 {
            return Err("Records Per Split must be at least 1".into());
        }
        Ok(SplitRecord {
            config,
            per_split: usize::try_from(per_split).unwrap_or(usize::MAX),
        })
    }

    fn split(&self, session: &mut dyn Session, ff: FlowFileRef) -> Result<(), ProcessError> {
        let read = session.read_with(ff, |content| {
            self.config.read(content).map(|set| {
                // Each split written now, while the content is lent.
                let splits: Vec<(Vec<u8>, usize)> = set
                    .records
                    .chunks(self.per_split)
                    .map(|chunk| {
                        let mut out = Vec::new();
                        self.config.write(&set.schema, chunk, &mut out);
                        (out, chunk.len())
                    })
                    .collect();
                splits
            })
        })?;
        let splits = match read {
            Ok(splits) => splits,
            Err(e) => {
                tracing::warn!(
                    "SplitRecord `{}`: cannot split {}: {e}",
                    session.component_name(),
                    session.flowfile(ff).uuid()
                );
                session.put_attribute(ff, FAILURE_REASON, e.to_string());
                session.transfer(ff, "failure")?;
                return Ok(());
            }
        };
        let fragment_id = uuid::Uuid::new_v4().to_string();
        let count = splits.len().to_string();
        let original_name = session
            .attribute(ff, "filename")
            .map(|n| n.into_owned())
            .unwrap_or_default();
        for (i, (content, records)) in splits.into_iter().enumerate() {
            let child = session.create_child(ff);
            session.write_owned(child, content)?;
            session.put_attribute(child, "record.count", records.to_string());
            session.put_attribute(child, "mime.type", self.config.mime_type());
            session.put_attribute(child, "fragment.identifier", fragment_id.clone());
            session.put_attribute(child, "fragment.index", i.to_string());
            session.put_attribute(child, "fragment.count", count.clone());
            session.put_attribute(child, "segment.original.filename", original_name.clone());
            session.transfer(child, "splits")?;
        }
        session.put_attribute(ff, "fragment.identifier", fragment_id);
        session.put_attribute(ff, "fragment.count", count);
        session.transfer(ff, "original")?;
        Ok(())
    }
}

impl Processor for SplitRecord {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let ffs = session.get_batch(SPLIT_BATCH)?;
        for &ff in &ffs {
            self.split(session, ff)?;
        }
        Ok(Trigger::worked_if(!ffs.is_empty()))
    }
}
