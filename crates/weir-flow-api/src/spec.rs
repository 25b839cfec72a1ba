//! What a processor type accepts: its properties (with defaults and value kinds), its
//! relationships, and what undeclared properties mean. The flow's validation reads a type's
//! [`ProcessorSpec`] before the processor is built, so a processor can rely on every declared
//! property being present (or defaulted) and well formed.

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
