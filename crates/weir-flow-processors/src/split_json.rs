//! SplitJson: its spec, its processor and its unit tests.

use super::evaluate_json_path::{NULL_CHOICES, null_text, parse};
use super::json_path::{self, Found, Path, Spans};
use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BuildError, BuiltIn, ProcessError, Processor, Trigger, props};

use std::sync::Arc;
use weir_flow_api::component::Component;
use weir_flow_api::flowfile::{SmolStr, int_value};
use weir_flow_api::session::Session;

/// The SplitJson type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(SplitJson::new(c)?)),
};

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "SplitJson",
    description: "Splits the JSON array a JSONPath finds into one flow file per element.",
    properties: &[
        p("JsonPath Expression", true, None, K::JsonPath).about(
            "The JSONPath of the array to split; anything else sends the flow file to failure.",
        ),
        p(
            "Null Value Representation",
            true,
            Some("empty string"),
            K::Choice(NULL_CHOICES),
        )
        .about("How a null element is written."),
        p("Max String Length", true, Some("20 MB"), K::Size).about(
            "The longest string the JSON may hold; a longer one sends the flow file to failure.",
        ),
    ],
    relationships: &["split", "original", "failure"],
    dynamic: Dynamic::None,
    source: false,
};

const FRAGMENT_ID: SmolStr = SmolStr::new_static("fragment.identifier");
const FRAGMENT_INDEX: SmolStr = SmolStr::new_static("fragment.index");
const FRAGMENT_COUNT: SmolStr = SmolStr::new_static("fragment.count");
const ORIGINAL_NAME: SmolStr = SmolStr::new_static("segment.original.filename");

/// SplitJson: each element of the array its path finds becomes a flow file (FORK), numbered
/// from 0 as NiFi numbers SplitJson's fragments.
pub struct SplitJson {
    path: Path,
    null_value: &'static str,
    max_string: u64,
}

impl SplitJson {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let path = json_path::compile(&props::text(c, "JsonPath Expression"))
            .map_err(|e| BuildError::Invalid(format!("JsonPath Expression: {e}")))?;
        Ok(SplitJson {
            path,
            null_value: null_text(&props::text(c, "Null Value Representation")),
            max_string: props::size(c, "Max String Length")?,
        })
    }

    /// The elements' texts, or why the content cannot be split.
    fn split(&self, data: &[u8]) -> Result<Vec<String>, String> {
        let document = parse(data, self.max_string)?;
        let found = self.path.find(&document);
        if found == Found::Nothing {
            return Err("the JSONPath found nothing".into());
        }
        found
            .elements(&mut Spans::new(data), self.null_value)
            .ok_or_else(|| "the JSONPath's result is not an array".to_string())
    }
}

impl Processor for SplitJson {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let Some(ff) = session.get()? else {
            return Ok(Trigger::Idle);
        };
        let parts = match session.read_with(ff, |data| self.split(data))? {
            Ok(parts) => parts,
            Err(why) => {
                tracing::warn!(flowfile = %session.flowfile(ff).uuid(), "SplitJson: {why}; routed to failure");
                session.transfer(ff, "failure")?;
                return Ok(Trigger::Worked);
            }
        };
        let fragment_id = SmolStr::from(uuid::Uuid::new_v4().to_string());
        let count = int_value(parts.len());
        let original_name = SmolStr::from(
            session
                .attribute(ff, "filename")
                .unwrap_or_default()
                .as_ref(),
        );
        for (i, part) in parts.into_iter().enumerate() {
            let child = session.create_child(ff);
            session.write_owned(child, part.into_bytes())?;
            session.put_attribute(child, FRAGMENT_ID, fragment_id.clone());
            session.put_attribute(child, FRAGMENT_INDEX, int_value(i));
            session.put_attribute(child, FRAGMENT_COUNT, count.clone());
            session.put_attribute(child, ORIGINAL_NAME, original_name.clone());
            session.transfer(child, "split")?;
        }
        session.put_attribute(ff, FRAGMENT_ID, fragment_id);
        session.put_attribute(ff, FRAGMENT_COUNT, count);
        session.transfer(ff, "original")?;
        Ok(Trigger::Worked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use std::collections::BTreeMap;

    fn splitter(path: &str, null: &str) -> SplitJson {
        let mut properties = BTreeMap::new();
        properties.insert("JsonPath Expression".to_string(), path.to_string());
        properties.insert("Null Value Representation".to_string(), null.to_string());
        properties.insert("Max String Length".to_string(), "20 MB".to_string());
        SplitJson::new(&super::super::component_for_tests(&SPEC, properties)).unwrap()
    }

    #[test]
    fn elements_are_written_as_nifi_writes_them() {
        let s = splitter("$.items", "the string 'null'");
        let parts = s
            .split(br#"{"items": [1, "two", null, {"k\u00e9": [true]}, [[]]]}"#)
            .unwrap();
        // As written: the escape in the key stays an escape.
        assert_eq!(parts, ["1", "two", "null", "{\"k\\u00e9\":[true]}", "[[]]"]);
        assert_eq!(
            splitter("$", "empty string").split(b"[]").unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(
            splitter("$[*].a", "empty string")
                .split(br#"[{"a":1},{"b":2},{"a":null}]"#)
                .unwrap(),
            ["1", ""]
        );
    }

    /// Any JSON value: scalars with escapes and non-ASCII text, nested arrays and objects.
    fn json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let text = "[a-z\"\\\n\u{e9}\u{1F600}]{0,6}";
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            (-1e9f64..1e9).prop_map(Value::from),
            text.prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map(text, inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// Each element is written so that it reads back as itself: strings as their text,
        /// null as the chosen representation, anything else as JSON.
        #[test]
        fn elements_read_back_as_themselves(items in proptest::collection::vec(json(), 0..6)) {
            let document = serde_json::to_vec(&serde_json::json!({"items": items})).unwrap();
            let parts = splitter("$.items", "the string 'null'").split(&document).unwrap();
            proptest::prop_assert_eq!(parts.len(), items.len());
            for (part, item) in parts.iter().zip(&items) {
                match item {
                    Value::String(s) => proptest::prop_assert_eq!(part, s),
                    Value::Null => proptest::prop_assert_eq!(part, "null"),
                    other => {
                        let back: Value = serde_json::from_str(part).unwrap();
                        proptest::prop_assert_eq!(&back, other);
                    }
                }
            }
        }
    }

    /// Each element's text is found from its array's members, listed once: splitting a
    /// large array is one pass over it (a search from the document's start per element
    /// took over a minute here for this one).
    #[test]
    fn a_large_array_splits_in_one_pass() {
        let items: Vec<String> = (0..50_000)
            .map(|i| format!(r#"{{ "id": {i}, "b": "x" }}"#))
            .collect();
        let doc = format!(r#"{{"items": [{}]}}"#, items.join(",\n"));
        for path in ["$.items", "$.items[*]"] {
            let parts = splitter(path, "empty string")
                .split(doc.as_bytes())
                .unwrap();
            assert_eq!(parts.len(), 50_000);
            assert_eq!(parts[0], r#"{"id":0,"b":"x"}"#);
            assert_eq!(parts[49_999], r#"{"id":49999,"b":"x"}"#);
        }
    }

    #[test]
    fn what_cannot_be_split_is_refused() {
        let s = splitter("$.items", "empty string");
        assert!(s.split(br#"{"items": {"a": 1}}"#).is_err(), "an object");
        assert!(s.split(br#"{"other": []}"#).is_err(), "not found");
        assert!(s.split(b"{").is_err(), "not JSON");
        assert!(s.split(b"").is_err(), "empty");
    }
}
