//! What every [`SessionStore`] must do, as checks each backend's tests run
//! against a store of its own (feature `conformance`). Each check works in
//! sessions named after `run`, so checks may share one database.

use std::sync::Arc;

use super::{Owner, Quotas, SessionError, SessionStore, StateScope};

/// The quotas the store under test must be configured with.
pub const QUOTAS: Quotas = Quotas {
    max_keys: MAX_KEYS,
    max_bytes: MAX_BYTES,
};
const MAX_KEYS: usize = 3;
const MAX_BYTES: usize = 10;

fn scope(run: &str, tenant: &str, principal: &str, session: &str, component: &str) -> StateScope {
    StateScope {
        owner: Owner::new(Some(tenant), Some(principal)),
        session: format!("{run}-{session}"),
        component: Arc::from(component),
    }
}

/// Values round-trip and overwrite; no part of a scope can be left out or
/// swapped to reach another scope's value.
pub async fn isolation(store: &dyn SessionStore, run: &str) {
    let mine = scope(run, "t", "alice", "s1", "alias:calc");
    assert_eq!(store.get(&mine, "ans").await.unwrap(), None);
    store.set(&mine, "ans", r#"{"n":1}"#.into()).await.unwrap();
    store.set(&mine, "ans", "2".into()).await.unwrap();
    assert_eq!(store.get(&mine, "ans").await.unwrap().as_deref(), Some("2"));
    for other in [
        scope(run, "t", "alice", "s2", "alias:calc"),
        scope(run, "t", "alice", "s1", "alias:files"),
        scope(run, "t", "bob", "s1", "alias:calc"),
        scope(run, "u", "alice", "s1", "alias:calc"),
        scope(run, "", "", "s1", "alias:calc"),
        // Parts that run together must not meet.
        scope(run, "ta", "lice", "s1", "alias:calc"),
    ] {
        assert_eq!(store.get(&other, "ans").await.unwrap(), None, "{other:?}");
    }
    assert_eq!(store.get(&mine, "an").await.unwrap(), None);
}

/// Past the [`QUOTAS`] a scope refuses new
/// writes with the quota's error; replacing counts only the new value, and
/// other scopes have quotas of their own.
pub async fn quotas(store: &dyn SessionStore, run: &str) {
    let keys = scope(run, "t", "p", "keys", "c");
    for key in ["a", "b", "c"] {
        store.set(&keys, key, "1".into()).await.unwrap();
    }
    store.set(&keys, "a", "2".into()).await.unwrap();
    assert!(matches!(
        store.set(&keys, "d", "1".into()).await,
        Err(SessionError::TooManyKeys { max: MAX_KEYS })
    ));
    assert_eq!(store.get(&keys, "d").await.unwrap(), None);
    let other = scope(run, "t", "q", "keys", "c");
    store.set(&other, "d", "1".into()).await.unwrap();

    let bytes = scope(run, "t", "p", "bytes", "c");
    store.set(&bytes, "a", "123456".into()).await.unwrap();
    assert!(matches!(
        store.set(&bytes, "b", "12345".into()).await,
        Err(SessionError::TooManyBytes { max: MAX_BYTES })
    ));
    store.set(&bytes, "a", "1234567890".into()).await.unwrap();
    // Bytes, not characters: four 3-byte characters are 12 bytes.
    assert!(matches!(
        store.set(&bytes, "a", "€€€€".into()).await,
        Err(SessionError::TooManyBytes { .. })
    ));
}

/// Conversations round-trip per owner and session.
pub async fn history(store: &dyn SessionStore, run: &str) {
    let alice = Owner::new(Some("t"), Some("alice"));
    let session = format!("{run}-chat");
    assert_eq!(store.load_history(&alice, &session).await.unwrap(), None);
    store.save_history(&alice, &session, "[1]").await.unwrap();
    store.save_history(&alice, &session, "[1,2]").await.unwrap();
    assert_eq!(
        store
            .load_history(&alice, &session)
            .await
            .unwrap()
            .as_deref(),
        Some("[1,2]")
    );
    let bob = Owner::new(Some("t"), Some("bob"));
    assert_eq!(store.load_history(&bob, &session).await.unwrap(), None);
    store.check().await.unwrap();
}

/// Protocol-session records round-trip per owner and can be deleted.
pub async fn protocol_sessions(store: &dyn SessionStore, run: &str) {
    let alice = Owner::new(Some("t"), Some("alice"));
    let id = format!("{run}-mcp");
    assert_eq!(
        store.load_protocol_session(&alice, &id).await.unwrap(),
        None
    );
    store
        .save_protocol_session(&alice, &id, "{}")
        .await
        .unwrap();
    store
        .save_protocol_session(&alice, &id, "{\"v\":2}")
        .await
        .unwrap();
    assert_eq!(
        store
            .load_protocol_session(&alice, &id)
            .await
            .unwrap()
            .as_deref(),
        Some("{\"v\":2}")
    );
    let bob = Owner::new(Some("t"), Some("bob"));
    assert_eq!(store.load_protocol_session(&bob, &id).await.unwrap(), None);
    store.delete_protocol_session(&bob, &id).await.unwrap();
    assert!(
        store
            .load_protocol_session(&alice, &id)
            .await
            .unwrap()
            .is_some()
    );
    store.delete_protocol_session(&alice, &id).await.unwrap();
    assert_eq!(
        store.load_protocol_session(&alice, &id).await.unwrap(),
        None
    );
}

/// Concurrent writers of one scope never take it past its key quota.
pub async fn concurrent_quota(store: Arc<dyn SessionStore>, run: &str) {
    let shared = scope(run, "t", "p", "race", "c");
    let writers = (0..8).map(|i| {
        let (store, shared) = (store.clone(), shared.clone());
        tokio::spawn(async move { store.set(&shared, &format!("k{i}"), "1".into()).await })
    });
    let mut stored = 0;
    for writer in writers {
        match writer.await.unwrap() {
            Ok(()) => stored += 1,
            Err(SessionError::TooManyKeys { .. }) => {}
            Err(other) => panic!("unexpected error: {other}"),
        }
    }
    assert_eq!(stored, MAX_KEYS);
}
