//! `host.get-state` / `host.set-state`: the tool's state in the session
//! store, scoped to (session, component), keys and values bounded.

use std::sync::Arc;

use wasm_agent_session::SessionStore;

/// Largest session-state key and value.
const MAX_STATE_KEY: usize = 256;
const MAX_STATE_VALUE: usize = 1024 * 1024;

/// One call's view of the session store.
pub struct SessionState {
    store: Arc<dyn SessionStore>,
    session_id: String,
    /// The component's identity (`alias:NAME` or `sha256:HEX`).
    scope: Arc<str>,
}

impl SessionState {
    /// The state of component `scope` in session `session_id`.
    pub fn new(store: Arc<dyn SessionStore>, session_id: String, scope: Arc<str>) -> Self {
        Self {
            store,
            session_id,
            scope,
        }
    }

    /// Reads one value (none for a key no write could have made).
    pub async fn get(&self, key: &str) -> Option<String> {
        if key.is_empty() || key.len() > MAX_STATE_KEY {
            return None;
        }
        self.store.get(&self.session_id, &self.scope, key).await
    }

    /// Writes one value: a key of 1-256 bytes, JSON text of at most 1 MiB,
    /// within the store's quotas.
    pub async fn set(&self, key: String, value: String) -> wasmtime::Result<()> {
        if key.is_empty() || key.len() > MAX_STATE_KEY {
            wasmtime::bail!("set-state: keys must be 1-{MAX_STATE_KEY} bytes");
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
        self.store
            .set(&self.session_id, &self.scope, &key, value)
            .await
            .map_err(|e| wasmtime::format_err!("set-state: {e}"))
    }
}
