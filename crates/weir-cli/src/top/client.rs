//! Reading the observability REST API (`/api/v1`) of a running `weir` process.

use std::time::Duration;

use serde::de::DeserializeOwned;
use weir_observe::model::{ErrorBody, FlowDetail, FlowSummary, JobDetail, JobSummary};

/// How long one request may take before the refresh reports the server unreachable.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

/// Why a refresh failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// No answer: refused, reset or timed out.
    #[error("cannot reach {url}: {source}")]
    Unreachable {
        /// The address asked.
        url: String,
        /// The transport error.
        source: reqwest::Error,
    },
    /// The server wants a token that was missing or wrong.
    #[error("{url}: the server refused the token (401); pass --token or set WEIR_UI_TOKEN")]
    Unauthorized {
        /// The address asked.
        url: String,
    },
    /// Another error status, with the server's message.
    #[error("{url}: {status}: {message}")]
    Status {
        /// The address asked.
        url: String,
        /// The HTTP status.
        status: reqwest::StatusCode,
        /// The `error` field of the answer, or its status text.
        message: String,
    },
    /// The answer was not the JSON the API describes.
    #[error("{url}: unexpected answer: {source}")]
    Body {
        /// The address asked.
        url: String,
        /// The decoding error.
        source: reqwest::Error,
    },
}

/// Everything one refresh read: each job and flow with its details.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApiSnapshot {
    /// Jobs, in the server's order.
    pub jobs: Vec<JobDetail>,
    /// Flows, in the server's order.
    pub flows: Vec<FlowDetail>,
}

/// A client for one server; cheap to clone (the connection pool is shared).
#[derive(Debug, Clone)]
pub struct ApiClient {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl ApiClient {
    /// A client for the server at `url` (`http://host:port`, with or without a trailing
    /// slash), sending `token` as a bearer token when given.
    pub fn new(url: &str, token: Option<String>) -> Self {
        Self::with_timeout(url, token, REQUEST_TIMEOUT)
    }

    /// [`ApiClient::new`] whose requests may take up to `timeout` (a stop with a savepoint
    /// answers once the savepoint is durable).
    pub fn with_timeout(url: &str, token: Option<String>, timeout: Duration) -> Self {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            // Building fails only when the TLS backend cannot initialise: a broken install.
            .expect("the HTTP client builds with default settings");
        Self {
            http,
            base: format!("{}/api/v1", url.trim_end_matches('/')),
            token,
        }
    }

    /// Reads the job and flow lists and then each one's details. `job` and `flow` keep only
    /// the one with that id (or name) when given. A job or flow that ends between the list and
    /// its details (404) is left out rather than failing the refresh.
    ///
    /// # Errors
    /// The first failed request, as a [`FetchError`].
    pub async fn snapshot(
        &self,
        job: Option<&str>,
        flow: Option<&str>,
    ) -> Result<ApiSnapshot, FetchError> {
        let wanted = |id: &str, name: &str, filter: Option<&str>| {
            filter.is_none_or(|f| f == id || f == name)
        };
        let mut snapshot = ApiSnapshot::default();
        // With only a flow asked for, jobs are not shown, and the other way round.
        if flow.is_none() || job.is_some() {
            let jobs: Vec<JobSummary> = self.get("/jobs").await?;
            for summary in jobs.iter().filter(|j| wanted(&j.id, &j.name, job)) {
                if let Some(detail) = self.get_optional(&format!("/jobs/{}", summary.id)).await? {
                    snapshot.jobs.push(detail);
                }
            }
        }
        if job.is_none() || flow.is_some() {
            let flows: Vec<FlowSummary> = self.get("/flows").await?;
            for summary in flows.iter().filter(|f| wanted(&f.id, &f.name, flow)) {
                if let Some(detail) = self.get_optional(&format!("/flows/{}", summary.id)).await? {
                    snapshot.flows.push(detail);
                }
            }
        }
        Ok(snapshot)
    }

    async fn get_optional<T: DeserializeOwned>(&self, path: &str) -> Result<Option<T>, FetchError> {
        match self.get(path).await {
            Ok(value) => Ok(Some(value)),
            Err(FetchError::Status { status, .. }) if status == reqwest::StatusCode::NOT_FOUND => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// GETs `path` (under `/api/v1`) as JSON.
    ///
    /// # Errors
    /// As [`FetchError`]; an error status carries the server's message.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, FetchError> {
        let url = format!("{}{path}", self.base);
        let request = self.http.get(&url);
        self.send(url, request).await
    }

    /// POSTs to `path` (under `/api/v1`) without a body; the JSON answer.
    ///
    /// # Errors
    /// As [`FetchError`]; an error status carries the server's message.
    pub async fn post<T: DeserializeOwned>(&self, path: &str) -> Result<T, FetchError> {
        let url = format!("{}{path}", self.base);
        let request = self.http.post(&url);
        self.send(url, request).await
    }

    async fn send<T: DeserializeOwned>(
        &self,
        url: String,
        mut request: reqwest::RequestBuilder,
    ) -> Result<T, FetchError> {
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request
            .send()
            .await
            .map_err(|source| FetchError::Unreachable {
                url: url.clone(),
                source,
            })?;
        let status = response.status();
        if status == reqwest::StatusCode::UNAUTHORIZED {
            return Err(FetchError::Unauthorized { url });
        }
        if !status.is_success() {
            let message = match response.json::<ErrorBody>().await {
                Ok(body) => body.error,
                Err(_) => status.canonical_reason().unwrap_or("error").to_owned(),
            };
            return Err(FetchError::Status {
                url,
                status,
                message,
            });
        }
        response
            .json()
            .await
            .map_err(|source| FetchError::Body { url, source })
    }
}
