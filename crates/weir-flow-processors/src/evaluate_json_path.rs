//! EvaluateJsonPath: its spec, its processor and its unit tests.

use super::json_path::{self, Found, Path, Spans};
use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BATCH, BuiltIn, Problem, dynamic_properties};
use super::{BuildError, ProcessError, Processor, Trigger, props};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use weir_flow_api::component::Component;
use weir_flow_api::flowfile::SmolStr;
use weir_flow_api::session::Session;

/// The EvaluateJsonPath type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(EvaluateJsonPath::new(c)?)),
};

const CONTENT: &str = "flowfile-content";
const ATTRIBUTE: &str = "flowfile-attribute";

/// NiFi's choices of how a JSON null is written.
pub(super) const NULL_CHOICES: &[&str] = &["empty string", "the string 'null'"];

/// The text a `Null Value Representation` choice writes for null.
pub(super) fn null_text(choice: &str) -> &'static str {
    if choice == NULL_CHOICES[1] {
        "null"
    } else {
        ""
    }
}

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "EvaluateJsonPath",
    description: "Evaluates JSONPath expressions against JSON content, into attributes or as the new content.",
    properties: &[
        p("Destination", true, Some(CONTENT), K::Choice(&[CONTENT, ATTRIBUTE]))
            .about("Whether results go to attributes named after the properties, or replace the content (then only one path may be given)."),
        p("Return Type", true, Some("auto-detect"), K::Choice(&["auto-detect", "json", "scalar"]))
            .about("`scalar` sends an object or array result to failure; `json` takes any; auto-detect is scalar for attributes, json for content."),
        p("Path Not Found Behavior", true, Some("ignore"), K::Choice(&["warn", "ignore", "skip"]))
            .about("For attributes: a path that finds nothing sets an empty attribute (ignore, or warn with a log line) or none (skip)."),
        p("Null Value Representation", true, Some("empty string"), K::Choice(NULL_CHOICES))
            .about("How a null result is written."),
        p("Max String Length", true, Some("20 MB"), K::Size)
            .about("The longest string the JSON may hold; a longer one sends the flow file to failure."),
    ],
    relationships: &["matched", "unmatched", "failure"],
    dynamic: Dynamic::JsonPaths,
    source: false,
};

/// Checks that each path compiles and that a content destination has exactly one.
pub(super) fn validate(
    spec: &ProcessorSpec,
    properties: &BTreeMap<String, String>,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut paths = 0;
    for (name, value) in dynamic_properties(spec, properties) {
        paths += 1;
        if let Err(message) = json_path::compile(value) {
            problems.push(Problem::new(name, message));
        }
    }
    if properties.get("Destination").map(String::as_str) != Some(ATTRIBUTE) && paths != 1 {
        problems.push(Problem::new(
            "Destination",
            format!(
                "exactly one JSONPath must be given with a destination of {CONTENT} ({paths} given)"
            ),
        ));
    }
    problems
}

/// The longest string (key or value) in `value`, in bytes.
pub(super) fn longest_string(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len(),
        Value::Array(items) => items.iter().map(longest_string).max().unwrap_or(0),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| k.len().max(longest_string(v)))
            .max()
            .unwrap_or(0),
        _ => 0,
    }
}

/// The content of a flow file as a JSON document, or why it is not one.
pub(super) fn parse(data: &[u8], max_string: u64) -> Result<Value, String> {
    let value: Value = serde_json::from_slice(data).map_err(|e| format!("not valid JSON: {e}"))?;
    let longest = longest_string(&value);
    if longest as u64 > max_string {
        return Err(format!(
            "a string of {longest} bytes is longer than Max String Length ({max_string} bytes)"
        ));
    }
    Ok(value)
}

/// EvaluateJsonPath: each dynamic property's JSONPath is evaluated against the content.
pub struct EvaluateJsonPath {
    /// Each property's attribute name and its path, in name order.
    paths: Vec<(SmolStr, Path)>,
    to_attributes: bool,
    scalar: bool,
    not_found: String,
    null_value: &'static str,
    max_string: u64,
}

