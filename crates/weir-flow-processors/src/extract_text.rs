//! ExtractText: its spec, its processor and its unit tests.

use super::charset::{self, Charset};
use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BATCH, BuiltIn, Problem, dynamic_properties};
use super::{BuildError, ProcessError, Processor, Trigger, props};
use regex::{Regex, RegexBuilder};
use std::collections::BTreeMap;
use std::sync::Arc;
use weir_flow_api::component::Component;
use weir_flow_api::flowfile::SmolStr;
use weir_flow_api::session::Session;

/// The ExtractText type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(ExtractText::new(c)?)),
};

const BOOL: K = K::Bool;

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "ExtractText",
    description: "Sets attributes from the capture groups of regular expressions matched against the content.",
    properties: &[
        p(
            "Character Set",
            true,
            Some("UTF-8"),
            K::Choice(charset::NAMES),
        )
        .about("The character set the content is encoded in."),
        p("Maximum Buffer Size", true, Some("1 MB"), K::Size)
            .about("How much of the content the expressions see; the rest is not evaluated."),
        p(
            "Maximum Capture Group Length",
            false,
            Some("1024"),
            K::Count,
        )
        .about("The most characters an attribute takes from a capture group; the rest is cut."),
        p("Enable Canonical Equivalence", true, Some("false"), BOOL).about(
            "Match characters by their canonical decompositions (not supported: must be false).",
        ),
        p(
            "Enable Case-insensitive Matching",
            true,
            Some("false"),
            BOOL,
        )
        .about("Letters match in either case, as the (?i) flag does."),
        p(
            "Permit Whitespace and Comments in Pattern",
            true,
            Some("false"),
            BOOL,
        )
        .about(
            "Whitespace in the pattern is ignored and # starts a comment, as the (?x) flag does.",
        ),
        p("Enable DOTALL Mode", true, Some("false"), BOOL)
            .about("`.` matches line terminators too, as the (?s) flag does."),
        p(
            "Enable Literal Parsing of the Pattern",
            true,
            Some("false"),
            BOOL,
        )
        .about("The pattern is literal text: its metacharacters mean nothing."),
        p("Enable Multiline Mode", true, Some("false"), BOOL)
            .about("`^` and `$` match at each line's start and end, as the (?m) flag does."),
        p(
            "Enable Unicode-aware Case Folding",
            true,
            Some("false"),
            BOOL,
        )
        .about("Case-insensitive matching folds all of Unicode (it always does here)."),
        p(
            "Enable Unicode Predefined Character Classes",
            true,
            Some("false"),
            BOOL,
        )
        .about("`\\w`, `\\d`, `\\s` and `\\b` follow Unicode (they always do here)."),
        p("Enable Unix Lines Mode", true, Some("false"), BOOL)
            .about("Only `\\n` ends a line for `.`, `^` and `$`; otherwise `\\r\\n` does too."),
        p("Include Capture Group 0", true, Some("true"), BOOL)
            .about("Also set `<name>.0` to the whole match."),
        p("Enable repeating capture group", true, Some("false"), BOOL)
            .about("Extract the groups of every match, not only the first."),
        p("Enable named group support", false, Some("false"), BOOL).about(
            "Name attributes after the named groups (`<name>.<group>`); every group must be named.",
        ),
    ],
    relationships: &["matched", "unmatched"],
    dynamic: Dynamic::Regexes,
    source: false,
};

/// NiFi's bound on the capture groups of one expression.
const MAX_GROUPS: usize = 40;

/// The regex flags of a component's properties (read through `get`, defaults included).
struct Flags {
    case_insensitive: bool,
    comments: bool,
    dotall: bool,
    literal: bool,
    multiline: bool,
    unix_lines: bool,
}

