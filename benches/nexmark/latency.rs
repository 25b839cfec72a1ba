//! Latency: q5, q7 and a keyed 1 s tumbling count, fed by one paced generator, and the delay
//! of each window result (see "Latency" in the module docs of `main.rs`).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

use hdrhistogram::Histogram;
use weir::stream::KeyedWindowResult;

use super::*;

/// The keyed count counts bids per `auction % COUNT_KEYS`: the generator's bids go to the
/// last 100 auctions created (and a hot one), and a new auction comes every 17 events, so at
/// 100,000 events/s and more every 1 s window holds bids on thousands of auctions and every
/// one of the 1,000 keys has a result.
pub(crate) const COUNT_KEYS: i64 = 1000;
/// The keyed count's tumbling window.
pub(crate) const COUNT_WINDOW_MS: i64 = 1000;
/// The fewest keyed-count results (window × key) a run must measure: the sample.
pub(crate) const MIN_COUNT_RESULTS: u64 = 10_000;
/// The goal for window close to sink: p99 below 10 ms and p99.99 below 20 ms.
const GOAL_P99_US: u64 = 10_000;
const GOAL_P9999_US: u64 = 20_000;

/// Wall-clock time in µs since the Unix epoch: the clock both the source side and the sinks
/// read, so their times compare.
fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// How q5 counts its bids: `pipelines::q5` (two stages, the default) or
/// `pipelines::q5_single_stage` (one stage after the shuffle).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Q5Stages {
    Two,
    One,
}

impl Q5Stages {
    /// Its name on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Q5Stages::Two => "two",
            Q5Stages::One => "one",
        }
    }

    /// Parses [`name`](Self::name).
    ///
    /// # Panics
    /// On any other name.
    pub(crate) fn parse(name: &str) -> Self {
        match name {
            "two" => Q5Stages::Two,
            "one" => Q5Stages::One,
            other => panic!("--q5-stages: {other:?} is neither `one` nor `two`"),
        }
    }
}

/// The three jobs measured together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Group {
    /// q5: 10 s windows sliding by 2 s.
    Q5,
    /// q7: 10 s tumbling windows.
    Q7,
    /// Bids counted per `auction % COUNT_KEYS` in 1 s tumbling windows.
    Count,
}

impl Group {
    const ALL: [Group; 3] = [Group::Q5, Group::Q7, Group::Count];

    fn name(self) -> &'static str {
        match self {
            Group::Q5 => "q5",
            Group::Q7 => "q7",
            Group::Count => "keyed 1 s count",
        }
    }

    /// The distance between two window ends, ms.
    fn step_ms(self) -> i64 {
        match self {
            Group::Q5 => Q5_SLIDE_MS,
            Group::Q7 => Q7_WINDOW_MS,
            Group::Count => COUNT_WINDOW_MS,
        }
    }
}

/// When each source instance handed on its events: per instance and per millisecond of event
/// time since `base_ms`, the wall time (µs since the epoch) at which the stage right after
/// the source first saw an event of that millisecond or later; 0 until then.
///
/// The watermark of a window stage passes a window's end `E` once every source instance has
/// emitted an event at or after `E + lag` (the watermark is the lowest of the instances',
/// each `highest event time - lag`), so [`all_reached`](Self::all_reached) of `E + lag` is
/// the moment the window could close.
pub(crate) struct SourceLog {
    base_ms: i64,
    handed: Vec<Box<[AtomicI64]>>,
    registered: AtomicUsize,
}

impl SourceLog {
    /// A log for `instances` source instances and `span_ms` ms of event time from `base_ms`.
    fn new(base_ms: i64, span_ms: i64, instances: usize) -> Self {
        let slots = span_ms.max(0) as usize + 1;
        SourceLog {
            base_ms,
            handed: (0..instances)
                .map(|_| (0..slots).map(|_| AtomicI64::new(0)).collect())
                .collect(),
            registered: AtomicUsize::new(0),
        }
    }

    /// The next instance's index.
    ///
    /// # Panics
    /// If more instances register than the log was made for.
    fn register(&self) -> usize {
        let i = self.registered.fetch_add(1, Ordering::Relaxed);
        assert!(
            i < self.handed.len(),
            "the source has more than the {} instances the log was made for",
            self.handed.len()
        );
        i
    }

