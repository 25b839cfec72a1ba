//! Jet's `ServiceFactory`: one shared client per process, used by every processor instance.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use weir_core::BoxError;

use super::{AsyncError, runtime};

type Create<S> = Arc<dyn Fn() -> Result<S, BoxError> + Send + Sync>;

/// Builds a service (an HTTP client with its connection pool, a database pool) once per
/// process and shares it with every processor instance of every stage given this factory
/// (or a clone of it).
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// use weir::async_io::ServiceFactory;
///
/// static CREATED: AtomicUsize = AtomicUsize::new(0);
/// let factory = ServiceFactory::new(|| {
///     CREATED.fetch_add(1, Ordering::Relaxed);
///     Ok::<_, std::io::Error>(String::from("a pooled client"))
/// });
/// let a = factory.get().unwrap();
/// let b = factory.clone().get().unwrap();
/// assert!(Arc::ptr_eq(&a, &b));
/// assert_eq!(CREATED.load(Ordering::Relaxed), 1);
/// ```
///
/// The service is created on the first [`get`](Self::get), which the async stages call in
/// their processors' `init`, so a failure refuses the job before it starts. Creation runs
/// inside the shared runtime's context (see [`runtime`]), so clients that register with a
/// tokio reactor can be built there. A failed creation is not remembered: the next `get`
/// tries again.
///
/// Cost: after creation, `get` is one atomic load and one reference-count increment.
pub struct ServiceFactory<S> {
    create: Create<S>,
    service: Arc<OnceLock<Arc<S>>>,
    creating: Arc<Mutex<()>>,
}

impl<S> Clone for ServiceFactory<S> {
    fn clone(&self) -> Self {
        ServiceFactory {
            create: Arc::clone(&self.create),
            service: Arc::clone(&self.service),
            creating: Arc::clone(&self.creating),
        }
    }
}

impl<S> fmt::Debug for ServiceFactory<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceFactory")
            .field("created", &self.service.get().is_some())
            .finish()
    }
}

impl<S: Send + Sync + 'static> ServiceFactory<S> {
    /// A factory that builds the service with `create`, at most once successfully.
    pub fn new<E: Into<BoxError>>(
        create: impl Fn() -> Result<S, E> + Send + Sync + 'static,
    ) -> Self {
        ServiceFactory {
            create: Arc::new(move || create().map_err(Into::into)),
            service: Arc::new(OnceLock::new()),
            creating: Arc::new(Mutex::new(())),
        }
    }

    /// The shared service, created now if this is the first call.
    ///
    /// # Errors
    /// [`AsyncError::Service`] when `create` fails, [`AsyncError::Runtime`] when the shared
    /// runtime cannot start.
    pub fn get(&self) -> Result<Arc<S>, AsyncError> {
        if let Some(s) = self.service.get() {
            return Ok(Arc::clone(s));
        }
        let _one_at_a_time = self.creating.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = self.service.get() {
            return Ok(Arc::clone(s));
        }
        let _context = runtime()?.enter();
        let service = Arc::new((self.create)().map_err(|source| AsyncError::Service { source })?);
        Ok(Arc::clone(self.service.get_or_init(|| service)))
    }

    /// Whether the service has been created.
    pub fn is_created(&self) -> bool {
        self.service.get().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_creation_is_retried() {
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let c = Arc::clone(&calls);
        let f = ServiceFactory::new(move || {
            let n = c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if n == 0 { Err("not yet") } else { Ok(n) }
        });
        let e = f.get().unwrap_err();
        assert!(e.to_string().contains("not yet"), "{e}");
        assert!(!f.is_created());
        assert_eq!(*f.get().unwrap(), 1);
        assert_eq!(*f.get().unwrap(), 1);
        assert!(f.is_created());
    }
}
