//! InvokeHTTP: its spec and its processor.

use super::BuiltIn;
use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BuildError, ProcessError, Processor, Trigger, eval, props};
use std::sync::Arc;
use std::time::Duration;
use weir_flow_api::component::Component;
use weir_flow_api::expression::Template;
use weir_flow_api::provenance::EventType;
use weir_flow_api::session::Session;

/// The InvokeHTTP type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(InvokeHttp::new(c)?)),
};

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "InvokeHTTP",
    description: "Sends an HTTP request per flow file and routes the original and the response.",
    properties: &[
        p(
            "HTTP Method",
            true,
            Some("GET"),
            K::Choice(&["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]),
        ).about(
            "The request's method; POST, PUT and PATCH send the content as the body.",
        ),
        p("HTTP URL", true, None, K::Expression).about(
            "The URL to call, evaluated per flow file (one that fails to evaluate sends the flow file to Failure).",
        ),
        p("Connection Timeout", true, Some("5 secs"), K::Duration).about(
            "How long connecting to the server may take.",
        ),
        p("Read Timeout", true, Some("15 secs"), K::Duration).about(
            "How long the whole request may take, until the response is read.",
        ),
    ],
    relationships: &["Original", "Response", "Retry", "No Retry", "Failure"],
    dynamic: Dynamic::None,
    source: false,
};

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