    /// Instance `instance` handed on, at `wall_us`, its first events at or after each of
    /// the event times `from_ms..=to_ms` (offsets from `base_ms`).
    fn stamp(&self, instance: usize, from_ms: i64, to_ms: i64, wall_us: i64) {
        let slots = &self.handed[instance];
        let (from, to) = (from_ms.max(0), to_ms.min(slots.len() as i64 - 1));
        if from > to {
            return;
        }
        for slot in &slots[from as usize..=to as usize] {
            // Release: a sink that sees a window this event closed reads the stamp after it.
            slot.store(wall_us, Ordering::Release);
        }
    }

    /// The wall time of each registered instance's first event at or after `time_ms`.
    fn reached(&self, time_ms: i64) -> Option<Vec<i64>> {
        let offset = usize::try_from(time_ms - self.base_ms).ok()?;
        let n = self
            .registered
            .load(Ordering::Relaxed)
            .min(self.handed.len());
        let times: Option<Vec<i64>> = self.handed[..n]
            .iter()
            .map(|slots| {
                let t = slots.get(offset)?.load(Ordering::Acquire);
                (t != 0).then_some(t)
            })
            .collect();
        times.filter(|t| !t.is_empty())
    }

    /// When every instance had handed on an event at or after `time_ms`: the last of them.
    fn all_reached(&self, time_ms: i64) -> Option<i64> {
        self.reached(time_ms)?.into_iter().max()
    }

    /// The source's least delay, over the whole run, between an event time read as
    /// wall-clock time and its hand-on: its schedule. The paced generator starts its pace at
    /// its first read and never runs ahead of it, so its first events show the start-up
    /// (planning, deployment, the first read after the event-time origin was chosen), a
    /// constant the source never makes up; any later delay is more than this. `None` before
    /// the first event.
    fn least_delay_us(&self) -> Option<i64> {
        let n = self
            .registered
            .load(Ordering::Relaxed)
            .min(self.handed.len());
        self.handed[..n]
            .iter()
            .flat_map(|slots| slots.iter().enumerate())
            .filter_map(|(offset, slot)| {
                let t = slot.load(Ordering::Acquire);
                (t != 0).then(|| t - (self.base_ms + offset as i64) * 1000)
            })
            .min()
    }
}

/// The stage right after the source: stamps the log with each new millisecond of event time
/// an instance hands on. One comparison per event; a clock read per new millisecond.
struct Stamper {
    log: Arc<SourceLog>,
    instance: usize,
    /// The next event-time offset not stamped yet.
    next_ms: i64,
}

impl Stamper {
    fn see(&mut self, event: &Event) {
        let offset = event.date_time() - self.log.base_ms;
        if offset >= self.next_ms {
            self.log
                .stamp(self.instance, self.next_ms, offset, now_us());
            self.next_ms = offset + 1;
        }
    }
}

/// What one job's sink instances measured, in µs.
pub(crate) struct Measured {
    /// Window close to sink: arrival at the sink minus the moment every source instance
    /// had handed on an event at or after the window's end plus the lag.
    close: Histogram<u64>,
    /// End to end, before the source's least delay is taken off (at the print, see
    /// [`SourceLog::least_delay_us`]): arrival minus the window's end plus the lag, event
    /// time read as wall-clock time. That is the time from the creation of the window's first
    /// event (its time stamp, the window's start) to the result, less the window's length and
    /// the lag.
    end_to_end: Histogram<u64>,
    /// How far the source ran behind its event time read as wall-clock time when the window
    /// could close, before its least delay is taken off: the difference of the two above.
    source_behind: Histogram<u64>,
    /// Results measured.
    results: u64,
    /// Their distinct window ends.
    windows: BTreeSet<i64>,
    /// Values below 0 recorded as 0.
    clamped: u64,
}

impl Measured {
    fn new() -> Self {
        let histogram = || Histogram::<u64>::new(3).expect("3 significant digits are valid");
        Measured {
            close: histogram(),
            end_to_end: histogram(),
            source_behind: histogram(),
            results: 0,
            windows: BTreeSet::new(),
            clamped: 0,
        }
    }

