//! Session state and conversations in memory, lost when the process ends.

mod exchange;

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::{Owner, Quotas, SessionError, SessionStore, StateScope, Usage, entry_size};

/// Session state and conversations in memory, lost when the process ends.
#[derive(Debug)]
pub struct InMemorySessionStore {
    quotas: Quotas,
    inner: Mutex<Inner>,
    exchange: Mutex<exchange::Exchange>,
}

/// Everything, under one lock.
#[derive(Debug)]
struct Inner {
    scopes: HashMap<StateScope, HashMap<String, String>>,
    histories: HashMap<(Owner, String), String>,
    protocol_sessions: HashMap<(Owner, String), (String, Instant)>,
    /// When each session's state or conversation was last written.
    written: HashMap<(Owner, String), Instant>,
    /// Bytes of keys and values by owner, and by tenant.
    owner_bytes: HashMap<Owner, usize>,
    tenant_bytes: HashMap<String, usize>,
    /// When idle sessions were last looked for (never: at the first write).
    last_collected: Option<Instant>,
}

impl Default for InMemorySessionStore {
    fn default() -> Self {
        Self {
            quotas: Quotas::default(),
            inner: Mutex::new(Inner {
                scopes: HashMap::new(),
                histories: HashMap::new(),
                protocol_sessions: HashMap::new(),
                written: HashMap::new(),
                owner_bytes: HashMap::new(),
                tenant_bytes: HashMap::new(),
                last_collected: None,
            }),
            exchange: Mutex::default(),
        }
    }
}

impl InMemorySessionStore {
    /// Holds state to `quotas` (default 1024 keys and 16 MiB per scope,
    /// 256 MiB per owner, 1 GiB per tenant, idle sessions kept 30 days).
    pub fn with_quotas(mut self, quotas: Quotas) -> Self {
        self.quotas = quotas;
        self
    }

    /// Takes the lock, collecting idle sessions first when it is time.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if inner
            .last_collected
            .is_none_or(|at| at.elapsed() >= self.quotas.collect_every())
        {
            inner.collect(self.quotas);
        }
        inner
    }
}

impl InMemorySessionStore {
    fn exchange(&self) -> MutexGuard<'_, exchange::Exchange> {
        self.exchange.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Inner {
    /// Forgets the sessions not written for `quotas.max_idle`.
    fn collect(&mut self, quotas: Quotas) {
        let now = Instant::now();
        self.last_collected = Some(now);
        let idle = |at: &Instant| now.duration_since(*at) >= quotas.max_idle;
        let gone: HashSet<(Owner, String)> = self
            .written
            .iter()
            .filter(|(_, at)| idle(at))
            .map(|(session, _)| session.clone())
            .collect();
        for session in &gone {
            self.written.remove(session);
            self.histories.remove(session);
        }
        let Inner {
            scopes,
            owner_bytes,
            tenant_bytes,
            ..
        } = self;
        scopes.retain(|scope, entries| {
            let key = (scope.owner.clone(), scope.session.clone());
            if !gone.contains(&key) {
                return true;
            }
            let size: usize = entries.iter().map(|(k, v)| entry_size(k, v)).sum();
            subtract(owner_bytes, &scope.owner, size);
            subtract(tenant_bytes, &scope.owner.tenant, size);
            false
        });
        self.protocol_sessions.retain(|_, (_, at)| !idle(at));
    }

    fn touch(&mut self, owner: &Owner, session: &str) {
        self.written
            .insert((owner.clone(), session.to_string()), Instant::now());
    }
}

fn subtract<K: std::hash::Hash + Eq + Clone>(totals: &mut HashMap<K, usize>, key: &K, size: usize) {
    if let Some(total) = totals.get_mut(key) {
        *total = total.saturating_sub(size);
        if *total == 0 {
            totals.remove(key);
        }
    }
}

#[async_trait::async_trait]
impl SessionStore for InMemorySessionStore {
    async fn get(&self, scope: &StateScope, key: &str) -> Result<Option<String>, SessionError> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(inner
            .scopes
            .get(scope)
            .and_then(|entries| entries.get(key))
            .cloned())
    }

