//! NiFi's expression language, the subset in the flow format: attribute references, chained
//! functions and subject-less functions inside literal text.
//!
//! ```
//! use std::borrow::Cow;
//! use std::collections::BTreeMap;
//! use weir_flow_api::expression::Template;
//!
//! let t = Template::parse("out-${filename:toUpper()}-${fragment.index:plus(1)}.txt").unwrap();
//! let attrs = BTreeMap::from([
//!     ("filename".to_string(), "a".to_string()),
//!     ("fragment.index".to_string(), "1".to_string()),
//! ]);
//! // A lookup lends what it holds, or makes a value (a flow file's derived `fileSize`).
//! let lookup = |k: &str| attrs.get(k).map(|v| Cow::Borrowed(v.as_str()));
//! assert_eq!(t.evaluate(&lookup).unwrap(), "out-A-2.txt");
//! ```
//!
//! A template is parsed once (a bad one is a validation error) and evaluated per flow file; an
//! evaluation that fails (`toNumber` of a word) is an [`EvalError`], which processors route to
//! `failure`. Evaluation borrows what it can: an attribute's value is read where the flow file
//! holds it, and a function that takes part of a text (`substringAfter`, `trim`) returns that
//! part of it, so `${attr}` or `${attr:substringAfter('.')}` allocates nothing.

use std::borrow::Cow;
use std::fmt;

use regex::Regex;

/// A property value: literal text with embedded `${...}` expressions.
#[derive(Debug, Clone)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Debug, Clone)]
enum Part {
    Text(String),
    Expr(Expr),
}

/// One `${...}`: a subject and a chain of functions applied to it.
#[derive(Debug, Clone)]
struct Expr {
    subject: Subject,
    chain: Vec<Call>,
}

#[derive(Debug, Clone)]
enum Subject {
    Attribute(String),
    Function(Call),
}

#[derive(Debug, Clone)]
struct Call {
    name: String,
    args: Vec<Arg>,
    /// Compiled once for `matches`, `find` and `replaceAll`.
    regex: Option<Regex>,
}

#[derive(Debug, Clone)]
enum Arg {
    Literal(String),
    Expr(Expr),
}

/// A value while an expression is evaluated; text is borrowed from the attributes or the
/// template where it can be.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    /// No such attribute.
    Null,
    /// Text.
    Text(Cow<'a, str>),
    /// A number (whole numbers print without a fraction).
    Number(f64),
    /// A boolean.
    Bool(bool),
}

impl fmt::Display for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => Ok(()),
            Value::Text(s) => f.write_str(s),
            Value::Number(n) if n.fract() == 0.0 && n.abs() < 1e18 => write!(f, "{}", *n as i64),
            Value::Number(n) => write!(f, "{n}"),
            Value::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// A template that does not parse: the message names the position in the text.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("bad expression at character {position}: {message}")]
pub struct ParseError {
    /// Character offset in the property value.
    pub position: usize,
    /// What is wrong.
    pub message: String,
}

/// An expression that failed on one flow file's attributes.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("expression failed: {0}")]
pub struct EvalError(pub String);

/// Functions with a subject, and how many arguments each takes (min, max).
const SUBJECT_FUNCTIONS: &[(&str, usize, usize)] = &[
    ("toUpper", 0, 0),
    ("toLower", 0, 0),
    ("trim", 0, 0),
    ("length", 0, 0),
    ("substring", 1, 2),
    ("substringBefore", 1, 1),
    ("substringAfter", 1, 1),
    ("append", 1, 1),
    ("prepend", 1, 1),
    ("replace", 2, 2),
    ("replaceAll", 2, 2),
    ("equals", 1, 1),
    ("equalsIgnoreCase", 1, 1),
    ("contains", 1, 1),
    ("startsWith", 1, 1),
    ("endsWith", 1, 1),
    ("matches", 1, 1),
    ("find", 1, 1),
    ("isEmpty", 0, 0),
    ("isNull", 0, 0),
    ("notNull", 0, 0),
    ("toNumber", 0, 0),
    ("plus", 1, 1),
    ("minus", 1, 1),
    ("multiply", 1, 1),
    ("divide", 1, 1),
    ("mod", 1, 1),
    ("gt", 1, 1),
    ("ge", 1, 1),
    ("lt", 1, 1),
    ("le", 1, 1),
    ("and", 1, 1),
    ("or", 1, 1),
    ("not", 0, 0),
];

