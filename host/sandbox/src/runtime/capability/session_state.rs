//! `host.get-state` / `host.set-state`: the tool's state in the session
//! store, scoped to (owner, session, component), keys and values bounded,
//! each operation bounded by the call's deadline.

use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;
use wasm_agent_session::{SessionError, SessionStore, StateScope};

use crate::runtime::classify::Interrupted;
use crate::runtime::deadline::CallDeadline;

/// Largest session-state key and value.
const MAX_STATE_KEY: usize = 256;
const MAX_STATE_VALUE: usize = 1024 * 1024;

/// How long before the call's deadline a store operation gives up, so the
/// call ends with `store_unavailable` (what happened) rather than `timeout`.
const DEADLINE_MARGIN: Duration = Duration::from_millis(100);
/// A store that had this long and did not answer is slow or unreachable;
/// one cut shorter by the call's own deadline was not given its chance, and
/// the call ends with `timeout`.
const STORE_PATIENCE: Duration = Duration::from_secs(1);

/// The session store failed or did not answer in time; the call ends with
/// `store_unavailable`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StoreFailed(pub SessionError);

/// The store refused a write past one of its quotas: the call ends as
/// `capability_denied`, naming the quota.
#[derive(Debug, thiserror::Error)]
#[error("set-state: {0}")]
pub struct StateFull(pub SessionError);

/// One call's view of the session store.
pub struct SessionState {
    store: Arc<dyn SessionStore>,
    scope: StateScope,
    /// When the call's own deadline passes.
    deadline: CallDeadline,
}

impl SessionState {
    /// The state `scope` names, for a call that must end by `deadline`.
    pub fn new(store: Arc<dyn SessionStore>, scope: StateScope, deadline: CallDeadline) -> Self {
        Self {
            store,
            scope,
            deadline,
        }
    }

    /// Reads one value (none for a key no write could have made).
    pub async fn get(&self, key: &str) -> wasmtime::Result<Option<String>> {
        if !valid_key(key) {
            return Ok(None);
        }
        traced("get", self.bounded(self.store.get(&self.scope, key))).await
    }

    /// Writes one value: a key of 1-256 bytes without NUL, JSON text of at
    /// most 1 MiB, within the store's quotas.
    pub async fn set(&self, key: String, value: String) -> wasmtime::Result<()> {
        if !valid_key(&key) {
            wasmtime::bail!("set-state: keys must be 1-{MAX_STATE_KEY} bytes, without NUL");
        }
        if value.len() > MAX_STATE_VALUE {
            wasmtime::bail!(
                "set-state: the value of {key:?} is {} bytes, more than the {MAX_STATE_VALUE} allowed",
                value.len()
            );
        }
        if serde_json::from_str::<serde::de::IgnoredAny>(&value).is_err() {
            wasmtime::bail!("set-state: the value of {key:?} is not JSON text");
        }
        traced(
            "set",
            self.bounded(self.store.set(&self.scope, &key, value)),
        )
        .await
    }

    /// Bounds its operations by `deadline` instead.
    pub fn set_deadline(&mut self, deadline: CallDeadline) {
        self.deadline = deadline;
    }

    /// Runs a store operation until shortly before the call's deadline.
    async fn bounded<T>(
        &self,
        operation: impl Future<Output = Result<T, SessionError>>,
    ) -> wasmtime::Result<T> {
        let deadline = self.deadline.instant();
        let until = deadline.checked_sub(DEADLINE_MARGIN).unwrap_or(deadline);
        let given = until.saturating_duration_since(std::time::Instant::now());
        match tokio::time::timeout_at(until.into(), operation).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) if error.is_unavailable() => Err(StoreFailed(error).into()),
            Ok(Err(refused)) => Err(StateFull(refused).into()),
            // The call's time ran out, not the store's.
            Err(_) if given < STORE_PATIENCE => Err(Interrupted::Deadline.into()),
            Err(_) => Err(StoreFailed(SessionError::backend(
                self.store.location(),
                format!("no answer in {:.1} s", given.as_secs_f64()),
                "the store is slow or unreachable",
            ))
            .into()),
        }
    }
}

/// Runs a store operation in a span of its own, failed when it fails.
async fn traced<T>(
    operation: &'static str,
    work: impl Future<Output = wasmtime::Result<T>>,
) -> wasmtime::Result<T> {
    let span = crate::spans::state(operation);
    let result = work.instrument(span.clone()).await;
    if let Err(error) = &result {
        crate::spans::failed(&span, "state", &error.to_string());
    }
    result
}

fn valid_key(key: &str) -> bool {
    !key.is_empty() && key.len() <= MAX_STATE_KEY && !key.contains('\0')
}
