//! A small model server speaking the TensorFlow Serving / KServe v1 REST protocol, for
//! tests, benchmarks and the README demo of `weir score`.
//!
//! ```
//! use std::time::Duration;
//! use weir_cli::model_server::{serve, ServerConfig};
//!
//! let (addr, server) = serve(ServerConfig::default()).unwrap();
//! let reply = weir::async_io::runtime().unwrap().block_on(async move {
//!     reqwest::Client::builder().no_proxy().build()?
//!         .post(format!("http://{addr}/v1/models/demo:predict"))
//!         .json(&serde_json::json!({"instances": [[1.0, 2.0], [0.5, 0.0]]}))
//!         .send()
//!         .await?
//!         .json::<serde_json::Value>()
//!         .await
//! }).unwrap();
//! // The model is linear: the sum of (i + 1) × feature i.
//! assert_eq!(reply, serde_json::json!({"predictions": [5.0, 0.5]}));
//! assert_eq!(server.stats().rows, 2);
//! ```
//!
//! `POST /v1/models/NAME:predict` with `{"instances": [[f1, f2, ...], ...]}` answers
//! `{"predictions": [p1, p2, ...]}`, one prediction per instance, in order. The model scores
//! a row as `Σ (i + 1) × fᵢ` ([`linear_score`]); with [`ServerConfig::outputs`] above 1 each
//! prediction is a list `[s, 2s, ...]`. Every request waits [`ServerConfig::latency`]
//! first, measured with a sub-millisecond timer ([`precise_sleep`]), and
//! [`ServerConfig::failure`] injects errors. [`ServerStats`] counts requests and rows and
//! keeps the most rows in flight at once, so that tests can check a client's bound. With
//! [`ServerConfig::record`], the server also keeps every row it answered, by model name
//! ([`ServerHandle::answered`]), so that a test can tell which rows a client had scored.
//!
//! The server runs on the shared runtime ([`weir::async_io::runtime`]) and binds
//! `127.0.0.1` unless told otherwise. Dropping the [`ServerHandle`] shuts it down.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

/// Which requests fail, and how.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Failure {
    /// None.
    #[default]
    Never,
    /// The first `count` requests answer `status` (a transient outage).
    FirstRequests {
        /// How many requests fail.
        count: u64,
        /// The HTTP status they answer.
        status: u16,
    },
    /// A request with a row whose first feature equals `value` answers `status` (a
    /// deterministic poison row).
    Poison {
        /// The first-feature value that fails its request.
        value: f64,
        /// The HTTP status it answers.
        status: u16,
    },
}

/// How the server behaves.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where to listen. Default `127.0.0.1:0` (a free port).
    pub addr: SocketAddr,
    /// How long each request takes before it is answered. Default zero.
    pub latency: Duration,
    /// Values per prediction: 1 gives a number, more give a list. Default 1.
    pub outputs: usize,
    /// Injected failures. Default none.
    pub failure: Failure,
    /// Keep every row answered with a prediction, by model name, for
    /// [`ServerHandle::answered`]. Default off: the record grows with every row.
    pub record: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            latency: Duration::ZERO,
            outputs: 1,
            failure: Failure::Never,
            record: false,
        }
    }
}

/// What the server has seen so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServerStats {
    /// Predict requests received.
    pub requests: u64,
    /// Rows (instances) received.
    pub rows: u64,
    /// Requests answered with an injected error.
    pub failed: u64,
    /// The most rows being handled at once.
    pub max_in_flight_rows: u64,
    /// The rows being handled now: received, not yet answered.
    pub in_flight_rows: u64,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    rows: AtomicU64,
    failed: AtomicU64,
    in_flight_rows: AtomicU64,
    max_in_flight_rows: AtomicU64,
}

struct AppState {
    config: ServerConfig,
    counters: Counters,
    /// With [`ServerConfig::record`]: the rows answered, by model name, in answer order.
    answered: Mutex<HashMap<String, Vec<Vec<f64>>>>,
}

