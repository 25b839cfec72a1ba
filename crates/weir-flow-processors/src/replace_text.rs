//! ReplaceText: its spec, its processor and its unit tests.

use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BATCH, BuiltIn};
use super::{BuildError, ProcessError, Processor, Trigger, eval, props};
use regex::Regex;
use std::sync::{Arc, Mutex};
use weir_flow_api::component::Component;
use weir_flow_api::expression::Template;
use weir_flow_api::session::Session;

/// The ReplaceText type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(ReplaceText::new(c)?)),
};

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "ReplaceText",
    description: "Replaces text in the content, by regex or literal, whole or line by line.",
    properties: &[
        p("Search Value", true, Some("(?s)(^.*$)"), K::Expression).about(
            "What to look for, evaluated per flow file: a regular expression for Regex Replace, plain text for Literal Replace (the other strategies ignore it).",
        ),
        p("Replacement Value", true, Some("$1"), K::Expression).about(
            "What to put in, evaluated per flow file; with Regex Replace, `$1`, `$2`, ... insert the match's groups.",
        ),
        p(
            "Replacement Strategy",
            true,
            Some("Regex Replace"),
            K::Choice(&[
                "Regex Replace",
                "Literal Replace",
                "Prepend",
                "Append",
                "Always Replace",
            ]),
        ).about(
            "Replace every match of a regular expression or of literal text, add the replacement at the start (`Prepend`) or end (`Append`), or replace the text entirely (`Always Replace`).",
        ),
        p(
            "Evaluation Mode",
            true,
            Some("Line-by-Line"),
            K::Choice(&["Entire text", "Line-by-Line"]),
        ).about(
            "Apply the strategy to the whole content (`Entire text`) or to each line apart, line endings kept (`Line-by-Line`); content that is not UTF-8 goes to failure, unless `Always Replace` replaces it whole.",
        ),
    ],
    relationships: &["success", "failure"],
    dynamic: Dynamic::None,
    source: false,
};

#[derive(Clone, Copy, PartialEq)]
enum Replace {
    Regex,
    Literal,
    Prepend,
    Append,
    Always,
}

/// ReplaceText: regex or literal replacement, prepend, append, or replace all, on the whole
/// text or line by line.
pub struct ReplaceText {
    search: Template,
    replacement: Template,
    strategy: Replace,
    line_by_line: bool,
    /// The last search regex compiled, by its text: a search value without expressions is
    /// compiled once, not once per flow file (compiling costs far more than matching).
    compiled: Mutex<Option<(String, Regex)>>,
}

impl ReplaceText {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let strategy = match props::text(c, "Replacement Strategy").as_str() {
            "Literal Replace" => Replace::Literal,
            "Prepend" => Replace::Prepend,
            "Append" => Replace::Append,
            "Always Replace" => Replace::Always,
            _ => Replace::Regex,
        };
        Ok(ReplaceText {
            search: props::template(c, "Search Value")?,
            replacement: props::template(c, "Replacement Value")?,
            strategy,
            line_by_line: props::text(c, "Evaluation Mode") == "Line-by-Line",
            compiled: Mutex::new(None),
        })
    }

    fn apply(&self, text: &str, search: &str, regex: Option<&Regex>, replacement: &str) -> String {
        match self.strategy {
            // Without `$` a regex's replacement is literal text (as `Regex::replace_all`
            // reads it); with one, its groups are expanded.
            Replace::Regex => match regex {
                None => text.to_string(),
                Some(r) if replacement.contains('$') => {
                    r.replace_all(text, replacement).into_owned()
                }
                Some(r) => spliced(text, r.find_iter(text).map(|m| m.range()), replacement),
            },
            Replace::Literal => spliced(
                text,
                text.match_indices(search).map(|(at, m)| at..at + m.len()),
                replacement,
            ),
            Replace::Prepend => format!("{replacement}{text}"),
            Replace::Append => format!("{text}{replacement}"),
            Replace::Always => replacement.to_string(),
        }
    }
}

