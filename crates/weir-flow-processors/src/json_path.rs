//! JSONPath for EvaluateJsonPath and SplitJson: RFC 9535 queries (`serde_json_path`) read
//! the way NiFi's Jayway JsonPath reads a path.
//!
//! - A path without a leading `$` is taken from the root (`store.book` is `$.store.book`).
//! - A dot name RFC 9535 would refuse (`$.first-name`, `$.2nd`) is read as the bracketed
//!   name (`$['first-name']`).
//! - A *definite* path (no `..`, `*`, filter, union or slice) yields its one value or
//!   nothing (Jayway's "path not found"); any other path yields a JSON array of every
//!   match, empty when nothing matches.
//!
//! Jayway's own extensions (functions such as `.length()`, the `=~`, `in` and `nin` filter
//! operators) are not RFC 9535 and are refused when the path is compiled, so at validation.
//!
//! An object or array found is written as the document has it, its members in their order
//! and its text as written, only the whitespace outside strings dropped: [`Spans`] finds a
//! value's text in the document by where the query located it.

use std::collections::HashMap;
use std::ops::Range;

use serde_json::Value;
use serde_json_path::{JsonPath, PathElement};

/// A compiled path.
#[derive(Debug, Clone)]
pub(crate) struct Path {
    query: JsonPath,
    definite: bool,
    /// Whether it lists selectors (`[1,0]`): then its matches keep the order it asks for;
    /// otherwise they are in the document's order, as Jayway gives them.
    union: bool,
}

/// Where a value is in a document: the names and indexes down to it.
type Location<'v> = Vec<PathElement<'v>>;

/// What a path found in a document.
#[derive(Debug, PartialEq)]
pub(crate) enum Found<'v> {
    /// A definite path's one value.
    One(Location<'v>, &'v Value),
    /// An indefinite path's matches (none, maybe): an array, in the document's order when
    /// `in_document_order`.
    Many {
        items: Vec<(Location<'v>, &'v Value)>,
        in_document_order: bool,
    },
    /// A definite path that matches nothing (Jayway's "path not found").
    Nothing,
}

/// Compiles `text`, or says why it is not a path.
pub(crate) fn compile(text: &str) -> Result<Path, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("the JSONPath expression cannot be empty".into());
    }
    let rooted = rooted(text);
    let query = JsonPath::parse(&rooted).map_err(|e| {
        let hint = if text.contains("()") {
            " (functions such as `.length()` are Jayway's own, not RFC 9535 JSONPath)"
        } else if text.contains("=~") {
            " (the `=~` operator is Jayway's own; RFC 9535 has `match()` and `search()`)"
        } else {
            ""
        };
        format!("`{text}` is not a JSONPath expression: {e}{hint}")
    })?;
    Ok(Path {
        definite: is_definite(&rooted),
        union: has_union(&rooted),
        query,
    })
}

impl Path {
    /// Evaluates the path against `document`.
    pub(crate) fn find<'v>(&self, document: &'v Value) -> Found<'v> {
        let nodes = self.query.query_located(document);
        let located = |n: serde_json_path::LocatedNode<'v>| {
            let node = n.node();
            (n.to_location().into_iter().collect::<Location<'v>>(), node)
        };
        if self.definite {
            match nodes.into_iter().next() {
                Some(n) => {
                    let (at, v) = located(n);
                    Found::One(at, v)
                }
                None => Found::Nothing,
            }
        } else {
            Found::Many {
                items: nodes.into_iter().map(located).collect(),
                in_document_order: !self.union,
            }
        }
    }
}

