//! What every [`SessionStore`] must do, as checks each backend's tests run
//! against a store of its own (feature `conformance`). Each check works in
//! sessions named after `run`, so checks may share one database.

use std::sync::Arc;
use std::time::Duration;

use super::{
    DEFAULT_MAX_IDLE, DEFAULT_MAX_OWNER_BYTES, DEFAULT_MAX_TENANT_BYTES, Owner, Quotas,
    SessionError, SessionStore, StateScope,
};

/// The quotas the store under test must be configured with.
pub const QUOTAS: Quotas = Quotas {
    max_keys: MAX_KEYS,
    max_bytes: MAX_BYTES,
    max_owner_bytes: DEFAULT_MAX_OWNER_BYTES,
    max_tenant_bytes: DEFAULT_MAX_TENANT_BYTES,
    max_idle: DEFAULT_MAX_IDLE,
};

/// The quotas of the store [`totals`] runs against.
pub const TOTALS_QUOTAS: Quotas = Quotas {
    max_keys: 1024,
    max_bytes: 1024,
    max_owner_bytes: 280,
    max_tenant_bytes: 420,
    max_idle: DEFAULT_MAX_IDLE,
};

/// The quotas of the store [`idle_sessions`] runs against: a session idle
/// for a second is collected.
pub const IDLE_QUOTAS: Quotas = Quotas {
    max_idle: Duration::from_secs(1),
    ..TOTALS_QUOTAS
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

/// A token is used once until its mark expires; a mailbox takes one message
/// while open, hands it over once, and takes none once closed, expired, or
/// never opened.
pub async fn exchange(store: &dyn SessionStore, run: &str) {
    let token = format!("{run}-token");
    let long = Duration::from_secs(60);
    assert!(store.use_once(&token, long).await.unwrap());
    assert!(!store.use_once(&token, long).await.unwrap());
    let brief = format!("{run}-brief");
    assert!(
        store
            .use_once(&brief, Duration::from_millis(300))
            .await
            .unwrap()
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(
        store.use_once(&brief, long).await.unwrap(),
        "an expired mark"
    );

    let address = format!("{run}-box");
    assert!(!store.deliver(&address, "early").await.unwrap(), "not open");
    store.open_mailbox(&address, long).await.unwrap();
    assert_eq!(store.collect_mail(&address).await.unwrap(), None);
    assert!(store.deliver(&address, "first").await.unwrap());
    assert!(
        !store.deliver(&address, "second").await.unwrap(),
        "one message"
    );
    assert_eq!(
        store.collect_mail(&address).await.unwrap().as_deref(),
        Some("first")
    );
    assert_eq!(store.collect_mail(&address).await.unwrap(), None);
    assert!(!store.deliver(&address, "late").await.unwrap(), "closed");

    let closed = format!("{run}-closed");
    store.open_mailbox(&closed, long).await.unwrap();
    store.close_mailbox(&closed).await.unwrap();
    assert!(!store.deliver(&closed, "x").await.unwrap());
    let expired = format!("{run}-expired");
    store
        .open_mailbox(&expired, Duration::from_millis(300))
        .await
        .unwrap();
    // Listed by prefix while open and unexpired, with a message once one came.
    let listed = format!("{run}-listed:");
    for (name, ttl) in [
        ("b", long),
        ("a", long),
        ("gone", Duration::from_millis(300)),
    ] {
        store
            .open_mailbox(&format!("{listed}{name}"), ttl)
            .await
            .unwrap();
    }
    assert!(store.deliver(&format!("{listed}b"), "held").await.unwrap());
    store
        .open_mailbox(&format!("{run}-other:a"), long)
        .await
        .unwrap();
    // Read exactly, not collected: a longer address that begins with it
    // is another mailbox.
    let read = format!("{listed}b");
    assert_eq!(
        store.mailbox(&read).await.unwrap(),
        Some(Some("held".to_string()))
    );
    assert_eq!(
        store.mailbox(&format!("{listed}a")).await.unwrap(),
        Some(None)
    );
    assert_eq!(store.mailbox(&listed).await.unwrap(), None, "a prefix");
    assert_eq!(store.mailbox(&closed).await.unwrap(), None, "closed");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(!store.deliver(&expired, "x").await.unwrap());
    assert_eq!(store.mailbox(&expired).await.unwrap(), None, "expired");
    assert_eq!(
        store.mailbox(&read).await.unwrap(),
        Some(Some("held".to_string()))
    );
    assert_eq!(
        store.mailboxes(&listed, 10).await.unwrap(),
        [
            (format!("{listed}a"), None),
            (format!("{listed}b"), Some("held".to_string()))
        ]
    );
    assert_eq!(store.mailboxes(&listed, 1).await.unwrap().len(), 1);
    store.close_mailbox(&format!("{listed}a")).await.unwrap();
    assert_eq!(store.mailboxes(&listed, 10).await.unwrap().len(), 1);
    // A prefix is matched as text: `%` and `_` are not wildcards.
    assert!(
        store
            .mailboxes(&format!("{run}-%"), 10)
            .await
            .unwrap()
            .is_empty()
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

/// Past [`TOTALS_QUOTAS`] an owner (in all its sessions and tools) and a
/// tenant (all its owners together) refuse new state; replacing a value
/// counts only the difference, and other owners and tenants are unaffected.
pub async fn totals(store: &dyn SessionStore, run: &str) {
    let tenant = format!("{run}-acme");
    let at = |principal: &str, session: &str, component: &str| {
        scope(run, &tenant, principal, session, component)
    };
    // Entries count their key, value and overhead: 1 + 4 + 64 = 69 bytes.
    store
        .set(&at("ann", "s1", "c"), "k", "1234".into())
        .await
        .unwrap();
    store
        .set(&at("ann", "s2", "c"), "k", "1234".into())
        .await
        .unwrap();
    store
        .set(&at("ann", "s1", "d"), "k", "1234".into())
        .await
        .unwrap();
    store
        .set(&at("ann", "s3", "c"), "k", "1234".into())
        .await
        .unwrap();
    assert!(matches!(
        store.set(&at("ann", "s4", "c"), "k", "1".into()).await,
        Err(SessionError::OwnerFull { max: 280 })
    ));
    // Replacing a value with one of the same size fits.
    store
        .set(&at("ann", "s1", "c"), "k", "abcd".into())
        .await
        .unwrap();
    // Another principal of the tenant: up to the tenant's 420 bytes.
    store
        .set(&at("bob", "s1", "c"), "k", "1234".into())
        .await
        .unwrap();
    store
        .set(&at("bob", "s2", "c"), "k", "1234".into())
        .await
        .unwrap();
    assert!(matches!(
        store.set(&at("bob", "s3", "c"), "k", "1".into()).await,
        Err(SessionError::TenantFull { max: 420 })
    ));
    // Another tenant has room of its own.
    let other = scope(run, &format!("{run}-globex"), "ann", "s1", "c");
    store.set(&other, "k", "1234".into()).await.unwrap();
}

/// A session not written for [`IDLE_QUOTAS`]' second has its state and
/// conversation collected (on a later write), and its bytes no longer count
/// against its owner; a session written since keeps everything.
pub async fn idle_sessions(store: &dyn SessionStore, run: &str) {
    let tenant = format!("{run}-idle");
    let owner = Owner::new(Some(&tenant), Some("ann"));
    let old = scope(run, &tenant, "ann", "old", "c");
    let kept = scope(run, &tenant, "ann", "kept", "c");
    store.set(&old, "k", "1234".into()).await.unwrap();
    store.set(&kept, "k", "1234".into()).await.unwrap();
    let chat = format!("{run}-old");
    store.save_history(&owner, &chat, "[1]").await.unwrap();
    store.set(&old, "j", "1234".into()).await.unwrap();
    store.set(&old, "i", "1234".into()).await.unwrap();
    // The owner is at 276 bytes of 280.
    assert!(matches!(
        store.set(&kept, "x", "1".into()).await,
        Err(SessionError::OwnerFull { .. })
    ));
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(600)).await;
        store.set(&kept, "k", "1234".into()).await.unwrap();
    }
    assert_eq!(store.get(&old, "k").await.unwrap(), None);
    assert_eq!(store.load_history(&owner, &chat).await.unwrap(), None);
    assert_eq!(
        store.get(&kept, "k").await.unwrap().as_deref(),
        Some("1234")
    );
    // What the old session held no longer counts.
    store.set(&kept, "x", "1234".into()).await.unwrap();
}