/// `text` with each of `matches` (in order, not overlapping) replaced by `replacement`, in
/// one allocation of the result's size: `str::replace` and `Regex::replace_all` start from
/// the text's size and regrow (a copy of all written so far) when the result is longer.
fn spliced(
    text: &str,
    matches: impl Iterator<Item = std::ops::Range<usize>>,
    replacement: &str,
) -> String {
    let matches: smallvec::SmallVec<[std::ops::Range<usize>; 4]> = matches.collect();
    let matched: usize = matches.iter().map(|m| m.len()).sum();
    let mut out = String::with_capacity(text.len() - matched + matches.len() * replacement.len());
    let mut last = 0;
    for m in matches {
        out.push_str(&text[last..m.start]);
        out.push_str(replacement);
        last = m.end;
    }
    out.push_str(&text[last..]);
    out
}

impl Processor for ReplaceText {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let ffs = session.get_batch(BATCH)?;
        // Each copy of a group has its own instance: the lock is never contended.
        let mut compiled = self.compiled.lock().unwrap_or_else(|e| e.into_inner());
        // One buffer for every flow file's replacement text.
        let mut replacement = String::new();
        for &ff in &ffs {
            replacement.clear();
            let flowfile = session.flowfile(ff);
            let replaced = self
                .replacement
                .evaluate_into(&|k| flowfile.attribute(k), &mut replacement);
            // The search text mostly is the property's own: borrowed, not copied.
            let search = match (eval(&self.search, session, ff), replaced) {
                (Ok(s), Ok(())) => s,
                _ => {
                    session.transfer(ff, "failure")?;
                    continue;
                }
            };
            let regex = if self.strategy == Replace::Regex {
                if compiled.as_ref().is_none_or(|(text, _)| *text != search) {
                    match Regex::new(&search) {
                        Ok(r) => *compiled = Some((search.to_string(), r)),
                        Err(_) => {
                            session.transfer(ff, "failure")?;
                            continue;
                        }
                    }
                }
                compiled.as_ref().map(|(_, r)| r)
            } else {
                None
            };
            if self.strategy == Replace::Always && !self.line_by_line {
                // The new content does not depend on the old one: it is not read (NiFi),
                // so any content, text or not, is replaced.
                session.write(ff, replacement.as_bytes())?;
                session.transfer(ff, "success")?;
                continue;
            }
            // The old content is only looked at: borrowed, not shared.
            let out = session.read_with(ff, |data| {
                let text = std::str::from_utf8(data).ok()?;
                Some(if self.line_by_line {
                    text.split_inclusive('\n')
                        .map(|line| {
                            let (body, nl) =
                                line.strip_suffix('\n').map_or((line, ""), |b| (b, "\n"));
                            self.apply(body, &search, regex, &replacement) + nl
                        })
                        .collect::<String>()
                } else {
                    self.apply(text, &search, regex, &replacement)
                })
            })?;
            let Some(out) = out else {
                session.transfer(ff, "failure")?;
                continue;
            };
            session.write_owned(ff, out.into_bytes())?;
            session.transfer(ff, "success")?;
        }
        Ok(Trigger::worked_if(!ffs.is_empty()))
    }
}

#[cfg(test)]
mod tests {
    use super::spliced;
    use proptest::prelude::*;

    proptest! {
        /// Splicing matches reads as `str::replace` and `Regex::replace_all` do, empty
        /// matches and multi-byte text included.
        #[test]
        fn spliced_text_is_what_replace_makes(
            text in "[ab\u{e9} ]{0,12}",
            search in "[ab\u{e9}]{0,2}",
            replacement in "[xy\u{e9}]{0,3}",
        ) {
            let literal = spliced(
                &text,
                text.match_indices(search.as_str()).map(|(at, m)| at..at + m.len()),
                &replacement,
            );
            prop_assert_eq!(literal, text.replace(search.as_str(), &replacement));
            let re = regex::Regex::new(&format!("(?:{})*", regex::escape(&search))).unwrap();
            let by_regex = spliced(&text, re.find_iter(&text).map(|m| m.range()), &replacement);
            prop_assert_eq!(by_regex, re.replace_all(&text, replacement.as_str()).into_owned());
        }
    }
}
