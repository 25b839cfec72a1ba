//! Reference results: the plain-Rust reference's checksums, cached per input.

use super::*;

/// The reference's count and checksum of every query and of the source, over `config`'s
/// events with the allowed lag `lag`.
pub(crate) fn reference_results(
    config: &GeneratorConfig,
    lag: i64,
) -> Vec<(Option<Query>, Checksum)> {
    let events: Vec<Event> = Generator::new(config.clone())
        .expect("config")
        .iter()
        .collect();
    reference_results_of(&events, lag)
}

/// The reference's count and checksum of every query and of the source, over `events`.
pub(crate) fn reference_results_of(events: &[Event], lag: i64) -> Vec<(Option<Query>, Checksum)> {
    let options = reference::Options {
        allowed_lag_ms: lag as u64,
    };
    let mut out = vec![(None, Checksum::of(events))];
    for q in BENCH_QUERIES {
        let sum = match q {
            Query::Q0 => Checksum::of(&reference::q0(events, &options).rows),
            Query::Q1 => Checksum::of(&reference::q1(events, &options).rows),
            Query::Q2 => Checksum::of(&reference::q2(events, &options).rows),
            Query::Q3 => Checksum::of(&reference::q3(events, &options).rows),
            Query::Q4 => Checksum::of(&reference::q4(events, &options).rows),
            Query::Q5 => Checksum::of(&reference::q5(events, &options).rows),
            Query::Q6 => Checksum::of(&reference::q6(events, &options).rows),
            Query::Q7 => Checksum::of(&reference::q7(events, &options).rows),
            Query::Q8 => Checksum::of(&reference::q8(events, &options).rows),
            Query::Q9 => Checksum::of(&reference::q9(events, &options).rows),
            Query::Q10 => Checksum::of(&reference::q10(events, &options).rows),
            Query::Q11 => Checksum::of(&reference::q11(events, &options).rows),
            Query::Q12 => unreachable!("not benchmarked"),
        };
        out.push((Some(q), sum));
    }
    out
}

/// The cached reference results of `input`'s events, computed in a child process on first
/// use: from the generator's configuration, or for a file of the independent generator from
/// that generator's events (never by parsing the file).
pub(crate) fn cached_reference(me: &Path, input: &Input) -> FxHashMap<Option<Query>, Checksum> {
    let config = input.config();
    let independent = matches!(
        input,
        Input::File {
            origin: Origin::Independent,
            ..
        }
    );
    let path = Path::new(DATA_DIR).join(format!(
        "{}reference-v{CHECKSUM_VERSION}-{}-rate{}-seed{}-base{}-ooo{}-lag{LAG_MS}{}.txt",
        if independent {
            "nexmark-rs-"
        } else {
            "nexmark-"
        },
        config.count.expect("finite"),
        config.rate,
        config.seed,
        config.base_time_ms,
        config.out_of_order_ms,
        strings_suffix(config.strings),
    ));
    if !path.exists() {
        eprintln!(
            "computing the reference results into {} ...",
            path.display()
        );
        std::fs::create_dir_all(DATA_DIR).expect("bench data dir");
        let mut cmd = Command::new(me);
        let source = if independent {
            input.clone()
        } else {
            Input::Generator(config.clone())
        };
        cmd.args(["--child", "reference"])
            .args(source.to_args())
            .arg("--result")
            .arg(&path);
        support::time_child(&mut cmd);
    }
    let text = std::fs::read_to_string(&path).expect("reference results");
    text.lines()
        .map(|line| {
            let (what, sum) = line.split_once(' ').expect("`what rows sum`");
            let sum = Checksum::from_line(sum).expect("rows and checksum");
            (parse_what(what), sum)
        })
        .collect()
}

/// Child: checks the hand loops against the reference on events out of order by up to 6 s,
/// so that some are late with the 4 s lag.
pub(crate) fn check_hand_loops() {
    let config = GeneratorConfig {
        count: Some(300_000),
        rate: 20_000,
        out_of_order_ms: 6_000,
        ..GeneratorConfig::default()
    };
    let events: Vec<Event> = Generator::new(config.clone())
        .expect("config")
        .iter()
        .collect();
    let expected: FxHashMap<_, _> = reference_results(&config, LAG_MS).into_iter().collect();
    let late = reference::split_late(
        &events,
        &reference::Options {
            allowed_lag_ms: LAG_MS as u64,
        },
    )
    .1;
    assert!(late > 0, "the check input must have late events");
    for q in HAND_QUERIES {
        let got = hand_run(Some(q), events.iter().cloned(), LAG_MS);
        assert_eq!(
            got,
            expected[&Some(q)],
            "the {q} hand loop disagrees with the reference on out-of-order input"
        );
    }
    // The tight file loops, from the events written with escaped strings, in another order
    // for every 7th line (which takes the engine's parser) and with CRLF line ends, on 1 and
    // 2 threads: chunk cuts, the fold's order and lateness across chunks.
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("check.jsonl");
    let escaped = GeneratorConfig {
        strings: StringStyle::Escaped,
        ..config.clone()
    };
    let mut text = Vec::new();
    for (i, e) in Generator::new(escaped).expect("config").iter().enumerate() {
        if i % 7 == 3 {
            let value = serde_json::to_value(&e).expect("an event as JSON");
            text.extend_from_slice(value.to_string().as_bytes());
            text.extend_from_slice(b"\r\n");
        } else {
            e.write_json_line(&mut text);
        }
    }
    std::fs::write(&path, &text).expect("write the check file");
    for threads in [1, 2] {
        for q in HAND_QUERIES {
            let mut records = TightFileRecords::open(&path, threads);
            let got = hand_query(q, &mut records, LAG_MS);
            assert_eq!(records.malformed, 0);
            assert_eq!(
                got,
                expected[&Some(q)],
                "the tight {q} file loop on {threads} threads disagrees with the reference"
            );
        }
    }
    let names: Vec<&str> = HAND_QUERIES.iter().map(|q| q.name()).collect();
    println!(
        "hand loops {} (and their tight file loops on 1 and 2 threads) match the reference on \
         {} out-of-order events ({late} late)",
        names.join(", "),
        events.len()
    );
}
