//! RouteOnContent: its spec, its processor and its unit tests.

use super::charset::{self, Charset};
use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BATCH, BuiltIn, Problem, dynamic_properties};
use super::{BuildError, ProcessError, Processor, Trigger, props};
use regex::Regex;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use weir_flow_api::component::Component;
use weir_flow_api::expression::Template;
use weir_flow_api::flowfile::SmolStr;
use weir_flow_api::provenance::EventType;
use weir_flow_api::session::Session;

/// The RouteOnContent type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(RouteOnContent::new(c)?)),
};

const MATCH_ALL: &str = "content must match exactly";
const MATCH_SUBSEQUENCE: &str = "content must contain match";

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "RouteOnContent",
    description: "Routes each flow file to every relationship whose regular expression matches its content.",
    properties: &[
        p(
            "Match Requirement",
            true,
            Some(MATCH_ALL),
            K::Choice(&[MATCH_ALL, MATCH_SUBSEQUENCE]),
        )
        .about("Whether the whole content must match an expression, or only some part of it."),
        p(
            "Character Set",
            true,
            Some("UTF-8"),
            K::Choice(charset::NAMES),
        )
        .about("The character set the content is encoded in."),
        p("Content Buffer Size", true, Some("1 MB"), K::Size)
            .about("How much of the content the expressions see; the rest is ignored."),
    ],
    relationships: &["unmatched"],
    dynamic: Dynamic::RegexRoutes,
    source: false,
};

/// RouteOnContent's attribute of the relationship chosen.
const ROUTE: SmolStr = SmolStr::new_static("RouteOnContent.Route");

/// A template evaluated against no attributes, each expression's value quoted: what a
/// route's expression is at validation.
fn without_attributes(template: &Template) -> Result<String, String> {
    template
        .evaluate_decorated(&|_| None, &|v| regex::escape(v))
        .map_err(|e| e.to_string())
}

/// Checks that each route's expression is a regular expression (its `${...}` parts taken as
/// empty, as NiFi validates them) and that no route takes the name `unmatched`.
pub(super) fn validate(
    spec: &ProcessorSpec,
    properties: &BTreeMap<String, String>,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (name, value) in dynamic_properties(spec, properties) {
        if name == "unmatched" {
            problems.push(Problem::new(
                name,
                "`unmatched` is RouteOnContent's own relationship",
            ));
            continue;
        }
        let checked = Template::parse(value)
            .map_err(|e| e.to_string())
            .and_then(|t| without_attributes(&t))
            .and_then(|pattern| {
                Regex::new(&pattern)
                    .map(drop)
                    .map_err(|e| format!("bad regular expression: {e}"))
            });
        if let Err(message) = checked {
            problems.push(Problem::new(name, message));
        }
    }
    problems
}

/// One route: its relationship and its expression, compiled once when it has no `${...}`.
struct Route {
    name: SmolStr,
    template: Template,
    fixed: Option<Regex>,
    /// The last expression compiled from attributes, by its text: flow files with the same
    /// values share it. One per route, so that routes do not evict each other's.
    compiled: Mutex<Option<(String, Regex)>>,
}

/// RouteOnContent: a copy of each flow file goes to every route whose expression matches.
pub struct RouteOnContent {
    routes: Vec<Route>,
    whole: bool,
    charset: Charset,
    buffer: usize,
}

impl RouteOnContent {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let spec = super::spec_of(c);
        let mut routes = Vec::new();
        for (name, value) in dynamic_properties(spec, &c.properties) {
            let template = props::template(c, name)?;
            let fixed = if template.has_expressions() {
                None
            } else {
                let whole = props::text(c, "Match Requirement").eq_ignore_ascii_case(MATCH_ALL);
                Some(
                    compile(value, whole)
                        .map_err(|e| BuildError::Invalid(format!("{name}: {e}")))?,
                )
            };
            routes.push(Route {
                name: SmolStr::new(name),
                template,
                fixed,
                compiled: Mutex::new(None),
            });
        }
        Ok(RouteOnContent {
            routes,
            whole: props::text(c, "Match Requirement").eq_ignore_ascii_case(MATCH_ALL),
            charset: Charset::named(&props::text(c, "Character Set")),
            buffer: usize::try_from(props::size(c, "Content Buffer Size")?).unwrap_or(usize::MAX),
        })
    }
}

/// `pattern` compiled to match all of a text when `whole` (Java's `matches()`: a
/// leftmost-first search could stop at a shorter alternative), or any part of it.
fn compile(pattern: &str, whole: bool) -> Result<Regex, regex::Error> {
    if whole {
        Regex::new(&format!(r"\A(?:{pattern})\z"))
    } else {
        Regex::new(pattern)
    }
}

