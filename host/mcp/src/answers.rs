//! "Allow for this session" answers kept in the shared session store, under
//! the session's owner, so that every replica serving the session knows
//! them: a call of that session on another replica is not asked again.

use std::sync::Arc;

use wasm_agent_sandbox::ask::SharedAnswers;
use wasm_agent_session::{SessionStore, StateScope};

use super::identity::Identity;
use super::records::owner;

/// The state scope's component name: never a component's (`alias:` or
/// `sha256:`), so no tool reads or writes it.
const ANSWERS: &str = "io.wasm-agent/answers";

/// One session's answers in the store.
pub(crate) struct StoredAnswers {
    store: Arc<dyn SessionStore>,
    scope: StateScope,
}

impl StoredAnswers {
    /// The answers of tool session `session` of `identity`.
    pub fn new(store: Arc<dyn SessionStore>, identity: &Identity, session: &str) -> Arc<Self> {
        Arc::new(Self {
            store,
            scope: StateScope {
                owner: owner(identity),
                session: session.to_string(),
                component: Arc::from(ANSWERS),
            },
        })
    }
}

#[async_trait::async_trait]
impl SharedAnswers for StoredAnswers {
    async fn is_allowed(&self, key: &str) -> bool {
        matches!(self.store.get(&self.scope, key).await, Ok(Some(value)) if value == "true")
    }

    async fn allow(&self, key: &str) {
        if let Err(error) = self.store.set(&self.scope, key, "true".into()).await {
            tracing::warn!(%error, "cannot keep an answer for the session: other replicas ask again");
        }
    }
}
