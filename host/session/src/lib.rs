//! Session state that tools keep between calls, scoped to (session, component).

#![warn(missing_docs)]

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// Why a state write was refused.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The scope holds too many keys.
    #[error("session state is full ({max} keys per tool and session)")]
    TooManyKeys {
        /// The limit.
        max: usize,
    },
    /// The scope's values would take more bytes than allowed.
    #[error("session state is full ({max} bytes of values per tool and session)")]
    TooManyBytes {
        /// The limit.
        max: usize,
    },
    /// The backing store failed.
    #[error("session store failed: {location}: {what}: {source}")]
    Backend {
        /// The store (a file path, a URL without credentials).
        location: String,
        /// What the store was doing.
        what: String,
        /// Why it failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl SessionError {
    /// A failure of the backing store at `location` while doing `what`.
    pub fn backend(
        location: impl Into<String>,
        what: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        SessionError::Backend {
            location: location.into(),
            what: what.into(),
            source: source.into(),
        }
    }
}

/// Keys one tool may keep in one session, by default.
pub const DEFAULT_MAX_KEYS: usize = 1024;
/// Bytes of values one tool may keep in one session, by default.
pub const DEFAULT_MAX_BYTES: usize = 16 * 1024 * 1024;

/// Where session state lives. Values are JSON text.
///
/// `scope` is the component the state belongs to: tools never see the state of
/// another component, even in the same session. The quotas (keys per scope,
/// bytes per scope, see [`within_bytes`]) are part of the contract: every
/// backend refuses past them with the same errors. Backends that block (a
/// file, a network) do so on the blocking pool, never on an async worker.
#[async_trait::async_trait]
pub trait SessionStore: Send + Sync + 'static {
    /// Reads one value.
    async fn get(&self, session_id: &str, scope: &str, key: &str) -> Option<String>;
    /// Writes one value; it is stored when this returns `Ok`. A write handed
    /// to a backend completes even if the caller stops waiting for it.
    async fn set(
        &self,
        session_id: &str,
        scope: &str,
        key: &str,
        value: String,
    ) -> Result<(), SessionError>;
}

/// Refuses a value that would take a scope past `max` bytes, counting the
/// `others` bytes its other keys hold (the same rule in every store).
pub fn within_bytes(max: usize, others: usize, value: usize) -> Result<(), SessionError> {
    if others.saturating_add(value) > max {
        return Err(SessionError::TooManyBytes { max });
    }
    Ok(())
}

/// Session state in memory, lost when the process ends.
#[derive(Debug)]
pub struct InMemorySessionStore {
    max_keys: usize,
    max_bytes: usize,
    scopes: Mutex<HashMap<(String, String), HashMap<String, String>>>,
}

impl Default for InMemorySessionStore {
    fn default() -> Self {
        Self {
            max_keys: DEFAULT_MAX_KEYS,
            max_bytes: DEFAULT_MAX_BYTES,
            scopes: Mutex::default(),
        }
    }
}

#[async_trait::async_trait]
impl SessionStore for InMemorySessionStore {
    async fn get(&self, session_id: &str, scope: &str, key: &str) -> Option<String> {
        let scopes = self.scopes.lock().unwrap_or_else(PoisonError::into_inner);
        scopes
            .get(&(session_id.to_string(), scope.to_string()))?
            .get(key)
            .cloned()
    }

    async fn set(
        &self,
        session_id: &str,
        scope: &str,
        key: &str,
        value: String,
    ) -> Result<(), SessionError> {
        let mut scopes = self.scopes.lock().unwrap_or_else(PoisonError::into_inner);
        let entries = scopes
            .entry((session_id.to_string(), scope.to_string()))
            .or_default();
        if entries.len() >= self.max_keys && !entries.contains_key(key) {
            return Err(SessionError::TooManyKeys { max: self.max_keys });
        }
        let others: usize = entries
            .iter()
            .filter(|(k, _)| k.as_str() != key)
            .map(|(_, v)| v.len())
            .sum();
        within_bytes(self.max_bytes, others, value.len())?;
        entries.insert(key.to_string(), value);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn scopes_do_not_leak() {
        let store = InMemorySessionStore::default();
        store.set("s1", "calc", "ans", "1".into()).await.unwrap();
        assert_eq!(store.get("s1", "calc", "ans").await.as_deref(), Some("1"));
        assert_eq!(store.get("s2", "calc", "ans").await, None);
        assert_eq!(store.get("s1", "files", "ans").await, None);
    }

    #[tokio::test]
    async fn refuses_new_keys_past_the_limit() {
        let store = InMemorySessionStore {
            max_keys: 1,
            ..Default::default()
        };
        store.set("s", "c", "a", "1".into()).await.unwrap();
        store.set("s", "c", "a", "2".into()).await.unwrap();
        assert!(matches!(
            store.set("s", "c", "b", "1".into()).await,
            Err(SessionError::TooManyKeys { max: 1 })
        ));
    }

    #[tokio::test]
    async fn refuses_values_past_the_byte_quota() {
        let store = InMemorySessionStore {
            max_bytes: 10,
            ..Default::default()
        };
        store.set("s", "c", "a", "123456".into()).await.unwrap();
        assert!(matches!(
            store.set("s", "c", "b", "12345".into()).await,
            Err(SessionError::TooManyBytes { max: 10 })
        ));
        // Replacing a value counts only the new one.
        store.set("s", "c", "a", "1234567890".into()).await.unwrap();
        store.set("s", "d", "b", "12345".into()).await.unwrap();
    }
}
