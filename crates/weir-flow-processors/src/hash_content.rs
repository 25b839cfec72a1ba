//! CryptographicHashContent: its spec and its processor.

use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BATCH, BuiltIn};
use super::{BuildError, ProcessError, Processor, Trigger, props};
use sha2::Digest;
use std::sync::Arc;
use weir_flow_api::component::Component;
use weir_flow_api::flowfile::SmolStr;
use weir_flow_api::session::Session;

/// The CryptographicHashContent type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(HashContent::new(c)?)),
};

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "CryptographicHashContent",
    description: "Adds an attribute with a hash of the content.",
    properties: &[p(
        "Hash Algorithm",
        true,
        Some("SHA-256"),
        K::Choice(&["SHA-224", "SHA-256", "SHA-384", "SHA-512"]),
    ).about(
        "The SHA-2 digest to compute; its lowercase hex goes into the attribute `content_<algorithm>` (`content_SHA-256`).",
    )],
    relationships: &["success", "failure"],
    dynamic: Dynamic::None,
    source: false,
};

/// CryptographicHashContent: writes `content_<algorithm>` as lowercase hex.
pub struct HashContent {
    algorithm: String,
    /// `content_<algorithm>`, made once.
    attribute: SmolStr,
}

impl HashContent {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let algorithm = props::text(c, "Hash Algorithm");
        Ok(HashContent {
            attribute: SmolStr::from(format!("content_{algorithm}")),
            algorithm,
        })
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        write!(out, "{b:02x}").expect("writing to a String cannot fail");
    }
    out
}

impl Processor for HashContent {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let ffs = session.get_batch(BATCH)?;
        for &ff in &ffs {
            let digest = session.read_with(ff, |data| match self.algorithm.as_str() {
                "SHA-224" => hex(&sha2::Sha224::digest(data)),
                "SHA-384" => hex(&sha2::Sha384::digest(data)),
                "SHA-512" => hex(&sha2::Sha512::digest(data)),
                _ => hex(&sha2::Sha256::digest(data)),
            })?;
            session.put_attribute(ff, self.attribute.clone(), digest);
            session.transfer(ff, "success")?;
        }
        Ok(Trigger::worked_if(!ffs.is_empty()))
    }
}
