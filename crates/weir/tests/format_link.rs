//! A file sink behind stages on every worker: its records are formatted in the vertex of
//! their input (a `format` link), and the single writer only appends the blocks.

use std::collections::HashMap;
use std::path::Path;

use weir::{Executor, ExecutorConfig, JobConfig};

use weir::prelude::*;

/// Runs `p` on `parallelism` workers; the job's error, or the `records_written` of all
/// its instances.
fn run(p: &Pipeline, parallelism: usize) -> Result<u64, String> {
    let executor = Executor::new(ExecutorConfig {
        workers: parallelism,
        ..Default::default()
    })
    .unwrap();
    let config = JobConfig::default().with_default_parallelism(parallelism);
    let job = p.submit(&executor, config).map_err(|e| e.to_string())?;
    while !job.wait_timeout(std::time::Duration::from_millis(20)) {}
    let written = job
        .metrics()
        .iter()
        .map(|m| m.counter("records_written"))
        .sum();
    job.join().map_err(|e| e.to_string())?;
    Ok(written)
}

/// Numbers tripled behind a rebalance, so the map runs on every worker, into `sink`.
fn tripled(n: u64, sink: Sink<u64>) -> Pipeline {
    let p = Pipeline::new();
    p.read_from(sources::collection::items(0..n))
        .rebalance()
        .map(|x| x * 3)
        .write_to(sink);
    p
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_single_file_behind_every_worker_gets_the_records_formatted_there() {
    let dir = tempfile::tempdir().unwrap();
    let n = 200_000;
    let want: Vec<String> = (0..n).map(|x| (x * 3).to_string()).collect();
    for parallelism in [1, 2, 4] {
        let path = dir.path().join(format!("out-{parallelism}.txt"));
        let p = tripled(n, sinks::files::text(&path));
        let plan = p.explain().unwrap();
        assert!(plan.contains("fused(rebalance, map, format)"), "{plan}");
        // Each record counts once, though the sink receives blocks of them.
        assert_eq!(run(&p, parallelism), Ok(n));
        let mut got = lines(&path);
        if parallelism == 1 {
            assert_eq!(got, want, "one instance keeps the order");
        }
        got.sort_by_key(|l| l.parse::<u64>().unwrap());
        assert_eq!(got, want, "parallelism {parallelism}");
    }
}

#[test]
fn a_sink_in_the_vertex_of_its_input_formats_there_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.txt");
    let p = Pipeline::new();
    p.read_from(sources::collection::items(0..10u64))
        .write_to(sinks::files::text(&path));
    let plan = p.explain().unwrap();
    assert!(!plan.contains("format"), "{plan}");
    assert_eq!(run(&p, 2), Ok(10));
    assert_eq!(lines(&path).len(), 10);
}

#[test]
fn a_header_is_written_once_and_even_without_records() {
    let dir = tempfile::tempdir().unwrap();
    for n in [0, 5_000] {
        let path = dir.path().join(format!("out-{n}.csv"));
        let sink = sinks::files::text_with_header(&path, "x\n", |x: &u64, out: &mut Vec<u8>| {
            out.extend_from_slice(format!("{x}\n").as_bytes());
        });
        assert_eq!(run(&tripled(n, sink), 2), Ok(n));
        let got = lines(&path);
        assert_eq!(got.len() as u64, n + 1);
        assert_eq!(got[0], "x");
    }
}

#[test]
fn an_item_that_cannot_be_encoded_fails_the_job_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.jsonl");
    let p = Pipeline::new();
    p.read_from(sources::collection::items(0..1000u32))
        .rebalance()
        // A JSON object's keys must be strings: a key of bytes cannot be written.
        .map(|x| HashMap::from([(vec![x as u8], x)]))
        .write_to(sinks::json::lines(&path));
    assert!(p.explain().unwrap().contains("format"));
    let err = run(&p, 2).unwrap_err();
    assert!(
        err.contains("cannot encode") && err.contains("out.jsonl"),
        "{err}"
    );
    assert!(!path.exists(), "a failed job leaves no file");
}
