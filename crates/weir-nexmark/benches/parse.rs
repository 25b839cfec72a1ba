//! The strict NEXMark line parser on one thread, on lines as the generator writes them and as
//! other producers do, against serde_json.
//!
//! ```text
//! cargo bench -p weir-nexmark --bench parse                 # 300,000 events, best of 7
//! cargo bench -p weir-nexmark --bench parse -- --events 1000000 --runs 5
//! cargo bench -p weir-nexmark --bench parse -- --input escaped --parser none   # one of each
//! ```
//!
//! Inputs: the generator's lines with its three string styles (`ascii`, `escaped`: about one
//! character in eight escaped, `unicode`: about one in four multi-byte), and the `escaped`
//! lines rewritten by serde_json (keys sorted, so in another order than the generator's),
//! with a space after every `:` and `,` and an unknown field holding a nested value.
//!
//! Parsers, each over every line of an input, summing the `date_time`s:
//! - `parse_line`: every string kept;
//! - `parse_line_keeping(NONE)`: no string kept, as q0, q5 and q7 read;
//! - `parse_line_serde`: the same checks through serde_json's tokeniser (the fallback);
//! - `serde_json::Value`: serde_json parsing the line into a `Value`, the usual way to read
//!   JSON in Rust and the yardstick of the ratios printed.
//!
//! All must give the same events (the `Value` by its `date_time`). It also prints how many
//! lines of each input the fast path reads (`parse::reads_on_the_fast_path`).

use std::hint::black_box;
use std::time::{Duration, Instant};

use weir_nexmark::generator::{GeneratorConfig, StringStyle};
use weir_nexmark::parse::{
    KeptStrings, parse_line, parse_line_keeping, parse_line_serde, reads_on_the_fast_path,
};
use weir_nexmark::{Event, Generator};

fn flag(args: &[String], name: &str) -> Option<u64> {
    Some(text_flag(args, name)?.parse().expect("a number"))
}

fn text_flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let at = args.iter().position(|a| a == name)?;
    Some(args.get(at + 1)?.as_str())
}

/// A parser under test: a line's `date_time`.
type LineParser = dyn Fn(&[u8]) -> i64;

/// The best time of `runs` passes of `parse` over `lines`.
fn time(lines: &[&[u8]], runs: u64, parse: &LineParser) -> Duration {
    (0..runs)
        .map(|_| {
            let started = Instant::now();
            let mut sum = 0i64;
            for line in lines {
                sum = sum.wrapping_add(parse(line));
            }
            black_box(sum);
            started.elapsed()
        })
        .min()
        .expect("at least one run")
}

/// The generator's events with `strings`, as JSON Lines.
fn generated(events: u64, strings: StringStyle) -> Vec<u8> {
    let config = GeneratorConfig {
        count: Some(events),
        rate: 20_000,
        strings,
        ..GeneratorConfig::default()
    };
    let mut text = Vec::new();
    for e in Generator::new(config).expect("config").iter() {
        e.write_json_line(&mut text);
    }
    text
}

/// `text`'s lines rewritten as another producer might: keys sorted, a space after each `:`
/// and `,`, and an unknown field with a nested value.
fn rewritten(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() * 11 / 10);
    for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let mut value: serde_json::Value = serde_json::from_slice(line).expect("a valid line");
        value["source"] = serde_json::json!({"host": "gen-1", "seq": [1, 2.5e3, null, true]});
        let compact = serde_json::to_string(&value).expect("serialises");
        // Spaces between tokens: a `:` or `,` outside strings is followed by one.
        let mut in_string = false;
        let mut escaped = false;
        for &b in compact.as_bytes() {
            out.push(b);
            match b {
                _ if escaped => escaped = false,
                b'\\' if in_string => escaped = true,
                b'"' => in_string = !in_string,
                b':' | b',' if !in_string => out.push(b' '),
                _ => {}
            }
        }
        out.push(b'\n');
    }
    out
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let events = flag(&args, "--events").unwrap_or(300_000);
    let runs = flag(&args, "--runs").unwrap_or(7).max(1);
    let escaped = generated(events, StringStyle::Escaped);
    let inputs = [
        ("ascii", generated(events, StringStyle::Ascii)),
        ("unicode", generated(events, StringStyle::Unicode)),
        ("rewritten", rewritten(&escaped)),
        ("escaped", escaped),
    ];
    println!("NEXMark line parser, one thread: {events} events per input, best of {runs}");
    let only_input = text_flag(&args, "--input");
    let only_parser = text_flag(&args, "--parser");
    for (name, text) in inputs
        .iter()
        .filter(|(n, _)| only_input.is_none_or(|o| o == *n))
    {
        let lines: Vec<&[u8]> = text
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        let fast_lines = lines.iter().filter(|l| reads_on_the_fast_path(l)).count();
        for line in lines.iter().step_by(97) {
            let serde = parse_line_serde(line);
            assert_eq!(parse_line(line), serde, "the parsers disagree");
            let value: serde_json::Value = serde_json::from_slice(line).expect("valid JSON");
            assert_eq!(
                value["date_time"].as_i64(),
                serde.as_ref().ok().map(Event::date_time)
            );
        }
        let mb = text.len() as f64 / 1e6;
        println!(
            "\n{name}: {} lines, {mb:.0} MB, {fast_lines} read on the fast path ({:.1}%)",
            lines.len(),
            100.0 * fast_lines as f64 / lines.len() as f64
        );
        let parsers: [(&str, &str, &LineParser); 4] = [
            ("value", "serde_json::Value", &|l| {
                let v: serde_json::Value = serde_json::from_slice(l).expect("valid JSON");
                v["date_time"].as_i64().expect("an integer")
            }),
            ("serde", "parse_line_serde", &|l| {
                parse_line_serde(l).expect("a valid line").date_time()
            }),
            ("all", "parse_line (all strings)", &|l| {
                parse_line(l).expect("a valid line").date_time()
            }),
            ("none", "parse_line_keeping(NONE)", &|l| {
                parse_line_keeping(l, KeptStrings::NONE)
                    .expect("a valid line")
                    .date_time()
            }),
        ];
        let timed: Vec<(&str, Duration)> = parsers
            .iter()
            .filter(|(short, _, _)| only_parser.is_none_or(|o| o == *short))
            .map(|(_, parser, parse)| (*parser, time(&lines, runs, parse)))
            .collect();
        let value = timed
            .first()
            .map(|(_, t)| *t)
            .expect("a parser named by --parser");
        for (parser, t) in timed {
            println!(
                "  {parser:<26} {:>7.0} MB/s {:>6.2} M lines/s {:>5.2}x the first",
                mb / t.as_secs_f64(),
                lines.len() as f64 / t.as_secs_f64() / 1e6,
                value.as_secs_f64() / t.as_secs_f64()
            );
        }
    }
}
