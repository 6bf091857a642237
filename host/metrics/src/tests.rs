use std::sync::Arc;
use std::time::Duration;

use wasm_agent_cache::{CacheError, CacheKey, MemoryCache, ResultCache};
use wasm_agent_sandbox::observe::CallObserver;
use wasm_agent_sandbox::result::ErrorKind;
use wasm_agent_session::{
    InMemorySessionStore, Owner, Quotas, SessionError, SessionStore, StateScope,
};

use super::{MeteredCache, MeteredStore, Metrics};

fn line<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
}

#[test]
fn calls_are_counted_by_tool_and_outcome_and_unknown_names_share_one_label() {
    let metrics = Metrics::new();
    metrics.call_started(Some("echo"));
    let text = metrics.render();
    assert_eq!(line(&text, "wasm_agent_tool_calls_in_flight"), Some("1"));
    metrics.call_finished(Some("echo"), None, Duration::from_millis(3));
    metrics.call_started(Some("echo"));
    metrics.call_finished(
        Some("echo"),
        Some(ErrorKind::Timeout),
        Duration::from_secs(2),
    );
    // Unknown names are the caller's, never labels.
    for _ in 0..2 {
        metrics.call_started(None);
        metrics.call_finished(None, Some(ErrorKind::UnknownTool), Duration::ZERO);
    }
    let text = metrics.render();
    assert_eq!(line(&text, "wasm_agent_tool_calls_in_flight"), Some("0"));
    assert_eq!(
        line(
            &text,
            r#"wasm_agent_tool_calls_total{tool="echo",outcome="ok"}"#
        ),
        Some("1")
    );
    assert_eq!(
        line(
            &text,
            r#"wasm_agent_tool_calls_total{tool="echo",outcome="timeout"}"#
        ),
        Some("1")
    );
    assert_eq!(
        line(
            &text,
            r#"wasm_agent_tool_calls_total{tool="(unknown)",outcome="unknown_tool"}"#
        ),
        Some("2")
    );
    assert_eq!(
        line(
            &text,
            r#"wasm_agent_tool_call_duration_seconds_count{tool="echo"}"#
        ),
        Some("2")
    );
    assert!(text.ends_with("# EOF\n"));
}

/// A store whose backend is gone: every operation fails.
struct Gone;

#[async_trait::async_trait]
impl SessionStore for Gone {
    async fn get(&self, _: &StateScope, _: &str) -> Result<Option<String>, SessionError> {
        Err(SessionError::backend("gone", "get", "down"))
    }
    async fn set(&self, _: &StateScope, _: &str, _: String) -> Result<(), SessionError> {
        Err(SessionError::backend("gone", "set", "down"))
    }
    async fn load_history(&self, _: &Owner, _: &str) -> Result<Option<String>, SessionError> {
        Err(SessionError::backend("gone", "load", "down"))
    }
    async fn save_history(&self, _: &Owner, _: &str, _: &str) -> Result<(), SessionError> {
        Err(SessionError::backend("gone", "save", "down"))
    }
    async fn save_protocol_session(&self, _: &Owner, _: &str, _: &str) -> Result<(), SessionError> {
        Err(SessionError::backend("gone", "save", "down"))
    }
    async fn load_protocol_session(
        &self,
        _: &Owner,
        _: &str,
    ) -> Result<Option<String>, SessionError> {
        Err(SessionError::backend("gone", "load", "down"))
    }
    async fn delete_protocol_session(&self, _: &Owner, _: &str) -> Result<(), SessionError> {
        Err(SessionError::backend("gone", "delete", "down"))
    }
    async fn use_once(&self, _: &str, _: std::time::Duration) -> Result<bool, SessionError> {
        Err(SessionError::backend("gone", "use", "down"))
    }
    async fn open_mailbox(&self, _: &str, _: std::time::Duration) -> Result<(), SessionError> {
        Err(SessionError::backend("gone", "open", "down"))
    }
    async fn deliver(&self, _: &str, _: &str) -> Result<bool, SessionError> {
        Err(SessionError::backend("gone", "deliver", "down"))
    }
    async fn collect_mail(&self, _: &str) -> Result<Option<String>, SessionError> {
        Err(SessionError::backend("gone", "collect", "down"))
    }
    async fn mailboxes(
        &self,
        _: &str,
        _: usize,
    ) -> Result<Vec<(String, Option<String>)>, SessionError> {
        Err(SessionError::backend("gone", "list", "down"))
    }
    async fn mailbox(&self, _: &str) -> Result<Option<Option<String>>, SessionError> {
        Err(SessionError::backend("gone", "read", "down"))
    }
    async fn close_mailbox(&self, _: &str) -> Result<(), SessionError> {
        Err(SessionError::backend("gone", "close", "down"))
    }
    fn location(&self) -> String {
        "gone".into()
    }
}

