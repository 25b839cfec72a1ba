//! Idle cost: the CPU a job takes at a low rate, a job with no input at all, and a flow with
//! nothing to do (see "Idle cost" in the module docs of `main.rs`).

use std::task::{Context, Poll, Waker};

use futures::StreamExt;
use weir::ProcessorContext;
use weir::sources::{Emitter, SourceReader};

use super::*;

/// The rates of the paced runs, events per second of wall-clock time.
const IDLE_RATES: [u64; 3] = [1_000, 10_000, 100_000];

/// One idle-cost measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IdleCase {
    /// q5 over the generator paced at this many events/s.
    Paced(u64),
    /// q5 over a stream source that never yields an event.
    NoInput,
    /// A flow, GetFile on an empty directory into PutFile, run by `weir flow run`.
    EmptyFlow,
}

impl IdleCase {
    fn label(self) -> &'static str {
        match self {
            IdleCase::Paced(_) => "q5, paced generator",
            IdleCase::NoInput => "q5, no input",
            IdleCase::EmptyFlow => "flow, nothing to do",
        }
    }

    /// The goal, as a share of one core; `None` where it sets none.
    fn goal(self) -> Option<f64> {
        match self {
            IdleCase::Paced(1_000) => Some(0.02),
            IdleCase::Paced(100_000) => Some(0.10),
            IdleCase::Paced(_) => None,
            IdleCase::NoInput | IdleCase::EmptyFlow => Some(0.005),
        }
    }
}

/// A source with nothing to read, ever: an async stream that stays pending, polled with the
/// instance's waker as `sources::reactive` polls a stream, so that data arriving would wake
/// the instance's worker.
struct NoInput {
    stream: futures::stream::Pending<Event>,
    waker: Waker,
}

impl SourceReader for NoInput {
    type Item = Event;

    fn open(&mut self, ctx: &ProcessorContext) -> Result<(), BoxError> {
        self.waker = ctx.waker().to_waker();
        Ok(())
    }

    fn read(&mut self, out: &mut Emitter<'_, Event>) -> Result<bool, BoxError> {
        match self
            .stream
            .poll_next_unpin(&mut Context::from_waker(&self.waker))
        {
            Poll::Ready(Some(event)) => {
                out.emit(event);
                Ok(false)
            }
            Poll::Ready(None) => Ok(true),
            Poll::Pending => Ok(false),
        }
    }

    /// The stream's waker wakes the instance when it has an event.
    fn next_read(&self) -> weir::NextCall {
        weir::NextCall::OnWake
    }
}

/// Child: q5 on `workers` workers, over the generator paced at `rate` events/s for `seconds`
/// (`Some(rate)`), or over a source that never yields, cancelled after `seconds` (`None`).
///
/// # Panics
/// If the paced job gave no result, or the job with no input ended by itself or gave one.
pub(crate) fn idle_child(rate: Option<u64>, seconds: u64, workers: usize, pinning: WorkerPinning) {
    let executor = Executor::new(ExecutorConfig {
        workers,
        pinning,
        ..ExecutorConfig::default()
    })
    .unwrap();
    let p = Pipeline::new();
    let source = match rate {
        Some(rate) => {
            let config = GeneratorConfig {
                count: Some(rate * seconds),
                rate,
                base_time_ms: now_ms(),
                ..GeneratorConfig::default()
            };
            source::stream_generator(config, Some(rate)).unwrap()
        }
        None => StreamSource::new("no-input", None, |_: &ProcessorContext| NoInput {
            stream: futures::stream::pending(),
            waker: Waker::noop().clone(),
        })
        .with_native_timestamps(Event::date_time),
    };
    let (sink, rows) = sinks::collection::list();
    pipelines::q5(&p.read_from(source).with_native_timestamps(LAG_MS)).write_to(sink);
    let job = p
        .submit(
            &executor,
            JobConfig::default().with_default_parallelism(workers),
        )
        .unwrap();
    match rate {
        Some(_) => {
            job.join().unwrap();
            assert!(!rows.take().is_empty(), "the paced q5 gave no result");
        }
        None => {
            // The measured wait: the job is left alone for the whole duration.
            let ended = job.wait_timeout(Duration::from_secs(seconds));
            assert!(
                !ended,
                "the job with no input ended by itself: {:?}",
                job.status()
            );
            job.cancel();
            match job.join() {
                Err(weir::core::Error::Cancelled) => {}
                other => panic!("the job with no input ended with {other:?}, not cancelled"),
            }
            assert!(rows.take().is_empty(), "the job with no input gave results");
        }
    }
}

