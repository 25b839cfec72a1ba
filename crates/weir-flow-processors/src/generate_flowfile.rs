//! GenerateFlowFile: its spec and its processor.

use super::BuiltIn;
use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BuildError, ProcessError, Processor, Trigger, eval, props};
use std::sync::Arc;
use weir_flow_api::component::Component;
use weir_flow_api::expression::Template;
use weir_flow_api::flowfile::SmolStr;
use weir_flow_api::session::Session;

/// The GenerateFlowFile type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(GenerateFlowFile::new(c)?)),
};

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "GenerateFlowFile",
    description: "Creates flow files of random or given content, for testing and load.",
    properties: &[
        p("File Size", true, Some("0 B"), K::Size).about(
            "The size of each flow file's random content (`0 B`: empty); ignored when Custom Text is set.",
        ),
        p("Batch Size", true, Some("1"), K::Count).about(
            "Flow files created per trigger (0 counts as 1).",
        ),
        p(
            "Data Format",
            true,
            Some("Text"),
            K::Choice(&["Text", "Binary"]),
        ).about(
            "Random content of letters and digits (`Text`) or of any bytes (`Binary`).",
        ),
        p("Unique FlowFiles", true, Some("false"), K::Bool).about(
            "New random content for every flow file (`true`), or one content made at start and shared by all (`false`, much cheaper).",
        ),
        p("Custom Text", false, None, K::Expression).about(
            "The content of every flow file instead of random bytes, an expression evaluated for each new flow file.",
        ),
    ],
    relationships: &["success"],
    dynamic: Dynamic::Attributes,
    source: true,
};

/// GenerateFlowFile: makes flow files of random (or custom) content.
pub struct GenerateFlowFile {
    size: usize,
    batch: usize,
    binary: bool,
    unique: bool,
    custom: Option<Template>,
    attributes: Vec<(String, Template)>,
    fixed: Vec<u8>,
}

fn random_content(size: usize, binary: bool) -> Vec<u8> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut x = uuid::Uuid::new_v4().as_u128() as u64 | 1;
    (0..size)
        .map(|_| {
            // xorshift: cheap and good enough for filler data.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if binary {
                x as u8
            } else {
                ALPHABET[(x % ALPHABET.len() as u64) as usize]
            }
        })
        .collect()
}

impl GenerateFlowFile {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let size = props::size(c, "File Size")? as usize;
        let binary = props::text(c, "Data Format").eq_ignore_ascii_case("Binary");
        let spec = match c.kind {
            weir_flow_api::component::ComponentKind::Processor(s) => s,
            weir_flow_api::component::ComponentKind::Port => return Err("not a processor".into()),
        };
        let mut attributes = Vec::new();
        for (k, v) in &c.properties {
            if spec.property(k).is_none() {
                attributes.push((
                    k.clone(),
                    Template::parse(v).map_err(|e| format!("{k}: {e}"))?,
                ));
            }
        }
        Ok(GenerateFlowFile {
            size,
            batch: props::count(c, "Batch Size")?.max(1) as usize,
            binary,
            unique: props::boolean(c, "Unique FlowFiles"),
            custom: props::opt(c, "Custom Text")
                .map(|t| Template::parse(&t))
                .transpose()
                .map_err(|e| e.to_string())?,
            attributes,
            fixed: random_content(size, binary),
        })
    }
}

impl Processor for GenerateFlowFile {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        for _ in 0..self.batch {
            let ff = session.create();
            let data = match &self.custom {
                Some(t) => eval(t, session, ff)
                    .map_err(|e| ProcessError::Other(e.to_string()))?
                    .into_owned()
                    .into_bytes(),
                None if self.unique => random_content(self.size, self.binary),
                None => self.fixed.clone(),
            };
            session.write(ff, &data)?;
            for (k, t) in &self.attributes {
                let v = eval(t, session, ff).map_err(|e| ProcessError::Other(e.to_string()))?;
                let v = SmolStr::new(v);
                session.put_attribute(ff, k, v);
            }
            session.transfer(ff, "success")?;
        }
        Ok(Trigger::Worked)
    }
}