/// Functions without a subject.
const FREE_FUNCTIONS: &[(&str, usize, usize)] = &[
    ("now", 0, 0),
    ("UUID", 0, 0),
    ("literal", 1, 1),
    ("hostname", 0, 0),
];

impl Template {
    /// Parses `text`.
    ///
    /// # Errors
    /// [`ParseError`] for an unclosed `${`, an unknown function, a wrong argument count or a
    /// bad regular expression.
    pub fn parse(text: &str) -> Result<Template, ParseError> {
        let mut p = Parser {
            chars: text.chars().collect(),
            pos: 0,
        };
        let mut parts = Vec::new();
        let mut literal = String::new();
        while p.pos < p.chars.len() {
            if p.peek() != Some('$') {
                literal.push(p.chars[p.pos]);
                p.pos += 1;
                continue;
            }
            // A run of `$`s. As in NiFi, only before `{` do they mean anything: each `$$`
            // there is one literal `$`, and an odd one out starts an expression. Anywhere
            // else they are text (`You owe me $$5` stays as it is).
            let run = p.chars[p.pos..].iter().take_while(|&&c| c == '$').count();
            let after = p.pos + run;
            if p.chars.get(after) != Some(&'{') {
                literal.extend(std::iter::repeat_n('$', run));
                p.pos = after;
                continue;
            }
            literal.extend(std::iter::repeat_n('$', run / 2));
            p.pos = after;
            if run % 2 == 0 {
                continue;
            }
            // `${` with no `}` to close it is text, as NiFi keeps it.
            if !closes(&p.chars, after + 1) {
                literal.extend(&p.chars[after - 1..]);
                p.pos = p.chars.len();
                break;
            }
            if !literal.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut literal)));
            }
            p.pos = after + 1;
            parts.push(Part::Expr(p.expr()?));
        }
        if !literal.is_empty() {
            parts.push(Part::Text(literal));
        }
        Ok(Template { parts })
    }

    /// True when the value holds at least one expression.
    pub fn has_expressions(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::Expr(_)))
    }

    /// Evaluates the template against one flow file's attributes, given by `lookup`, which
    /// lends a value the flow file holds or makes one it derives (`fileSize`).
    /// Borrowed when the result is one attribute's value or part of it, or the template's
    /// own text; allocated otherwise.
    ///
    /// # Errors
    /// [`EvalError`] when a function cannot apply (a number expected, a bad index).
    pub fn evaluate<'r, 'a: 'r>(
        &'r self,
        lookup: &dyn Fn(&str) -> Option<Cow<'a, str>>,
    ) -> Result<Cow<'r, str>, EvalError> {
        // Values borrowed from the attributes are held no longer than the template.
        self.evaluate_in(&|k| -> Option<Cow<'r, str>> { lookup(k) })
    }

    fn evaluate_in<'r>(
        &'r self,
        lookup: &dyn Fn(&str) -> Option<Cow<'r, str>>,
    ) -> Result<Cow<'r, str>, EvalError> {
        match self.parts.as_slice() {
            // One expression (`${attr:fn()}`, the usual property) is its value's text as
            // made, not copied into a new string.
            [Part::Expr(e)] => return Ok(into_text(eval_expr(e, lookup)?)),
            [Part::Text(t)] => return Ok(Cow::Borrowed(t)),
            [] => return Ok(Cow::Borrowed("")),
            _ => {}
        }
        // Room for the literal text and a short value per expression, at once.
        let room = self
            .parts
            .iter()
            .map(|p| match p {
                Part::Text(t) => t.len(),
                Part::Expr(_) => 16,
            })
            .sum();
        let mut out = String::with_capacity(room);
        self.write_parts(lookup, &mut out)?;
        Ok(Cow::Owned(out))
    }

    /// Appends the template's text to `out`: a caller that evaluates it for each of many
    /// flow files keeps one buffer instead of allocating a string per flow file.
    ///
    /// # Errors
    /// As [`Template::evaluate`]; `out` may then hold part of the text.
    pub fn evaluate_into<'r, 'a: 'r>(
        &'r self,
        lookup: &dyn Fn(&str) -> Option<Cow<'a, str>>,
        out: &mut String,
    ) -> Result<(), EvalError> {
        self.write_parts(&|k| -> Option<Cow<'r, str>> { lookup(k) }, out)
    }

    fn write_parts<'r>(
        &'r self,
        lookup: &dyn Fn(&str) -> Option<Cow<'r, str>>,
        out: &mut String,
    ) -> Result<(), EvalError> {
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Expr(e) => match eval_expr(e, lookup)? {
                    Value::Text(t) => out.push_str(&t),
                    other => {
                        use fmt::Write;
                        write!(out, "{other}").expect("writing to a String cannot fail")
                    }
                },
            }
        }
        Ok(())
    }

    /// Evaluates the template with each expression's value passed through `decorate`
    /// (NiFi's attribute value decorator): RouteOnContent quotes the values it puts into a
    /// regular expression, so an attribute's text is matched literally.
    ///
    /// # Errors
    /// As [`Template::evaluate`].
    pub fn evaluate_decorated<'a>(
        &self,
        lookup: &dyn Fn(&str) -> Option<Cow<'a, str>>,
        decorate: &dyn Fn(&str) -> String,
    ) -> Result<String, EvalError> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Expr(e) => {
                    let lookup = |k: &str| -> Option<Cow<'_, str>> { lookup(k) };
                    let value = into_text(eval_expr(e, &lookup)?);
                    out.push_str(&decorate(&value));
                }
            }
        }
        Ok(out)
    }

    /// Evaluates the template as a boolean (RouteOnAttribute's rules): `true` when the result
    /// is the text `true`, ignoring case.
    ///
    /// # Errors
    /// As [`Template::evaluate`].
    pub fn evaluate_bool<'r, 'a: 'r>(
        &'r self,
        lookup: &dyn Fn(&str) -> Option<Cow<'a, str>>,
    ) -> Result<bool, EvalError> {
        let lookup = |k: &str| -> Option<Cow<'r, str>> { lookup(k) };
        let lookup: &dyn Fn(&str) -> Option<Cow<'r, str>> = &lookup;
        let is_true = |t: &str| t.trim().eq_ignore_ascii_case("true");
        // One expression (`${x:equals('y')}`, the usual rule) is judged by its value: a
        // boolean as it is, without writing it out as text first.
        if let [Part::Expr(e)] = self.parts.as_slice() {
            return Ok(match eval_expr(e, lookup)? {
                Value::Bool(b) => b,
                Value::Text(t) => is_true(&t),
                other => is_true(&other.to_string()),
            });
        }
        Ok(is_true(&self.evaluate_in(lookup)?))
    }
}