    async fn set(&self, scope: &StateScope, key: &str, value: String) -> Result<(), SessionError> {
        let mut inner = self.lock();
        let inner = &mut *inner;
        let entries = inner.scopes.entry(scope.clone()).or_default();
        let old = entries.get(key).map(|v| entry_size(key, v)).unwrap_or(0);
        let owner = inner.owner_bytes.get(&scope.owner).copied().unwrap_or(0);
        let tenant = inner
            .tenant_bytes
            .get(&scope.owner.tenant)
            .copied()
            .unwrap_or(0);
        let usage = Usage {
            keys: entries.len(),
            exists: entries.contains_key(key),
            others: entries
                .iter()
                .filter(|(k, _)| k.as_str() != key)
                .map(|(_, v)| v.len())
                .sum(),
            owner: owner.saturating_sub(old),
            tenant: tenant.saturating_sub(old),
        };
        if let Err(refused) = self.quotas.admit(usage, key, &value) {
            if entries.is_empty() {
                inner.scopes.remove(scope);
            }
            return Err(refused);
        }
        let size = entry_size(key, &value);
        entries.insert(key.to_string(), value);
        inner
            .owner_bytes
            .insert(scope.owner.clone(), usage.owner + size);
        inner
            .tenant_bytes
            .insert(scope.owner.tenant.clone(), usage.tenant + size);
        inner.touch(&scope.owner, &scope.session);
        Ok(())
    }

    async fn load_history(
        &self,
        owner: &Owner,
        session: &str,
    ) -> Result<Option<String>, SessionError> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(inner
            .histories
            .get(&(owner.clone(), session.to_string()))
            .cloned())
    }

    async fn save_history(
        &self,
        owner: &Owner,
        session: &str,
        history_json: &str,
    ) -> Result<(), SessionError> {
        let mut inner = self.lock();
        inner.histories.insert(
            (owner.clone(), session.to_string()),
            history_json.to_string(),
        );
        inner.touch(owner, session);
        Ok(())
    }

    async fn save_protocol_session(
        &self,
        owner: &Owner,
        id: &str,
        record: &str,
    ) -> Result<(), SessionError> {
        let mut inner = self.lock();
        inner.protocol_sessions.insert(
            (owner.clone(), id.to_string()),
            (record.to_string(), Instant::now()),
        );
        Ok(())
    }

    async fn load_protocol_session(
        &self,
        owner: &Owner,
        id: &str,
    ) -> Result<Option<String>, SessionError> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(inner
            .protocol_sessions
            .get(&(owner.clone(), id.to_string()))
            .map(|(record, _)| record.clone()))
    }

    async fn delete_protocol_session(&self, owner: &Owner, id: &str) -> Result<(), SessionError> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner
            .protocol_sessions
            .remove(&(owner.clone(), id.to_string()));
        Ok(())
    }

    async fn use_once(&self, token: &str, ttl: Duration) -> Result<bool, SessionError> {
        Ok(self.exchange().use_once(token, ttl))
    }

    async fn open_mailbox(&self, address: &str, ttl: Duration) -> Result<(), SessionError> {
        self.exchange().open_mailbox(address, ttl);
        Ok(())
    }

    async fn deliver(&self, address: &str, message: &str) -> Result<bool, SessionError> {
        Ok(self.exchange().deliver(address, message))
    }

    async fn collect_mail(&self, address: &str) -> Result<Option<String>, SessionError> {
        Ok(self.exchange().collect_mail(address))
    }

    async fn mailboxes(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, Option<String>)>, SessionError> {
        Ok(self.exchange().mailboxes(prefix, limit))
    }

    async fn mailbox(&self, address: &str) -> Result<Option<Option<String>>, SessionError> {
        Ok(self.exchange().mailbox(address))
    }

    async fn close_mailbox(&self, address: &str) -> Result<(), SessionError> {
        self.exchange().close_mailbox(address);
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

    #[tokio::test]
    async fn does_what_every_store_does() {
        use crate::conformance;
        let store = InMemorySessionStore::default().with_quotas(conformance::QUOTAS);
        conformance::isolation(&store, "run").await;
        conformance::quotas(&store, "run").await;
        conformance::history(&store, "run").await;
        conformance::protocol_sessions(&store, "run").await;
        conformance::exchange(&store, "run").await;
        let store = InMemorySessionStore::default().with_quotas(conformance::TOTALS_QUOTAS);
        conformance::totals(&store, "run").await;
        let store = InMemorySessionStore::default().with_quotas(conformance::IDLE_QUOTAS);
        conformance::idle_sessions(&store, "run").await;
    }
}
