//! What each built-in processor type accepts: its properties (with defaults and value
//! kinds) and its relationships, declared in the type's module and read here by validation,
//! so a property is declared once. The same specs describe the types to people: `weir flow
//! processors` prints them, and [`markdown_table`] is the table of `docs/flows.md`.

use std::fmt::Write as _;

pub use weir_flow_api::spec::{Dynamic, ProcessorSpec, PropertyKind, PropertySpec};

/// Short for the kinds of value in the specs of the processors' modules.
pub(crate) use PropertyKind as K;

/// A [`PropertySpec`], short for the specs of the processors' modules.
pub(crate) const fn p(
    name: &'static str,
    required: bool,
    default: Option<&'static str>,
    kind: PropertyKind,
) -> PropertySpec {
    PropertySpec::new(name, required, default, kind)
}

/// Every built-in processor type's spec, in the order of `docs/flows.md`.
pub fn specs() -> impl Iterator<Item = &'static ProcessorSpec> {
    super::built_ins().map(|b| b.spec)
}

/// The spec of `kind`, if it is a built-in type.
pub fn spec(kind: &str) -> Option<&'static ProcessorSpec> {
    super::built_in(kind).map(|b| b.spec)
}

/// `"; did you mean `PutFile`?"` for `kind`, naming the built-in types closest to it, or
/// `""` when none is close (see [`weir_flow_api::suggest::similar`]): the tail of an
/// "unknown processor type" error.
pub fn did_you_mean(kind: &str) -> String {
    weir_flow_api::suggest::did_you_mean(kind, specs().map(|s| s.kind))
}

/// The relationships of `spec` in words: its fixed ones, after "each dynamic property's
/// name" for a type whose dynamic properties are routes (RouteOnAttribute, RouteOnContent,
/// RouteText; "(or matched)" where a strategy can route to `matched` instead).
pub fn relationships_summary(spec: &ProcessorSpec) -> String {
    let fixed = spec.relationships.join(", ");
    match spec.dynamic {
        Dynamic::Routes | Dynamic::LineRoutes => {
            format!("each dynamic property's name (or matched), {fixed}")
        }
        Dynamic::RegexRoutes => format!("each dynamic property's name, {fixed}"),
        Dynamic::None | Dynamic::Attributes | Dynamic::Regexes | Dynamic::JsonPaths => fixed,
    }
}

/// The Markdown table of `specs` (header and one row each, every line ending in a newline):
/// type, what it does (sources say so), properties (kind or allowed values, default or
/// "required", and what dynamic properties mean) and relationships. `docs/flows.md` holds it
/// for every built-in type between `<!-- processors:begin -->` and `<!-- processors:end -->`
/// (a test keeps them equal); `weir flow processors --format markdown` prints it.
pub fn markdown_table<'a>(specs: impl IntoIterator<Item = &'a ProcessorSpec>) -> String {
    let mut out =
        String::from("| type | what it does | properties | relationships |\n|---|---|---|---|\n");
    for spec in specs {
        let source = if spec.source { "**Source.** " } else { "" };
        let mut properties: Vec<String> = spec.properties.iter().map(property_cell).collect();
        if spec.dynamic != Dynamic::None {
            properties.push(format!("*dynamic properties:* {}", spec.dynamic.meaning()));
        }
        let properties = if properties.is_empty() {
            "—".to_string()
        } else {
            properties.join("; ")
        };
        let relationships = relationships_summary(spec);
        // Writing to a String cannot fail.
        let _ = writeln!(
            out,
            "| {} | {source}{} | {} | {} |",
            cell(spec.kind),
            cell(spec.description),
            cell(&properties),
            cell(&relationships)
        );
    }
    out
}

/// `Name (kind, default `x`)`, `Name (`a`/`b`, default `a`)` or `Name (kind, required)`.
fn property_cell(p: &PropertySpec) -> String {
    let kind = match p.kind {
        PropertyKind::Choice(values) => {
            values.iter().map(|v| code(v)).collect::<Vec<_>>().join("/")
        }
        other => other.name().to_string(),
    };
    let default = match p.default {
        Some("") => ", default empty".to_string(),
        Some(d) => format!(", default {}", code(d)),
        None if p.required => ", required".to_string(),
        None => String::new(),
    };
    format!("{} ({kind}{default})", p.name)
}