/// A running server. Dropping it shuts the server down (requests in progress are cut off).
pub struct ServerHandle {
    addr: SocketAddr,
    state: Arc<AppState>,
    shutdown: Option<oneshot::Sender<()>>,
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("addr", &self.addr)
            .field("stats", &self.stats())
            .finish()
    }
}

impl ServerHandle {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The predict URL of model `name`.
    pub fn url(&self, name: &str) -> String {
        format!("http://{}/v1/models/{name}:predict", self.addr)
    }

    /// The counters so far.
    pub fn stats(&self) -> ServerStats {
        let c = &self.state.counters;
        ServerStats {
            requests: c.requests.load(Ordering::SeqCst),
            rows: c.rows.load(Ordering::SeqCst),
            failed: c.failed.load(Ordering::SeqCst),
            max_in_flight_rows: c.max_in_flight_rows.load(Ordering::SeqCst),
            in_flight_rows: c.in_flight_rows.load(Ordering::SeqCst),
        }
    }

    /// The rows (their features) answered with a prediction for model `name` (the `NAME` of
    /// `NAME:predict`), in the order the answers were made; empty unless the server was
    /// started with [`ServerConfig::record`]. A row answered twice is listed twice. A row is
    /// listed once its answer is made, before it is sent: a client killed at that moment
    /// never got it.
    ///
    /// Cost: a copy of the model's record.
    pub fn answered(&self, name: &str) -> Vec<Vec<f64>> {
        self.state
            .answered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
            .unwrap_or_default()
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The shared runtime could not start.
    #[error(transparent)]
    Runtime(#[from] weir::async_io::AsyncError),
}

/// Starts a server with `config` on the shared runtime and returns its address and handle.
///
/// # Errors
/// [`ServerError::Bind`] when the address is taken or not allowed.
pub fn serve(config: ServerConfig) -> Result<(SocketAddr, ServerHandle), ServerError> {
    let runtime = weir::async_io::runtime()?;
    let addr = config.addr;
    let bind = |source| ServerError::Bind { addr, source };
    let listener = std::net::TcpListener::bind(addr).map_err(bind)?;
    listener.set_nonblocking(true).map_err(bind)?;
    let local = listener.local_addr().map_err(bind)?;
    let listener = {
        let _context = runtime.enter();
        tokio::net::TcpListener::from_std(listener).map_err(bind)?
    };
    let state = Arc::new(AppState {
        config,
        counters: Counters::default(),
        answered: Mutex::new(HashMap::new()),
    });
    let app = Router::new()
        .route("/v1/models/{model}", post(predict))
        .with_state(Arc::clone(&state));
    let (tx, rx) = oneshot::channel::<()>();
    runtime.spawn(async move {
        let server = axum::serve(listener, app).with_graceful_shutdown(async {
            let _ = rx.await;
        });
        if let Err(e) = server.await {
            tracing::error!(error = %e, "model server stopped");
        }
    });
    Ok((
        local,
        ServerHandle {
            addr: local,
            state,
            shutdown: Some(tx),
        },
    ))
}

/// The body of a predict request.
#[derive(Debug, Deserialize)]
struct PredictRequest {
    instances: Vec<Vec<f64>>,
}

/// The body of a predict reply.
#[derive(Debug, Serialize)]
struct PredictReply {
    predictions: Vec<serde_json::Value>,
}

/// The model: `Σ (i + 1) × features[i]`.
pub fn linear_score(features: &[f64]) -> f64 {
    features
        .iter()
        .enumerate()
        .map(|(i, f)| (i as f64 + 1.0) * f)
        .sum()
}

/// Takes rows out of the in-flight count when the request ends, however it ends.
struct InFlight<'a> {
    counters: &'a Counters,
    rows: u64,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.counters
            .in_flight_rows
            .fetch_sub(self.rows, Ordering::SeqCst);
    }
}

