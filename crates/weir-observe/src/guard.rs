//! What keeps other web pages out: the `Host` check against DNS rebinding, the origin check
//! against cross-site request forgery, and the security headers of every response.
//!
//! A server on loopback needs no token, which is right for a person at the machine; but any
//! page that person's browser opens can send requests to it. Two attacks follow, and two
//! checks stop them:
//!
//! - **DNS rebinding**: a page on `attacker.example` re-resolves its name to 127.0.0.1 and
//!   reads the API as its own origin. Its requests carry `Host: attacker.example:PORT`, so
//!   every request's `Host` must name this server: the bound address, `localhost`,
//!   `127.0.0.1`, `[::1]` or a name given with `--ui-allowed-host`, with the bound port
//!   (any IP address too when the server listens on every interface, which needs a token).
//!   Anything else is answered 421.
//! - **Cross-site requests**: any page can POST to the server without a preflight (a form,
//!   or `fetch` with a simple content type). So a state-changing request (any method but
//!   GET, HEAD and OPTIONS) must carry the server's token as a bearer header, or come from
//!   this server's own origin: its `Origin` (or, without one, its `Referer`) names an allowed
//!   host, or the browser says `Sec-Fetch-Site: same-origin`. A request that carries none of
//!   these is no browser's (browsers send `Origin` on every POST), so `curl` and `weir top`
//!   keep working on loopback; everything else is answered 403.
//!
//! Every response carries `X-Content-Type-Options: nosniff`, `Referrer-Policy: same-origin`
//! and a `Content-Security-Policy` that lets the dashboard load only its own scripts, styles
//! and API, and never be framed. No response allows other origins (`Access-Control-*`).
//!
//! Cost: a few string comparisons per request.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::api::ApiError;

/// The dashboard's content security policy: its own files and API only.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Which hosts and origins a server answers.
#[derive(Debug, Clone)]
pub(crate) struct RequestGuard {
    /// The bound address, with its real port.
    bound: SocketAddr,
    /// Lowercase host names allowed besides the loopback names and the bound address.
    allowed: Vec<String>,
    token: Option<Arc<str>>,
}

impl RequestGuard {
    pub(crate) fn new(bound: SocketAddr, allowed: &[String], token: Option<Arc<str>>) -> Self {
        RequestGuard {
            bound,
            allowed: allowed.iter().map(|h| h.to_ascii_lowercase()).collect(),
            token,
        }
    }

    /// Whether `authority` (`host[:port]`, as in `Host` or an origin) names this server.
    fn is_own(&self, authority: &str) -> bool {
        let Some((host, port)) = split_authority(authority) else {
            return false;
        };
        if port.is_some_and(|p| p != self.bound.port()) {
            return false;
        }
        let host = host.to_ascii_lowercase();
        if host == "localhost" || self.allowed.contains(&host) {
            return true;
        }
        match host.parse::<IpAddr>() {
            Ok(ip) => {
                ip == self.bound.ip()
                    || ip.is_loopback()
                    // Listening everywhere (with a token): reached by any of its addresses.
                    || self.bound.ip().is_unspecified()
            }
            Err(_) => false,
        }
    }

    /// Whether the request carries the server's token as a bearer header.
    fn has_token(&self, headers: &HeaderMap) -> bool {
        let Some(expected) = &self.token else {
            return false;
        };
        headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|given| bool::from(given.as_bytes().ct_eq(expected.as_bytes())))
    }

    /// Why a state-changing request is refused, if it is.
    fn refuse_write(&self, headers: &HeaderMap) -> Option<String> {
        if self.has_token(headers) {
            return None;
        }
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        if let Some(origin) = text(header::ORIGIN.as_str()) {
            return (!self.is_own_origin(origin))
                .then(|| format!("a request from origin `{origin}` may not change this server's state: only its own pages, or a client with its token, may"));
        }
        if let Some(site) = text("sec-fetch-site") {
            return (site != "same-origin")
                .then(|| format!("a {site} request may not change this server's state"));
        }
        if let Some(referer) = text(header::REFERER.as_str()) {
            return (!self.is_own_origin(referer)).then(|| {
                format!("a request from page `{referer}` may not change this server's state")
            });
        }
        // No browser sends a POST without any of these: a command-line client.
        None
    }

    /// Whether `url`'s origin (`http://host[:port]`, any path after) is this server's.
    fn is_own_origin(&self, url: &str) -> bool {
        let Some(rest) = url.strip_prefix("http://") else {
            return false;
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        // An origin without a port is on port 80.
        if split_authority(authority).is_some_and(|(_, port)| port.is_none())
            && self.bound.port() != 80
        {
            return false;
        }
        self.is_own(authority)
    }
}

