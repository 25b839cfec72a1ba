//! `weir flow processors [TYPE]`: the built-in processor types, read from the specs that
//! flow validation uses, as text for people, JSON for tools, or the Markdown table of
//! `docs/flows.md`.

use clap::{Args, ValueEnum};
use weir_flow::processors::spec::{self, ProcessorSpec, PropertySpec};

/// `weir flow processors`' arguments.
#[derive(Debug, Args)]
pub struct ProcessorsArgs {
    /// Only this type, in full (NiFi's name: PutFile, RouteOnAttribute, ...).
    #[arg(value_name = "TYPE", value_parser = parse_type)]
    pub kind: Option<&'static ProcessorSpec>,
    /// How to print: text for people, json for tools (every field of the specs), or
    /// markdown (the table of docs/flows.md).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// The output formats of `weir flow processors`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Lines for people.
    Text,
    /// Pretty-printed JSON: one type's object, or an array of every type's.
    Json,
    /// The Markdown table of docs/flows.md.
    Markdown,
}

/// The spec of a built-in type; an unknown name is refused with the closest names, as a bad
/// command line (exit code 2).
fn parse_type(kind: &str) -> Result<&'static ProcessorSpec, String> {
    spec::spec(kind).ok_or_else(|| {
        format!(
            "unknown processor type `{kind}`{} (`weir flow processors` lists them all)",
            spec::did_you_mean(kind)
        )
    })
}

/// Prints one type, or every built-in type, in `args.format`.
pub fn run(args: ProcessorsArgs) -> anyhow::Result<()> {
    let specs: Vec<&'static ProcessorSpec> = match args.kind {
        Some(one) => vec![one],
        None => spec::specs().collect(),
    };
    match (args.format, args.kind) {
        (Format::Text, Some(one)) => print_type(one)?,
        (Format::Text, None) => {
            let width = specs.iter().map(|s| s.kind.len()).max().unwrap_or_default();
            for s in &specs {
                outln!("{:<width$}  {}", s.kind, s.description)?;
            }
        }
        (Format::Json, Some(one)) => outln!("{}", serde_json::to_string_pretty(one)?)?,
        (Format::Json, None) => outln!("{}", serde_json::to_string_pretty(&specs)?)?,
        (Format::Markdown, _) => out!("{}", spec::markdown_table(specs.iter().copied()))?,
    }
    Ok(())
}

/// One type in full: what it does, whether it is a source, each property, its
/// relationships and what dynamic properties mean.
fn print_type(s: &ProcessorSpec) -> std::io::Result<()> {
    outln!("{}", s.kind)?;
    outln!("  {}", s.description)?;
    outln!()?;
    if s.source {
        outln!("Source: yes (it takes no incoming connection)")?;
    } else {
        outln!("Source: no (it takes the flow files of its incoming connections)")?;
    }
    if s.properties.is_empty() {
        outln!("Properties: none")?;
    } else {
        outln!("Properties:")?;
        for p in s.properties {
            print_property(p)?;
        }
    }
    outln!("Relationships: {}", spec::relationships_summary(s))?;
    outln!("Dynamic properties: {}", s.dynamic.meaning())
}

fn print_property(p: &PropertySpec) -> std::io::Result<()> {
    let default = match p.default {
        Some("") => "\"\" (empty)".to_string(),
        Some(d) => d.to_string(),
        None => "none".to_string(),
    };
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    outln!("  {}", p.name)?;
    outln!("    {}", p.description)?;
    outln!(
        "    required: {}, default: {default}, kind: {}, supports expressions: {}",
        yes_no(p.required),
        p.kind.name(),
        yes_no(p.kind.supports_expressions())
    )?;
    let allowed = p.kind.allowed_values();
    if !allowed.is_empty() {
        outln!("    allowed values: {}", allowed.join(", "))?;
    }
    Ok(())
}
