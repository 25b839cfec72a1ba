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

use serde_json::Value;
use serde_json_path::JsonPath;

/// A compiled path.
#[derive(Debug, Clone)]
pub(crate) struct Path {
    query: JsonPath,
    definite: bool,
}

/// What a path found in a document.
#[derive(Debug, PartialEq)]
pub(crate) enum Found {
    /// The value (a definite path's one value, or an array of an indefinite path's).
    Value(Value),
    /// A definite path that matches nothing.
    NotFound,
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
        query,
    })
}

impl Path {
    /// Evaluates the path against `document`.
    pub(crate) fn find(&self, document: &Value) -> Found {
        let nodes = self.query.query(document);
        if self.definite {
            match nodes.first() {
                Some(v) => Found::Value(v.clone()),
                None => Found::NotFound,
            }
        } else {
            Found::Value(Value::Array(nodes.all().into_iter().cloned().collect()))
        }
    }
}

/// A value as NiFi writes a path's result: a string as its text, a number or boolean as
/// written, null as `null_value`, an object or array as compact JSON.
pub(crate) fn render(value: &Value, null_value: &str) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => null_value.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Array(_) | Value::Object(_) => value.to_string(),
    }
}

/// True for a string, number, boolean or null (what a `scalar` return type accepts).
pub(crate) fn is_scalar(value: &Value) -> bool {
    !matches!(value, Value::Array(_) | Value::Object(_))
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn find(path: &str, doc: &Value) -> Found {
        compile(path).unwrap().find(doc)
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
        assert_eq!(
            find("$.store.book[0].title", &doc),
            Found::Value(json!("Sayings"))
        );
        assert_eq!(
            find("store.book[1].price", &doc),
            Found::Value(json!(12.99))
        );
        assert_eq!(
            find("$.store.book[0].first-name", &doc),
            Found::Value(json!("Nigel"))
        );
        assert_eq!(find("$.2nd", &doc), Found::Value(json!(true)));
        assert_eq!(find("$.caf\u{e9}", &doc), Found::Value(json!("cr\u{e8}me")));
        assert_eq!(
            find("$['store']['book'][1]['isbn']", &doc),
            Found::Value(Value::Null)
        );
        assert_eq!(find("$.store.missing", &doc), Found::NotFound);
        assert_eq!(
            find("$..title", &doc),
            Found::Value(json!(["Sayings", "Sword"]))
        );
        assert_eq!(
            find("$.store.book[?(@.price < 10)].title", &doc),
            Found::Value(json!(["Sayings"]))
        );
        assert_eq!(
            find("$.store.book[*].nothing", &doc),
            Found::Value(json!([]))
        );
        assert_eq!(
            find("$.store.book[0,1].price", &doc),
            Found::Value(json!([8.95, 12.99]))
        );
    }

    #[test]
    fn rfc_functions_stand_in_for_jayways() {
        let doc = json!([{"a": "xyz", "tags": [1, 2]}, {"a": "abc", "tags": []}]);
        assert_eq!(
            find("$[?match(@.a, 'x.*')].a", &doc),
            Found::Value(json!(["xyz"]))
        );
        assert_eq!(
            find("$[?search(@.a, 'b')].a", &doc),
            Found::Value(json!(["abc"]))
        );
        assert_eq!(
            find("$[?length(@.tags) > 1].a", &doc),
            Found::Value(json!(["xyz"]))
        );
        let err = compile("$.tags.length()").unwrap_err();
        assert!(err.contains("Jayway"), "{err}");
    }

    #[test]
    fn quoted_names_keep_their_dots_and_stars() {
        let doc = json!({"a.b": {"*": 1}});
        assert_eq!(find("$['a.b']['*']", &doc), Found::Value(json!(1)));
    }

    #[test]
    fn jayway_extensions_and_nonsense_are_refused() {
        for bad in ["", "$.book.length()", "$[?(@.a =~ /x/)]", "$.a[", "$$"] {
            assert!(compile(bad).is_err(), "{bad} compiled");
        }
    }

    #[test]
    fn results_render_as_nifi_writes_them() {
        assert_eq!(render(&json!("a\"b"), ""), "a\"b");
        assert_eq!(render(&Value::Null, "null"), "null");
        assert_eq!(render(&Value::Null, ""), "");
        assert_eq!(render(&json!(1.5), ""), "1.5");
        assert_eq!(
            render(&json!({"k": ["\u{e9}", 1]}), ""),
            "{\"k\":[\"\u{e9}\",1]}"
        );
    }
}
