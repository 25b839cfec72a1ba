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
//! assert_eq!(spec::specs().count(), 30);
//! ```
//!
//! Each processor type is one module holding its spec, its processor and their unit tests
//! (`put_file.rs`: `PutFile`), and exposes one `BuiltIn`; the list of them here is the only
//! place a type is registered: validation's specs ([`spec::spec`]), the built-in list
//! ([`spec::specs`]) and [`build`] all read it. A new built-in processor is a new module
//! and a line in `BUILT_INS`.

mod brokers;
mod charset;
mod compress_content;
mod consume_amqp;
mod consume_jetstream;
mod control_rate;
mod convert_record;
mod detect_duplicate;
mod evaluate_json_path;
mod extract_text;
mod fetch_file;
mod generate_flowfile;
mod get_file;
mod hash_content;
mod invoke_http;
mod json_path;
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
mod route_on_content;
mod route_text;
pub mod spec;
mod split_json;
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
static BUILT_INS: [&BuiltIn; 30] = [
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
    &extract_text::BUILT_IN,
    &route_on_content::BUILT_IN,
    &route_text::BUILT_IN,
    &evaluate_json_path::BUILT_IN,
    &split_json::BUILT_IN,
    &detect_duplicate::BUILT_IN,
    &control_rate::BUILT_IN,
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

/// A property a processor type refuses at validation, and why: what its spec's kinds alone
/// cannot check (a regular expression compiled with the type's flags, a JSONPath, a setting
/// that needs another).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The property at fault (a declared or a dynamic one).
    pub property: String,
    /// What is wrong with it.
    pub message: String,
}

impl Problem {
    pub(crate) fn new(property: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem {
            property: property.into(),
            message: message.into(),
        }
    }
}

/// Checks a built-in type's `properties` (declared ones with their defaults, dynamic ones as
/// written) for what its spec's kinds cannot: validation calls this after the kinds, and
/// reports each [`Problem`] at its property. Nothing for a type without such checks.
pub fn validate(
    spec: &ProcessorSpec,
    properties: &std::collections::BTreeMap<String, String>,
) -> Vec<Problem> {
    match spec.kind {
        "ExtractText" => extract_text::validate(spec, properties),
        "RouteOnContent" => route_on_content::validate(spec, properties),
        "RouteText" => route_text::validate(spec, properties),
        "EvaluateJsonPath" => evaluate_json_path::validate(spec, properties),
        "ControlRate" => control_rate::validate(properties),
        "DetectDuplicate" => detect_duplicate::validate(properties),
        _ => Vec::new(),
    }
}

/// The relationships a built-in type's component has, given its `properties` (defaults
/// filled in), when they differ from its spec's fixed ones and one per dynamic property:
/// RouteText's `matched` (and ControlRate's `rate exceeded`) follow a strategy property.
/// `None` when they do not.
pub fn relationships(
    spec: &ProcessorSpec,
    properties: &std::collections::BTreeMap<String, String>,
) -> Option<Vec<String>> {
    match spec.kind {
        "RouteText" => Some(route_text::relationships(spec, properties)),
        "ControlRate" => Some(control_rate::relationships(properties)),
        _ => None,
    }
}

/// Checks a JSONPath expression as EvaluateJsonPath and SplitJson read it (validation's
/// check of a [`PropertyKind::JsonPath`](weir_flow_api::spec::PropertyKind::JsonPath)
/// value): `Err` says why it is not one.
pub fn check_json_path(text: &str) -> Result<(), String> {
    json_path::compile(text).map(drop)
}

/// The spec of a processor component (a port has none: an empty spec).
pub(crate) fn spec_of(c: &Component) -> &'static ProcessorSpec {
    static NONE: ProcessorSpec = ProcessorSpec {
        kind: "",
        description: "",
        properties: &[],
        relationships: &[],
        dynamic: Dynamic::None,
        source: false,
    };
    match c.kind {
        ComponentKind::Processor(s) => s,
        ComponentKind::Port => &NONE,
    }
}

/// The dynamic properties among `properties` (those `spec` does not declare), in name
/// order, when the type takes any.
pub(crate) fn dynamic_properties<'a>(
    spec: &'a ProcessorSpec,
    properties: &'a std::collections::BTreeMap<String, String>,
) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
    properties
        .iter()
        .filter(move |(name, _)| spec.dynamic != Dynamic::None && spec.property(name).is_none())
        .map(|(name, value)| (name.as_str(), value.as_str()))
}

/// A component of `spec` with `properties`, for unit tests.
#[cfg(test)]
pub(crate) fn component_for_tests(
    spec: &'static ProcessorSpec,
    properties: std::collections::BTreeMap<String, String>,
) -> Component {
    Component {
        name: "under-test".into(),
        group: "root".into(),
        kind: ComponentKind::Processor(spec),
        properties,
        schedule: weir_flow_api::component::Schedule::Timer(std::time::Duration::ZERO),
        concurrency: 1,
        run_duration: std::time::Duration::ZERO,
        penalty: std::time::Duration::from_secs(30),
        yield_duration: std::time::Duration::from_secs(1),
        auto_terminate: Default::default(),
        relationships: spec.relationships.iter().map(|r| r.to_string()).collect(),
        failure_port: false,
        group_timeout: None,
        line: None,
    }
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