    /// Records one result of the window ending at `end`: its three figures, in µs.
    fn record(&mut self, end: i64, close_us: i64, end_to_end_us: i64, behind_us: i64) {
        for (h, us) in [
            (&mut self.close, close_us),
            (&mut self.end_to_end, end_to_end_us),
            (&mut self.source_behind, behind_us),
        ] {
            if us < 0 {
                self.clamped += 1;
            }
            h.record(us.max(0) as u64)
                .expect("the histogram resizes itself");
        }
        self.results += 1;
        self.windows.insert(end);
    }

    fn merge(&mut self, other: &mut Measured) {
        self.close.add(&other.close).expect("same precision");
        self.end_to_end
            .add(&other.end_to_end)
            .expect("same precision");
        self.source_behind
            .add(&other.source_behind)
            .expect("same precision");
        self.results += other.results;
        self.windows.append(&mut other.windows);
        self.clamped += other.clamped;
    }
}

/// The window ends a run measures: after the first window (start-up), up to the last one the
/// watermark closes (later ones are closed by the end of the input).
#[derive(Debug, Clone, Copy)]
struct Counted {
    /// The first window's end, not measured.
    first_end: i64,
    /// The last end measured.
    last_end: i64,
}

impl Counted {
    /// For `group`'s windows over events from `base_ms` whose source instances' last events
    /// are at `last_ms` or later.
    fn new(group: Group, base_ms: i64, last_ms: i64) -> Self {
        let step = group.step_ms();
        Counted {
            first_end: (base_ms.div_euclid(step) + 1) * step,
            last_end: (last_ms - LAG_MS).div_euclid(step) * step,
        }
    }

    fn contains(&self, end: i64) -> bool {
        self.first_end < end && end <= self.last_end
    }

    /// How many window ends are measured.
    fn expected(&self, group: Group) -> usize {
        ((self.last_end - self.first_end) / group.step_ms()).max(0) as usize
    }
}

/// Measures each window result it receives (its window's end) for one job; the instances'
/// figures are merged at close.
struct LatencySink {
    group: Group,
    log: Arc<SourceLog>,
    counted: Counted,
    local: Measured,
    shared: Arc<Mutex<Measured>>,
}

impl SinkWriter for LatencySink {
    type Item = i64;

    fn write(&mut self, end: i64) -> Result<(), BoxError> {
        let arrived = now_us();
        if !self.counted.contains(end) {
            return Ok(());
        }
        let closing = end + LAG_MS;
        let closable = self.log.all_reached(closing).ok_or_else(|| {
            format!(
                "{} window ending at {end} reached the sink before every source instance had \
                 handed on an event at or after {closing}, the watermark that closes it",
                self.group.name()
            )
        })?;
        // When the window's wait for its lag ended, event time read as wall-clock time.
        let due = closing * 1000;
        self.local
            .record(end, arrived - closable, arrived - due, closable - due);
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        self.shared.lock().unwrap().merge(&mut self.local);
        Ok(())
    }
}

/// A sink measuring `group`'s results into `shared`.
fn latency_sink(
    group: Group,
    log: &Arc<SourceLog>,
    counted: Counted,
    shared: &Arc<Mutex<Measured>>,
) -> Sink<i64> {
    let (log, shared) = (Arc::clone(log), Arc::clone(shared));
    Sink::new(format!("latency-{}", group.name()), None, move |_| {
        LatencySink {
            group,
            log: Arc::clone(&log),
            counted,
            local: Measured::new(),
            shared: Arc::clone(&shared),
        }
    })
}

/// Milliseconds with two decimals, from µs.
fn ms(us: u64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}

/// Prints one row: a histogram's count and percentiles in ms, less `shift_us` (a constant
/// taken off every value keeps their order, so it comes off every percentile).
fn print_latency_row(
    (name, what): (&str, &str),
    m: &Measured,
    h: &Histogram<u64>,
    shift_us: u64,
    goal: &str,
) {
    let at = |q: f64| ms(h.value_at_quantile(q).saturating_sub(shift_us));
    println!(
        "{:<16} {:<11} {:>8} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8}  {}",
        name,
        what,
        h.len(),
        m.windows.len(),
        at(0.50),
        at(0.99),
        at(0.999),
        at(0.9999),
        ms(h.max().saturating_sub(shift_us)),
        goal
    );
}

