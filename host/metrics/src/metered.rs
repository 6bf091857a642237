//! A session store and a result cache that time every operation and count
//! failures, around any other.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasm_agent_cache::{CacheError, CacheKey, ResultCache};
use wasm_agent_session::{Owner, SessionError, SessionStore, StateScope};

use super::Metrics;

/// A [`SessionStore`] whose operations are timed and whose failures are
/// counted in [`Metrics`]; quota refusals are answers, not failures.
pub struct MeteredStore {
    inner: Arc<dyn SessionStore>,
    metrics: Arc<Metrics>,
}

impl MeteredStore {
    /// `inner`, metered into `metrics`.
    pub fn around(inner: Arc<dyn SessionStore>, metrics: Arc<Metrics>) -> Arc<dyn SessionStore> {
        Arc::new(Self { inner, metrics })
    }

    fn note<T>(&self, operation: &'static str, started: Instant, result: &Result<T, SessionError>) {
        let failed = matches!(result, Err(SessionError::Backend { .. }));
        self.metrics
            .store_operation(operation, started.elapsed(), failed);
    }
}

/// Runs `$call` on the inner store, noting it as `$operation`.
macro_rules! metered {
    ($self:ident, $operation:literal, $call:expr) => {{
        let started = Instant::now();
        let result = $call.await;
        $self.note($operation, started, &result);
        result
    }};
}

#[async_trait::async_trait]
impl SessionStore for MeteredStore {
    async fn get(&self, scope: &StateScope, key: &str) -> Result<Option<String>, SessionError> {
        metered!(self, "get", self.inner.get(scope, key))
    }

    async fn set(&self, scope: &StateScope, key: &str, value: String) -> Result<(), SessionError> {
        metered!(self, "set", self.inner.set(scope, key, value))
    }

    async fn load_history(
        &self,
        owner: &Owner,
        session: &str,
    ) -> Result<Option<String>, SessionError> {
        metered!(
            self,
            "load_history",
            self.inner.load_history(owner, session)
        )
    }

    async fn save_history(
        &self,
        owner: &Owner,
        session: &str,
        history: &str,
    ) -> Result<(), SessionError> {
        metered!(
            self,
            "save_history",
            self.inner.save_history(owner, session, history)
        )
    }

    async fn save_protocol_session(
        &self,
        owner: &Owner,
        id: &str,
        record: &str,
    ) -> Result<(), SessionError> {
        metered!(
            self,
            "save_protocol_session",
            self.inner.save_protocol_session(owner, id, record)
        )
    }

    async fn load_protocol_session(
        &self,
        owner: &Owner,
        id: &str,
    ) -> Result<Option<String>, SessionError> {
        metered!(
            self,
            "load_protocol_session",
            self.inner.load_protocol_session(owner, id)
        )
    }

    async fn delete_protocol_session(&self, owner: &Owner, id: &str) -> Result<(), SessionError> {
        metered!(
            self,
            "delete_protocol_session",
            self.inner.delete_protocol_session(owner, id)
        )
    }

    async fn check(&self) -> Result<(), SessionError> {
        metered!(self, "check", self.inner.check())
    }

    async fn use_once(&self, token: &str, ttl: Duration) -> Result<bool, SessionError> {
        metered!(self, "use_once", self.inner.use_once(token, ttl))
    }

    async fn open_mailbox(&self, address: &str, ttl: Duration) -> Result<(), SessionError> {
        metered!(self, "open_mailbox", self.inner.open_mailbox(address, ttl))
    }

    async fn deliver(&self, address: &str, message: &str) -> Result<bool, SessionError> {
        metered!(self, "deliver", self.inner.deliver(address, message))
    }

    async fn collect_mail(&self, address: &str) -> Result<Option<String>, SessionError> {
        metered!(self, "collect_mail", self.inner.collect_mail(address))
    }

    async fn mailboxes(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, Option<String>)>, SessionError> {
        metered!(self, "mailboxes", self.inner.mailboxes(prefix, limit))
    }

    async fn mailbox(&self, address: &str) -> Result<Option<Option<String>>, SessionError> {
        metered!(self, "mailbox", self.inner.mailbox(address))
    }

    async fn close_mailbox(&self, address: &str) -> Result<(), SessionError> {
        metered!(self, "close_mailbox", self.inner.close_mailbox(address))
    }

    fn location(&self) -> String {
        self.inner.location()
    }
}

/// A [`ResultCache`] whose operations are timed and whose failures are
/// counted in [`Metrics`]; a value too large to keep is not a failure.
pub struct MeteredCache {
    inner: Arc<dyn ResultCache>,
    metrics: Arc<Metrics>,
}

impl MeteredCache {
    /// `inner`, metered into `metrics`.
    pub fn around(inner: Arc<dyn ResultCache>, metrics: Arc<Metrics>) -> Arc<dyn ResultCache> {
        Arc::new(Self { inner, metrics })
    }

    fn note<T>(&self, operation: &'static str, started: Instant, result: &Result<T, CacheError>) {
        let failed = matches!(result, Err(e) if !matches!(e, CacheError::TooLarge { .. }));
        self.metrics
            .cache_operation(operation, started.elapsed(), failed);
    }
}

#[async_trait::async_trait]
impl ResultCache for MeteredCache {
    async fn get(&self, key: &CacheKey) -> Result<Option<Vec<u8>>, CacheError> {
        metered!(self, "get", self.inner.get(key))
    }

    async fn put(&self, key: &CacheKey, value: &[u8], ttl: Duration) -> Result<(), CacheError> {
        metered!(self, "put", self.inner.put(key, value, ttl))
    }

    async fn clear(&self) -> Result<(), CacheError> {
        metered!(self, "clear", self.inner.clear())
    }

    fn location(&self) -> String {
        self.inner.location()
    }
}