/// Splits `host[:port]` (a bracketed IPv6 address included); `None` if malformed.
fn split_authority(authority: &str) -> Option<(&str, Option<u16>)> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after.strip_prefix(':') {
            Some(port) => Some((host, Some(port.parse().ok()?))),
            None if after.is_empty() => Some((host, None)),
            None => None,
        };
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => Some((host, Some(port.parse().ok()?))),
        None => Some((authority, None)),
    }
    .filter(|(host, _)| !host.is_empty())
}

/// The middleware: refuses foreign hosts and cross-origin writes, and adds the security
/// headers to every response.
pub(crate) async fn guard(
    State(guard): State<Arc<RequestGuard>>,
    request: Request,
    next: Next,
) -> Response {
    let mut response = match check(&guard, &request) {
        Some(refusal) => refusal.into_response(),
        None => next.run(request).await,
    };
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    response
}

fn check(guard: &RequestGuard, request: &Request) -> Option<ApiError> {
    let headers = request.headers();
    // HTTP/2 carries the authority in the URI instead.
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    if let Some(host) = host
        && !guard.is_own(host)
    {
        return Some(ApiError::misdirected(format!(
            "this server does not answer for host `{host}`: use its address ({}), localhost or 127.0.0.1, or start it with --ui-allowed-host NAME",
            guard.bound
        )));
    }
    let reads = [Method::GET, Method::HEAD, Method::OPTIONS];
    if !reads.contains(request.method())
        && let Some(why) = guard.refuse_write(headers)
    {
        return Some(ApiError::forbidden(why));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(bound: &str, allowed: &[&str], token: Option<&str>) -> RequestGuard {
        let allowed: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
        RequestGuard::new(bound.parse().unwrap(), &allowed, token.map(Arc::from))
    }

    #[test]
    fn hosts_of_this_server_and_no_others() {
        let g = guard("127.0.0.1:8080", &["Weir.Example"], None);
        for own in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST:8080",
            "[::1]:8080",
            "127.0.0.1",
            "weir.example:8080",
        ] {
            assert!(g.is_own(own), "{own}");
        }
        for foreign in [
            "attacker.example:8080",
            "127.0.0.1:8081",
            "localhost.attacker.example:8080",
            "10.0.0.1:8080",
            "",
            ":8080",
            "[::1",
            "127.0.0.1:x",
        ] {
            assert!(!g.is_own(foreign), "{foreign}");
        }
        let everywhere = guard("0.0.0.0:8080", &[], Some("t"));
        assert!(everywhere.is_own("10.0.0.1:8080"));
        assert!(!everywhere.is_own("attacker.example:8080"));
    }

    #[test]
    fn writes_need_the_token_or_this_servers_origin() {
        let g = guard("127.0.0.1:8080", &[], Some("s3cret"));
        let headers = |pairs: &[(&'static str, &str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, v.parse().unwrap());
            }
            h
        };
        let refused = |pairs: &[(&'static str, &str)]| g.refuse_write(&headers(pairs)).is_some();
        assert!(!refused(&[]), "no browser headers: a command-line client");
        assert!(!refused(&[("origin", "http://127.0.0.1:8080")]));
        assert!(!refused(&[("origin", "http://localhost:8080")]));
        assert!(refused(&[("origin", "http://attacker.example")]));
        assert!(refused(&[("origin", "http://127.0.0.1:8081")]));
        assert!(refused(&[("origin", "null")]));
        assert!(refused(&[("origin", "https://127.0.0.1:8080")]));
        assert!(refused(&[("sec-fetch-site", "cross-site")]));
        assert!(!refused(&[("sec-fetch-site", "same-origin")]));
        assert!(refused(&[("referer", "http://attacker.example/page")]));
        assert!(!refused(&[("referer", "http://127.0.0.1:8080/jobs/1")]));
        assert!(!refused(&[
            ("origin", "http://attacker.example"),
            ("authorization", "Bearer s3cret"),
        ]));
        assert!(refused(&[
            ("origin", "http://attacker.example"),
            ("authorization", "Bearer wrong"),
        ]));
    }
}