async fn predict(
    State(state): State<Arc<AppState>>,
    Path(model): Path<String>,
    body: axum::Json<PredictRequest>,
) -> Response {
    if !model.ends_with(":predict") {
        return (StatusCode::NOT_FOUND, "only NAME:predict is served\n").into_response();
    }
    let counters = &state.counters;
    let rows = body.instances.len() as u64;
    let request = counters.requests.fetch_add(1, Ordering::SeqCst);
    counters.rows.fetch_add(rows, Ordering::SeqCst);
    let now = counters.in_flight_rows.fetch_add(rows, Ordering::SeqCst) + rows;
    counters.max_in_flight_rows.fetch_max(now, Ordering::SeqCst);
    let _in_flight = InFlight { counters, rows };
    precise_sleep(state.config.latency).await;
    let fail = match state.config.failure {
        Failure::Never => None,
        Failure::FirstRequests { count, status } => (request < count).then_some(status),
        Failure::Poison { value, status } => body
            .instances
            .iter()
            .any(|row| row.first() == Some(&value))
            .then_some(status),
    };
    if let Some(status) = fail {
        counters.failed.fetch_add(1, Ordering::SeqCst);
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return (status, "injected failure\n").into_response();
    }
    let outputs = state.config.outputs.max(1);
    let predictions = body
        .instances
        .iter()
        .map(|row| {
            let s = linear_score(row);
            if outputs == 1 {
                serde_json::json!(s)
            } else {
                serde_json::json!((1..=outputs).map(|k| s * k as f64).collect::<Vec<_>>())
            }
        })
        .collect();
    if state.config.record {
        let name = model.strip_suffix(":predict").unwrap_or(&model).to_string();
        state
            .answered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(name)
            .or_default()
            .extend(body.0.instances);
    }
    axum::Json(PredictReply { predictions }).into_response()
}

/// Deadlines waiting for [`precise_sleep`]'s timer thread.
struct Timer {
    deadlines: Mutex<BinaryHeap<Reverse<(Instant, u64)>>>,
    wakers: Mutex<std::collections::HashMap<u64, oneshot::Sender<()>>>,
    changed: Condvar,
    next_id: AtomicU64,
}

fn timer() -> &'static Timer {
    static TIMER: OnceLock<&'static Timer> = OnceLock::new();
    TIMER.get_or_init(|| {
        let timer: &'static Timer = Box::leak(Box::new(Timer {
            deadlines: Mutex::new(BinaryHeap::new()),
            wakers: Mutex::new(std::collections::HashMap::new()),
            changed: Condvar::new(),
            next_id: AtomicU64::new(0),
        }));
        let spawned = std::thread::Builder::new()
            .name("weir-precise-timer".into())
            .spawn(move || timer_loop(timer));
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the precise timer; sleeps fall back to tokio's");
        }
        timer
    })
}

fn timer_loop(timer: &'static Timer) {
    let mut deadlines = timer.deadlines.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let now = Instant::now();
        while let Some(&Reverse((at, id))) = deadlines.peek() {
            if at > now {
                break;
            }
            deadlines.pop();
            let waker = timer
                .wakers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
            if let Some(tx) = waker {
                let _ = tx.send(());
            }
        }
        deadlines = match deadlines.peek() {
            Some(&Reverse((at, _))) => {
                let wait = at.saturating_duration_since(Instant::now());
                timer
                    .changed
                    .wait_timeout(deadlines, wait)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
            None => timer
                .changed
                .wait(deadlines)
                .unwrap_or_else(|e| e.into_inner()),
        };
    }
}

