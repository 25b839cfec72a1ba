//! The processors of both engines, with NiFi's names, properties and relationships. They
//! depend on the flow API (`weir-flow-api`) and on no engine, so they run unchanged in the
//! traditional and the stateless engine of `weir-flow`, which re-exports this crate as
//! `weir_flow::processors`.
//!
//! ```
//! use weir_flow_processors::spec;
//!
//! let put_file = spec::spec("PutFile").expect("a built-in type");
//! assert!(put_file.property("Directory").is_some_and(|p| p.required));
//! assert_eq!(spec::specs().count(), 23);
//! ```
//!
//! Each processor type is one module holding its spec, its processor and their unit tests
//! (`put_file.rs`: `PutFile`), and exposes one `BuiltIn`; the list of them here is the only
//! place a type is registered: validation's specs ([`spec::spec`]), the built-in list
//! ([`spec::specs`]) and [`build`] all read it. A new built-in processor is a new module
//! and a line in `BUILT_INS`.

mod brokers;
mod compress_content;
mod consume_amqp;
mod consume_jetstream;
mod convert_record;
mod fetch_file;
mod generate_flowfile;
mod get_file;
mod hash_content;
mod invoke_http;
mod list_file;
mod listen_http;
mod log_attribute;
mod merge_content;
mod pass_through;
mod publish_amqp;
mod publish_jetstream;
mod put_database_record;
mod put_file;
pub mod records;
pub mod registry;
mod replace_text;
mod route_on_attribute;
pub mod spec;
mod split_record;
mod split_text;
mod update_attribute;

use std::sync::Arc;

use weir_flow_api::component::{Component, ComponentKind};
use weir_flow_api::expression::Template;
use weir_flow_api::flowfile::SmolStr;
pub use weir_flow_api::processor::{BuildError, ProcessError, Processor, StartError, Trigger};
pub(crate) use weir_flow_api::props;
use weir_flow_api::session::Session;
use weir_flow_api::spec::{Dynamic, ProcessorSpec};

/// The relationship of ConsumeAMQP and ConsumeJetStream for messages delivered more than
/// `Max Deliveries` times (present only when that property is above 0).
pub const DEAD_LETTER: &str = "dead-letter";

/// A built-in processor type: what it accepts (validation reads it) and how it is built.
pub(crate) struct BuiltIn {
    /// Its properties and relationships.
    pub(crate) spec: &'static ProcessorSpec,
    /// Makes its processor for a validated component.
    pub(crate) build: fn(&Component) -> Result<Arc<dyn Processor>, BuildError>,
}

/// Every built-in processor type, in the order of `docs/flows.md`.
static BUILT_INS: [&BuiltIn; 23] = [
    &generate_flowfile::BUILT_IN,
    &get_file::BUILT_IN,
    &put_file::BUILT_IN,
    &list_file::BUILT_IN,
    &fetch_file::BUILT_IN,
    &split_text::BUILT_IN,
    &merge_content::BUILT_IN,
    &convert_record::BUILT_IN,
    &split_record::BUILT_IN,
    &update_attribute::BUILT_IN,
    &route_on_attribute::BUILT_IN,
    &replace_text::BUILT_IN,
    &compress_content::BUILT_IN,
    &hash_content::BUILT_IN,
    &log_attribute::BUILT_IN,
    &invoke_http::BUILT_IN,
    &listen_http::BUILT_IN,
    &consume_amqp::BUILT_IN,
    &publish_amqp::BUILT_IN,
    &consume_jetstream::BUILT_IN,
    &publish_jetstream::BUILT_IN,
    &put_database_record::BUILT_IN,
    &pass_through::BUILT_IN,
];

/// Every built-in processor type, in the order of `docs/flows.md`.
pub(crate) fn built_ins() -> impl Iterator<Item = &'static BuiltIn> {
    BUILT_INS.iter().copied()
}

/// The built-in type `kind`, if there is one.
pub(crate) fn built_in(kind: &str) -> Option<&'static BuiltIn> {
    built_ins().find(|b| b.spec.kind == kind)
}

/// How many flow files one trigger of a per-flow-file processor takes.
const BATCH: usize = 100;

/// Builds the built-in processor for a validated component (a port is a pass-through).
///
/// # Errors
/// [`BuildError`]: a property the processor cannot use (validation catches most of these
/// earlier), or a type without a built-in processor.
pub fn build(c: &Component) -> Result<Arc<dyn Processor>, BuildError> {
    let spec = match c.kind {
        ComponentKind::Port => return Ok(Arc::new(pass_through::PassThrough)),
        ComponentKind::Processor(s) => s,
    };
    let built_in =
        built_in(spec.kind).ok_or_else(|| BuildError::UnknownType(spec.kind.to_string()))?;
    (built_in.build)(c)
}

/// Evaluates `t` against the attributes of `ff` in `session`, borrowing from them where it
/// can (see [`Template::evaluate`](weir_flow_api::expression::Template::evaluate)).
pub(crate) fn eval<'a>(
    t: &'a weir_flow_api::expression::Template,
    session: &'a dyn Session,
    ff: weir_flow_api::session::FlowFileRef,
) -> Result<std::borrow::Cow<'a, str>, weir_flow_api::expression::EvalError> {
    session.evaluate(t, ff)
}

/// A component's dynamic properties, each name with its value parsed (UpdateAttribute's and
/// RouteOnAttribute's). Names are held as [`SmolStr`]s: an attribute set by name shares it
/// instead of copying it per flow file.
fn dynamic_templates(c: &Component) -> Result<Vec<(SmolStr, Template)>, BuildError> {
    let spec = match c.kind {
        ComponentKind::Processor(s) => s,
        ComponentKind::Port => return Ok(vec![]),
    };
    let mut out = Vec::new();
    for (name, value) in &c.properties {
        if spec.property(name).is_none() && spec.dynamic != Dynamic::None {
            let template =
                Template::parse(value).map_err(|source| props::PropertyError::Template {
                    name: name.clone(),
                    source,
                })?;
            out.push((SmolStr::new(name), template));
        }
    }
    Ok(out)
}

/// The `file:///` URI of `path` for a provenance event's transit URI: made absolute against
/// the working directory (no filesystem access), with the characters a URI cannot hold
/// percent-encoded (`/data/in box/a#1` is `file:///data/in%20box/a%231`).
pub(crate) fn file_uri(path: &std::path::Path) -> SmolStr {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    match url::Url::from_file_path(&absolute) {
        Ok(uri) => SmolStr::from(uri.as_str()),
        // Only a path that is not absolute is refused, and `absolute` made it so.
        Err(()) => SmolStr::from(format!("file://{}", absolute.display())),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::file_uri;

    #[test]
    fn a_file_uri_is_absolute_and_encoded() {
        assert_eq!(
            file_uri(Path::new("/data/in box/a#1?.txt")),
            "file:///data/in%20box/a%231%3F.txt"
        );
        let cwd = std::env::current_dir().unwrap();
        let relative = file_uri(Path::new("out/x.txt"));
        assert!(relative.starts_with("file:///"), "{relative}");
        assert!(relative.ends_with("/out/x.txt"), "{relative}");
        assert_eq!(
            url::Url::parse(&relative).unwrap().to_file_path().unwrap(),
            cwd.join("out/x.txt")
        );
    }
}