impl EvaluateJsonPath {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let spec = super::spec_of(c);
        let mut paths = Vec::new();
        for (name, value) in dynamic_properties(spec, &c.properties) {
            let path = json_path::compile(value)
                .map_err(|e| BuildError::Invalid(format!("{name}: {e}")))?;
            paths.push((SmolStr::new(name), path));
        }
        let to_attributes = props::text(c, "Destination") == ATTRIBUTE;
        let scalar = match props::text(c, "Return Type").as_str() {
            "scalar" => true,
            "json" => false,
            _ => to_attributes,
        };
        Ok(EvaluateJsonPath {
            paths,
            to_attributes,
            scalar,
            not_found: props::text(c, "Path Not Found Behavior"),
            null_value: null_text(&props::text(c, "Null Value Representation")),
            max_string: props::size(c, "Max String Length")?,
        })
    }
}

/// What one flow file's evaluation comes to.
enum Outcome {
    Failure(String),
    Unmatched,
    Attributes(Vec<(SmolStr, String)>),
    Content(String),
}

impl EvaluateJsonPath {
    /// Evaluates every path against `document`, whose text is `text`.
    fn evaluate(&self, text: &[u8], document: &Value, flowfile: &str) -> Outcome {
        let mut spans = Spans::new(text);
        let mut attributes = Vec::new();
        for (name, path) in &self.paths {
            let found = path.find(document);
            if found == Found::Nothing {
                if self.not_found == "warn" {
                    tracing::warn!(flowfile, attribute = %name, "JSONPath found nothing");
                }
                if !self.to_attributes {
                    return Outcome::Unmatched;
                }
                if self.not_found != "skip" {
                    attributes.push((name.clone(), String::new()));
                }
                continue;
            }
            if self.scalar && !found.is_scalar() {
                return Outcome::Failure(format!(
                    "{name}: the result is not a scalar and Return Type is scalar"
                ));
            }
            let rendered = found.render(&mut spans, self.null_value);
            if !self.to_attributes {
                return Outcome::Content(rendered);
            }
            attributes.push((name.clone(), rendered));
        }
        Outcome::Attributes(attributes)
    }
}