/// Child: q5, q7 and the keyed count over one generator paced at `wall_rate` events/s for
/// `seconds`, on `parallelism` workers; prints each job's latencies.
///
/// # Panics
/// If a job measured fewer windows than its run closes by the watermark, the keyed count
/// fewer than [`MIN_COUNT_RESULTS`] results, or a result came before its closing event.
pub(crate) fn latency_child(
    seconds: u64,
    wall_rate: u64,
    parallelism: usize,
    q5: Q5Stages,
    pinning: WorkerPinning,
) {
    let events = wall_rate * seconds;
    // The workers start first, so that the event time's origin (now) and the first read are
    // only a submission apart: event time then follows the wall clock.
    let executor = Executor::new(ExecutorConfig {
        workers: parallelism,
        pinning,
        ..ExecutorConfig::default()
    })
    .unwrap();
    println!(
        "workers pinned ({pinning}) to CPUs {:?}",
        executor.worker_cpus()
    );
    let base = now_ms();
    let config = GeneratorConfig {
        count: Some(events),
        rate: wall_rate,
        base_time_ms: base,
        ..GeneratorConfig::default()
    };
    let generator = Generator::new(config.clone()).unwrap();
    // Instance i hands out events i, i + p, ...: the lowest of the instances' last event
    // times is that of event `events - p`. A window whose end plus the lag is past it is
    // closed by the end of the input.
    let last_ms = generator.timestamp(events.saturating_sub(parallelism as u64));
    let log = Arc::new(SourceLog::new(
        base,
        generator.timestamp(events) - base,
        parallelism,
    ));

    let p = Pipeline::new();
    let stamper_log = Arc::clone(&log);
    let stream = p
        .read_from(source::stream_generator(config, Some(wall_rate)).unwrap())
        .with_native_timestamps(LAG_MS)
        .map_stateful(
            move || Stamper {
                instance: stamper_log.register(),
                log: Arc::clone(&stamper_log),
                next_ms: 0,
            },
            |stamper, event: Event| {
                stamper.see(&event);
                Some(event)
            },
        );
    let measured: Vec<(Group, Counted, Arc<Mutex<Measured>>)> = Group::ALL
        .iter()
        .map(|&g| {
            let counted = Counted::new(g, base, last_ms);
            (g, counted, Arc::new(Mutex::new(Measured::new())))
        })
        .collect();
    for (group, counted, shared) in &measured {
        let sink = latency_sink(*group, &log, *counted, shared);
        match group {
            Group::Q5 => match q5 {
                Q5Stages::Two => pipelines::q5(&stream),
                Q5Stages::One => pipelines::q5_single_stage(&stream),
            }
            .map(|r| r.window_end)
            .write_to(sink),
            Group::Q7 => pipelines::q7(&stream).map(|r| r.window_end).write_to(sink),
            Group::Count => stream
                .filter_map(|e| match e {
                    Event::Bid(b) => Some(b),
                    _ => None,
                })
                .grouping_key(|b: &weir_nexmark::Bid| b.auction % COUNT_KEYS)
                .window(WindowDefinition::tumbling(COUNT_WINDOW_MS))
                .aggregate(weir::aggregate::counting())
                .map(|r: KeyedWindowResult<i64, u64>| r.end)
                .write_to(sink),
        }
    }
    let started = Instant::now();
    p.submit(
        &executor,
        JobConfig::default().with_default_parallelism(parallelism),
    )
    .unwrap()
    .join()
    .unwrap();
    let elapsed = started.elapsed();

    println!(
        "{events} events at {wall_rate}/s of wall-clock time, one generator on {parallelism} \
         workers, in {:.1} s; latencies in ms",
        elapsed.as_secs_f64()
    );
    println!(
        "{:<16} {:<11} {:>8} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8}  goal: p99 < {} ms, p99.99 < {} ms",
        "job",
        "latency",
        "results",
        "windows",
        "p50",
        "p99",
        "p99.9",
        "p99.99",
        "max",
        GOAL_P99_US / 1000,
        GOAL_P9999_US / 1000
    );
    let least_delay = log
        .least_delay_us()
        .expect("the source handed on events")
        .max(0) as u64;
    let mut behind = Measured::new();
    let mut failures = Vec::new();
    for (group, counted, shared) in &measured {
        let m = shared.lock().unwrap();
        let name = group.name();
        let verdict = if m.close.value_at_quantile(0.99) < GOAL_P99_US
            && m.close.value_at_quantile(0.9999) < GOAL_P9999_US
        {
            "ok"
        } else {
            "FAIL"
        };
        print_latency_row((name, "close→sink"), &m, &m.close, 0, verdict);
        print_latency_row((name, "end-to-end"), &m, &m.end_to_end, least_delay, "");
        behind.source_behind.add(&m.source_behind).unwrap();
        if m.clamped > 0 {
            println!("  {name}: {} negative values recorded as 0", m.clamped);
        }
        let expected = counted.expected(*group);
        if m.results == 0 {
            failures.push(format!("{name}: the sink got no result to measure"));
        } else if m.windows.len() != expected {
            failures.push(format!(
                "{name}: {} windows measured, the run closes {expected} by the watermark \
                 (ends {} to {})",
                m.windows.len(),
                counted.first_end + group.step_ms(),
                counted.last_end
            ));
        }
        if *group == Group::Count && m.results < MIN_COUNT_RESULTS {
            failures.push(format!(
                "{name}: {} results measured, fewer than the {MIN_COUNT_RESULTS} the goal is \
                 judged on (raise --latency-seconds or the rate)",
                m.results
            ));
        }
    }
    let b = &behind.source_behind;
    let behind_ms = |q: f64| ms(b.value_at_quantile(q).saturating_sub(least_delay));
    println!(
        "source: least delay behind its event time {} ms (start-up, taken off end-to-end); \
         behind it by more when a window could close: p50 {} ms, p99 {} ms, max {} ms",
        ms(least_delay),
        behind_ms(0.5),
        behind_ms(0.99),
        ms(b.max().saturating_sub(least_delay))
    );
    assert!(failures.is_empty(), "{}", failures.join("; "));
}

