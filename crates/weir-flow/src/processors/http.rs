//! HTTP processors: ListenHTTP (axum) and InvokeHTTP (reqwest), both on Weir's shared
//! runtime.

use std::sync::Mutex;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;

use super::{BuildError, ProcessError, Processor, StartError, Trigger, eval, props};
use weir_flow_api::component::Component;
use weir_flow_api::expression::Template;
use weir_flow_api::provenance::EventType;
use weir_flow_api::session::{Session, SessionFactory};

/// ListenHTTP: each POST to `/<Base Path>` becomes a flow file (RECEIVE). The answer is
/// 200 only once the session holding the data is durable; 503 when the flow is back-pressured
/// or stopping; 500 when the commit fails.
pub struct ListenHttp {
    address: String,
    port: u16,
    base_path: String,
    shutdown: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
}

impl ListenHttp {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let port = props::count(c, "Listening Port")?;
        Ok(ListenHttp {
            address: props::text(c, "Listening Address"),
            port: u16::try_from(port)
                .map_err(|_| format!("Listening Port {port} is not a port"))?,
            base_path: props::text(c, "Base Path").trim_matches('/').to_string(),
            shutdown: Mutex::new(None),
        })
    }
}

async fn receive(
    State(sessions): State<SessionFactory>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    if sessions.held_back() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "back pressure: try again later\n".into(),
        );
    }
    let outcome = tokio::task::spawn_blocking(move || -> Result<(), String> {
        let mut session = sessions.session();
        let ff = session.create();
        session.write(ff, &body).map_err(|e| e.to_string())?;
        for (name, value) in &headers {
            if let Ok(v) = value.to_str() {
                session.put_attribute(ff, format!("http.headers.{name}"), v.to_string());
            }
        }
        session.report(
            ff,
            EventType::RECEIVE,
            Some("http://listenhttp".into()),
            None,
        );
        session.transfer(ff, "success").map_err(|e| e.to_string())?;
        let committed = session.commit().map_err(|e| e.to_string())?;
        sessions.count(&committed);
        Ok(())
    })
    .await;
    match outcome {
        Ok(Ok(())) => (StatusCode::OK, "ok\n".into()),
        Ok(Err(e)) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("not stored: {e}\n"),
        ),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("not stored: {e}\n"),
        ),
    }
}

impl Processor for ListenHttp {
    fn start(&self, sessions: SessionFactory) -> Result<(), StartError> {
        let addr = format!("{}:{}", self.address, self.port);
        let listener = std::net::TcpListener::bind(&addr)
            .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let listener = tokio::net::TcpListener::from_std(listener).map_err(|e| e.to_string())?;
        let app = Router::new()
            .route(&format!("/{}", self.base_path), post(receive))
            .with_state(sessions);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        *self.shutdown.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx);
        tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = rx.await;
            });
            if let Err(e) = serve.await {
                tracing::error!("ListenHTTP: {e}");
            }
        });
        Ok(())
    }

    fn trigger(&self, _session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        Ok(Trigger::Idle)
    }

    fn schedulable(&self) -> bool {
        false
    }

    fn stop(&self) {
        if let Some(tx) = self
            .shutdown
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = tx.send(());
        }
    }
}

/// InvokeHTTP: calls a URL per flow file. The original goes to `Original` on a 2xx (with the
/// response as a new flow file on `Response`), to `Retry` on a 5xx, `No Retry` on other
/// statuses, and `Failure` when the call cannot be made.
pub struct InvokeHttp {
    method: reqwest::Method,
    url: Template,
    client: reqwest::Client,
    read_timeout: Duration,
    runtime: tokio::runtime::Handle,
}

impl InvokeHttp {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let client = reqwest::Client::builder()
            .connect_timeout(props::duration(c, "Connection Timeout")?)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(InvokeHttp {
            method: props::text(c, "HTTP Method")
                .parse()
                .map_err(|_| "HTTP Method: not a method".to_string())?,
            url: props::template(c, "HTTP URL")?,
            client,
            read_timeout: props::duration(c, "Read Timeout")?,
            runtime: weir_runtime::runtime().map_err(|e| e.to_string())?.clone(),
        })
    }
}

impl Processor for InvokeHttp {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let Some(ff) = session.get()? else {
            return Ok(Trigger::Idle);
        };
        let Ok(url) = eval(&self.url, session, ff).map(std::borrow::Cow::into_owned) else {
            session.transfer(ff, "Failure")?;
            return Ok(Trigger::Worked);
        };
        let body = if matches!(
            self.method,
            reqwest::Method::POST | reqwest::Method::PUT | reqwest::Method::PATCH
        ) {
            session.read(ff)?
        } else {
            bytes::Bytes::new()
        };
        let request = self
            .client
            .request(self.method.clone(), &url)
            .timeout(self.read_timeout)
            .body(body);
        // The trigger runs on the blocking pool, where waiting for the runtime is allowed.
        let response = self.runtime.block_on(async move {
            let r = request.send().await?;
            let status = r.status();
            let bytes = r.bytes().await?;
            Ok::<_, reqwest::Error>((status, bytes))
        });
        match response {
            Ok((status, bytes)) => {
                session.put_attribute(ff, "invokehttp.status.code", status.as_u16().to_string());
                session.put_attribute(ff, "invokehttp.request.url", url.clone());
                if status.is_success() {
                    let resp = session.create_child(ff);
                    session.write(resp, &bytes)?;
                    session.put_attribute(
                        resp,
                        "invokehttp.status.code",
                        status.as_u16().to_string(),
                    );
                    session.report(resp, EventType::FETCH, Some(url.as_str().into()), None);
                    session.transfer(resp, "Response")?;
                    session.report(ff, EventType::REMOTE_INVOCATION, Some(url.into()), None);
                    session.transfer(ff, "Original")?;
                } else if status.is_server_error() {
                    session.penalize(ff);
                    session.transfer(ff, "Retry")?;
                } else {
                    session.transfer(ff, "No Retry")?;
                }
            }
            Err(e) => {
                session.put_attribute(ff, "invokehttp.java.exception.message", e.to_string());
                session.penalize(ff);
                session.transfer(ff, "Failure")?;
            }
        }
        Ok(Trigger::Worked)
    }
}
