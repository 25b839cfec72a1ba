//! `weir flow processors` as a user runs it: every built-in type listed, one type in full,
//! JSON for tools, the Markdown table, and bad names refused with suggestions.

mod support;

use support::{stderr, stdout, weir};

use std::process::Command;

use weir_flow_processors::spec::{self, ProcessorSpec};

/// `weir flow processors args...`, which must succeed; its standard output.
fn processors(args: &[&str]) -> String {
    let mut all = vec!["flow", "processors"];
    all.extend_from_slice(args);
    let o = weir(&all);
    assert!(o.status.success(), "weir {all:?}: {}", stderr(&o));
    assert!(o.stderr.is_empty(), "weir {all:?}: {}", stderr(&o));
    stdout(&o)
}

#[test]
fn the_list_names_every_built_in_type_with_its_description() {
    let out = processors(&[]);
    let lines: Vec<&str> = out.lines().collect();
    let specs: Vec<&ProcessorSpec> = spec::specs().collect();
    assert_eq!(lines.len(), specs.len(), "{out}");
    for (line, s) in lines.iter().zip(&specs) {
        let (kind, description) = line.split_once(' ').expect("TYPE  description");
        assert_eq!(kind, s.kind);
        assert_eq!(description.trim_start(), s.description);
    }
    // The descriptions start in one column.
    let column = |l: &str| l.len() - l[l.find(' ').unwrap()..].trim_start().len();
    assert!(lines.iter().all(|l| column(l) == column(lines[0])), "{out}");
}

/// The lines of `text` under the line that is exactly `  NAME` (a property), up to the next
/// property or section.
fn property_section<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    let mut lines = text.lines().skip_while(|l| *l != format!("  {name}"));
    assert!(lines.next().is_some(), "no property {name} in:\n{text}");
    lines.take_while(|l| l.starts_with("    ")).collect()
}

#[test]
fn one_type_shows_every_property_in_full() {
    let out = processors(&["PutFile"]);
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("PutFile"));
    assert_eq!(
        lines.next().map(str::trim),
        Some(spec::spec("PutFile").unwrap().description)
    );
    assert!(out.contains("\nSource: no"), "{out}");
    let directory = property_section(&out, "Directory");
    assert_eq!(
        directory[1],
        "    required: yes, default: none, kind: expression, supports expressions: yes",
        "{out}"
    );
    assert!(directory[0].contains("filename"), "{out}");
    let conflict = property_section(&out, "Conflict Resolution Strategy");
    assert_eq!(
        conflict[1],
        "    required: yes, default: fail, kind: choice, supports expressions: no"
    );
    assert_eq!(conflict[2], "    allowed values: replace, ignore, fail");
    let sync = property_section(&out, "Sync");
    assert!(
        sync[1].starts_with("    required: no, default: none, kind: bool"),
        "{out}"
    );
    assert!(out.contains("\nRelationships: success, failure\n"), "{out}");
    assert!(
        out.ends_with(
            "Dynamic properties: Not allowed: an undeclared property is a validation error.\n"
        ),
        "{out}"
    );

    // Every property of every type is printed, with its description.
    for s in spec::specs() {
        let out = processors(&[s.kind]);
        for p in s.properties {
            let section = property_section(&out, p.name);
            assert_eq!(section[0].trim(), p.description, "{} {}", s.kind, p.name);
            assert!(section[1].contains(&format!("kind: {}", p.kind.name())));
        }
        let source = if s.source {
            "Source: yes"
        } else {
            "Source: no"
        };
        assert!(out.contains(source), "{out}");
    }
}

#[test]
fn dynamic_properties_sources_and_types_without_properties_say_so() {
    let routes = processors(&["RouteOnAttribute"]);
    assert!(
        routes.contains("Relationships: each dynamic property's name (or matched), unmatched\n"),
        "{routes}"
    );
    assert!(
        routes.contains("Dynamic properties: Each is a boolean expression"),
        "{routes}"
    );
    assert!(
        routes.contains("    allowed values: Route to Property name, Route to 'matched' if all match, Route to 'matched' if any matches\n"),
        "{routes}"
    );
    let update = processors(&["UpdateAttribute"]);
    assert!(update.contains("Properties: none\n"), "{update}");
    assert!(update.contains("Dynamic properties: Each sets the attribute of its name"));
    let get = processors(&["GetFile"]);
    assert!(get.contains("Source: yes"), "{get}");
    // An empty default is shown as such.
    let publish = processors(&["PublishAMQP"]);
    let exchange = property_section(&publish, "Exchange Name");
    assert!(exchange[1].contains("default: \"\" (empty)"), "{publish}");
}