impl Found<'_> {
    /// True for a string, number, boolean or null (what a `scalar` return type accepts).
    pub(crate) fn is_scalar(&self) -> bool {
        matches!(self, Found::One(_, v) if !matches!(v, Value::Array(_) | Value::Object(_)))
    }

    /// The result as NiFi writes it: a string as its text, a number or boolean as
    /// written, null as `null_value`, an object or array as compact JSON (see
    /// [`Spans`]); nothing found as the empty text.
    pub(crate) fn render(&self, spans: &mut Spans<'_>, null_value: &str) -> String {
        match self {
            Found::One(at, v) => render(spans, at, v, null_value),
            Found::Many { .. } => {
                let mut out = String::from("[");
                for (i, (at, v)) in self.many(spans).into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&spans.json(at, v));
                }
                out.push(']');
                out
            }
            Found::Nothing => String::new(),
        }
    }

    /// The elements of the array found, each rendered as [`Found::render`] renders a
    /// value (SplitJson's parts); `None` when the result is no array.
    pub(crate) fn elements(&self, spans: &mut Spans<'_>, null_value: &str) -> Option<Vec<String>> {
        match self {
            Found::One(at, Value::Array(items)) => Some(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| {
                        let mut element = at.clone();
                        element.push(PathElement::Index(i));
                        render(spans, &element, item, null_value)
                    })
                    .collect(),
            ),
            Found::Many { .. } => Some(
                self.many(spans)
                    .into_iter()
                    .map(|(at, v)| render(spans, at, v, null_value))
                    .collect(),
            ),
            _ => None,
        }
    }

    /// An indefinite path's matches in the order they are written in: the document's,
    /// unless the path lists its selectors.
    fn many(&self, spans: &mut Spans<'_>) -> Vec<(&[PathElement<'_>], &Value)> {
        let Found::Many {
            items,
            in_document_order,
        } = self
        else {
            return Vec::new();
        };
        let mut out: Vec<(&[PathElement<'_>], &Value)> =
            items.iter().map(|(at, v)| (at.as_slice(), *v)).collect();
        if *in_document_order {
            // Stable: a match whose text cannot be found keeps its place among equals.
            out.sort_by_cached_key(|(at, _)| spans.span(at).map_or(usize::MAX, |s| s.start));
        }
        out
    }
}

/// One value as NiFi writes a path's result.
fn render(
    spans: &mut Spans<'_>,
    at: &[PathElement<'_>],
    value: &Value,
    null_value: &str,
) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => null_value.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Array(_) | Value::Object(_) => spans.json(at, value),
    }
}

/// A member of an object or array in a document's text: its key's span (quotes included;
/// none in an array) and its value's.
type Member = (Option<Range<usize>>, Range<usize>);

/// The text of a document, for writing the values found in it as they are written there.
/// Each container's members are found once, when a value inside it is first asked for, so
/// writing every element of a large array costs one pass over it.
pub(crate) struct Spans<'t> {
    text: &'t [u8],
    /// By a container's first byte: each member's key (objects) and value span.
    members: HashMap<usize, Vec<Member>>,
    /// The whole document's span, once found.
    root: Option<Range<usize>>,
}

