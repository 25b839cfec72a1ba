//! RouteText: its spec, its processor and its unit tests.

use super::charset::{self, Charset};
use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BuildError, ProcessError, Processor, Trigger, props};
use super::{BuiltIn, Problem, dynamic_properties};
use regex::{Regex, RegexBuilder};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use weir_flow_api::component::Component;
use weir_flow_api::expression::Template;
use weir_flow_api::flowfile::{FlowFile, SmolStr};
use weir_flow_api::provenance::EventType;
use weir_flow_api::session::{FlowFileRef, Session};

/// The RouteText type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(RouteText::new(c)?)),
};

const BY_NAME: &str = "Route to each matching Property Name";
const ALL: &str = "Route to 'matched' if line matches all conditions";
// NiFi's wording, "lines" included.
const ANY: &str = "Route to 'matched' if lines matches any condition";

const SATISFIES: &str = "Satisfies Expression";
const STARTS_WITH: &str = "Starts With";
const ENDS_WITH: &str = "Ends With";
const CONTAINS: &str = "Contains";
const EQUALS: &str = "Equals";
const MATCHES_REGEX: &str = "Matches Regular Expression";
const CONTAINS_REGEX: &str = "Contains Regular Expression";

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "RouteText",
    description: "Routes each line of text content by conditions on the line, into new flow files per relationship and group.",
    properties: &[
        p("Routing Strategy", true, Some(BY_NAME), K::Choice(&[BY_NAME, ALL, ANY]))
            .about("Whether a line goes to each property's relationship it matches, or to `matched` when it matches all or any of them."),
        p(
            "Matching Strategy",
            true,
            None,
            K::Choice(&[
                SATISFIES,
                STARTS_WITH,
                ENDS_WITH,
                CONTAINS,
                EQUALS,
                MATCHES_REGEX,
                CONTAINS_REGEX,
            ]),
        )
        .about("How a line is compared with each property's value: an expression over `line` and `lineNo`, literal text, or a regular expression."),
        p("Character Set", true, Some("UTF-8"), K::Choice(charset::NAMES))
            .about("The character set the content is encoded in (and the lines are written in)."),
        p("Ignore Leading/Trailing Whitespace", true, Some("true"), K::Bool)
            .about("Compare each line without the whitespace around it."),
        p("Ignore Case", true, Some("false"), K::Bool)
            .about("Compare letters in either case (not for Satisfies Expression)."),
        p("Grouping Regular Expression", false, None, K::Regex)
            .about("Lines whose capture groups of this expression differ go into different flow files; its groups make `RouteText.Group`."),
    ],
    relationships: &["original", "unmatched"],
    dynamic: Dynamic::LineRoutes,
    source: false,
};

const ROUTE: SmolStr = SmolStr::new_static("RouteText.Route");
const GROUP: SmolStr = SmolStr::new_static("RouteText.Group");

#[derive(Clone, Copy, PartialEq, Eq)]
enum Routing {
    ByName,
    All,
    Any,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Matching {
    Satisfies,
    StartsWith,
    EndsWith,
    Contains,
    Equals,
    MatchesRegex,
    ContainsRegex,
}

impl Matching {
    fn named(name: &str) -> Matching {
        match name {
            SATISFIES => Matching::Satisfies,
            STARTS_WITH => Matching::StartsWith,
            ENDS_WITH => Matching::EndsWith,
            CONTAINS => Matching::Contains,
            EQUALS => Matching::Equals,
            MATCHES_REGEX => Matching::MatchesRegex,
            _ => Matching::ContainsRegex,
        }
    }