/// `value` is `s` as JSON, field by field (not through the serializer the command uses).
fn assert_json_is_spec(value: &serde_json::Value, s: &ProcessorSpec) {
    assert_eq!(value["type"], s.kind);
    assert_eq!(value["description"], s.description);
    assert_eq!(value["source"], s.source);
    assert_eq!(value["relationships"], serde_json::json!(s.relationships));
    assert_eq!(value["dynamic_properties"]["kind"], s.dynamic.name());
    assert_eq!(value["dynamic_properties"]["meaning"], s.dynamic.meaning());
    let properties = value["properties"].as_array().expect("properties");
    assert_eq!(properties.len(), s.properties.len(), "{}", s.kind);
    for (json, p) in properties.iter().zip(s.properties) {
        assert_eq!(json["name"], p.name);
        assert_eq!(json["description"], p.description);
        assert_eq!(json["required"], p.required);
        assert_eq!(json["default"], serde_json::json!(p.default));
        assert_eq!(json["kind"], p.kind.name());
        assert_eq!(
            json["allowed_values"],
            serde_json::json!(p.kind.allowed_values())
        );
        assert_eq!(json["supports_expressions"], p.kind.supports_expressions());
    }
}

#[test]
fn json_holds_every_field_of_the_specs() {
    let all: serde_json::Value =
        serde_json::from_str(&processors(&["--format", "json"])).expect("JSON");
    let all = all.as_array().expect("an array of types");
    let specs: Vec<&ProcessorSpec> = spec::specs().collect();
    assert_eq!(all.len(), specs.len());
    for (value, s) in all.iter().zip(&specs) {
        assert_json_is_spec(value, s);
        let one: serde_json::Value =
            serde_json::from_str(&processors(&[s.kind, "--format", "json"])).expect("JSON");
        assert_eq!(&one, value, "{}", s.kind);
    }
    let put_file = all.iter().find(|v| v["type"] == "PutFile").unwrap();
    assert_eq!(put_file["properties"][0]["name"], "Directory");
    assert_eq!(put_file["properties"][0]["required"], true);
    assert_eq!(put_file["properties"][0]["supports_expressions"], true);
}

#[test]
fn markdown_is_the_table_of_the_docs() {
    assert_eq!(
        processors(&["--format", "markdown"]),
        spec::markdown_table(spec::specs())
    );
    let one = processors(&["SplitText", "--format", "markdown"]);
    assert_eq!(one, spec::markdown_table(spec::spec("SplitText")));
    assert_eq!(one.lines().count(), 3, "{one}");
    let docs = std::fs::read_to_string("docs/flows.md").unwrap();
    assert!(docs.contains(&spec::markdown_table(spec::specs())));
}

#[test]
fn an_unknown_type_is_a_bad_command_line_with_suggestions() {
    let o = weir(&["flow", "processors", "Putfile"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    let e = stderr(&o);
    assert!(e.contains("unknown processor type `Putfile`"), "{e}");
    assert!(e.contains("did you mean `PutFile`?"), "{e}");

    let e = stderr(&weir(&[
        "flow",
        "processors",
        "jetstream",
        "--format",
        "json",
    ]));
    assert!(
        e.contains("did you mean `ConsumeJetStream` or `PublishJetStream`?"),
        "{e}"
    );

    // Nothing close: no guess, but where to look.
    let o = weir(&["flow", "processors", "Xyzzy"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("unknown processor type `Xyzzy`"), "{e}");
    assert!(!e.contains("did you mean"), "{e}");
    assert!(e.contains("`weir flow processors` lists them all"), "{e}");

    // Names are NiFi's, exactly as a flow definition spells them; a bad format is clap's.
    assert_eq!(weir(&["flow", "processors", ""]).status.code(), Some(2));
    let o = weir(&["flow", "processors", "--format", "yaml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("markdown"), "{}", stderr(&o));
}

/// `weir flow processors ... | head -1` once `head` has exited: the reader of the pipe is
/// already gone when the command writes.
#[test]
fn a_closed_pipe_ends_quietly_with_exit_0() {
    for args in [
        &["flow", "processors"][..],
        &["flow", "processors", "MergeContent"],
        &["flow", "processors", "--format", "json"],
        &["flow", "processors", "--format", "markdown"],
    ] {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let o = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(args)
            .stdout(writer)
            .output()
            .expect("weir runs");
        let e = stderr(&o);
        assert!(o.status.success(), "weir {args:?}: {}\n{e}", o.status);
        assert!(e.is_empty(), "weir {args:?}: {e}");
    }
}