impl<'t> Spans<'t> {
    /// The spans of `text`, a document that parsed as JSON.
    pub(crate) fn new(text: &'t [u8]) -> Spans<'t> {
        Spans {
            text,
            members: HashMap::new(),
            root: None,
        }
    }

    /// `value`, found at `at`, as compact JSON: its text in the document without the
    /// whitespace outside strings; as serde_json writes it if it cannot be found there.
    fn json(&mut self, at: &[PathElement<'_>], value: &Value) -> String {
        match self.span(at) {
            Some(span) => minified(&self.text[span]),
            None => value.to_string(),
        }
    }

    /// Where the value at `path` is in the text.
    fn span(&mut self, path: &[PathElement<'_>]) -> Option<Range<usize>> {
        let text = self.text;
        let mut span = match &self.root {
            Some(root) => root.clone(),
            None => {
                let start = skip_whitespace(text, 0);
                let root = start..value_end(text, start)?;
                self.root = Some(root.clone());
                root
            }
        };
        for step in path {
            let members = match self.members.entry(span.start) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(members(text, span.start)?)
                }
            };
            span = match step {
                PathElement::Index(i) => members.get(*i)?.1.clone(),
                // The last member of a name, as serde_json keeps the last.
                PathElement::Name(name) => members
                    .iter()
                    .rev()
                    .find(|(key, _)| key.as_ref().is_some_and(|k| key_is(&text[k.clone()], name)))?
                    .1
                    .clone(),
            };
        }
        Some(span)
    }
}

fn skip_whitespace(text: &[u8], mut at: usize) -> usize {
    while at < text.len() && matches!(text[at], b' ' | b'\t' | b'\n' | b'\r') {
        at += 1;
    }
    at
}

/// The end (exclusive) of the string whose opening quote is at `at`.
fn string_end(text: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    while i < text.len() {
        match text[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// The end (exclusive) of the value that starts at `at`.
fn value_end(text: &[u8], at: usize) -> Option<usize> {
    match text.get(at)? {
        b'"' => string_end(text, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            while i < text.len() {
                match text[i] {
                    b'"' => {
                        i = string_end(text, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let mut i = at;
            while i < text.len()
                && !matches!(text[i], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            {
                i += 1;
            }
            Some(i)
        }
    }
}

/// The members of the object or array at `at`: each one's key span (objects, quotes
/// included) and value span.
fn members(text: &[u8], at: usize) -> Option<Vec<Member>> {
    let object = match text.get(at)? {
        b'{' => true,
        b'[' => false,
        _ => return None,
    };
    let close = if object { b'}' } else { b']' };
    let mut out = Vec::new();
    let mut i = skip_whitespace(text, at + 1);
    if text.get(i) == Some(&close) {
        return Some(out);
    }
    loop {
        let key = if object {
            let end = string_end(text, i)?;
            let key = i..end;
            i = skip_whitespace(text, end);
            if text.get(i) != Some(&b':') {
                return None;
            }
            i = skip_whitespace(text, i + 1);
            Some(key)
        } else {
            None
        };
        let end = value_end(text, i)?;
        out.push((key, i..end));
        i = skip_whitespace(text, end);
        match text.get(i)? {
            b',' => i = skip_whitespace(text, i + 1),
            c if *c == close => return Some(out),
            _ => return None,
        }
    }
}

/// Whether the quoted key `quoted` (as written, escapes and all) is `name`.
fn key_is(quoted: &[u8], name: &str) -> bool {
    let inner = &quoted[1..quoted.len() - 1];
    if !inner.contains(&b'\\') {
        return inner == name.as_bytes();
    }
    serde_json::from_slice::<String>(quoted).is_ok_and(|k| k == name)
}

/// `raw` JSON without the whitespace outside its strings.
fn minified(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'"' => {
                let end = string_end(raw, i).unwrap_or(raw.len());
                out.extend_from_slice(&raw[i..end]);
                i = end;
            }
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    // Whole strings and ASCII punctuation of a document that parsed: still UTF-8.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// `text` rooted at `$`, with dot names RFC 9535 refuses bracketed.
fn rooted(text: &str) -> String {
    let body = if let Some(rest) = text.strip_prefix('$') {
        rest.to_string()
    } else if text.starts_with('[') || text.starts_with('.') {
        text.to_string()
    } else {
        format!(".{text}")
    };
    let mut out = String::with_capacity(body.len() + 3);
    out.push('$');
    let chars: Vec<char> = body.chars().collect();
    let mut i = 0;
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    while i < chars.len() {
        let c = chars[i];
        match (quote, c) {
            (Some(_), '\\') => {
                out.push(c);
                if let Some(&next) = chars.get(i + 1) {
                    out.push(next);
                }
                i += 2;
                continue;
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '[' | '(') => depth += 1,
            (None, ']' | ')') => depth = depth.saturating_sub(1),
            (None, '.') if depth == 0 => {
                // A dot name: up to the next `.` or `[` (a `..` is a descendant segment).
                let double = chars.get(i + 1) == Some(&'.');
                let start = i + 1 + usize::from(double);
                let end = (start..chars.len())
                    .find(|&j| matches!(chars[j], '.' | '['))
                    .unwrap_or(chars.len());
                let name: String = chars[start..end].iter().collect();
                // Only names of letters, digits, `_` and `-` are bracketed: anything else
                // (a Jayway function's `()`) is left for the parser to refuse.
                let plain = name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-') || !c.is_ascii());
                if name.is_empty() || !plain || is_shorthand(&name) {
                    out.extend(&chars[i..end]);
                } else {
                    out.push_str(if double { ".." } else { "" });
                    out.push_str("['");
                    for ch in name.chars() {
                        if matches!(ch, '\'' | '\\') {
                            out.push('\\');
                        }
                        out.push(ch);
                    }
                    out.push_str("']");
                }
                i = end;
                continue;
            }
            _ => {}
        }
        out.push(c);
        i += 1;
    }
    out
}

/// True for a name RFC 9535 takes after a dot: a letter, `_` or non-ASCII character, then
/// those or digits.
fn is_shorthand(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || !c.is_ascii())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || !c.is_ascii())
}

/// Jayway's definite path: no descendant segment, wildcard, filter, union or slice
/// (looked for outside quoted names).
fn is_definite(rooted: &str) -> bool {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut previous = ' ';
    for c in rooted.chars() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => quote = Some(c),
            '*' | '?' | ',' | ':' => return false,
            '.' if previous == '.' => return false,
            _ => {}
        }
        previous = c;
    }
    true
}

/// Whether a path lists selectors (a `,` inside brackets, outside quotes and a filter's
/// parentheses).
fn has_union(rooted: &str) -> bool {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let (mut brackets, mut parens) = (0usize, 0usize);
    for c in rooted.chars() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => quote = Some(c),
            '[' => brackets += 1,
            ']' => brackets = brackets.saturating_sub(1),
            '(' => parens += 1,
            ')' => parens = parens.saturating_sub(1),
            ',' if brackets > 0 && parens == 0 => return true,
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What `path` finds in `doc`, as one value (an array for an indefinite path).
    fn find(path: &str, doc: &Value) -> Option<Value> {
        match compile(path).unwrap().find(doc) {
            Found::One(_, v) => Some(v.clone()),
            Found::Many { items, .. } => Some(Value::Array(
                items.into_iter().map(|(_, v)| v.clone()).collect(),
            )),
            Found::Nothing => None,
        }
    }

    /// What `path` finds in the document `text`, written as NiFi writes it.
    fn rendered(text: &str, path: &str, null: &str) -> String {
        let doc: Value = serde_json::from_str(text).unwrap();
        compile(path)
            .unwrap()
            .find(&doc)
            .render(&mut Spans::new(text.as_bytes()), null)
    }

    #[test]
    fn paths_read_as_jayway_reads_them() {
        let doc = json!({
            "store": {"book": [
                {"title": "Sayings", "price": 8.95, "first-name": "Nigel"},
                {"title": "Sword", "price": 12.99, "isbn": null}
            ]},
            "2nd": true,
            "caf\u{e9}": "cr\u{e8}me"
        });
        assert_eq!(find("$.store.book[0].title", &doc), Some(json!("Sayings")));
        assert_eq!(find("store.book[1].price", &doc), Some(json!(12.99)));
        assert_eq!(
            find("$.store.book[0].first-name", &doc),
            Some(json!("Nigel"))
        );
        assert_eq!(find("$.2nd", &doc), Some(json!(true)));
        assert_eq!(find("$.caf\u{e9}", &doc), Some(json!("cr\u{e8}me")));
        assert_eq!(
            find("$['store']['book'][1]['isbn']", &doc),
            Some(Value::Null)
        );
        assert_eq!(find("$.store.missing", &doc), None);
        assert_eq!(find("$..title", &doc), Some(json!(["Sayings", "Sword"])));
        assert_eq!(
            find("$.store.book[?(@.price < 10)].title", &doc),
            Some(json!(["Sayings"]))
        );
        assert_eq!(find("$.store.book[*].nothing", &doc), Some(json!([])));
        assert_eq!(
            find("$.store.book[0,1].price", &doc),
            Some(json!([8.95, 12.99]))
        );
    }

    #[test]
    fn rfc_functions_stand_in_for_jayways() {
        let doc = json!([{"a": "xyz", "tags": [1, 2]}, {"a": "abc", "tags": []}]);
        assert_eq!(find("$[?match(@.a, 'x.*')].a", &doc), Some(json!(["xyz"])));
        assert_eq!(find("$[?search(@.a, 'b')].a", &doc), Some(json!(["abc"])));
        assert_eq!(find("$[?length(@.tags) > 1].a", &doc), Some(json!(["xyz"])));
        let err = compile("$.tags.length()").unwrap_err();
        assert!(err.contains("Jayway"), "{err}");
    }

    #[test]
    fn quoted_names_keep_their_dots_and_stars() {
        let doc = json!({"a.b": {"*": 1}});
        assert_eq!(find("$['a.b']['*']", &doc), Some(json!(1)));
    }

    #[test]
    fn jayway_extensions_and_nonsense_are_refused() {
        for bad in ["", "$.book.length()", "$[?(@.a =~ /x/)]", "$.a[", "$$"] {
            assert!(compile(bad).is_err(), "{bad} compiled");
        }
    }

    #[test]
    fn results_render_as_nifi_writes_them() {
        let text = r#"{ "s": "a\"b", "n": null, "f": 1.50, "t": true,
            "o": { "z": [ 1 , "x y" ], "a": "\u00e9" }, "dup": 1, "dup": {"b": 2} }"#;
        assert_eq!(rendered(text, "$.s", ""), "a\"b");
        assert_eq!(rendered(text, "$.n", "null"), "null");
        assert_eq!(rendered(text, "$.n", ""), "");
        assert_eq!(rendered(text, "$.f", ""), "1.5");
        assert_eq!(rendered(text, "$.t", ""), "true");
        // Members in the document's order and as written, whitespace in strings kept.
        assert_eq!(rendered(text, "$.o", ""), r#"{"z":[1,"x y"],"a":"\u00e9"}"#);
        assert_eq!(rendered(text, "$.o.z", ""), r#"[1,"x y"]"#);
        assert_eq!(
            rendered(text, "$.dup", ""),
            r#"{"b":2}"#,
            "the last of a repeated name"
        );
        assert_eq!(rendered(text, "$..z", ""), r#"[[1,"x y"]]"#);
        assert_eq!(
            rendered(text, "$.o.*", ""),
            r#"[[1,"x y"],"\u00e9"]"#,
            "the document's order"
        );
        assert_eq!(
            rendered(text, "$['t','s']", ""),
            r#"[true,"a\"b"]"#,
            "the order asked for"
        );
        assert_eq!(rendered(text, "$.missing", ""), "");
        assert_eq!(rendered("[]", "$[*]", ""), "[]");
    }

    proptest::proptest! {
        /// Whatever the whitespace around its tokens, a document's values are written as
        /// serde_json writes them compactly (the same members, in the same order).
        #[test]
        fn found_values_are_their_compact_text(
            keys in proptest::collection::vec("[a-z\"\u{e9} ]{0,4}", 1..5),
            spaces in "[ \n\t]{0,3}",
        ) {
            let mut object = serde_json::Map::new();
            for (i, k) in keys.iter().enumerate() {
                object.insert(k.clone(), serde_json::json!([i, {"k": k}]));
            }
            let value = Value::Object(object);
            let pretty = serde_json::to_string_pretty(&serde_json::json!({"v": value}))
                .unwrap()
                .replace('\n', &format!("\n{spaces}"));
            proptest::prop_assert_eq!(rendered(&pretty, "$.v", ""), value.to_string());
            for k in keys {
                let path = format!("$.v['{}']", k.replace('\\', "\\\\").replace('\'', "\\'"));
                let doc: Value = serde_json::from_str(&pretty).unwrap();
                let expected = doc["v"][&k].to_string();
                proptest::prop_assert_eq!(rendered(&pretty, &path, ""), expected);
            }
        }
    }
}