    fn regex(self) -> bool {
        matches!(self, Matching::MatchesRegex | Matching::ContainsRegex)
    }
}

fn routing(properties: &BTreeMap<String, String>) -> Routing {
    match properties.get("Routing Strategy").map(String::as_str) {
        Some(ALL) => Routing::All,
        Some(ANY) => Routing::Any,
        _ => Routing::ByName,
    }
}

/// The relationships of a RouteText component: `original` and `unmatched`, with `matched`
/// or one per dynamic property by the routing strategy.
pub(super) fn relationships(
    spec: &ProcessorSpec,
    properties: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut out = vec!["original".to_string(), "unmatched".to_string()];
    if routing(properties) == Routing::ByName {
        out.extend(dynamic_properties(spec, properties).map(|(name, _)| name.to_string()));
    } else {
        out.push("matched".into());
    }
    out
}

/// `pattern` compiled as the matching strategy needs it: anchored at both ends for Matches
/// Regular Expression (Java's `matches()`), ignoring case when asked.
fn compile(pattern: &str, matching: Matching, ignore_case: bool) -> Result<Regex, String> {
    let pattern = if matching == Matching::MatchesRegex {
        Cow::Owned(format!(r"\A(?:{pattern})\z"))
    } else {
        Cow::Borrowed(pattern)
    };
    RegexBuilder::new(&pattern)
        .case_insensitive(ignore_case)
        .build()
        .map_err(|e| format!("bad regular expression: {e}"))
}

/// Checks the conditions against the matching strategy, the grouping expression's groups,
/// and that there is at least one condition.
pub(super) fn validate(
    spec: &ProcessorSpec,
    properties: &BTreeMap<String, String>,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    let matching = Matching::named(
        properties
            .get("Matching Strategy")
            .map_or("", String::as_str),
    );
    let ignore_case = properties.get("Ignore Case").is_some_and(|v| v == "true");
    let mut conditions = 0;
    for (name, value) in dynamic_properties(spec, properties) {
        conditions += 1;
        if routing(properties) == Routing::ByName && matches!(name, "original" | "unmatched") {
            problems.push(Problem::new(
                name,
                format!("`{name}` is RouteText's own relationship"),
            ));
            continue;
        }
        let template = match Template::parse(value) {
            Ok(t) => t,
            Err(e) => {
                problems.push(Problem::new(name, e.to_string()));
                continue;
            }
        };
        if value.is_empty() {
            problems.push(Problem::new(name, "the value to match cannot be empty"));
        } else if matching.regex() {
            let checked = template
                .evaluate(&|_| None)
                .map_err(|e| e.to_string())
                .and_then(|pattern| compile(&pattern, matching, ignore_case).map(drop));
            if let Err(message) = checked {
                problems.push(Problem::new(name, message));
            }
        } else if matching == Matching::Satisfies && !template.has_expressions() {
            problems.push(Problem::new(
                name,
                "Satisfies Expression needs an expression such as ${line:startsWith('#')}",
            ));
        }
    }
    if conditions == 0 {
        problems.push(Problem::new(
            "Matching Strategy",
            "RouteText needs at least one dynamic property to match lines against",
        ));
    }
    if let Some(grouping) = properties.get("Grouping Regular Expression")
        && let Ok(regex) = Regex::new(grouping)
        && regex.captures_len() < 2
    {
        problems.push(Problem::new(
            "Grouping Regular Expression",
            "needs at least one capture group",
        ));
    }
    problems
}

/// One condition: its relationship and its value.
struct Condition {
    name: SmolStr,
    template: Template,
}

/// A condition's value for one flow file.
enum Compare {
    Text(String),
    Regex(usize),
    Expression,
}

/// RouteText: each line is matched against the conditions and appended to the flow file of
/// its relationship and group; the original goes to `original`.
pub struct RouteText {
    conditions: Vec<Condition>,
    routing: Routing,
    matching: Matching,
    charset: Charset,
    trim: bool,
    ignore_case: bool,
    grouping: Option<Regex>,
    /// Whether `unmatched` drops its flow files: then its lines are not even gathered.
    unmatched_dropped: bool,
    /// Regular expressions compiled per flow file (those with `${...}`), by their text.
    compiled: Mutex<HashMap<String, Regex>>,
}

/// Bounds the compiled expressions kept (NiFi keeps 1024).
const COMPILED_KEPT: usize = 1024;

impl RouteText {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let spec = super::spec_of(c);
        let mut conditions = Vec::new();
        for (name, _) in dynamic_properties(spec, &c.properties) {
            conditions.push(Condition {
                name: SmolStr::new(name),
                template: props::template(c, name)?,
            });
        }
        let grouping =
            match props::opt(c, "Grouping Regular Expression") {
                Some(g) => Some(Regex::new(&format!(r"\A(?:{g})\z")).map_err(|e| {
                    BuildError::Invalid(format!("Grouping Regular Expression: {e}"))
                })?),
                None => None,
            };
        Ok(RouteText {
            conditions,
            routing: routing(&c.properties),
            matching: Matching::named(&props::text(c, "Matching Strategy")),
            charset: Charset::named(&props::text(c, "Character Set")),
            trim: props::boolean(c, "Ignore Leading/Trailing Whitespace"),
            ignore_case: props::boolean(c, "Ignore Case"),
            grouping,
            unmatched_dropped: c.auto_terminate.contains("unmatched"),
            compiled: Mutex::new(HashMap::new()),
        })
    }

