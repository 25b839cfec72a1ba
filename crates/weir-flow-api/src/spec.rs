//! What a processor type accepts: its properties (with defaults and value kinds), its
//! relationships, and what undeclared properties mean. The flow's validation reads a type's
//! [`ProcessorSpec`] before the processor is built, so a processor can rely on every declared
//! property being present (or defaulted) and well formed.
//!
//! A spec also describes itself, for `weir flow processors` and the docs: each type and
//! property has a sentence, and the types serialize to JSON (see the [`Serialize`] impls).

use serde::ser::{Serialize, SerializeStruct, Serializer};

/// The kind of value a property holds, checked at validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PropertyKind {
    /// Any text, no expressions.
    Text,
    /// Text with `${...}` expressions, evaluated per flow file.
    Expression,
    /// `true` or `false`.
    Bool,
    /// A whole number, at least 0.
    Count,
    /// A NiFi duration (`30 sec`).
    Duration,
    /// A NiFi size (`1 KB`).
    Size,
    /// A regular expression.
    Regex,
    /// A JSONPath expression (EvaluateJsonPath's, SplitJson's).
    JsonPath,
    /// One of a fixed list (matched ignoring case).
    Choice(&'static [&'static str]),
}

/// One declared property.
#[derive(Debug, Clone, Copy)]
pub struct PropertySpec {
    /// NiFi's display name, the key in the YAML `properties:` map.
    pub name: &'static str,
    /// Whether validation requires it (when it has no default).
    pub required: bool,
    /// The value used when the definition leaves it out.
    pub default: Option<&'static str>,
    /// What the value must look like.
    pub kind: PropertyKind,
    /// One sentence on what it does, for `weir flow processors TYPE` and the docs ("" when
    /// not given; see [`PropertySpec::about`]).
    pub description: &'static str,
}

/// What extra (dynamic) properties mean for a type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dynamic {
    /// Not allowed: an unknown property is a validation error.
    None,
    /// Each sets the attribute of its name (UpdateAttribute).
    Attributes,
    /// Each is a boolean expression and a relationship of its name (RouteOnAttribute).
    Routes,
    /// Each is a regular expression whose captures set attributes named after it
    /// (ExtractText); compiled at validation with the type's regex flags.
    Regexes,
    /// Each is a regular expression (expressions in it quoted) and a relationship of its
    /// name (RouteOnContent).
    RegexRoutes,
    /// Each is a JSONPath expression whose result sets the attribute of its name
    /// (EvaluateJsonPath); compiled at validation.
    JsonPaths,
    /// Each is a condition on a line of text, of the kind the `Matching Strategy` property
    /// says, and a relationship of its name unless the `Routing Strategy` routes to
    /// `matched` (RouteText).
    LineRoutes,
}

/// A processor type: its properties and relationships.
#[derive(Debug, Clone, Copy)]
pub struct ProcessorSpec {
    /// NiFi's type name.
    pub kind: &'static str,
    /// One sentence on what the type does, for `weir flow processors` and the docs.
    pub description: &'static str,
    /// Declared properties.
    pub properties: &'static [PropertySpec],
    /// Fixed relationships (RouteOnAttribute adds its dynamic ones).
    pub relationships: &'static [&'static str],
    /// Meaning of undeclared properties.
    pub dynamic: Dynamic,
    /// True when the type takes no input (it runs on its schedule, not on queued data).
    pub source: bool,
}

impl PropertySpec {
    /// A property `name`, required when `required` and it has no `default`, holding values of
    /// `kind`. `const`, for a spec in a `static`.
    pub const fn new(
        name: &'static str,
        required: bool,
        default: Option<&'static str>,
        kind: PropertyKind,
    ) -> PropertySpec {
        PropertySpec {
            name,
            required,
            default,
            kind,
            description: "",
        }
    }

    /// This property with `description` (one sentence on what it does). `const`, so a
    /// spec in a `static` can say it: `p("Directory", true, None, K::Expression).about("...")`.
    pub const fn about(mut self, description: &'static str) -> PropertySpec {
        self.description = description;
        self
    }
}

impl ProcessorSpec {
    /// The declared property `name`.
    pub fn property(&self, name: &str) -> Option<&'static PropertySpec> {
        self.properties.iter().find(|p| p.name == name)
    }
}

impl PropertyKind {
    /// The kind's name, as `weir flow processors` and its JSON show it: `text`,
    /// `expression`, `bool`, `count`, `duration`, `size`, `regex`, `jsonpath` or `choice`.
    pub fn name(&self) -> &'static str {
        match self {
            PropertyKind::Text => "text",
            PropertyKind::Expression => "expression",
            PropertyKind::Bool => "bool",
            PropertyKind::Count => "count",
            PropertyKind::Duration => "duration",
            PropertyKind::Size => "size",
            PropertyKind::Regex => "regex",
            PropertyKind::JsonPath => "jsonpath",
            PropertyKind::Choice(_) => "choice",
        }
    }

    /// Whether `${...}` in the value is evaluated per flow file (only [`PropertyKind::Expression`]:
    /// elsewhere it is plain text).
    pub fn supports_expressions(&self) -> bool {
        matches!(self, PropertyKind::Expression)
    }

    /// The values a [`PropertyKind::Choice`] allows; empty for every other kind.
    pub fn allowed_values(&self) -> &'static [&'static str] {
        match self {
            PropertyKind::Choice(values) => values,
            _ => &[],
        }
    }
}

