//! The `weir` command as a user runs it.

mod support;

use support::{stderr, weir};

use std::path::Path;
use std::process::{Command, Output};

fn read_counts(path: &Path) -> Vec<(String, u64)> {
    std::fs::read_to_string(path)
        .expect("output exists")
        .lines()
        .map(|l| {
            let (w, c) = l.split_once('\t').expect("word<TAB>count");
            (w.to_string(), c.parse().expect("count"))
        })
        .collect()
}

/// What the output must be, computed the plain way.
fn reference_counts(text: &str) -> Vec<(String, u64)> {
    let mut counts = std::collections::HashMap::<String, u64>::new();
    for w in text
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
    {
        *counts
            .entry(w.chars().flat_map(char::to_lowercase).collect())
            .or_default() += 1;
    }
    let mut v: Vec<_> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

#[test]
fn wordcount_on_the_bundled_sample_matches_a_reference_at_every_parallelism_and_pinning() {
    let dir = tempfile::tempdir().unwrap();
    let mut all = String::new();
    let mut files: Vec<_> = std::fs::read_dir("data/sample")
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in files {
        all.push_str(&std::fs::read_to_string(f).unwrap());
        all.push('\n');
    }
    let expected = reference_counts(&all);
    // `always` with more workers than this machine's CPUs puts two workers on one CPU.
    for (p, pin) in [
        ("1", "auto"),
        ("2", "auto"),
        ("4", "auto"),
        ("2", "never"),
        ("1", "always"),
        ("4", "always"),
    ] {
        let out = dir.path().join(format!("counts-{p}-{pin}.tsv"));
        let o = weir(&[
            "run",
            "wordcount",
            "--input",
            "data/sample",
            "--output",
            out.to_str().unwrap(),
            "--parallelism",
            p,
            "--pin-workers",
            pin,
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(
            read_counts(&out),
            expected,
            "parallelism {p}, pinning {pin}"
        );
        let summary = String::from_utf8_lossy(&o.stdout);
        assert!(summary.starts_with("wordcount: 25 lines"), "{summary}");
        assert!(
            summary.contains(&format!("{} distinct words", expected.len())),
            "{summary}"
        );
    }
}

/// `weir run wordcount` from `input` to `out`.
fn wordcount(input: &Path, out: &Path) -> Output {
    weir(&[
        "run",
        "wordcount",
        "--input",
        input.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
    ])
}

#[test]
fn invalid_utf8_is_decoded_lossily_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("bad.txt");
    std::fs::write(&input, b"good line\nbad \xff\xfe bytes\nmore good\n").unwrap();
    let out = dir.path().join("out.tsv");
    let o = wordcount(&input, &out);
    assert!(o.status.success(), "{}", stderr(&o));
    let counts = read_counts(&out);
    assert!(counts.contains(&("good".into(), 2)));
    assert!(counts.contains(&("bytes".into(), 1)));
    assert!(String::from_utf8_lossy(&o.stdout).contains("1 lines with invalid UTF-8"));
}

#[test]
fn empty_input_gives_empty_output() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("empty.txt");
    std::fs::write(&input, b"").unwrap();
    let out = dir.path().join("out.tsv");
    let o = wordcount(&input, &out);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&out).unwrap(), b"");
}

#[test]
fn a_glob_selects_the_input_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "x y").unwrap();
    std::fs::write(dir.path().join("b.txt"), "y").unwrap();
    std::fs::write(dir.path().join("c.md"), "z").unwrap();
    let out = dir.path().join("out.tsv");
    let pattern = dir.path().join("*.txt");
    let o = weir(&[
        "run",
        "wordcount",
        "--input",
        pattern.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        read_counts(&out),
        [("y".to_string(), 2), ("x".to_string(), 1)]
    );
}

#[test]
fn bad_input_and_bad_flags_fail_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.tsv");
    let out = out.to_str().unwrap();

    let o = weir(&[
        "run",
        "wordcount",
        "--input",
        "no/such/path",
        "--output",
        out,
    ]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.contains("no/such/path") && e.contains("does not exist"),
        "{e}"
    );
    assert!(!Path::new(out).exists(), "nothing ran");

    let wordcount = [
        "run",
        "wordcount",
        "--input",
        "data/sample",
        "--output",
        out,
    ];
    let o = weir(&[&wordcount[..], &["--parallelism", "0"]].concat());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--parallelism"));

    let nexmark = [
        "nexmark", "run", "--query", "q0", "--events", "10", "--output", out,
    ];
    for command in [&wordcount[..], &nexmark[..]] {
        let mut args = command.to_vec();
        args.extend(["--pin-workers", "sometimes"]);
        let o = weir(&args);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.contains("'sometimes'") && e.contains("--pin-workers") && e.contains("never"),
            "{e}"
        );
        assert!(!Path::new(out).exists(), "nothing ran");
    }

    let o = weir(&["run", "wordcount", "--input", "data/sample"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--output"));

    let o = weir(&["run", "nosuchjob"]);
    assert_eq!(o.status.code(), Some(2));

    // An output that cannot be created fails before anything runs, naming the path.
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "").unwrap();
    let under_file = blocker.join("out.tsv");
    let o = weir(&[
        "run",
        "wordcount",
        "--input",
        "data/sample",
        "--output",
        under_file.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("file"), "{}", stderr(&o));
}

#[test]
fn explain_prints_the_fused_plan() {
    let o = weir(&["explain", "wordcount"]);
    assert!(o.status.success());
    let plan = String::from_utf8_lossy(&o.stdout);
    let vertices: Vec<&str> = plan.lines().filter(|l| l.starts_with("vertex")).collect();
    // A file sink names its target by its absolute path (the same file however it is
    // named); the plan's placeholder is taken from the working directory.
    let output = std::path::absolute("OUTPUT").unwrap();
    assert_eq!(
        vertices,
        [
            "vertex 'fused(text-blocks(INPUT), count-keys)' (parallelism default)".to_string(),
            "vertex 'combine' (parallelism default)".to_string(),
            format!(
                "vertex 'fused(sort, text({}))' (parallelism 1)",
                output.display()
            ),
        ]
    );
    assert!(plan.contains("-> 'combine':0 [partitioned"), "{plan}");

    let o = weir(&["explain", "wordcount", "--dot"]);
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("digraph"));
}