    /// Each condition's value for `ff`: text and expressions evaluated against its
    /// attributes, regular expressions compiled (once per distinct text).
    fn values(
        &self,
        session: &dyn Session,
        ff: FlowFileRef,
        regexes: &mut Vec<Regex>,
    ) -> Result<Vec<Compare>, ProcessError> {
        let flowfile = session.flowfile(ff);
        let mut compiled = self.compiled.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::with_capacity(self.conditions.len());
        for condition in &self.conditions {
            if self.matching == Matching::Satisfies {
                out.push(Compare::Expression);
                continue;
            }
            let value = condition
                .template
                .evaluate(&|k| flowfile.attribute(k))
                .map_err(|e| ProcessError::Other(format!("{}: {e}", condition.name)))?;
            if !self.matching.regex() {
                out.push(Compare::Text(if self.ignore_case {
                    value.to_lowercase()
                } else {
                    value.into_owned()
                }));
                continue;
            }
            let regex = match compiled.get(value.as_ref()) {
                Some(r) => r.clone(),
                None => {
                    let r = compile(&value, self.matching, self.ignore_case)
                        .map_err(|e| ProcessError::Other(format!("{}: {e}", condition.name)))?;
                    if compiled.len() >= COMPILED_KEPT {
                        compiled.clear();
                    }
                    compiled.insert(value.into_owned(), r.clone());
                    r
                }
            };
            regexes.push(regex);
            out.push(Compare::Regex(regexes.len() - 1));
        }
        Ok(out)
    }

    /// Whether `line` (number `line_no`, from 1) meets condition `i` of value `compare`.
    #[allow(clippy::too_many_arguments)]
    fn meets<'a>(
        &self,
        i: usize,
        compare: &Compare,
        line: &'a str,
        lowered: &str,
        line_no: usize,
        regexes: &[Regex],
        flowfile: &'a FlowFile,
    ) -> bool {
        match compare {
            Compare::Text(value) => {
                let line = if self.ignore_case { lowered } else { line };
                match self.matching {
                    Matching::StartsWith => line.starts_with(value.as_str()),
                    Matching::EndsWith => line.ends_with(value.as_str()),
                    Matching::Contains => line.contains(value.as_str()),
                    _ => line == value,
                }
            }
            Compare::Regex(r) => regexes[*r].is_match(line),
            Compare::Expression => {
                let number = line_no.to_string();
                let lookup = |k: &str| -> Option<Cow<'a, str>> {
                    match k {
                        "line" => Some(Cow::Borrowed(line)),
                        "lineNo" => Some(Cow::Owned(number.clone())),
                        _ => flowfile.attribute(k),
                    }
                };
                self.conditions[i]
                    .template
                    .evaluate_bool(&lookup)
                    .unwrap_or(false)
            }
        }
    }

    /// The group of `line`: the grouping expression's captures when it matches the whole
    /// line, else none.
    fn group(&self, line: &str) -> Vec<String> {
        let Some(regex) = &self.grouping else {
            return Vec::new();
        };
        match regex.captures(line) {
            Some(caps) => caps
                .iter()
                .skip(1)
                .map(|m| m.map_or_else(String::new, |m| m.as_str().to_string()))
                .collect(),
            None => Vec::new(),
        }
    }
}

/// The lines gathered for the flow files one original makes, by relationship and group, in
/// the order they first appear.
#[derive(Default)]
struct Outputs {
    order: Vec<(SmolStr, Vec<String>)>,
    text: HashMap<(SmolStr, Vec<String>), String>,
}

impl Outputs {
    fn append(&mut self, relationship: &SmolStr, group: Vec<String>, line: &str) {
        let key = (relationship.clone(), group);
        match self.text.get_mut(&key) {
            Some(text) => text.push_str(line),
            None => {
                self.order.push(key.clone());
                self.text.insert(key, line.to_string());
            }
        }
    }
}

