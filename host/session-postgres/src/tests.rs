//! Tests against a real PostgreSQL server: a private cluster per test binary.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::*;
use wasm_agent_session::conformance;

#[path = "../../../tests/support/postgres.rs"]
mod postgres;
use postgres::Postgres;

/// One cluster for the tests that do not stop it.
fn shared() -> &'static Postgres {
    static CLUSTER: OnceLock<Postgres> = OnceLock::new();
    CLUSTER.get_or_init(Postgres::start)
}

fn run_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn scope(session: &str) -> StateScope {
    StateScope {
        owner: Owner::new(Some("t"), Some("p")),
        session: session.to_string(),
        component: Arc::from("alias:c"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn does_what_every_store_does() {
    let store = PostgresSessionStore::connect(&shared().url())
        .await
        .unwrap()
        .with_quotas(conformance::QUOTAS);
    let store: Arc<dyn SessionStore> = Arc::new(store);
    let run = run_id();
    conformance::isolation(&*store, &run).await;
    conformance::quotas(&*store, &run).await;
    conformance::history(&*store, &run).await;
    conformance::protocol_sessions(&*store, &run).await;
    conformance::exchange(&*store, &run).await;
    conformance::concurrent_quota(store, &run).await;
    let store = PostgresSessionStore::connect(&shared().url())
        .await
        .unwrap()
        .with_quotas(conformance::TOTALS_QUOTAS);
    conformance::totals(&store, &run).await;
    let store = PostgresSessionStore::connect(&shared().url())
        .await
        .unwrap()
        .with_quotas(conformance::IDLE_QUOTAS);
    conformance::idle_sessions(&store, &run).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_stores_on_one_database_share_state_and_quotas() {
    let url = shared().url();
    // Two replicas start together: both migrate, neither fails.
    let (first, second) = tokio::join!(
        PostgresSessionStore::connect(&url),
        PostgresSessionStore::connect(&url)
    );
    let four_keys = Quotas {
        max_keys: 4,
        ..Quotas::default()
    };
    let first = first.unwrap().with_quotas(four_keys);
    let second = second.unwrap().with_quotas(four_keys);
    let s = scope(&run_id());
    first.set(&s, "a", "1".into()).await.unwrap();
    assert_eq!(second.get(&s, "a").await.unwrap().as_deref(), Some("1"));
    // Eight writers across the two stores: exactly the quota's worth land.
    let writes = (0..8).map(|i| {
        let store = if i % 2 == 0 {
            first.clone()
        } else {
            second.clone()
        };
        let s = s.clone();
        tokio::spawn(async move { store.set(&s, &format!("k{i}"), "1".into()).await })
    });
    let mut stored = 0;
    for write in writes {
        stored += usize::from(write.await.unwrap().is_ok());
    }
    assert_eq!(stored, 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn names_with_nul_are_refused_not_sent() {
    let store = PostgresSessionStore::connect(&shared().url())
        .await
        .unwrap();
    let s = scope(&run_id());
    let error = store.set(&s, "a\0b", "1".into()).await.unwrap_err();
    assert!(error.to_string().contains("NUL"), "{error}");
    assert_eq!(store.get(&s, "a\0b").await.unwrap(), None);
    store.check().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn refuses_a_newer_schema() {
    let store = PostgresSessionStore::connect(&shared().url())
        .await
        .unwrap();
    let client = store.pool.get().await.unwrap();
    client
        .batch_execute("CREATE SCHEMA future; CREATE TABLE future.wasm_agent_schema (version integer); INSERT INTO future.wasm_agent_schema VALUES (99)")
        .await
        .unwrap();
    let url = format!("{}?options=-csearch_path%3Dfuture", shared().url());
    let error = PostgresSessionStore::connect(&url).await.unwrap_err();
    let message = error.to_string();
    assert!(message.contains("newer wasm-agent"), "{message}");
    assert!(message.contains("version 99"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_fails_calls_in_time_and_loses_no_acknowledged_write() {
    let cluster = Postgres::start();
    let store = PostgresSessionStore::connect(&cluster.url())
        .await
        .unwrap()
        .with_timeout(Duration::from_millis(800));
    let s = scope("restart");
    store.set(&s, "before", "1".into()).await.unwrap();
    cluster.stop();
    let started = Instant::now();
    let error = store.set(&s, "during", "2".into()).await.unwrap_err();
    assert!(error.is_unavailable(), "{error}");
    assert!(error.to_string().contains("127.0.0.1"), "{error}");
    assert!(!error.to_string().contains("password"), "{error}");
    let error = store.get(&s, "before").await.unwrap_err();
    assert!(error.is_unavailable(), "{error}");
    assert!(store.check().await.is_err());
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    cluster.resume();
    // Pooled connections died with the server; the store reconnects.
    store.set(&s, "after", "3".into()).await.unwrap();
    assert_eq!(store.get(&s, "before").await.unwrap().as_deref(), Some("1"));
    assert_eq!(store.get(&s, "during").await.unwrap(), None);
    assert_eq!(store.get(&s, "after").await.unwrap().as_deref(), Some("3"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_database_is_refused_at_connect_with_its_location() {
    let url = "postgres://app:s3cret@127.0.0.1:1/tools";
    let started = Instant::now();
    let error = PostgresSessionStore::connect(url).await.unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with("session store failed: postgres://app@127.0.0.1:1/tools"),
        "{message}"
    );
    assert!(!message.contains("s3cret"), "{message}");
    assert!(started.elapsed() < DEFAULT_TIMEOUT + Duration::from_secs(1));
}
