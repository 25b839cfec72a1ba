//! The HTTP server: its settings, the token check, the router, and its life on the shared
//! tokio runtime.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Query, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use subtle::ConstantTimeEq;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::api::{self, ApiError};
use crate::guard::RequestGuard;
use crate::registry::Registry;

/// The environment variable that holds the token when `--ui-token` is not given.
pub const TOKEN_ENV: &str = "WEIR_UI_TOKEN";

/// How often the sampler records the jobs' and flows' counters.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(1);

/// Why a server cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A non-loopback address without a token: anyone on the network could read and cancel.
    #[error(
        "--ui {addr} listens beyond this machine, so it needs a token: pass --ui-token TOKEN or set {TOKEN_ENV} (or bind 127.0.0.1)"
    )]
    TokenRequired {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// An empty token would let every request through.
    #[error("--ui-token: the token is empty")]
    EmptyToken,
    /// A host name that cannot be one.
    #[error("--ui-allowed-host `{host}`: give a host name alone, without port or path")]
    BadHost {
        /// The name given.
        host: String,
    },
    /// The address cannot be bound.
    #[error("--ui {addr}: cannot listen: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The shared runtime could not start.
    #[error("the async runtime: {0}")]
    Runtime(String),
}

/// Where the server listens, the token it requires and the host names it answers to,
/// checked when made.
#[derive(Clone)]
pub struct ServerConfig {
    addr: SocketAddr,
    token: Option<Arc<str>>,
    allowed_hosts: Vec<String>,
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the token.
        f.debug_struct("ServerConfig")
            .field("addr", &self.addr)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("allowed_hosts", &self.allowed_hosts)
            .finish()
    }
}

impl ServerConfig {
    /// Settings for a server on `addr`. Without a token, only a loopback address (127.0.0.0/8,
    /// `::1`) is allowed; with one, every request must carry it.
    ///
    /// # Errors
    /// [`ServeError::TokenRequired`] for a non-loopback address without a token (port 0 and
    /// the unspecified address `0.0.0.0` included), [`ServeError::EmptyToken`].
    pub fn new(addr: SocketAddr, token: Option<String>) -> Result<ServerConfig, ServeError> {
        if token.as_deref() == Some("") {
            return Err(ServeError::EmptyToken);
        }
        if token.is_none() && !addr.ip().is_loopback() {
            return Err(ServeError::TokenRequired { addr });
        }
        Ok(ServerConfig {
            addr,
            token: token.map(Arc::from),
            allowed_hosts: Vec::new(),
        })
    }

    /// Also answers requests whose `Host` is one of `hosts` (names by which the machine is
    /// reached, such as `weir.internal`); by default only the bound address, `localhost`,
    /// `127.0.0.1` and `[::1]` are (see `guard.rs`).
    ///
    /// # Errors
    /// [`ServeError::BadHost`] for a name that is empty or holds a port, a path or spaces.
    pub fn allow_hosts(mut self, hosts: Vec<String>) -> Result<ServerConfig, ServeError> {
        for host in &hosts {
            if host.is_empty() || host.contains([':', '/', ' ', '@', '?', '#']) {
                return Err(ServeError::BadHost { host: host.clone() });
            }
        }
        self.allowed_hosts = hosts;
        Ok(self)
    }

    /// The address to listen on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Whether requests need a token.
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }
}

/// The `token` query parameter, for pages and `EventSource`, which cannot set headers.
#[derive(Debug, serde::Deserialize)]
struct TokenParam {
    token: Option<String>,
}

/// Lets a request through when the server has no token, or when the request carries it as
/// `Authorization: Bearer <token>` or `?token=<token>`; answers 401 otherwise. The
/// comparison takes the same time wherever the tokens differ.
async fn check_token(
    State(expected): State<Option<Arc<str>>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(expected) = expected else {
        return next.run(request).await;
    };
    let header = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_string);
    let given = header.or_else(|| {
        Query::<TokenParam>::try_from_uri(request.uri())
            .ok()
            .and_then(|Query(p)| p.token)
    });
    let matches = given.is_some_and(|g| bool::from(g.as_bytes().ct_eq(expected.as_bytes())));
    if !matches {
        return ApiError::unauthorized().into_response();
    }
    next.run(request).await
}