#[test]
fn the_example_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("example.tsv");
    let o = Command::new(env!("CARGO"))
        .args([
            "run",
            "--quiet",
            "--example",
            "wordcount",
            "--",
            "data/sample",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let expected_top = read_counts(&out)[0].clone();
    assert_eq!(expected_top, ("the".to_string(), 32));
}

#[test]
fn nexmark_generate_writes_the_requested_events_deterministically() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("events.jsonl");
    let args = [
        "nexmark",
        "generate",
        "--events",
        "1000",
        "--seed",
        "3",
        "--out-of-order-ms",
        "2000",
        "--output",
        out.to_str().unwrap(),
    ];
    let o = weir(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let summary = String::from_utf8_lossy(&o.stdout);
    assert!(
        summary.starts_with("nexmark generate: 1000 events (20 persons, 60 auctions, 920 bids)"),
        "{summary}"
    );
    let text = std::fs::read_to_string(&out).unwrap();
    let mut kinds = std::collections::BTreeMap::<String, u32>::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        *kinds
            .entry(v["type"].as_str().unwrap().to_owned())
            .or_default() += 1;
        assert!(v["date_time"].is_i64(), "{line}");
    }
    assert_eq!(kinds["person"], 20);
    assert_eq!(kinds["auction"], 60);
    assert_eq!(kinds["bid"], 920);
    assert!(
        text.starts_with(r#"{"type":"person","id":1000,"name":"#),
        "{text:.80}"
    );

    // The same settings give the same file.
    let again = dir.path().join("again.jsonl");
    let mut args2 = args;
    args2[9] = again.to_str().unwrap();
    assert!(weir(&args2).status.success());
    assert_eq!(std::fs::read(&again).unwrap(), text.as_bytes());
}

#[test]
fn nexmark_generate_rejects_bad_flags_clearly() {
    let o = weir(&[
        "nexmark", "generate", "--events", "1", "--rate", "0", "--output", "x",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--rate"), "{}", stderr(&o));
    let o = weir(&["nexmark", "generate", "--events", "many", "--output", "x"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("many"), "{}", stderr(&o));

    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "").unwrap();
    let out = blocker.join("events.jsonl");
    let o = weir(&[
        "nexmark",
        "generate",
        "--events",
        "5",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.starts_with("error: cannot write"), "{err}");
    assert!(err.contains(&*blocker.to_string_lossy()), "{err}");
}

/// Every command that writes a file refuses `--output -` before it runs, naming the flag, and
/// leaves no file named `-` where it ran: its output is written under a temporary name and
/// renamed into place, which standard output cannot be.
#[test]
fn output_dash_is_refused_by_every_command_that_writes_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/data/sample");
    let events = dir.path().join("events.jsonl");
    std::fs::write(&events, "").unwrap();
    let rows = dir.path().join("rows.csv");
    std::fs::write(&rows, "id,x\n1,2\n").unwrap();
    for args in [
        &["nexmark", "generate", "--events", "5", "--output", "-"][..],
        &[
            "nexmark", "run", "--query", "q0", "--events", "5", "--output", "-",
        ],
        &[
            "nexmark",
            "run",
            "--query",
            "q0",
            "--input",
            events.to_str().unwrap(),
            "--output",
            "-",
        ],
        &["run", "wordcount", "--input", sample, "--output", "-"],
        &[
            "score",
            "--input",
            rows.to_str().unwrap(),
            "--url",
            "http://127.0.0.1:9/v1/models/m:predict",
            "--output",
            "-",
        ],
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("weir runs");
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "weir {args:?}: {err}");
        assert!(err.contains("'-' for '--output"), "weir {args:?}: {err}");
        assert!(err.contains("name a file"), "weir {args:?}: {err}");
        assert!(
            !dir.path().join("-").exists(),
            "weir {args:?} wrote a file named -"
        );
    }
}

#[test]
fn nexmark_run_checks_every_query_against_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.jsonl");
    let o = weir(&[
        "nexmark",
        "generate",
        "--events",
        "20000",
        "--rate",
        "5000",
        "--out-of-order-ms",
        "3000",
        "--output",
        events.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    for query in [
        "q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "q9", "q10", "q11", "q12",
    ] {
        let out = dir.path().join(format!("{query}.csv"));
        let o = weir(&[
            "nexmark",
            "run",
            "--query",
            query,
            "--input",
            events.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
            "--allowed-lag-ms",
            "2000",
            "--check",
        ]);
        assert!(o.status.success(), "{query}: {}", stderr(&o));
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(stdout.contains("equal the reference"), "{query}: {stdout}");
        // q12 reads in processing time: nothing is late there.
        assert_eq!(
            stdout.contains(" 0 late"),
            query == "q12",
            "{query}: events beyond the lag are counted late: {stdout}"
        );
        let csv = std::fs::read_to_string(&out).unwrap();
        let header = csv.lines().next().unwrap();
        assert!(
            header.starts_with(match query {
                "q2" => "auction,price",
                "q3" => "name,city,state,id",
                "q4" => "category,avg_price",
                "q5" => "window_start,window_end,auction,num",
                "q7" => "window_start,",
                "q8" => "id,name,window_start",
                "q6" => "seller,avg_price",
                "q9" => "id,item_name,description,initial_bid,reserve,date_time,expires,",
                "q10" => "auction,bidder,price,date_time,extra,dt,hm",
                "q11" | "q12" => "bidder,bid_count,window_start,window_end",
                _ => "auction,bidder,price,date_time",
            }),
            "{query}: {header}"
        );
    }
}

#[test]
fn nexmark_run_counts_malformed_lines_and_refuses_bad_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.jsonl");
    std::fs::write(
        &events,
        concat!(
            r#"{"type":"bid","auction":1000,"bidder":1001,"price":5321,"channel":"c","url":"u","date_time":1000,"extra":""}"#, "\n",
            "not json\n",
            r#"{"type":"bid","auction":1000,"bidder":1001,"price":1.0,"channel":"c","url":"u","date_time":1001,"extra":""}"#, "\n",
            r#"{"type":"bid","auction":1000,"bidder":1002,"price":7,"channel":"c","url":"u","date_time":1002,"extra":""}"#, "\n",
        ),
    )
    .unwrap();
    let o = weir(&[
        "nexmark",
        "run",
        "--query",
        "q0",
        "--input",
        events.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("2 malformed lines") && stdout.contains("2 rows"),
        "{stdout}"
    );
    assert!(
        stderr(&o).contains(":2") && stderr(&o).contains(":3"),
        "line numbers are reported: {}",
        stderr(&o)
    );

    let o = weir(&["nexmark", "run", "--query", "q13", "--events", "10"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("q0, q1, q2, q3, q4, q5, q6, q7, q8, q9, q10, q11, q12"));
    let o = weir(&[
        "nexmark",
        "run",
        "--query",
        "q5",
        "--input",
        "no/such/file.jsonl",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no/such/file.jsonl"));
    let o = weir(&["nexmark", "run", "--query", "q5"]);
    assert_eq!(o.status.code(), Some(2), "needs --input or --events");
    let o = weir(&["nexmark", "run", "--query", "q5", "--events", "30000"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("30000 events"));
}

/// Runs `weir args` with standard output into a pipe whose reader is already gone, as in
/// `weir ... | head` after `head` exits.
fn weir_into_closed_pipe(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .stdout(writer)
        .output()
        .expect("weir runs")
}

#[test]
fn a_closed_pipe_ends_quietly_with_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().to_str().unwrap();
    for args in [
        &["explain", "wordcount"][..],
        &["snapshots", "list", "--state-dir", state],
        &["nexmark", "run", "--query", "q0", "--events", "20000"],
    ] {
        let out = weir_into_closed_pipe(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "weir {args:?}: {}\n{stderr}",
            out.status
        );
        assert!(
            !stderr.contains("Broken pipe") && !stderr.contains("panicked"),
            "weir {args:?}: {stderr}"
        );
        assert!(
            !stderr.contains('\u{1b}'),
            "no colours into a pipe: {stderr}"
        );
    }
}

#[test]
fn word_count_skips_binary_files_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir(&input).unwrap();
    std::fs::write(input.join("a.txt"), "text words here\nhere again\n").unwrap();
    // A binary file whose bytes would otherwise count as the "words" `elf` and `payload`.
    std::fs::write(
        input.join("tool"),
        b"\x7fELF\x02\x01\x01\0\0\0 payload payload\n",
    )
    .unwrap();
    let out = dir.path().join("out.tsv");
    let o = wordcount(&input, &out);
    assert!(o.status.success(), "{}", stderr(&o));
    let counts = read_counts(&out);
    assert!(counts.contains(&("here".into(), 2)), "{counts:?}");
    assert!(
        !counts.iter().any(|(w, _)| w == "payload" || w == "elf"),
        "{counts:?}"
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("1 binary files skipped"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(
        stderr(&o).contains("tool"),
        "the warning names the file: {}",
        stderr(&o)
    );
}
