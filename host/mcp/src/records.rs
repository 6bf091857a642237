//! The records that let any replica serve an HTTP session another opened:
//! kept in the host's session store under the session's owner, so a session
//! id alone finds nothing.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use wasm_agent_sandbox::host::ToolHost;
use wasm_agent_session::{Owner, SessionError, SessionStore};

use super::identity::Identity;

/// A session older than this is not taken up by another replica.
pub(crate) const MAX_SESSION_AGE: Duration = Duration::from_secs(24 * 3600);

/// The shared records of one server's sessions.
pub(crate) struct Records {
    store: Arc<dyn SessionStore>,
}

impl Records {
    pub fn new(host: &ToolHost) -> Self {
        Self {
            store: host.session_store().clone(),
        }
    }

    /// Records session `id` of `identity`, opened with `initialize` params.
    pub async fn opened(
        &self,
        identity: &Identity,
        id: &str,
        initialize: &str,
    ) -> Result<(), SessionError> {
        let initialize: Value = serde_json::from_str(initialize).unwrap_or(Value::Null);
        let record = json!({"opened": unix_now(), "initialize": initialize});
        self.store
            .save_protocol_session(&owner(identity), id, &record.to_string())
            .await
    }

    /// The `initialize` parameters of session `id`, if `identity` opened it
    /// (on any replica) within [`MAX_SESSION_AGE`].
    pub async fn opened_by(&self, identity: &Identity, id: &str) -> Option<Value> {
        if !is_session_id(id) {
            return None;
        }
        let record = match self.store.load_protocol_session(&owner(identity), id).await {
            Ok(record) => record?,
            Err(error) => {
                tracing::warn!(%error, "cannot look up an MCP session in the session store");
                return None;
            }
        };
        let mut record = serde_json::from_str::<Value>(&record).ok()?;
        let opened = record["opened"].as_u64()?;
        (unix_now().saturating_sub(opened) <= MAX_SESSION_AGE.as_secs())
            .then(|| record["initialize"].take())
    }

    /// Forgets session `id` (the client ended it).
    pub async fn ended(&self, identity: &Identity, id: &str) {
        if let Err(error) = self
            .store
            .delete_protocol_session(&owner(identity), id)
            .await
        {
            tracing::warn!(%error, "cannot forget an ended MCP session");
        }
    }
}

/// The store's owner for a request's identity.
pub(crate) fn owner(identity: &Identity) -> Owner {
    Owner::new(identity.tenant.as_deref(), identity.principal.as_deref())
}

/// Ids this server mints: 32 lowercase hex digits.
fn is_session_id(id: &str) -> bool {
    id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