/// Whether the expression whose body starts at `from` (just after its `${`) is closed by a
/// `}`: quotes are skipped (with their escapes) and nested `${` ... `}` counted.
fn closes(chars: &[char], from: usize) -> bool {
    let mut depth = 1;
    let mut quote: Option<char> = None;
    let mut i = from;
    while let Some(&c) = chars.get(i) {
        match (quote, c) {
            (Some(_), '\\') => i += 1,
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '{') => depth += 1,
            (None, '}') => {
                depth -= 1;
                if depth == 0 {
                    return true;
                }
            }
            (None, _) => {}
        }
        i += 1;
    }
    false
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn err(&self, message: impl Into<String>) -> ParseError {
        ParseError {
            position: self.pos,
            message: message.into(),
        }
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    /// After `${`: subject, chain, `}`.
    fn expr(&mut self) -> Result<Expr, ParseError> {
        self.skip_ws();
        let subject = match self.peek() {
            Some(q @ ('\'' | '"')) => Subject::Attribute(self.quoted(q)?),
            Some(_) => {
                let start = self.pos;
                while self.peek().is_some_and(|c| {
                    !matches!(c, ':' | '}' | '(' | ')' | ',') && !c.is_whitespace()
                }) {
                    self.pos += 1;
                }
                let name: String = self.chars[start..self.pos].iter().collect();
                if name.is_empty() {
                    return Err(self.err("empty attribute name"));
                }
                self.skip_ws();
                if self.peek() == Some('(') {
                    Subject::Function(self.call(name, FREE_FUNCTIONS)?)
                } else {
                    Subject::Attribute(name)
                }
            }
            None => return Err(self.err("unclosed `${`")),
        };
        let mut chain = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                Some('}') => {
                    self.pos += 1;
                    return Ok(Expr { subject, chain });
                }
                Some(':') => {
                    self.pos += 1;
                    self.skip_ws();
                    let start = self.pos;
                    while self.peek().is_some_and(|c| c.is_ascii_alphanumeric()) {
                        self.pos += 1;
                    }
                    let name: String = self.chars[start..self.pos].iter().collect();
                    self.skip_ws();
                    if self.peek() != Some('(') {
                        return Err(self.err(format!("`{name}` needs `(...)`")));
                    }
                    chain.push(self.call(name, SUBJECT_FUNCTIONS)?);
                }
                Some(c) => return Err(self.err(format!("unexpected `{c}`"))),
                None => return Err(self.err("unclosed `${`")),
            }
        }
    }

    /// At `(`: the arguments of `name`, checked against `table`.
    fn call(&mut self, name: String, table: &[(&str, usize, usize)]) -> Result<Call, ParseError> {
        let Some(&(_, min, max)) = table.iter().find(|(n, _, _)| *n == name) else {
            return Err(self.err(format!("unknown function `{name}`")));
        };
        self.pos += 1; // `(`
        let mut args = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                Some(')') => {
                    self.pos += 1;
                    break;
                }
                Some(q @ ('\'' | '"')) => args.push(Arg::Literal(self.quoted(q)?)),
                Some('$') if self.chars.get(self.pos + 1) == Some(&'{') => {
                    self.pos += 2;
                    args.push(Arg::Expr(self.expr()?));
                }
                Some(c) if c.is_ascii_digit() || c == '-' || c == '.' => {
                    let start = self.pos;
                    self.pos += 1;
                    while self.peek().is_some_and(|c| c.is_ascii_digit() || c == '.') {
                        self.pos += 1;
                    }
                    args.push(Arg::Literal(self.chars[start..self.pos].iter().collect()));
                }
                Some(c) if c.is_ascii_alphabetic() => {
                    // `true` and `false` as bare words.
                    let start = self.pos;
                    while self.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
                        self.pos += 1;
                    }
                    let word: String = self.chars[start..self.pos].iter().collect();
                    if word != "true" && word != "false" {
                        return Err(self.err(format!("bare word `{word}`: quote text arguments")));
                    }
                    args.push(Arg::Literal(word));
                }
                Some(c) => return Err(self.err(format!("unexpected `{c}` in arguments"))),
                None => return Err(self.err("unclosed `(`")),
            }
            self.skip_ws();
            match self.peek() {
                Some(',') => self.pos += 1,
                Some(')') => {}
                _ => return Err(self.err("expected `,` or `)`")),
            }
        }
        if args.len() < min || args.len() > max {
            return Err(self.err(format!(
                "`{name}` takes {} argument(s), got {}",
                if min == max {
                    min.to_string()
                } else {
                    format!("{min} to {max}")
                },
                args.len()
            )));
        }
        let regex = if matches!(name.as_str(), "matches" | "find" | "replaceAll") {
            match &args[0] {
                Arg::Literal(pattern) => Some(
                    Regex::new(pattern)
                        .map_err(|e| self.err(format!("bad regular expression: {e}")))?,
                ),
                Arg::Expr(_) => None,
            }
        } else {
            None
        };
        Ok(Call { name, args, regex })
    }

    fn quoted(&mut self, quote: char) -> Result<String, ParseError> {
        self.pos += 1;
        let mut s = String::new();
        loop {
            match self.peek() {
                Some(c) if c == quote => {
                    self.pos += 1;
                    return Ok(s);
                }
                Some('\\') => {
                    self.pos += 1;
                    match self.peek() {
                        Some('n') => s.push('\n'),
                        Some('t') => s.push('\t'),
                        Some('r') => s.push('\r'),
                        Some(c @ ('\\' | '\'' | '"')) => s.push(c),
                        // An escape NiFi does not know keeps its backslash: `'\.gz$'` is the
                        // regular expression `\.gz$`.
                        Some(c) => {
                            s.push('\\');
                            s.push(c);
                        }
                        None => return Err(self.err("unclosed quote")),
                    }
                    self.pos += 1;
                }
                Some(c) => {
                    s.push(c);
                    self.pos += 1;
                }
                None => return Err(self.err("unclosed quote")),
            }
        }
    }
}