impl Flags {
    fn read(get: &dyn Fn(&str) -> Option<String>) -> Flags {
        let on = |name: &str| get(name).is_some_and(|v| v.eq_ignore_ascii_case("true"));
        Flags {
            case_insensitive: on("Enable Case-insensitive Matching"),
            comments: on("Permit Whitespace and Comments in Pattern"),
            dotall: on("Enable DOTALL Mode"),
            literal: on("Enable Literal Parsing of the Pattern"),
            multiline: on("Enable Multiline Mode"),
            unix_lines: on("Enable Unix Lines Mode"),
        }
    }

    /// `pattern` compiled with these flags.
    fn compile(&self, pattern: &str) -> Result<Regex, String> {
        let pattern = if self.literal {
            regex::escape(pattern)
        } else {
            pattern.to_string()
        };
        RegexBuilder::new(&pattern)
            .case_insensitive(self.case_insensitive)
            .ignore_whitespace(self.comments && !self.literal)
            .dot_matches_new_line(self.dotall)
            .multi_line(self.multiline)
            // Java's lines end at `\r\n` too unless Unix lines mode is on.
            .crlf(!self.unix_lines)
            .build()
            .map_err(|e| format!("bad regular expression: {e}"))
    }
}

/// Checks what the spec alone cannot: each expression compiles with the flags and has the
/// groups the settings need.
pub(super) fn validate(
    spec: &ProcessorSpec,
    properties: &BTreeMap<String, String>,
) -> Vec<Problem> {
    let get = |name: &str| properties.get(name).cloned();
    let flags = Flags::read(&get);
    let on = |name: &str| get(name).is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let mut problems = Vec::new();
    if on("Enable Canonical Equivalence") {
        problems.push(Problem::new(
            "Enable Canonical Equivalence",
            "canonical equivalence is not supported by this regular expression engine; set it to false",
        ));
    }
    if get("Maximum Capture Group Length").is_some_and(|v| v.trim() == "0") {
        problems.push(Problem::new(
            "Maximum Capture Group Length",
            "must be at least 1",
        ));
    }
    let group_zero = on("Include Capture Group 0");
    let named = on("Enable named group support");
    for (name, pattern) in dynamic_properties(spec, properties) {
        let regex = match flags.compile(pattern) {
            Ok(r) => r,
            Err(e) => {
                problems.push(Problem::new(name, e));
                continue;
            }
        };
        let groups = regex.captures_len() - 1;
        if groups > MAX_GROUPS {
            problems.push(Problem::new(
                name,
                format!("has {groups} capture groups; at most {MAX_GROUPS} are allowed"),
            ));
        } else if !group_zero && groups == 0 {
            problems.push(Problem::new(
                name,
                "needs at least one capture group when `Include Capture Group 0` is false",
            ));
        }
        if named && regex.capture_names().flatten().count() != groups {
            problems.push(Problem::new(
                name,
                "with named group support every capture group must be named",
            ));
        }
    }
    problems
}

/// ExtractText: each dynamic property's regular expression is matched against the content
/// and its capture groups become attributes.
pub struct ExtractText {
    /// Each property's attribute name and its expression, in name order.
    patterns: Vec<(String, Regex)>,
    charset: Charset,
    buffer: usize,
    max_group_length: usize,
    group_zero: bool,
    repeating: bool,
    named_groups: bool,
}