/// The routes over `registry`, for a server bound to `bound`. Every request goes through the
/// host and origin checks first, and every response gets the security headers (see
/// `guard.rs`). The token check guards every API route and `/metrics`; the dashboard's pages
/// and files (the fallback) are served without it, since they are the same embedded bytes
/// for everyone and hold no data: the page then asks the API with the token.
pub fn router(registry: Registry, config: &ServerConfig, bound: SocketAddr) -> Router {
    let guard = Arc::new(RequestGuard::new(
        bound,
        &config.allowed_hosts,
        config.token.clone(),
    ));
    Router::new()
        .route("/api/v1/jobs", get(api::list_jobs))
        .route("/api/v1/jobs/{id}", get(api::get_job))
        .route("/api/v1/jobs/{id}/cancel", post(api::cancel_job))
        .route("/api/v1/jobs/{id}/stop", post(api::stop_job))
        .route("/api/v1/flows", get(api::list_flows))
        .route("/api/v1/flows/{id}", get(api::get_flow))
        .route(
            "/api/v1/flows/{id}/processors/{pid}/start",
            post(api::start_processor),
        )
        .route(
            "/api/v1/flows/{id}/processors/{pid}/stop",
            post(api::stop_processor),
        )
        .route("/api/v1/flows/{id}/provenance", get(api::search_provenance))
        .route(
            "/api/v1/flows/{id}/flowfiles/{ffid}/lineage",
            get(api::get_lineage),
        )
        .route(
            "/api/v1/flows/{id}/flowfiles/{ffid}/content",
            get(api::get_content),
        )
        .route("/api/v1/openapi.json", get(api::openapi_json))
        .route("/api/v1/events", get(api::events))
        .route("/metrics", get(api::metrics))
        // `route_layer`: only the routes above, not the fallback's files.
        .route_layer(middleware::from_fn_with_state(
            config.token.clone(),
            check_token,
        ))
        .fallback(get(api::static_files))
        .with_state(registry)
        .layer(middleware::from_fn_with_state(guard, crate::guard::guard))
}

/// A running server. Dropping it stops it (as [`Server::stop`] does).
pub struct Server {
    addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    serve: Option<JoinHandle<()>>,
    sampler: JoinHandle<()>,
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.addr).finish()
    }
}

impl Server {
    /// Binds `config`'s address (before returning, so a taken port is an error here) and
    /// serves `registry` on Weir's shared tokio runtime, with a sampler task that records the
    /// jobs' and flows' counters once per second for their rates.
    ///
    /// Cost to running jobs and flows: the sampler's one read of each one's counters per
    /// second, and whatever the clients ask for; nothing per item or flow file.
    ///
    /// # Errors
    /// [`ServeError::Bind`] or [`ServeError::Runtime`].
    pub fn start(config: &ServerConfig, registry: Registry) -> Result<Server, ServeError> {
        let runtime = weir_runtime::runtime()
            .map_err(|e| {
                ServeError::Runtime(format!(
                    "cannot start the shared async runtime: {}",
                    e.reason
                ))
            })?
            .clone();
        let bind = |source| ServeError::Bind {
            addr: config.addr,
            source,
        };
        let std_listener = std::net::TcpListener::bind(config.addr).map_err(bind)?;
        std_listener.set_nonblocking(true).map_err(bind)?;
        let listener = {
            let _entered = runtime.enter();
            tokio::net::TcpListener::from_std(std_listener).map_err(bind)?
        };
        let addr = listener.local_addr().map_err(bind)?;
        let app = router(registry.clone(), config, addr);
        let (shutdown, stopped) = oneshot::channel::<()>();
        let serve = runtime.spawn(async move {
            let stopped = async {
                let _ = stopped.await;
            };
            if let Err(e) = axum::serve(listener, app)
                .with_graceful_shutdown(stopped)
                .await
            {
                tracing::warn!(%addr, error = %e, "the observability server stopped");
            }
        });
        let sampler = runtime.spawn(async move {
            let mut interval = tokio::time::interval(SAMPLE_INTERVAL);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                let registry = registry.clone();
                // Reading the counters takes locks briefly: off the async threads.
                let _ = tokio::task::spawn_blocking(move || registry.sample(Instant::now())).await;
            }
        });
        Ok(Server {
            addr,
            shutdown: Some(shutdown),
            serve: Some(serve),
            sampler,
            runtime,
        })
    }

    /// The bound address (with the real port when port 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The dashboard's URL: `http://ADDR/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Stops accepting connections, gives open requests up to a second to finish, then
    /// closes the rest (event streams never finish by themselves).
    pub fn stop(mut self) {
        self.stop_now(Duration::from_secs(1));
    }

    fn stop_now(&mut self, grace: Duration) {
        self.sampler.abort();
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(serve) = self.serve.take() {
            let abort = serve.abort_handle();
            // Waiting needs a thread outside the runtime; from inside one, only abort.
            if tokio::runtime::Handle::try_current().is_err() {
                let _ = self
                    .runtime
                    .block_on(async { tokio::time::timeout(grace, serve).await });
            }
            abort.abort();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_now(Duration::ZERO);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beyond_loopback_a_token_is_required() {
        let any: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let err = ServerConfig::new(any, None).unwrap_err();
        assert!(matches!(err, ServeError::TokenRequired { .. }));
        assert!(err.to_string().contains("--ui-token"), "{err}");
        assert!(err.to_string().contains(TOKEN_ENV), "{err}");
        assert!(ServerConfig::new(any, Some("s3cret".into())).is_ok());
        assert!(matches!(
            ServerConfig::new(any, Some(String::new())),
            Err(ServeError::EmptyToken)
        ));
        for loopback in ["127.0.0.1:0", "127.0.0.2:80", "[::1]:0"] {
            let cfg = ServerConfig::new(loopback.parse().unwrap(), None).unwrap();
            assert!(!cfg.has_token());
        }
    }

    #[test]
    fn the_token_never_shows_in_debug_output() {
        let cfg = ServerConfig::new("0.0.0.0:1".parse().unwrap(), Some("s3cret".into())).unwrap();
        assert!(!format!("{cfg:?}").contains("s3cret"));
    }
}
