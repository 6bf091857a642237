//! Session state that tools keep between calls, scoped to (session, component).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// Why a state write was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
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
    #[error("session store failed: {0}")]
    Backend(String),
}

/// Keys one tool may keep in one session, by default.
pub const DEFAULT_MAX_KEYS: usize = 1024;
/// Bytes of values one tool may keep in one session, by default.
pub const DEFAULT_MAX_BYTES: usize = 16 * 1024 * 1024;

/// Where session state lives. Values are JSON text.
///
/// `scope` is the component the state belongs to: tools never see the state of
/// another component, even in the same session.
pub trait SessionStore: Send + Sync + 'static {
    /// Reads one value.
    fn get(&self, session_id: &str, scope: &str, key: &str) -> Option<String>;
    /// Writes one value.
    fn set(
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

impl SessionStore for InMemorySessionStore {
    fn get(&self, session_id: &str, scope: &str, key: &str) -> Option<String> {
        let scopes = self.scopes.lock().unwrap_or_else(PoisonError::into_inner);
        scopes
            .get(&(session_id.to_string(), scope.to_string()))?
            .get(key)
            .cloned()
    }

    fn set(
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

    #[test]
    fn scopes_do_not_leak() {
        let store = InMemorySessionStore::default();
        store.set("s1", "calc", "ans", "1".into()).unwrap();
        assert_eq!(store.get("s1", "calc", "ans").as_deref(), Some("1"));
        assert_eq!(store.get("s2", "calc", "ans"), None);
        assert_eq!(store.get("s1", "files", "ans"), None);
    }

    #[test]
    fn refuses_new_keys_past_the_limit() {
        let store = InMemorySessionStore {
            max_keys: 1,
            ..Default::default()
        };
        store.set("s", "c", "a", "1".into()).unwrap();
        store.set("s", "c", "a", "2".into()).unwrap();
        assert_eq!(
            store.set("s", "c", "b", "1".into()),
            Err(SessionError::TooManyKeys { max: 1 })
        );
    }

    #[test]
    fn refuses_values_past_the_byte_quota() {
        let store = InMemorySessionStore {
            max_bytes: 10,
            ..Default::default()
        };
        store.set("s", "c", "a", "123456".into()).unwrap();
        assert_eq!(
            store.set("s", "c", "b", "12345".into()),
            Err(SessionError::TooManyBytes { max: 10 })
        );
        // Replacing a value counts only the new one.
        store.set("s", "c", "a", "1234567890".into()).unwrap();
        store.set("s", "d", "b", "12345".into()).unwrap();
    }
}