fn scope() -> StateScope {
    StateScope {
        owner: Owner::new(Some("t"), Some("p")),
        session: "s".into(),
        component: Arc::from("alias:c"),
    }
}

#[tokio::test]
async fn store_failures_count_and_quota_refusals_do_not() {
    let metrics = Metrics::new();
    let quotas = Quotas {
        max_keys: 1,
        max_bytes: 100,
        ..Quotas::default()
    };
    let store = MeteredStore::around(
        Arc::new(InMemorySessionStore::default().with_quotas(quotas)),
        metrics.clone(),
    );
    store.set(&scope(), "a", "1".into()).await.unwrap();
    assert!(matches!(
        store.set(&scope(), "b", "2".into()).await,
        Err(SessionError::TooManyKeys { .. })
    ));
    assert_eq!(
        store.get(&scope(), "a").await.unwrap().as_deref(),
        Some("1")
    );
    let gone = MeteredStore::around(Arc::new(Gone), metrics.clone());
    assert!(gone.get(&scope(), "a").await.is_err());
    assert_eq!(gone.location(), "gone");

    let text = metrics.render();
    let count = r#"wasm_agent_store_operation_duration_seconds_count{operation="set"}"#;
    assert_eq!(line(&text, count), Some("2"));
    let count = r#"wasm_agent_store_operation_duration_seconds_count{operation="get"}"#;
    assert_eq!(line(&text, count), Some("2"));
    assert_eq!(
        line(&text, r#"wasm_agent_store_errors_total{operation="get"}"#),
        Some("1")
    );
    assert_eq!(
        line(&text, r#"wasm_agent_store_errors_total{operation="set"}"#),
        None
    );
}

/// A cache that never answers in time.
struct Unreachable;

#[async_trait::async_trait]
impl ResultCache for Unreachable {
    async fn get(&self, _: &CacheKey) -> Result<Option<Vec<u8>>, CacheError> {
        Err(CacheError::Unavailable {
            location: "x".into(),
            reason: "down".into(),
        })
    }
    async fn put(&self, _: &CacheKey, _: &[u8], _: Duration) -> Result<(), CacheError> {
        Err(CacheError::Unavailable {
            location: "x".into(),
            reason: "down".into(),
        })
    }
    async fn clear(&self) -> Result<(), CacheError> {
        Ok(())
    }
    fn location(&self) -> String {
        "x".into()
    }
}

#[tokio::test]
async fn cache_failures_count_and_oversized_values_do_not() {
    let metrics = Metrics::new();
    let key = CacheKey::new("t", "v", &serde_json::json!({}), None, None);
    let memory = MeteredCache::around(Arc::new(MemoryCache::with_limits(4, 40)), metrics.clone());
    assert!(matches!(
        memory.put(&key, &[0; 11], Duration::from_secs(9)).await,
        Err(CacheError::TooLarge { .. })
    ));
    assert_eq!(memory.get(&key).await.unwrap(), None);
    let down = MeteredCache::around(Arc::new(Unreachable), metrics.clone());
    assert!(down.get(&key).await.is_err());
    assert!(down.put(&key, b"v", Duration::from_secs(1)).await.is_err());
    down.clear().await.unwrap();

    let text = metrics.render();
    let gets = r#"wasm_agent_cache_operation_duration_seconds_count{operation="get"}"#;
    assert_eq!(line(&text, gets), Some("2"));
    assert_eq!(
        line(&text, r#"wasm_agent_cache_errors_total{operation="get"}"#),
        Some("1")
    );
    assert_eq!(
        line(&text, r#"wasm_agent_cache_errors_total{operation="put"}"#),
        Some("1")
    );
    assert_eq!(
        line(&text, r#"wasm_agent_cache_errors_total{operation="clear"}"#),
        None
    );
}