fn eval_expr<'a>(
    e: &'a Expr,
    lookup: &dyn Fn(&str) -> Option<Cow<'a, str>>,
) -> Result<Value<'a>, EvalError> {
    let mut value = match &e.subject {
        Subject::Attribute(name) => lookup(name).map_or(Value::Null, Value::Text),
        Subject::Function(call) => free_function(call, lookup)?,
    };
    for call in &e.chain {
        value = apply(value, call, lookup)?;
    }
    Ok(value)
}

/// Argument `i`'s text: a literal borrowed as written (no copy per evaluation), an
/// expression evaluated.
fn arg_text<'a>(
    call: &'a Call,
    i: usize,
    lookup: &dyn Fn(&str) -> Option<Cow<'a, str>>,
) -> Result<Cow<'a, str>, EvalError> {
    match &call.args[i] {
        Arg::Literal(s) => Ok(Cow::Borrowed(s)),
        Arg::Expr(e) => Ok(into_text(eval_expr(e, lookup)?)),
    }
}

/// A value as text: text as it is, anything else written out.
fn into_text(v: Value<'_>) -> Cow<'_, str> {
    match v {
        Value::Text(t) => t,
        other => Cow::Owned(other.to_string()),
    }
}

/// Part `range` of `text`: borrowed from what `text` borrows, or cut from the string it owns.
fn part(text: Cow<'_, str>, range: std::ops::Range<usize>) -> Cow<'_, str> {
    match text {
        Cow::Borrowed(t) => Cow::Borrowed(&t[range]),
        Cow::Owned(mut t) => {
            t.truncate(range.end);
            t.drain(..range.start);
            Cow::Owned(t)
        }
    }
}

fn number(text: &str, what: &str) -> Result<f64, EvalError> {
    text.trim()
        .parse::<f64>()
        .map_err(|_| EvalError(format!("{what}: `{text}` is not a number")))
}

fn free_function<'a>(
    call: &'a Call,
    lookup: &dyn Fn(&str) -> Option<Cow<'a, str>>,
) -> Result<Value<'a>, EvalError> {
    Ok(match call.name.as_str() {
        "now" => Value::Number(chrono::Utc::now().timestamp_millis() as f64),
        "UUID" => Value::Text(uuid::Uuid::new_v4().to_string().into()),
        "literal" => Value::Text(arg_text(call, 0, lookup)?),
        "hostname" => Value::Text(
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .or_else(|_| std::env::var("HOSTNAME"))
                .unwrap_or_else(|_| "localhost".to_string())
                .into(),
        ),
        other => return Err(EvalError(format!("unknown function `{other}`"))),
    })
}