impl Processor for RouteOnContent {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let ffs = session.get_batch(BATCH)?;
        for &ff in &ffs {
            let text = session.read_with(ff, |data| {
                self.charset.decode_prefix(data, self.buffer).into_owned()
            })?;
            let mut matched: Vec<SmolStr> = Vec::new();
            for route in &self.routes {
                let yes = match &route.fixed {
                    Some(regex) => regex.is_match(&text),
                    None => {
                        let flowfile = session.flowfile(ff);
                        let pattern = route
                            .template
                            .evaluate_decorated(&|k| flowfile.attribute(k), &|v| regex::escape(v))
                            .map_err(|e| ProcessError::Other(format!("{}: {e}", route.name)))?;
                        let mut compiled = route.compiled.lock().unwrap_or_else(|e| e.into_inner());
                        if compiled.as_ref().is_none_or(|(p, _)| *p != pattern) {
                            let regex = compile(&pattern, self.whole).map_err(|e| {
                                ProcessError::Other(format!(
                                    "{}: bad regular expression: {e}",
                                    route.name
                                ))
                            })?;
                            *compiled = Some((pattern, regex));
                        }
                        let (_, regex) = compiled.as_ref().expect("compiled just above");
                        regex.is_match(&text)
                    }
                };
                if yes {
                    matched.push(route.name.clone());
                }
            }
            let Some((first, others)) = matched.split_first() else {
                let unmatched = SmolStr::new_static("unmatched");
                session.put_attribute(ff, ROUTE, unmatched.clone());
                session.report(ff, EventType::ROUTE, None, Some(unmatched.clone()));
                session.transfer(ff, &unmatched)?;
                continue;
            };
            for rel in others {
                let copy = session.clone_flowfile(ff);
                session.put_attribute(copy, ROUTE, rel.clone());
                session.report(copy, EventType::ROUTE, None, Some(rel.clone()));
                session.transfer(copy, rel)?;
            }
            session.put_attribute(ff, ROUTE, first.clone());
            session.report(ff, EventType::ROUTE, None, Some(first.clone()));
            session.transfer(ff, first)?;
        }
        Ok(Trigger::worked_if(!ffs.is_empty()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router(routes: &[(&str, &str)], whole: bool) -> RouteOnContent {
        let mut properties: BTreeMap<String, String> = SPEC
            .properties
            .iter()
            .filter_map(|p| p.default.map(|d| (p.name.to_string(), d.to_string())))
            .collect();
        if !whole {
            properties.insert("Match Requirement".into(), MATCH_SUBSEQUENCE.into());
        }
        for (k, v) in routes {
            properties.insert(k.to_string(), v.to_string());
        }
        assert!(validate(&SPEC, &properties).is_empty());
        RouteOnContent::new(&super::super::component_for_tests(&SPEC, properties)).unwrap()
    }

    #[test]
    fn exact_matching_needs_the_whole_content() {
        let r = router(&[("a", "a|ab")], true);
        let regex = r.routes[0].fixed.as_ref().unwrap();
        assert!(
            regex.is_match("ab"),
            "the longer alternative matches the whole"
        );
        assert!(regex.is_match("a"));
        assert!(!regex.is_match("abc"));
        let empty = router(&[("e", "x*")], true);
        let regex = empty.routes[0].fixed.as_ref().unwrap();
        assert!(
            regex.is_match(""),
            "an empty content matches an expression that takes nothing"
        );
        assert!(!regex.is_match("y"));
    }

    #[test]
    fn containing_a_match_is_enough_when_asked() {
        let r = router(&[("a", "b+")], false);
        let regex = r.routes[0].fixed.as_ref().unwrap();
        assert!(regex.is_match("abbc"));
        assert!(!regex.is_match("ac"));
    }

    #[test]
    fn validation_refuses_bad_expressions_and_the_unmatched_name() {
        let mut properties: BTreeMap<String, String> = BTreeMap::new();
        properties.insert("Match Requirement".into(), MATCH_ALL.into());
        properties.insert("unmatched".into(), "x".into());
        properties.insert("broken".into(), "(".into());
        properties.insert("quoted".into(), "^${literal('(')}$".into());
        let problems = validate(&SPEC, &properties);
        let named: Vec<&str> = problems.iter().map(|p| p.property.as_str()).collect();
        assert_eq!(named, ["broken", "unmatched"], "{problems:?}");
    }
}