impl Dynamic {
    /// The variant's name in JSON: `none`, `attributes`, `routes`, `regexes`,
    /// `regex-routes`, `jsonpaths` or `line-routes`.
    pub fn name(&self) -> &'static str {
        match self {
            Dynamic::None => "none",
            Dynamic::Attributes => "attributes",
            Dynamic::Routes => "routes",
            Dynamic::Regexes => "regexes",
            Dynamic::RegexRoutes => "regex-routes",
            Dynamic::JsonPaths => "jsonpaths",
            Dynamic::LineRoutes => "line-routes",
        }
    }

    /// What an undeclared property does, in one sentence for people.
    pub fn meaning(&self) -> &'static str {
        match self {
            Dynamic::None => "Not allowed: an undeclared property is a validation error.",
            Dynamic::Attributes => {
                "Each sets the attribute of its name to its value, an expression evaluated per flow file."
            }
            Dynamic::Routes => {
                "Each is a boolean expression evaluated per flow file, and (with Route to Property name) a relationship of its name."
            }
            Dynamic::Regexes => {
                "Each is a regular expression, compiled at validation with the type's flags; its capture groups set attributes named after the property."
            }
            Dynamic::RegexRoutes => {
                "Each is a regular expression (expressions in it evaluated and matched literally) and a relationship of its name."
            }
            Dynamic::JsonPaths => {
                "Each is a JSONPath, compiled at validation, whose result goes to the attribute of its name (or the content)."
            }
            Dynamic::LineRoutes => {
                "Each is a condition on a line, of the kind Matching Strategy says, and (with Route to each matching Property Name) a relationship of its name."
            }
        }
    }
}

/// A property as JSON: `name`, `description`, `required`, `default` (null when none),
/// `kind` ([`PropertyKind::name`]), `allowed_values` (empty unless a choice) and
/// `supports_expressions`.
impl Serialize for PropertySpec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("PropertySpec", 7)?;
        s.serialize_field("name", self.name)?;
        s.serialize_field("description", self.description)?;
        s.serialize_field("required", &self.required)?;
        s.serialize_field("default", &self.default)?;
        s.serialize_field("kind", self.kind.name())?;
        s.serialize_field("allowed_values", self.kind.allowed_values())?;
        s.serialize_field("supports_expressions", &self.kind.supports_expressions())?;
        s.end()
    }
}

/// A type as JSON: `type`, `description`, `source`, `properties` (each as [`PropertySpec`]
/// serializes), `relationships`, and `dynamic_properties` (`{"kind": ` [`Dynamic::name`]`,
/// "meaning": "..."}`).
impl Serialize for ProcessorSpec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("ProcessorSpec", 6)?;
        s.serialize_field("type", self.kind)?;
        s.serialize_field("description", self.description)?;
        s.serialize_field("source", &self.source)?;
        s.serialize_field("properties", self.properties)?;
        s.serialize_field("relationships", self.relationships)?;
        s.serialize_field("dynamic_properties", &self.dynamic)?;
        s.end()
    }
}

/// `{"kind": "none"|"attributes"|"routes", "meaning": "..."}`.
impl Serialize for Dynamic {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Dynamic", 2)?;
        s.serialize_field("kind", self.name())?;
        s.serialize_field("meaning", self.meaning())?;
        s.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static SPEC: ProcessorSpec = ProcessorSpec {
        kind: "Route",
        description: "Routes.",
        properties: &[
            PropertySpec::new("Target", true, None, PropertyKind::Expression).about("Where."),
            PropertySpec::new("Mode", true, Some("a"), PropertyKind::Choice(&["a", "b"])),
        ],
        relationships: &["unmatched"],
        dynamic: Dynamic::Routes,
        source: false,
    };

    #[test]
    fn a_spec_serializes_with_every_field_a_tool_needs() {
        let json = serde_json::to_value(SPEC).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "type": "Route",
                "description": "Routes.",
                "source": false,
                "properties": [
                    {"name": "Target", "description": "Where.", "required": true, "default": null,
                     "kind": "expression", "allowed_values": [], "supports_expressions": true},
                    {"name": "Mode", "description": "", "required": true, "default": "a",
                     "kind": "choice", "allowed_values": ["a", "b"], "supports_expressions": false},
                ],
                "relationships": ["unmatched"],
                "dynamic_properties": {"kind": "routes", "meaning": Dynamic::Routes.meaning()},
            })
        );
    }

    #[test]
    fn only_expressions_evaluate_and_only_choices_list_values() {
        for kind in [
            PropertyKind::Text,
            PropertyKind::Bool,
            PropertyKind::Count,
            PropertyKind::Duration,
            PropertyKind::Size,
            PropertyKind::Regex,
        ] {
            assert!(!kind.supports_expressions(), "{kind:?}");
            assert!(kind.allowed_values().is_empty(), "{kind:?}");
            assert_eq!(kind.name(), format!("{kind:?}").to_lowercase());
        }
        assert!(PropertyKind::Expression.supports_expressions());
        assert_eq!(PropertyKind::Choice(&["x"]).allowed_values(), ["x"]);
        for dynamic in [Dynamic::None, Dynamic::Attributes, Dynamic::Routes] {
            assert_eq!(dynamic.name(), format!("{dynamic:?}").to_lowercase());
            assert!(dynamic.meaning().ends_with('.'), "{dynamic:?}");
        }
    }
}