/// Where `needle` first occurs in `text`, in bytes. With `memchr`'s searcher, not the
/// standard library's two-way one, which costs several hundred instructions to set up and
/// run for the one-character separators expressions mostly look for (`substringAfter('.')`).
/// A match of UTF-8 in UTF-8 starts on a character boundary, so the index slices `text`.
fn find_text(text: &str, needle: &str) -> Option<usize> {
    memchr::memmem::find(text.as_bytes(), needle.as_bytes())
}

fn apply<'a>(
    value: Value<'a>,
    call: &'a Call,
    lookup: &dyn Fn(&str) -> Option<Cow<'a, str>>,
) -> Result<Value<'a>, EvalError> {
    // Text is borrowed, not copied, when the value is text already.
    let text = || -> Cow<'_, str> {
        match &value {
            Value::Text(t) => Cow::Borrowed(t),
            other => Cow::Owned(other.to_string()),
        }
    };
    let arg = |i: usize| arg_text(call, i, lookup);
    // A regex compiled at parse time is borrowed: a clone would start with an empty match
    // cache of its own.
    let regex = |i: usize| -> Result<Cow<'_, Regex>, EvalError> {
        match &call.regex {
            Some(r) => Ok(Cow::Borrowed(r)),
            None => Regex::new(&arg(i)?)
                .map(Cow::Owned)
                .map_err(|e| EvalError(format!("bad regex: {e}"))),
        }
    };
    let num = |v: &Value| match v {
        Value::Number(n) => Ok(*n),
        other => number(&other.to_string(), &call.name),
    };
    let boolean = |v: &Value| match v {
        Value::Bool(b) => Ok(*b),
        other => match other.to_string().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            t => Err(EvalError(format!("{}: `{t}` is not a boolean", call.name))),
        },
    };
    Ok(match call.name.as_str() {
        "toUpper" => Value::Text(text().to_uppercase().into()),
        "toLower" => Value::Text(text().to_lowercase().into()),
        "trim" => {
            let t = into_text(value);
            let start = t.len() - t.trim_start().len();
            let end = t.trim_end().len().max(start);
            Value::Text(part(t, start..end))
        }
        "length" => Value::Number(text().chars().count() as f64),
        "substring" => {
            // As NiFi: indices outside the text (a negative one, one past the end, an end
            // before the start) give the empty text, not an error.
            let chars: Vec<char> = text().chars().collect();
            let len = chars.len() as f64;
            let start = number(&arg(0)?, "substring")?.trunc();
            let end = if call.args.len() > 1 {
                number(&arg(1)?, "substring")?.trunc()
            } else {
                len
            };
            if start < 0.0 || end < start || end > len {
                Value::Text(Cow::Borrowed(""))
            } else {
                let (start, end) = (start as usize, end as usize);
                Value::Text(chars[start..end].iter().collect::<String>().into())
            }
        }
        "substringBefore" => {
            let s = arg(0)?;
            let t = into_text(value);
            // As NiFi: an empty search text leaves the subject whole.
            let end = if s.is_empty() {
                t.len()
            } else {
                find_text(&t, &s).unwrap_or(t.len())
            };
            Value::Text(part(t, 0..end))
        }
        "substringAfter" => {
            let s = arg(0)?;
            let t = into_text(value);
            let start = find_text(&t, &s).map_or(0, |i| i + s.len());
            let end = t.len();
            Value::Text(part(t, start..end))
        }
        "append" => Value::Text((text().into_owned() + &arg(0)?).into()),
        "prepend" => Value::Text((arg(0)?.into_owned() + &*text()).into()),
        "replace" => Value::Text(text().replace(&*arg(0)?, &arg(1)?).into()),
        "replaceAll" => Value::Text(
            regex(0)?
                .replace_all(&text(), &*arg(1)?)
                .into_owned()
                .into(),
        ),
        "equals" => Value::Bool(text() == arg(0)?),
        "equalsIgnoreCase" => Value::Bool(text().eq_ignore_ascii_case(&arg(0)?)),
        "contains" => Value::Bool(find_text(&text(), &arg(0)?).is_some()),
        "startsWith" => Value::Bool(text().starts_with(&*arg(0)?)),
        "endsWith" => Value::Bool(text().ends_with(&*arg(0)?)),
        "matches" => {
            let t = text();
            Value::Bool(
                regex(0)?
                    .find(&t)
                    .is_some_and(|m| m.start() == 0 && m.end() == t.len()),
            )
        }
        "find" => Value::Bool(regex(0)?.is_match(&text())),
        "isEmpty" => Value::Bool(value == Value::Null || text().trim().is_empty()),
        "isNull" => Value::Bool(value == Value::Null),
        "notNull" => Value::Bool(value != Value::Null),
        "toNumber" => Value::Number(num(&value)?),
        "plus" => Value::Number(num(&value)? + number(&arg(0)?, "plus")?),
        "minus" => Value::Number(num(&value)? - number(&arg(0)?, "minus")?),
        "multiply" => Value::Number(num(&value)? * number(&arg(0)?, "multiply")?),
        "divide" => {
            let d = number(&arg(0)?, "divide")?;
            if d == 0.0 {
                return Err(EvalError("divide by zero".into()));
            }
            let q = num(&value)? / d;
            // NiFi divides whole numbers as whole numbers.
            Value::Number(if q.is_finite() { q.trunc() } else { q })
        }
        "mod" => {
            let d = number(&arg(0)?, "mod")?;
            if d == 0.0 {
                return Err(EvalError("mod by zero".into()));
            }
            Value::Number(num(&value)? % d)
        }
        "gt" => Value::Bool(num(&value)? > number(&arg(0)?, "gt")?),
        "ge" => Value::Bool(num(&value)? >= number(&arg(0)?, "ge")?),
        "lt" => Value::Bool(num(&value)? < number(&arg(0)?, "lt")?),
        "le" => Value::Bool(num(&value)? <= number(&arg(0)?, "le")?),
        "and" => Value::Bool(boolean(&value)? && boolean(&Value::Text(arg(0)?))?),
        "or" => Value::Bool(boolean(&value)? || boolean(&Value::Text(arg(0)?))?),
        "not" => Value::Bool(!boolean(&value)?),
        other => return Err(EvalError(format!("unknown function `{other}`"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    proptest::proptest! {
        /// `find_text` finds what the standard library's `str::find` finds, in any UTF-8.
        #[test]
        fn find_text_agrees_with_str_find(text in "[a.é€ -]{0,24}", needle in "[a.é€-]{0,3}") {
            proptest::prop_assert_eq!(find_text(&text, &needle), text.find(needle.as_str()));
        }
    }

    fn map(attrs: &[(&str, &str)]) -> BTreeMap<String, String> {
        attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn eval(t: &str, attrs: &[(&str, &str)]) -> Result<String, EvalError> {
        let map = map(attrs);
        Template::parse(t)
            .unwrap()
            .evaluate(&|k| map.get(k).map(|v| Cow::Borrowed(v.as_str())))
            .map(Cow::into_owned)
    }

    #[test]
    fn a_decorator_sees_each_expressions_value_and_not_the_text_around() {
        let map = map(&[("a", "x.y"), ("n", "41")]);
        let lookup = |k: &str| map.get(k).map(|v| Cow::Borrowed(v.as_str()));
        let quote = |v: &str| format!("[{v}]");
        let t = Template::parse("^${a}.${n:plus(1)}${missing}$").unwrap();
        assert_eq!(
            t.evaluate_decorated(&lookup, &quote).unwrap(),
            "^[x.y].[42][]$"
        );
        let bad = Template::parse("${a:plus(1)}").unwrap();
        assert!(bad.evaluate_decorated(&lookup, &quote).is_err());
    }

    #[test]
    fn evaluating_into_a_buffer_appends_what_evaluate_returns() {
        let map = map(&[("a", "x"), ("n", "41")]);
        let lookup = |k: &str| map.get(k).map(|v| Cow::Borrowed(v.as_str()));
        let mut out = String::from("kept:");
        for t in ["", "plain", "${a}", "<${a}>${n:plus(1)}!", "${missing}-"] {
            let template = Template::parse(t).unwrap();
            out.truncate("kept:".len());
            template.evaluate_into(&lookup, &mut out).unwrap();
            assert_eq!(
                out,
                format!("kept:{}", template.evaluate(&lookup).unwrap()),
                "{t}"
            );
        }
        let bad = Template::parse("${a:toNumber()}").unwrap();
        assert!(bad.evaluate_into(&lookup, &mut out).is_err());
    }

    #[test]
    fn functions_and_text() {
        let a = [("filename", " Data.TXT "), ("n", "7"), ("a b", "x")];
        assert_eq!(
            eval("${filename:trim():toLower()}", &a).unwrap(),
            "data.txt"
        );
        assert_eq!(eval("${n:plus(3):multiply(2)}", &a).unwrap(), "20");
        assert_eq!(eval("${n:mod(2):equals(1)}", &a).unwrap(), "true");
        assert_eq!(eval("${n:gt(5):and(${n:lt(10)})}", &a).unwrap(), "true");
        assert_eq!(eval("${'a b'}-${missing:isNull()}", &a).unwrap(), "x-true");
        assert_eq!(eval("${literal('hi'):append('!')}", &a).unwrap(), "hi!");
        assert_eq!(
            eval("${filename:trim():substringBefore('.')}", &a).unwrap(),
            "Data"
        );
        assert_eq!(
            eval("${filename:trim():replaceAll('[A-Z]', '_')}", &a).unwrap(),
            "_ata.___"
        );
        assert_eq!(
            eval("${filename:trim():matches('D.*T')}", &a).unwrap(),
            "true"
        );
        assert_eq!(eval("${n:divide(2)}", &a).unwrap(), "3");
        // Alone, and among text: a missing attribute is empty, a number prints whole.
        assert_eq!(eval("${missing}", &a).unwrap(), "");
        assert_eq!(eval("n=${n:plus(1)}${missing}", &a).unwrap(), "n=8");
        assert_eq!(eval("$${n}", &a).unwrap(), "${n}");
        assert_eq!(eval("${UUID():length()}", &a).unwrap(), "36");
    }

    #[test]
    fn a_rule_is_true_only_for_true_ignoring_case_and_blanks() {
        let attrs = map(&[("p", "even"), ("t", " TRUE "), ("n", "1")]);
        let rule = |t: &str| {
            Template::parse(t)
                .unwrap()
                .evaluate_bool(&|k| attrs.get(k).map(|v| Cow::Borrowed(v.as_str())))
        };
        assert!(rule("${p:equals('even')}").unwrap());
        assert!(!rule("${p:equals('odd')}").unwrap());
        assert!(rule("${t}").unwrap());
        assert!(!rule("${n}").unwrap());
        assert!(!rule("${missing}").unwrap());
        assert!(rule("true").unwrap());
        assert!(rule(" ${p:startsWith('ev')} ").unwrap());
        assert!(!rule("${p:equals('even')}x").unwrap());
        assert!(rule("${p:toNumber()}").is_err());
    }

    #[test]
    fn an_attribute_or_a_part_of_it_is_borrowed_not_copied() {
        let attrs = map(&[("key", "queue.even"), ("pad", "  x y  "), ("blank", "   ")]);
        let lookup = |k: &str| attrs.get(k).map(|v| Cow::Borrowed(v.as_str()));
        let borrowed = |t: &str| {
            let t = Template::parse(t).unwrap();
            matches!(t.evaluate(&lookup).unwrap(), Cow::Borrowed(_))
        };
        for t in [
            "${key}",
            "${key:substringAfter('.')}",
            "${key:substringBefore('.')}",
            "${pad:trim()}",
            "plain text",
            "",
        ] {
            assert!(borrowed(t), "{t} was copied");
        }
        assert!(!borrowed("${key:toUpper()}"));
        // A part of made text is cut from it, with the same result as from borrowed text.
        let eval = |t: &str| {
            Template::parse(t)
                .unwrap()
                .evaluate(&lookup)
                .unwrap()
                .into_owned()
        };
        assert_eq!(eval("${key:toUpper():substringAfter('.')}"), "EVEN");
        assert_eq!(eval("${key:toUpper():substringBefore('.')}"), "QUEUE");
        assert_eq!(eval("${key:substringAfter('none')}"), "queue.even");
        assert_eq!(eval("${key:substringBefore('none')}"), "queue.even");
        assert_eq!(eval("${pad:toUpper():trim()}"), "X Y");
        assert_eq!(eval("${blank:trim()}"), "");
        assert_eq!(eval("${blank:append('!'):trim()}"), "!");
        assert_eq!(eval("${key:substringAfter('.'):substringAfter('v')}"), "en");
    }

    #[test]
    fn failures() {
        assert!(eval("${filename:toNumber()}", &[("filename", "x")]).is_err());
        assert!(
            Template::parse("${a:nope()}")
                .unwrap_err()
                .message
                .contains("unknown function")
        );
        // Not a complete expression: text, as NiFi keeps it.
        assert_eq!(eval("${a", &[("a", "x")]).unwrap(), "${a");
        assert!(
            Template::parse("${a:plus()}")
                .unwrap_err()
                .message
                .contains("argument")
        );
        assert!(
            Template::parse("${a:matches('(')}")
                .unwrap_err()
                .message
                .contains("regular")
        );
    }

    /// Cases from NiFi's Expression Language guide and its query tests, with the result NiFi
    /// gives: `$` escapes, text that is not a complete expression, backslash escapes in
    /// quoted arguments, and `substring`/`substringBefore` at the edges.
    #[test]
    fn nifi_cases() {
        let attrs = [("filename", "file-255"), ("abc", "xyz"), ("x", "5")];
        let cases: &[(&str, &str)] = &[
            // `$$` is a literal `$` only before `{`; elsewhere `$`s are text.
            ("You owe me $$5 too", "You owe me $$5 too"),
            ("$${abc}", "${abc}"),
            ("$$${abc}", "$xyz"),
            ("$$$${abc}", "$${abc}"),
            ("price: $${x} is $${x}", "price: ${x} is ${x}"),
            ("a $ b $$ c", "a $ b $$ c"),
            ("${abc}$", "xyz$"),
            // Text that is not a complete expression stays as it is.
            ("${abc", "${abc"),
            ("hello ${abc} and ${abc", "hello xyz and ${abc"),
            ("${abc:equals('}')", "${abc:equals('}')"),
            // Escapes in quoted arguments: known ones are read, unknown ones keep the `\`.
            (r"${abc:append('\t')}", "xyz\t"),
            (r"${abc:append('\'')}", "xyz'"),
            (r"${abc:append('\\')}", "xyz\\"),
            (r"${literal('\.gz$')}", r"\.gz$"),
            (r"${filename:replaceAll('\d', 'n')}", "file-nnn"),
            // `substring` outside the text gives the empty text.
            ("${filename:substring(0, 4)}", "file"),
            ("${filename:substring(5)}", "255"),
            ("${filename:substring(8)}", ""),
            ("${filename:substring(10, 20)}", ""),
            ("${filename:substring(10)}", ""),
            ("${filename:substring(2, -2)}", ""),
            ("${filename:substring(-2)}", ""),
            ("${filename:substring(3, 2)}", ""),
            ("${filename:substring(2, 20)}", ""),
            // An empty search text leaves the subject whole.
            ("${filename:substringBefore('')}", "file-255"),
            ("${filename:substringAfter('')}", "file-255"),
            ("${filename:substringBefore('-')}", "file"),
        ];
        for (expression, want) in cases {
            let got =
                eval(expression, &attrs).unwrap_or_else(|e| panic!("`{expression}` failed: {e}"));
            assert_eq!(got, *want, "`{expression}`");
        }
    }
}
