//! ListenHTTP: its spec and its processor.

use super::BuiltIn;
use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BuildError, ProcessError, Processor, StartError, Trigger, props};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use std::sync::Arc;
use std::sync::Mutex;
use weir_flow_api::component::Component;
use weir_flow_api::provenance::EventType;
use weir_flow_api::session::{Session, SessionFactory};

/// The ListenHTTP type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(ListenHttp::new(c)?)),
};

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "ListenHTTP",
    description: "Accepts HTTP POSTs as flow files, answering 200 once the data is committed.",
    properties: &[
        p("Listening Port", true, None, K::Count).about("The TCP port to listen on."),
        p("Base Path", true, Some("contentListener"), K::Text).about(
            "The path clients POST to (`/contentListener`); slashes around it are ignored.",
        ),
        p("Listening Address", true, Some("127.0.0.1"), K::Text).about(
            "The address to listen on; only loopback addresses (`127.0.0.1`, `::1`, `localhost`) are allowed.",
        ),
    ],
    relationships: &["success"],
    dynamic: Dynamic::None,
    source: true,
};

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