/// `text` as a Markdown code span: fenced by one more backtick than its longest run, and
/// padded when it starts or ends with one.
fn code(text: &str) -> String {
    let longest = text
        .split(|c| c != '`')
        .map(str::len)
        .max()
        .unwrap_or_default();
    let fence = "`".repeat(longest + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{text}{pad}{fence}")
}

/// `text` safe in a table cell: a `|` would end the cell (even in a code span), a newline
/// the row.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every built-in type and property says what it does, in a sentence (a new type
    /// without them fails here): `weir flow processors` and the docs print them.
    #[test]
    fn every_built_in_type_and_property_is_described() {
        for spec in specs() {
            let d = spec.description;
            assert!(
                d.ends_with('.') && d.starts_with(char::is_uppercase),
                "{}: the type's description is not a sentence: {d:?}",
                spec.kind
            );
            for p in spec.properties {
                let d = p.description;
                assert!(
                    d.ends_with('.') && d.starts_with(|c: char| c.is_uppercase() || c == '`'),
                    "{}: property `{}` needs a one-sentence description (`.about(\"...\")`): {d:?}",
                    spec.kind,
                    p.name
                );
            }
        }
    }

    #[test]
    fn type_names_are_unique_and_suggested_when_mistyped() {
        let kinds: Vec<&str> = specs().map(|s| s.kind).collect();
        for (i, k) in kinds.iter().enumerate() {
            assert!(!kinds[..i].contains(k), "{k} is registered twice");
            assert_eq!(
                did_you_mean(&k.to_lowercase()),
                format!("; did you mean `{k}`?")
            );
        }
        assert_eq!(did_you_mean("Putfile"), "; did you mean `PutFile`?");
        assert_eq!(did_you_mean("NoSuchThingAtAll"), "");
    }

    #[test]
    fn a_row_shows_kinds_defaults_and_required_properties() {
        let table = markdown_table(spec("PutFile"));
        let mut lines = table.lines();
        assert_eq!(
            lines.next(),
            Some("| type | what it does | properties | relationships |")
        );
        assert_eq!(lines.next(), Some("|---|---|---|---|"));
        let row = lines.next().unwrap();
        assert!(lines.next().is_none());
        assert!(
            row.starts_with("| PutFile | Writes each flow file"),
            "{row}"
        );
        assert!(row.contains("Directory (expression, required)"), "{row}");
        assert!(
            row.contains(
                "Conflict Resolution Strategy (`replace`/`ignore`/`fail`, default `fail`)"
            ),
            "{row}"
        );
        assert!(row.contains("; Sync (bool) |"), "{row}");
        assert!(row.ends_with("| success, failure |"), "{row}");

        let routes = markdown_table(spec("RouteOnAttribute"));
        assert!(
            routes.contains("*dynamic properties:* Each is a boolean"),
            "{routes}"
        );
        assert!(routes.contains("| each dynamic property's name (or matched), unmatched |"));
        let source = markdown_table(spec("GetFile"));
        assert!(
            source.contains("| GetFile | **Source.** Takes files"),
            "{source}"
        );
        // An empty default, and a type without properties.
        assert!(
            markdown_table(spec("PublishAMQP"))
                .contains("Exchange Name (expression, default empty)")
        );
        assert!(
            markdown_table(spec("Funnel"))
                .contains("| Funnel | Passes every flow file on unchanged. | — | success |")
        );
        assert_eq!(markdown_table([]).lines().count(), 2);
    }

    #[test]
    fn cells_escape_what_would_break_the_table() {
        assert_eq!(cell("a|b\nc"), "a\\|b c");
        assert_eq!(code("x"), "`x`");
        assert_eq!(code("a`b"), "``a`b``");
        assert_eq!(code("`a"), "`` `a ``");
        assert_eq!(code(""), "``");
        // A regex default with a `|` stays in its cell.
        static SPEC: ProcessorSpec = ProcessorSpec {
            kind: "T",
            description: "T.",
            properties: &[p("F", true, Some("a|b"), K::Regex)],
            relationships: &["success"],
            dynamic: Dynamic::None,
            source: false,
        };
        let row = markdown_table([&SPEC]).lines().nth(2).unwrap().to_string();
        assert_eq!(row, "| T | T. | F (regex, default `a\\|b`) | success |");
    }

    /// `docs/flows.md`'s processor table is [`markdown_table`] of the built-in types, between
    /// its markers. When a type or property changes, regenerate it with
    /// `WEIR_UPDATE_DOCS=1 cargo test -p weir-flow-processors --lib docs_table`.
    #[test]
    fn the_docs_table_is_generated_from_the_specs() {
        const BEGIN: &str = "<!-- processors:begin -->\n";
        const END: &str = "<!-- processors:end -->";
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/flows.md");
        let docs = std::fs::read_to_string(&path).expect("docs/flows.md");
        let (before, rest) = docs
            .split_once(BEGIN)
            .expect("docs/flows.md has `<!-- processors:begin -->` on a line of its own");
        let (_, after) = rest
            .split_once(END)
            .expect("docs/flows.md has `<!-- processors:end -->` after the begin marker");
        let generated = format!("{before}{BEGIN}{}{END}{after}", markdown_table(specs()));
        if docs == generated {
            return;
        }
        if std::env::var_os("WEIR_UPDATE_DOCS").is_some_and(|v| v == "1") {
            std::fs::write(&path, generated).expect("writing docs/flows.md");
            return;
        }
        panic!(
            "docs/flows.md's processor table differs from the specs; regenerate it with\n  \
             WEIR_UPDATE_DOCS=1 cargo test -p weir-flow-processors --lib docs_table\n\
             (the table alone: weir flow processors --format markdown)"
        );
    }
}
