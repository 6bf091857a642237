//! Session state and conversations in memory, lost when the process ends.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use super::{Owner, Quotas, SessionError, SessionStore, StateScope};

/// Session state and conversations in memory, lost when the process ends.
#[derive(Debug, Default)]
pub struct InMemorySessionStore {
    quotas: Quotas,
    scopes: Mutex<HashMap<StateScope, HashMap<String, String>>>,
    histories: Mutex<HashMap<(Owner, String), String>>,
    protocol_sessions: Mutex<HashMap<(Owner, String), String>>,
}

impl InMemorySessionStore {
    /// Holds each scope to `quotas` (default 1024 keys, 16 MiB).
    pub fn with_quotas(mut self, quotas: Quotas) -> Self {
        self.quotas = quotas;
        self
    }
}

#[async_trait::async_trait]
impl SessionStore for InMemorySessionStore {
    async fn get(&self, scope: &StateScope, key: &str) -> Result<Option<String>, SessionError> {
        let scopes = self.scopes.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(scopes
            .get(scope)
            .and_then(|entries| entries.get(key))
            .cloned())
    }

    async fn set(&self, scope: &StateScope, key: &str, value: String) -> Result<(), SessionError> {
        let mut scopes = self.scopes.lock().unwrap_or_else(PoisonError::into_inner);
        let entries = scopes.entry(scope.clone()).or_default();
        let others: usize = entries
            .iter()
            .filter(|(k, _)| k.as_str() != key)
            .map(|(_, v)| v.len())
            .sum();
        let exists = entries.contains_key(key);
        self.quotas
            .admit(entries.len(), exists, others, value.len())?;
        entries.insert(key.to_string(), value);
        Ok(())
    }

    async fn load_history(
        &self,
        owner: &Owner,
        session: &str,
    ) -> Result<Option<String>, SessionError> {
        let histories = self
            .histories
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Ok(histories
            .get(&(owner.clone(), session.to_string()))
            .cloned())
    }

    async fn save_history(
        &self,
        owner: &Owner,
        session: &str,
        history_json: &str,
    ) -> Result<(), SessionError> {
        let mut histories = self
            .histories
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        histories.insert(
            (owner.clone(), session.to_string()),
            history_json.to_string(),
        );
        Ok(())
    }

    async fn save_protocol_session(
        &self,
        owner: &Owner,
        id: &str,
        record: &str,
    ) -> Result<(), SessionError> {
        let mut sessions = self
            .protocol_sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        sessions.insert((owner.clone(), id.to_string()), record.to_string());
        Ok(())
    }

    async fn load_protocol_session(
        &self,
        owner: &Owner,
        id: &str,
    ) -> Result<Option<String>, SessionError> {
        let sessions = self
            .protocol_sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Ok(sessions.get(&(owner.clone(), id.to_string())).cloned())
    }

    async fn delete_protocol_session(&self, owner: &Owner, id: &str) -> Result<(), SessionError> {
        let mut sessions = self
            .protocol_sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        sessions.remove(&(owner.clone(), id.to_string()));
        Ok(())
    }

    fn location(&self) -> String {
        "memory:".to_string()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn scope(tenant: &str, principal: &str, session: &str, component: &str) -> StateScope {
        StateScope {
            owner: Owner::new(Some(tenant), Some(principal)),
            session: session.to_string(),
            component: Arc::from(component),
        }
    }

    #[tokio::test]
    async fn scopes_do_not_leak() {
        let store = InMemorySessionStore::default();
        let mine = scope("t", "alice", "s1", "calc");
        store.set(&mine, "ans", "1".into()).await.unwrap();
        assert_eq!(store.get(&mine, "ans").await.unwrap().as_deref(), Some("1"));
        for other in [
            scope("t", "alice", "s2", "calc"),
            scope("t", "alice", "s1", "files"),
            scope("t", "bob", "s1", "calc"),
            scope("u", "alice", "s1", "calc"),
        ] {
            assert_eq!(store.get(&other, "ans").await.unwrap(), None, "{other:?}");
        }
    }

    #[tokio::test]
    async fn histories_are_per_owner() {
        let store = InMemorySessionStore::default();
        let alice = Owner::new(None, Some("alice"));
        store.save_history(&alice, "s", "[1]").await.unwrap();
        assert_eq!(
            store.load_history(&alice, "s").await.unwrap().as_deref(),
            Some("[1]")
        );
        let bob = Owner::new(None, Some("bob"));
        assert_eq!(store.load_history(&bob, "s").await.unwrap(), None);
    }

    #[tokio::test]
    async fn refuses_new_keys_past_the_limit() {
        let store = InMemorySessionStore::default().with_quotas(Quotas {
            max_keys: 1,
            ..Quotas::default()
        });
        let s = scope("", "", "s", "c");
        store.set(&s, "a", "1".into()).await.unwrap();
        store.set(&s, "a", "2".into()).await.unwrap();
        assert!(matches!(
            store.set(&s, "b", "1".into()).await,
            Err(SessionError::TooManyKeys { max: 1 })
        ));
    }

    #[tokio::test]
    async fn refuses_values_past_the_byte_quota() {
        let store = InMemorySessionStore::default().with_quotas(Quotas {
            max_bytes: 10,
            ..Quotas::default()
        });
        let s = scope("", "", "s", "c");
        store.set(&s, "a", "123456".into()).await.unwrap();
        assert!(matches!(
            store.set(&s, "b", "12345".into()).await,
            Err(SessionError::TooManyBytes { max: 10 })
        ));
        // Replacing a value counts only the new one.
        store.set(&s, "a", "1234567890".into()).await.unwrap();
        store
            .set(&scope("", "", "s", "d"), "b", "12345".into())
            .await
            .unwrap();
    }
}
