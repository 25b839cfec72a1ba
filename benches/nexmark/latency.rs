//! Latency: a rate-limited run of q5 and q7 and the delay of their window results.

use super::*;

/// Records (window end, latency) for each window result it receives.
pub(crate) struct LatencySink {
    pub(crate) latencies: Arc<Mutex<Vec<(i64, i64)>>>,
    pub(crate) local: Vec<(i64, i64)>,
}

impl SinkWriter for LatencySink {
    type Item = i64;
    fn write(&mut self, window_end: i64) -> Result<(), BoxError> {
        self.local
            .push((window_end, now_ms() - (window_end + LAG_MS)));
        Ok(())
    }
    fn close(&mut self) -> Result<(), BoxError> {
        self.latencies.lock().unwrap().append(&mut self.local);
        Ok(())
    }
}

/// Child: a rate-limited run of q5 and q7 together; prints the latency percentiles.
pub(crate) fn latency_child(events: u64, wall_rate: u64, parallelism: usize) {
    // The workers start first, so that the event time's origin (now) and the first read are
    // only a submission apart: event time then follows the wall clock.
    let executor = Executor::new(ExecutorConfig {
        workers: parallelism,
        ..ExecutorConfig::default()
    })
    .unwrap();
    let base = now_ms();
    let config = GeneratorConfig {
        count: Some(events),
        rate: wall_rate,
        base_time_ms: base,
        ..GeneratorConfig::default()
    };
    // The last event time: windows ending later than this minus the lag are closed by the end
    // of the input, not by the watermark, and have no latency to speak of.
    let last_event_time = base + (events as f64 * 1000.0 / wall_rate as f64) as i64;
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let p = Pipeline::new();
    let stream = p
        .read_from(source::stream_generator(config, Some(wall_rate)).unwrap())
        .with_native_timestamps(LAG_MS);
    let sink = |l: &Arc<Mutex<Vec<(i64, i64)>>>| {
        let l = Arc::clone(l);
        Sink::new("latency", None, move |_| LatencySink {
            latencies: Arc::clone(&l),
            local: Vec::new(),
        })
    };
    pipelines::q5(&stream)
        .map(|r| r.window_end)
        .write_to(sink(&latencies));
    pipelines::q7(&stream)
        .map(|r| r.window_end)
        .write_to(sink(&latencies));
    let started = Instant::now();
    p.submit(
        &executor,
        JobConfig::default().with_default_parallelism(parallelism),
    )
    .unwrap()
    .join()
    .unwrap();
    let elapsed = started.elapsed();
    let mut l: Vec<i64> = latencies
        .lock()
        .unwrap()
        .iter()
        .filter(|(end, _)| end + LAG_MS <= last_event_time)
        .map(|(_, latency)| *latency)
        .collect();
    l.sort_unstable();
    let pct = |p: f64| {
        l.get(((l.len() as f64 * p) as usize).min(l.len().saturating_sub(1)))
            .copied()
            .unwrap_or(-1)
    };
    println!(
        "latency: {} window results, {events} events at {wall_rate}/s in {:.1} s; watermark-to-sink ms p50 {} p99 {} p99.9 {} max {}",
        l.len(),
        elapsed.as_secs_f64(),
        pct(0.50),
        pct(0.99),
        pct(0.999),
        l.last().copied().unwrap_or(-1)
    );
}

pub(crate) fn latency_run(me: &Path, events: u64, wall_rate: u64) {
    let mut cmd = Command::new(me);
    cmd.args([
        "--child",
        "latency",
        "--events",
        &events.to_string(),
        "--wall-rate",
        &wall_rate.to_string(),
        "--parallelism",
        "2",
    ]);
    let (_, rss) = support::time_child(&mut cmd);
    println!("latency run peak RSS {:.1} MiB", rss as f64 / 1024.0);
}