impl Processor for RouteText {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let Some(ff) = session.get()? else {
            return Ok(Trigger::Idle);
        };
        let mut regexes = Vec::new();
        let values = self.values(session, ff, &mut regexes)?;
        let matched = SmolStr::new_static("matched");
        let unmatched = SmolStr::new_static("unmatched");
        let mut outputs = Outputs::default();
        {
            let flowfile = session.flowfile(ff);
            let text = session.read_with(ff, |data| self.charset.decode(data).into_owned())?;
            for (n, line) in text.split_inclusive('\n').enumerate() {
                let bare = line
                    .strip_suffix('\n')
                    .map_or(line, |l| l.strip_suffix('\r').unwrap_or(l));
                let compared = if self.trim { bare.trim() } else { bare };
                let lowered = if self.ignore_case && self.matching != Matching::Satisfies {
                    compared.to_lowercase()
                } else {
                    String::new()
                };
                let mut met = 0;
                for (i, compare) in values.iter().enumerate() {
                    let yes = self.meets(i, compare, compared, &lowered, n + 1, &regexes, flowfile);
                    if yes {
                        met += 1;
                    }
                    match self.routing {
                        Routing::ByName if yes => {
                            let group = self.group(compared);
                            outputs.append(&self.conditions[i].name, group, line);
                        }
                        Routing::Any if yes => break,
                        Routing::All if !yes => break,
                        _ => {}
                    }
                }
                let relationship = match self.routing {
                    Routing::ByName if met > 0 => continue,
                    Routing::Any if met > 0 => &matched,
                    Routing::All if met == values.len() => &matched,
                    _ => &unmatched,
                };
                if relationship == &unmatched && self.unmatched_dropped {
                    continue;
                }
                outputs.append(relationship, self.group(compared), line);
            }
        }
        for key in &outputs.order {
            let (relationship, group) = key;
            let child = session.create_child(ff);
            let lines = &outputs.text[key];
            session.write_owned(child, self.charset.encode(lines))?;
            session.put_attribute(child, ROUTE, relationship.clone());
            session.put_attribute(child, GROUP, SmolStr::from(group.join(", ")));
            session.report(child, EventType::ROUTE, None, Some(relationship.clone()));
            session.transfer(child, relationship)?;
        }
        let original = SmolStr::new_static("original");
        session.put_attribute(ff, ROUTE, original.clone());
        session.report(ff, EventType::ROUTE, None, Some(original.clone()));
        session.transfer(ff, &original)?;
        Ok(Trigger::Worked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn properties(settings: &[(&str, &str)]) -> BTreeMap<String, String> {
        let mut properties: BTreeMap<String, String> = SPEC
            .properties
            .iter()
            .filter_map(|p| p.default.map(|d| (p.name.to_string(), d.to_string())))
            .collect();
        for (k, v) in settings {
            properties.insert(k.to_string(), v.to_string());
        }
        properties
    }

    #[test]
    fn relationships_follow_the_routing_strategy() {
        let by_name = properties(&[("Matching Strategy", CONTAINS), ("errors", "ERROR")]);
        assert_eq!(
            relationships(&SPEC, &by_name),
            ["original", "unmatched", "errors"]
        );
        let any = properties(&[
            ("Matching Strategy", CONTAINS),
            ("Routing Strategy", ANY),
            ("errors", "ERROR"),
        ]);
        assert_eq!(
            relationships(&SPEC, &any),
            ["original", "unmatched", "matched"]
        );
    }

    #[test]
    fn validation_checks_the_conditions_by_strategy() {
        let none = properties(&[("Matching Strategy", CONTAINS)]);
        assert_eq!(validate(&SPEC, &none)[0].property, "Matching Strategy");
        let bad_regex = properties(&[("Matching Strategy", MATCHES_REGEX), ("r", "(")]);
        assert_eq!(validate(&SPEC, &bad_regex)[0].property, "r");
        let literal_paren = properties(&[("Matching Strategy", CONTAINS), ("r", "(")]);
        assert!(validate(&SPEC, &literal_paren).is_empty());
        let no_expression = properties(&[("Matching Strategy", SATISFIES), ("e", "true")]);
        assert_eq!(validate(&SPEC, &no_expression)[0].property, "e");
        let no_group = properties(&[
            ("Matching Strategy", CONTAINS),
            ("r", "x"),
            ("Grouping Regular Expression", ".*"),
        ]);
        assert_eq!(
            validate(&SPEC, &no_group)[0].property,
            "Grouping Regular Expression"
        );
    }

    #[test]
    fn groups_are_the_captures_of_a_whole_line_match() {
        let props = properties(&[
            ("Matching Strategy", CONTAINS),
            ("r", "x"),
            ("Grouping Regular Expression", "(\\w+),(\\w+)?.*"),
        ]);
        let r = RouteText::new(&super::super::component_for_tests(&SPEC, props)).unwrap();
        assert_eq!(r.group("a,b,c"), ["a", "b"]);
        assert_eq!(r.group("a,"), ["a", ""]);
        assert!(r.group("no comma").is_empty());
    }
}