impl ExtractText {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let spec = super::spec_of(c);
        let flags = Flags::read(&|name| props::opt(c, name));
        let mut patterns = Vec::new();
        for (name, pattern) in dynamic_properties(spec, &c.properties) {
            let regex = flags
                .compile(pattern)
                .map_err(|e| BuildError::Invalid(format!("{name}: {e}")))?;
            patterns.push((name.to_string(), regex));
        }
        Ok(ExtractText {
            patterns,
            charset: Charset::named(&props::text(c, "Character Set")),
            buffer: usize::try_from(props::size(c, "Maximum Buffer Size")?).unwrap_or(usize::MAX),
            max_group_length: usize::try_from(props::count(c, "Maximum Capture Group Length")?)
                .unwrap_or(usize::MAX)
                .max(1),
            group_zero: props::boolean(c, "Include Capture Group 0"),
            repeating: props::boolean(c, "Enable repeating capture group"),
            named_groups: props::boolean(c, "Enable named group support"),
        })
    }

    /// The attributes the expressions extract from `text`, in NiFi's naming.
    fn extract(&self, text: &str) -> BTreeMap<String, String> {
        let mut found = BTreeMap::new();
        let cut = |value: &str| -> String {
            match value.char_indices().nth(self.max_group_length) {
                Some((at, _)) => value[..at].to_string(),
                None => value.to_string(),
            }
        };
        for (base, regex) in &self.patterns {
            let groups = regex.captures_len() - 1;
            let names: Vec<&str> = regex.capture_names().flatten().collect();
            let by_name = self.named_groups && !names.is_empty() && names.len() == groups;
            // How many attribute indexes the matches before this one used.
            let mut j = 0;
            for caps in regex.captures_iter(text) {
                if by_name {
                    for group in &names {
                        let Some(m) = caps.name(group).filter(|m| !m.is_empty()) else {
                            continue;
                        };
                        let key = if j > 0 {
                            format!("{base}.{group}.{j}")
                        } else {
                            format!("{base}.{group}")
                        };
                        found.insert(key, cut(m.as_str()));
                    }
                    if self.group_zero && j == 0 {
                        found.insert(base.clone(), caps[0].to_string());
                    }
                    j += 1;
                } else {
                    let first = if j == 0 && self.group_zero { 0 } else { 1 };
                    for i in first..=groups {
                        let Some(m) = caps.get(i).filter(|m| !m.is_empty()) else {
                            continue;
                        };
                        let value = cut(m.as_str());
                        if i == 1 && j == 0 {
                            found.insert(base.clone(), value.clone());
                        }
                        found.insert(format!("{base}.{}", i + j), value);
                    }
                    j += groups;
                }
                if !self.repeating {
                    break;
                }
            }
        }
        found
    }
}