/// Sleeps for `duration`, to within about 0.1 ms.
///
/// Tokio's timer rounds sleeps up to its 1 ms tick, so a "5 ms" `tokio::time::sleep` lasts
/// 5 to 6 ms; a service simulated with it would be 10% slower than claimed. This one hands
/// the deadline to one timer thread per process that waits on a condition variable and
/// completes a oneshot channel on time. Zero returns at once.
///
/// Cost: one heap push, one map insert and one condition-variable signal per sleep.
pub async fn precise_sleep(duration: Duration) {
    if duration.is_zero() {
        return;
    }
    let timer = timer();
    let (tx, rx) = oneshot::channel();
    let id = timer.next_id.fetch_add(1, Ordering::Relaxed);
    timer
        .wakers
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(id, tx);
    timer
        .deadlines
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Reverse((Instant::now() + duration, id)));
    timer.changed.notify_one();
    if rx.await.is_err() {
        // The timer thread is gone: fall back to tokio's coarser timer.
        tokio::time::sleep(duration).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(url: &str, body: serde_json::Value) -> (u16, String) {
        let url = url.to_string();
        weir::async_io::runtime()
            .unwrap()
            .block_on(async move {
                let r = reqwest::Client::builder()
                    .no_proxy()
                    .build()?
                    .post(url)
                    .json(&body)
                    .send()
                    .await?;
                let status = r.status().as_u16();
                Ok::<_, reqwest::Error>((status, r.text().await?))
            })
            .unwrap()
    }

    #[test]
    fn scores_rows_in_order_as_numbers_or_lists() {
        let (_, server) = serve(ServerConfig {
            outputs: 2,
            ..Default::default()
        })
        .unwrap();
        let (status, body) = post(
            &server.url("m"),
            serde_json::json!({"instances": [[1.0], [1.0, 1.0]]}),
        );
        assert_eq!(status, 200);
        assert_eq!(body, r#"{"predictions":[[1.0,2.0],[3.0,6.0]]}"#);
        let (status, _) = post(
            &format!("http://{}/v1/models/m", server.addr()),
            serde_json::json!({"instances": []}),
        );
        assert_eq!(status, 404);
    }

    #[test]
    fn injects_failures() {
        let (_, server) = serve(ServerConfig {
            failure: Failure::FirstRequests {
                count: 1,
                status: 503,
            },
            ..Default::default()
        })
        .unwrap();
        let body = serde_json::json!({"instances": [[2.0]]});
        assert_eq!(post(&server.url("m"), body.clone()).0, 503);
        assert_eq!(post(&server.url("m"), body).0, 200);
        let (_, poisoned) = serve(ServerConfig {
            failure: Failure::Poison {
                value: -1.0,
                status: 500,
            },
            ..Default::default()
        })
        .unwrap();
        let url = poisoned.url("m");
        assert_eq!(
            post(&url, serde_json::json!({"instances": [[1.0], [-1.0]]})).0,
            500
        );
        assert_eq!(post(&url, serde_json::json!({"instances": [[1.0]]})).0, 200);
        assert_eq!(poisoned.stats().failed, 1);
        assert_eq!(poisoned.stats().rows, 3);
        assert!(poisoned.answered("m").is_empty(), "recording is off");
    }

    #[test]
    fn records_the_rows_it_answered_by_model() {
        let (_, server) = serve(ServerConfig {
            failure: Failure::Poison {
                value: -1.0,
                status: 500,
            },
            record: true,
            ..Default::default()
        })
        .unwrap();
        post(
            &server.url("a"),
            serde_json::json!({"instances": [[1.0], [2.0]]}),
        );
        post(&server.url("b"), serde_json::json!({"instances": [[3.0]]}));
        post(&server.url("a"), serde_json::json!({"instances": [[-1.0]]}));
        post(&server.url("a"), serde_json::json!({"instances": [[1.0]]}));
        assert_eq!(
            server.answered("a"),
            [[1.0], [2.0], [1.0]],
            "failed rows are not answered"
        );
        assert_eq!(server.answered("b"), [[3.0]]);
        assert!(server.answered("c").is_empty());
        assert_eq!(server.stats().in_flight_rows, 0);
    }

    #[test]
    fn precise_sleep_waits_at_least_its_duration() {
        let rt = weir::async_io::runtime().unwrap();
        let start = Instant::now();
        rt.block_on(precise_sleep(Duration::from_millis(3)));
        assert!(start.elapsed() >= Duration::from_millis(3));
    }
}