impl Processor for EvaluateJsonPath {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let ffs = session.get_batch(BATCH)?;
        for &ff in &ffs {
            let uuid = session.flowfile(ff).uuid().to_string();
            let outcome = session.read_with(ff, |data| match parse(data, self.max_string) {
                Ok(document) => self.evaluate(data, &document, &uuid),
                Err(why) => Outcome::Failure(why),
            })?;
            match outcome {
                Outcome::Failure(why) => {
                    tracing::warn!(flowfile = %uuid, "EvaluateJsonPath: {why}; routed to failure");
                    session.transfer(ff, "failure")?;
                }
                Outcome::Unmatched => session.transfer(ff, "unmatched")?,
                Outcome::Attributes(attributes) => {
                    for (name, value) in attributes {
                        session.put_attribute(ff, name, SmolStr::from(value));
                    }
                    session.transfer(ff, "matched")?;
                }
                Outcome::Content(text) => {
                    session.write_owned(ff, text.into_bytes())?;
                    session.transfer(ff, "matched")?;
                }
            }
        }
        Ok(Trigger::worked_if(!ffs.is_empty()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn evaluator(settings: &[(&str, &str)]) -> EvaluateJsonPath {
        let mut properties: BTreeMap<String, String> = SPEC
            .properties
            .iter()
            .filter_map(|p| p.default.map(|d| (p.name.to_string(), d.to_string())))
            .collect();
        for (k, v) in settings {
            properties.insert(k.to_string(), v.to_string());
        }
        let problems = validate(&SPEC, &properties);
        assert!(problems.is_empty(), "{problems:?}");
        EvaluateJsonPath::new(&super::super::component_for_tests(&SPEC, properties)).unwrap()
    }

    fn attributes(outcome: Outcome) -> Vec<(String, String)> {
        match outcome {
            Outcome::Attributes(a) => a.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            _ => panic!("not attributes"),
        }
    }

    #[test]
    fn attributes_take_scalars_and_missing_paths_by_the_behavior() {
        let doc = json!({"id": 7, "name": "caf\u{e9} \"x\"", "tags": ["a"], "gone": null});
        let e = evaluator(&[
            ("Destination", ATTRIBUTE),
            ("id", "$.id"),
            ("name", "$.name"),
            ("gone", "$.gone"),
            ("missing", "$.nothing"),
        ]);
        assert_eq!(
            attributes(e.evaluate(doc.to_string().as_bytes(), &doc, "f")),
            [
                ("gone".into(), "".into()),
                ("id".into(), "7".into()),
                ("missing".into(), "".into()),
                ("name".into(), "caf\u{e9} \"x\"".into()),
            ]
        );
        let skip = evaluator(&[
            ("Destination", ATTRIBUTE),
            ("Path Not Found Behavior", "skip"),
            ("Null Value Representation", "the string 'null'"),
            ("gone", "$.gone"),
            ("missing", "$.nothing"),
        ]);
        assert_eq!(
            attributes(skip.evaluate(doc.to_string().as_bytes(), &doc, "f")),
            [("gone".into(), "null".into())]
        );
        let tags = evaluator(&[("Destination", ATTRIBUTE), ("tags", "$.tags")]);
        assert!(
            matches!(
                tags.evaluate(doc.to_string().as_bytes(), &doc, "f"),
                Outcome::Failure(_)
            ),
            "an array is no scalar"
        );
        let json_tags = evaluator(&[
            ("Destination", ATTRIBUTE),
            ("Return Type", "json"),
            ("tags", "$.tags"),
        ]);
        assert_eq!(
            attributes(json_tags.evaluate(doc.to_string().as_bytes(), &doc, "f")),
            [("tags".into(), "[\"a\"]".into())]
        );
    }

    #[test]
    fn content_takes_the_one_result_or_goes_unmatched() {
        let doc = json!({"a": {"b": [1, {"c": "d"}]}});
        let e = evaluator(&[("p", "$.a.b")]);
        assert!(
            matches!(e.evaluate(doc.to_string().as_bytes(), &doc, "f"), Outcome::Content(t) if t == "[1,{\"c\":\"d\"}]")
        );
        let missing = evaluator(&[("p", "$.a.x")]);
        assert!(matches!(
            missing.evaluate(doc.to_string().as_bytes(), &doc, "f"),
            Outcome::Unmatched
        ));
    }

    #[test]
    fn validation_wants_one_path_for_content_and_good_paths() {
        let mut properties: BTreeMap<String, String> = BTreeMap::new();
        properties.insert("Destination".into(), CONTENT.into());
        assert_eq!(validate(&SPEC, &properties)[0].property, "Destination");
        properties.insert("bad".into(), "$.a[".into());
        assert_eq!(validate(&SPEC, &properties)[0].property, "bad");
        properties.insert("Destination".into(), ATTRIBUTE.into());
        properties.insert("good".into(), "$.a".into());
        assert_eq!(validate(&SPEC, &properties).len(), 1);
    }

    #[test]
    fn documents_are_refused_when_malformed_or_too_long() {
        assert!(parse(b"", 100).is_err());
        assert!(parse(b"{\"a\":", 100).is_err());
        assert!(parse(b"{\"a\":\"\xff\"}", 100).is_err(), "invalid UTF-8");
        assert!(parse(b"{\"a\":\"long\"}", 3).is_err());
        assert_eq!(
            parse(b"{\"\\u00e9\":\"\\n\"}", 3).unwrap(),
            json!({"\u{e9}": "\n"})
        );
    }
}