/// Runs the latency child once per rate in `rates` and form of q5 in `q5_forms`, each for
/// `seconds`, and prints its table and its process's usage. Each run first waits for the
/// machine to be quiet, as `repeat` says (its run count is not used).
pub(crate) fn latency_run(
    me: &Path,
    rates: &[u64],
    seconds: u64,
    q5_forms: &[Q5Stages],
    repeat: Repeat,
    pinning: WorkerPinning,
) {
    for &rate in rates {
        for &q5 in q5_forms {
            latency_run_one(me, rate, seconds, q5, repeat, pinning);
        }
    }
}

/// One child of [`latency_run`].
fn latency_run_one(
    me: &Path,
    rate: u64,
    seconds: u64,
    q5: Q5Stages,
    repeat: Repeat,
    pinning: WorkerPinning,
) {
    println!();
    let others = support::wait_for_quiet(repeat.quiet, repeat.patience);
    println!(
        "Latency: q5 (counts in {} stage(s)), q7 and a keyed 1 s count of bids \
         ({COUNT_KEYS} keys) from one generator at {rate} events/s, {seconds} s, \
         parallelism 2 (others busy {:.0}%)",
        q5.name(),
        others * 100.0
    );
    let mut cmd = Command::new(me);
    cmd.args([
        "--child",
        "latency",
        "--seconds",
        &seconds.to_string(),
        "--wall-rate",
        &rate.to_string(),
        "--parallelism",
        "2",
        "--q5-stages",
        q5.name(),
        "--pin-workers",
        &pinning.to_string(),
    ]);
    let usage = support::run_child(&mut cmd);
    let wall = usage.wall.as_secs_f64();
    let cpu = usage.cpu.as_secs_f64();
    println!(
        "process: wall {wall:.2} s, CPU {cpu:.2} s (user + system, all threads; {:.0}% of \
         one core), peak RSS {:.1} MiB, context switches {} voluntary, {} involuntary",
        cpu / wall * 100.0,
        usage.max_rss_kib as f64 / 1024.0,
        usage.voluntary_switches,
        usage.involuntary_switches
    );
}
