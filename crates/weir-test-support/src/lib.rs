//! What Weir's tests share, kept out of the libraries' APIs: whether the local services a
//! connector test needs are reachable ([`services`]), and waiting for a condition with a
//! deadline ([`wait_for`], [`wait_for_async`], [`wait_for_value`]).
//!
//! ```
//! use std::time::{Duration, Instant};
//!
//! let start = Instant::now();
//! let ready = weir_test_support::wait_for(Duration::from_secs(5), || {
//!     start.elapsed() > Duration::from_millis(20)
//! });
//! assert!(ready);
//! ```
//!
//! Waiting polls: a test that waits for something another thread or process does (a file
//! appearing, a broker queue draining, a job's status) checks it every few milliseconds up
//! to a deadline, and fails with a message when the deadline passes. It never sleeps for a
//! fixed time in place of the condition.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often the waits check their condition.
const POLL: Duration = Duration::from_millis(5);

/// Checks `cond` every few milliseconds until it holds or `limit` passes; whether it held.
/// The last check comes after the deadline, so a condition that holds by then counts.
pub fn wait_for(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(POLL);
    }
    cond()
}

/// [`wait_for`] for a condition that is checked asynchronously (an HTTP call, a query):
/// it yields to the runtime between checks instead of blocking the thread.
pub async fn wait_for_async(limit: Duration, mut cond: impl AsyncFnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if cond().await {
            return true;
        }
        tokio::time::sleep(POLL).await;
    }
    cond().await
}

/// Checks `check` until it returns a value, and returns it.
///
/// # Panics
/// When `limit` passes first, naming `what` the test waited for.
pub async fn wait_for_value<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Service checks for tests and examples: is a server reachable on loopback?
pub mod services {
    use std::net::{SocketAddr, TcpStream};
    use std::time::Duration;

    /// RabbitMQ's AMQP port on this machine.
    pub const AMQP: &str = "127.0.0.1:5672";
    /// NATS (with JetStream) on this machine.
    pub const NATS: &str = "127.0.0.1:4222";
    /// PostgreSQL on this machine (trust authentication, database `test`).
    pub const POSTGRES: &str = "127.0.0.1:5432";

    /// True when `addr` accepts a TCP connection within a second.
    pub fn reachable(addr: &str) -> bool {
        addr.parse::<SocketAddr>()
            .ok()
            .is_some_and(|a| TcpStream::connect_timeout(&a, Duration::from_secs(1)).is_ok())
    }

    /// True when every one of `addrs` is reachable. Otherwise prints which is not and
    /// returns false, so the caller skips, unless `WEIR_REQUIRE_SERVICES=1`, where it panics.
    ///
    /// # Panics
    /// When a service is unreachable and `WEIR_REQUIRE_SERVICES=1`.
    pub fn available(test: &str, addrs: &[&str]) -> bool {
        let missing: Vec<&str> = addrs.iter().copied().filter(|a| !reachable(a)).collect();
        if missing.is_empty() {
            return true;
        }
        skip_unless_required(
            test,
            &format!("service(s) {} unreachable", missing.join(", ")),
            "start RabbitMQ, NATS with JetStream and PostgreSQL; see README",
        );
        false
    }

    /// What a test does when something it needs from the machine (`what`, e.g. "service(s)
    /// ... unreachable") is not there: it prints that it is skipped and why, with `hint`
    /// (how to get it), unless `WEIR_REQUIRE_SERVICES=1`, where it panics instead.
    ///
    /// # Panics
    /// When `WEIR_REQUIRE_SERVICES=1`.
    pub fn skip_unless_required(test: &str, what: &str, hint: &str) {
        let required = std::env::var("WEIR_REQUIRE_SERVICES").is_ok_and(|v| v == "1");
        assert!(!required, "{test}: {what} and WEIR_REQUIRE_SERVICES=1");
        eprintln!("SKIPPED {test}: {what} ({hint})");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[test]
    fn a_condition_that_never_holds_times_out() {
        let checks = AtomicU32::new(0);
        let held = wait_for(Duration::from_millis(30), || {
            checks.fetch_add(1, Ordering::Relaxed);
            false
        });
        assert!(!held);
        assert!(checks.load(Ordering::Relaxed) >= 2);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_value_is_returned_once_it_is_there() {
        let mut n = 0;
        let got = wait_for_value(Duration::from_secs(5), "the third check", || {
            n += 1;
            let v = (n >= 3).then_some(n);
            async move { v }
        })
        .await;
        assert_eq!(got, 3);
        let mut m = 0;
        assert!(
            wait_for_async(Duration::from_secs(5), async || {
                m += 1;
                m > 1
            })
            .await
        );
    }
}