/// Runs `weir flow run` on a flow whose GetFile watches an empty directory, for `seconds`,
/// then stops it with SIGTERM as a user's Ctrl-C would; returns its usage.
///
/// # Panics
/// If the flow ends early, fails, or processed a flow file.
fn empty_flow_run(seconds: u64) -> support::ChildUsage {
    let dir = tempfile::tempdir().expect("temp dir");
    let (input, output, repo) = (
        dir.path().join("in"),
        dir.path().join("out"),
        dir.path().join("repo"),
    );
    std::fs::create_dir(&input).expect("input directory");
    let definition = dir.path().join("idle.yaml");
    std::fs::write(
        &definition,
        format!(
            "flow: idle
groups:
  - name: main
    processors:
      - name: read
        type: GetFile
        properties:
          Input Directory: {}
      - name: write
        type: PutFile
        properties:
          Directory: {}
        auto_terminate: [success, failure]
    connections:
      - {{ from: read, relationships: [success], to: write }}
",
            input.display(),
            output.display()
        ),
    )
    .expect("flow definition");
    let log = dir.path().join("stderr");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weir"));
    cmd.args(["flow", "run"])
        .arg(&definition)
        .arg("--repo")
        .arg(&repo)
        .stdout(Stdio::null())
        .stderr(File::create(&log).expect("log file"));
    let usage = support::run_child_for(&mut cmd, Duration::from_secs(seconds));
    let said = std::fs::read_to_string(&log).expect("the flow's log");
    assert!(
        said.contains("0 flow files processed, 0 queued"),
        "the idle flow did something or did not stop cleanly: {said}"
    );
    usage
}

/// Runs every idle-cost case for `seconds` each, one child process at a time, and prints
/// their CPU time against their wall time. Each run first waits for the machine to be quiet,
/// as `repeat` says (its run count is not used).
pub(crate) fn idle_run(me: &Path, seconds: u64, repeat: Repeat, pinning: WorkerPinning) {
    const WORKERS: usize = 2;
    println!();
    println!(
        "Idle cost: CPU time (user + system, all threads, from wait4) over wall time of one child \
         process per run, about {seconds} s each, {WORKERS} workers; cs/s: context switches per \
         second, voluntary (a thread blocked or parked, then woke) and involuntary (preempted)"
    );
    println!(
        "{:<20} {:>8} {:>7} {:>7} {:>8} {:>15} {:>9} {:>11} {:>7} {:>5} {:>7}",
        "run",
        "events/s",
        "wall s",
        "CPU s",
        "CPU %",
        "CPU ms/1000 ev",
        "vol cs/s",
        "invol cs/s",
        "goal",
        "",
        "others"
    );
    let cases = IDLE_RATES
        .iter()
        .map(|&r| IdleCase::Paced(r))
        .chain([IdleCase::NoInput, IdleCase::EmptyFlow]);
    let mut paced_share = Vec::new();
    for case in cases {
        let others = support::wait_for_quiet(repeat.quiet, repeat.patience);
        let usage = match case {
            IdleCase::Paced(_) | IdleCase::NoInput => {
                let mut cmd = Command::new(me);
                cmd.args(["--child", "idle", "--seconds", &seconds.to_string()])
                    .args(["--parallelism", &WORKERS.to_string()])
                    .args(["--pin-workers", &pinning.to_string()])
                    .stdout(Stdio::null());
                if let IdleCase::Paced(rate) = case {
                    cmd.args(["--wall-rate", &rate.to_string()]);
                }
                support::run_child(&mut cmd)
            }
            IdleCase::EmptyFlow => empty_flow_run(seconds),
        };
        let wall = usage.wall.as_secs_f64();
        let cpu = usage.cpu.as_secs_f64();
        let share = cpu / wall;
        let (rate, per_thousand) = match case {
            IdleCase::Paced(rate) => {
                paced_share.push((rate, share));
                let events = (rate * seconds) as f64;
                (rate.to_string(), format!("{:.2}", cpu * 1e6 / events))
            }
            _ => ("0".to_string(), "—".to_string()),
        };
        let (goal, verdict) = match case.goal() {
            Some(g) => (
                format!("≤ {}%", g * 100.0),
                if share <= g { "ok" } else { "FAIL" },
            ),
            None => ("—".to_string(), ""),
        };
        println!(
            "{:<20} {:>8} {:>7.2} {:>7.2} {:>7.2}% {:>15} {:>9.0} {:>11.0} {:>7} {:>5} {:>6.0}%",
            case.label(),
            rate,
            wall,
            cpu,
            share * 100.0,
            per_thousand,
            usage.voluntary_switches as f64 / wall,
            usage.involuntary_switches as f64 / wall,
            goal,
            verdict,
            others * 100.0
        );
    }
    // Linear in the rate: the middle run against the line through the lowest and highest.
    if let [(r0, c0), (r1, c1), (r2, c2)] = paced_share[..] {
        let slope = (c2 - c0) / (r2 - r0) as f64;
        let on_line = c0 + slope * (r1 - r0) as f64;
        println!(
            "linear in the rate? at {r1} events/s {:.2}% of a core measured, {:.2}% on the line \
             through the {r0} and {r2} events/s runs; that line's cost at 0 events/s: {:.2}%",
            c1 * 100.0,
            on_line * 100.0,
            (c0 - slope * r0 as f64) * 100.0
        );
    }
}
