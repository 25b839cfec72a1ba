//! The strict NEXMark line parser on one thread: the fast path for plain lines
//! ([`parse_line`]) against serde_json alone ([`parse_line_serde`], the same visitor and
//! checks), on generated JSON Lines.
//!
//! ```text
//! cargo bench -p weir-nexmark --bench parse                 # 300,000 events, best of 7
//! cargo bench -p weir-nexmark --bench parse -- --events 1000000 --runs 5
//! ```
//!
//! The events are those of the NEXMark file benchmark (20,000 events/s of event time, seed
//! 0), written once into memory; each run parses every line and sums the `date_time`s, and
//! both parsers must give the same events. Prints MB/s, lines/s and the ratio of the two.

use std::hint::black_box;
use std::time::{Duration, Instant};

use weir_nexmark::generator::GeneratorConfig;
use weir_nexmark::parse::{parse_line, parse_line_serde};
use weir_nexmark::{Event, Generator, ParseError};

fn flag(args: &[String], name: &str) -> Option<u64> {
    let at = args.iter().position(|a| a == name)?;
    Some(args.get(at + 1)?.parse().expect("a number"))
}

/// The best time of `runs` passes of `parse` over `lines`.
fn time(lines: &[&[u8]], runs: u64, parse: fn(&[u8]) -> Result<Event, ParseError>) -> Duration {
    (0..runs)
        .map(|_| {
            let started = Instant::now();
            let mut sum = 0i64;
            for line in lines {
                sum = sum.wrapping_add(parse(line).expect("a valid line").date_time());
            }
            black_box(sum);
            started.elapsed()
        })
        .min()
        .expect("at least one run")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let events = flag(&args, "--events").unwrap_or(300_000);
    let runs = flag(&args, "--runs").unwrap_or(7).max(1);
    let config = GeneratorConfig {
        count: Some(events),
        rate: 20_000,
        ..GeneratorConfig::default()
    };
    let mut text = Vec::new();
    for e in Generator::new(config).expect("config").iter() {
        e.write_json_line(&mut text);
    }
    let lines: Vec<&[u8]> = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    for line in lines.iter().step_by(97) {
        assert_eq!(
            parse_line(line),
            parse_line_serde(line),
            "the parsers disagree"
        );
    }
    let mb = text.len() as f64 / 1e6;
    println!(
        "NEXMark line parser, one thread: {} lines, {mb:.0} MB, best of {runs}",
        lines.len()
    );
    let serde = time(&lines, runs, parse_line_serde);
    let fast = time(&lines, runs, parse_line);
    for (name, t) in [
        ("serde_json (parse_line_serde)", serde),
        ("plain-line fast path (parse_line)", fast),
    ] {
        println!(
            "{name:<36} {:>7.0} MB/s {:>6.2} M lines/s {:>5.2}x serde_json",
            mb / t.as_secs_f64(),
            lines.len() as f64 / t.as_secs_f64() / 1e6,
            serde.as_secs_f64() / t.as_secs_f64()
        );
    }
}
