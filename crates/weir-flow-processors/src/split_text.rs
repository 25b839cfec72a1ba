//! SplitText: its spec and its processor.

use super::BuiltIn;
use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BuildError, ProcessError, Processor, Trigger, props};
use std::sync::Arc;
use weir_flow_api::component::Component;
use weir_flow_api::session::Session;

/// The SplitText type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(SplitText::new(c)?)),
};

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "SplitText",
    description: "Splits text content into flow files of a number of lines each.",
    properties: &[
        p("Line Split Count", true, None, K::Count).about(
            "Lines of content per split, the header not counted (at least 1).",
        ),
        p("Header Line Count", true, Some("0"), K::Count).about(
            "Lines at the start of the content copied to the top of every split.",
        ),
        p("Remove Trailing Newlines", true, Some("true"), K::Bool).about(
            "Strip the newlines at the end of each split, dropping splits that are then empty (apart from the header).",
        ),
    ],
    relationships: &["splits", "original", "failure"],
    dynamic: Dynamic::None,
    source: false,
};

/// SplitText: splits text into flow files of `Line Split Count` lines (FORK).
pub struct SplitText {
    lines: usize,
    header: usize,
    remove_newlines: bool,
}

impl SplitText {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let lines = props::count(c, "Line Split Count")? as usize;
        if lines == 0 {
            return Err("Line Split Count must be at least 1".into());
        }
        Ok(SplitText {
            lines,
            header: props::count(c, "Header Line Count")? as usize,
            remove_newlines: props::boolean(c, "Remove Trailing Newlines"),
        })
    }
}

impl Processor for SplitText {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let Some(ff) = session.get()? else {
            return Ok(Trigger::Idle);
        };
        let data = session.read(ff)?;
        let lines: Vec<&[u8]> = data.split_inclusive(|b| *b == b'\n').collect();
        let header: Vec<u8> = lines
            .iter()
            .take(self.header)
            .flat_map(|l| l.iter().copied())
            .collect();
        let body = &lines[self.header.min(lines.len())..];
        let mut chunks: Vec<(Vec<u8>, usize)> = Vec::new();
        for group in body.chunks(self.lines) {
            let mut chunk = header.clone();
            for l in group {
                chunk.extend_from_slice(l);
            }
            if self.remove_newlines {
                while matches!(chunk.last(), Some(b'\n' | b'\r')) {
                    chunk.pop();
                }
                if chunk.len() == header.len() {
                    continue; // NiFi drops splits that are empty once newlines go
                }
            }
            chunks.push((chunk, group.len()));
        }
        let fragment_id = uuid::Uuid::new_v4().to_string();
        let original_name = session
            .attribute(ff, "filename")
            .unwrap_or_default()
            .to_string();
        let count = chunks.len();
        for (i, (chunk, n)) in chunks.into_iter().enumerate() {
            let child = session.create_child(ff);
            session.write(child, &chunk)?;
            session.put_attribute(child, "fragment.identifier", fragment_id.clone());
            session.put_attribute(child, "fragment.index", (i + 1).to_string());
            session.put_attribute(child, "fragment.count", count.to_string());
            session.put_attribute(child, "segment.original.filename", original_name.clone());
            session.put_attribute(child, "text.line.count", n.to_string());
            session.transfer(child, "splits")?;
        }
        session.transfer(ff, "original")?;
        Ok(Trigger::Worked)
    }
}