impl Processor for ExtractText {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let ffs = session.get_batch(BATCH)?;
        for &ff in &ffs {
            let found = session.read_with(ff, |data| {
                self.extract(&self.charset.decode_prefix(data, self.buffer))
            })?;
            if found.is_empty() {
                session.transfer(ff, "unmatched")?;
                continue;
            }
            for (name, value) in found {
                session.put_attribute(ff, SmolStr::from(name), SmolStr::from(value));
            }
            session.transfer(ff, "matched")?;
        }
        Ok(Trigger::worked_if(!ffs.is_empty()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn extractor(patterns: &[(&str, &str)], settings: &[(&str, &str)]) -> ExtractText {
        let mut properties: BTreeMap<String, String> = SPEC
            .properties
            .iter()
            .filter_map(|p| p.default.map(|d| (p.name.to_string(), d.to_string())))
            .collect();
        for (k, v) in settings.iter().chain(patterns) {
            properties.insert(k.to_string(), v.to_string());
        }
        let problems = validate(&SPEC, &properties);
        assert!(problems.is_empty(), "{problems:?}");
        let c = super::super::component_for_tests(&SPEC, properties);
        ExtractText::new(&c).unwrap()
    }

    fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn groups_are_named_as_nifi_names_them() {
        let x = extractor(&[("regex", "abc(def)?(g)")], &[]);
        assert_eq!(
            x.extract("xxabcgyy"),
            attrs(&[("regex.0", "abcg"), ("regex.2", "g")]),
            "an optional group that did not match sets nothing"
        );
        assert_eq!(
            x.extract("abcdefg"),
            attrs(&[
                ("regex", "def"),
                ("regex.0", "abcdefg"),
                ("regex.1", "def"),
                ("regex.2", "g")
            ])
        );
        assert!(x.extract("nothing here").is_empty());
    }

    #[test]
    fn repeating_groups_continue_the_numbering() {
        let x = extractor(
            &[("kv", r"(\w+)=(\d+)")],
            &[
                ("Enable repeating capture group", "true"),
                ("Include Capture Group 0", "false"),
            ],
        );
        assert_eq!(
            x.extract("a=1, b=2, c=3"),
            attrs(&[
                ("kv", "a"),
                ("kv.1", "a"),
                ("kv.2", "1"),
                ("kv.3", "b"),
                ("kv.4", "2"),
                ("kv.5", "c"),
                ("kv.6", "3")
            ])
        );
    }

    #[test]
    fn named_groups_name_the_attributes() {
        let x = extractor(
            &[("p", r"(?<key>\w+):(?<value>\w*)")],
            &[
                ("Enable named group support", "true"),
                ("Enable repeating capture group", "true"),
            ],
        );
        assert_eq!(
            x.extract("a:1 b: c:3"),
            attrs(&[
                ("p", "a:1"),
                ("p.key", "a"),
                ("p.value", "1"),
                ("p.key.1", "b"),
                ("p.key.2", "c"),
                ("p.value.2", "3")
            ])
        );
    }

    #[test]
    fn empty_matches_set_nothing() {
        let x = extractor(
            &[("e", "x*")],
            &[("Enable repeating capture group", "true")],
        );
        assert!(x.extract("abc").is_empty());
        assert!(x.extract("").is_empty());
    }

    #[test]
    fn flags_change_the_matching() {
        let text = "Line one\r\nline TWO\r\n";
        let insensitive = extractor(
            &[("l", "(LINE) (two)$")],
            &[
                ("Enable Case-insensitive Matching", "true"),
                ("Enable Multiline Mode", "true"),
            ],
        );
        assert_eq!(insensitive.extract(text)["l.2"], "TWO", "$ before \\r\\n");
        let dotall = extractor(&[("d", "one(.)")], &[("Enable DOTALL Mode", "true")]);
        assert_eq!(dotall.extract(text)["d.1"], "\r");
        let plain = extractor(&[("d", "one(.)")], &[]);
        assert!(plain.extract(text).is_empty(), "`.` stops at \\r");
        let literal = extractor(
            &[("lit", "a.b(")],
            &[("Enable Literal Parsing of the Pattern", "true")],
        );
        assert_eq!(literal.extract("xa.b(y")["lit.0"], "a.b(");
        let comments = extractor(
            &[("c", "(a) # the a\n (b)")],
            &[("Permit Whitespace and Comments in Pattern", "true")],
        );
        assert_eq!(comments.extract("ab")["c.2"], "b");
    }

    #[test]
    fn long_groups_are_cut_at_a_character() {
        let x = extractor(&[("g", "(.+)")], &[("Maximum Capture Group Length", "3")]);
        assert_eq!(
            x.extract("\u{e9}\u{e9}\u{e9}\u{e9}")["g"],
            "\u{e9}\u{e9}\u{e9}"
        );
    }

    #[test]
    fn validation_names_the_expression_at_fault() {
        let mut properties: BTreeMap<String, String> = SPEC
            .properties
            .iter()
            .filter_map(|p| p.default.map(|d| (p.name.to_string(), d.to_string())))
            .collect();
        properties.insert("lookbehind".into(), "(?<=a)b".into());
        properties.insert("nogroup".into(), "abc".into());
        properties.insert("Include Capture Group 0".into(), "false".into());
        properties.insert("Enable Canonical Equivalence".into(), "true".into());
        let problems = validate(&SPEC, &properties);
        let named: Vec<&str> = problems.iter().map(|p| p.property.as_str()).collect();
        assert_eq!(
            named,
            ["Enable Canonical Equivalence", "lookbehind", "nogroup"],
            "{problems:?}"
        );
        properties.remove("lookbehind");
        properties.remove("nogroup");
        properties.insert("Enable Canonical Equivalence".into(), "false".into());
        properties.insert("Enable named group support".into(), "true".into());
        properties.insert("half".into(), "(?<a>x)(y)".into());
        let problems = validate(&SPEC, &properties);
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].property, "half");
    }
}
