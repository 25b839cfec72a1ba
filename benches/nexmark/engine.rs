//! Weir runs: a query as a job, its checking sink, and an observed run's server.

use super::*;

/// Child: runs `query` (or the source alone) as a Weir job over `input`; returns what its
/// sink received. With `observe`, the observability server serves the job and a client
/// polls it once a second (see the module docs).
pub(crate) fn engine_run(
    query: Option<Query>,
    input: &Input,
    parallelism: usize,
    observe: bool,
) -> Checksum {
    let p = Pipeline::new();
    let source = match input {
        Input::Generator(config) => source::stream_generator(config.clone(), None).expect("config"),
        // As many parser threads as workers, so that parallelism 1 is one core's work.
        Input::File { path, .. } => {
            let options = source::ReplayOptions {
                chunks: ChunkOptions::with_threads(parallelism),
                strings: kept_strings(query),
                wall_rate: None,
            };
            source::stream_replay_with(path, options).expect("event file")
        }
    };
    let stream = p.read_from(source).with_native_timestamps(LAG_MS);
    let shared = Arc::new(Mutex::new(Checksum::default()));
    attach_query(query, &stream, &shared);
    let executor = Executor::new(ExecutorConfig {
        workers: parallelism,
        ..ExecutorConfig::default()
    })
    .expect("executor");
    let observer = observe.then(Observer::start);
    let job = p
        .submit(
            &executor,
            JobConfig::default().with_default_parallelism(parallelism),
        )
        .expect("submit");
    let polling = observer.as_ref().map(|o| o.poll(&job));
    job.join().expect("job");
    if let (Some(observer), Some(polling)) = (observer, polling) {
        observer.finish(polling);
    }
    *shared.lock().expect("checksum lock")
}

/// The observability server of an observed run, and its registry.
pub(crate) struct Observer {
    pub(crate) registry: weir_observe::Registry,
    pub(crate) server: weir_observe::Server,
}

/// The polling client of an observed run, and how many polls it completed.
pub(crate) struct Polling {
    pub(crate) polls: Arc<std::sync::atomic::AtomicU64>,
    pub(crate) task: tokio::task::JoinHandle<()>,
}

impl Observer {
    pub(crate) fn start() -> Observer {
        let registry = weir_observe::Registry::new();
        let config = weir_observe::ServerConfig::new("127.0.0.1:0".parse().expect("addr"), None)
            .expect("config");
        let server = weir_observe::Server::start(&config, registry.clone()).expect("server");
        Observer { registry, server }
    }

    /// Registers `job` and starts a client that GETs the job and `/metrics` once a second,
    /// checking each answer.
    pub(crate) fn poll(&self, job: &weir::Job) -> Polling {
        self.registry.add_job(job.monitor());
        let base = self.server.url();
        let id = job.id();
        let polls = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let done = Arc::clone(&polls);
        let task = weir::async_io::runtime()
            .expect("runtime")
            .spawn(async move {
                let client = reqwest::Client::new();
                let mut interval = tokio::time::interval(Duration::from_secs(1));
                loop {
                    interval.tick().await;
                    let job: serde_json::Value = client
                        .get(format!("{base}api/v1/jobs/{id}"))
                        .send()
                        .await
                        .and_then(reqwest::Response::error_for_status)
                        .expect("GET the job")
                        .json()
                        .await
                        .expect("the job's JSON");
                    assert!(job["vertices"].is_array(), "{job}");
                    let metrics = client
                        .get(format!("{base}metrics"))
                        .send()
                        .await
                        .and_then(reqwest::Response::error_for_status)
                        .expect("GET /metrics")
                        .text()
                        .await
                        .expect("the scrape");
                    assert!(metrics.contains("weir_vertex_items_out_total"));
                    done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            });
        Polling { polls, task }
    }

    /// Stops the client and the server at once (the job has ended: nothing waits for the
    /// client's next tick); panics unless the client polled about once per second the job
    /// ran, every answer checked.
    pub(crate) fn finish(self, polling: Polling) {
        // The client only ends by a failed check, which panics it.
        assert!(!polling.task.is_finished(), "the polling client failed");
        polling.task.abort();
        let polls = polling.polls.load(std::sync::atomic::Ordering::Relaxed);
        let ran = self.registry.jobs()[0].elapsed();
        assert!(
            polls + 1 >= ran.as_secs(),
            "the client polled {polls} times in {ran:?}"
        );
        drop(self.server);
    }
}

/// Adds `query`'s stages and a checking sink of its row type behind `events`.
pub(crate) fn attach_query(
    query: Option<Query>,
    events: &StreamStage<Event>,
    shared: &Arc<Mutex<Checksum>>,
) {
    let Some(query) = query else {
        return events.write_to(checksum_sink(shared));
    };
    match query {
        Query::Q0 => pipelines::q0(events).write_to(checksum_sink(shared)),
        Query::Q1 => pipelines::q1(events).write_to(checksum_sink(shared)),
        Query::Q2 => pipelines::q2(events).write_to(checksum_sink(shared)),
        Query::Q3 => pipelines::q3(events).write_to(checksum_sink(shared)),
        Query::Q4 => pipelines::q4(events).write_to(checksum_sink(shared)),
        Query::Q5 => pipelines::q5(events).write_to(checksum_sink(shared)),
        Query::Q6 => pipelines::q6(events).write_to(checksum_sink(shared)),
        Query::Q7 => pipelines::q7(events).write_to(checksum_sink(shared)),
        Query::Q8 => pipelines::q8(events).write_to(checksum_sink(shared)),
        Query::Q9 => pipelines::q9(events).write_to(checksum_sink(shared)),
        Query::Q10 => pipelines::q10(events).write_to(checksum_sink(shared)),
        Query::Q11 => pipelines::q11(events).write_to(checksum_sink(shared)),
        Query::Q12 => panic!("{query} reads in processing time: its windows differ every run"),
    }
}
