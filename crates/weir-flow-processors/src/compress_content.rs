//! CompressContent: its spec and its processor.

use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BATCH, BuiltIn};
use super::{BuildError, ProcessError, Processor, Trigger, props};
use std::io::{Read, Write};
use std::sync::Arc;
use weir_flow_api::component::Component;
use weir_flow_api::session::Session;

/// The CompressContent type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(CompressContent::new(c)?)),
};

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "CompressContent",
    description: "Compresses or decompresses the content (gzip).",
    properties: &[
        p(
            "Mode",
            true,
            Some("compress"),
            K::Choice(&["compress", "decompress"]),
        ).about(
            "`compress` the content, or `decompress` it (content that is not valid gzip goes to failure); `mime.type` is set to match.",
        ),
        p(
            "Compression Format",
            true,
            Some("gzip"),
            K::Choice(&["gzip"]),
        ).about(
            "The format of the compressed content: gzip.",
        ),
    ],
    relationships: &["success", "failure"],
    dynamic: Dynamic::None,
    source: false,
};

/// CompressContent: gzip compress or decompress.
pub struct CompressContent {
    compress: bool,
}

impl CompressContent {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        Ok(CompressContent {
            compress: props::text(c, "Mode") == "compress",
        })
    }
}

impl Processor for CompressContent {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let ffs = session.get_batch(BATCH)?;
        for &ff in &ffs {
            let out = session.read_with(ff, |data| {
                if self.compress {
                    let mut e =
                        flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                    e.write_all(data).and_then(|()| e.finish())
                } else {
                    let mut out = Vec::new();
                    flate2::read::GzDecoder::new(data)
                        .read_to_end(&mut out)
                        .map(|_| out)
                }
            })?;
            match out {
                Ok(out) => {
                    session.write(ff, &out)?;
                    let mime = if self.compress {
                        "application/gzip"
                    } else {
                        "application/octet-stream"
                    };
                    session.put_attribute(ff, "mime.type", mime);
                    session.transfer(ff, "success")?;
                }
                Err(_) => session.transfer(ff, "failure")?,
            }
        }
        Ok(Trigger::worked_if(!ffs.is_empty()))
    }
}
