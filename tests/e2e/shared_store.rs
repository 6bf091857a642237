//! Session state in PostgreSQL (`--store postgres://...`): shared across
//! processes, kept apart by tenant and principal, and a store that is down
//! fails the calls that need it with `store_unavailable`, within their
//! deadline, while other calls go on.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde_json::json;
use wasm_agent::session::PostgresSessionStore;
use wasm_agent::{CallContext, ErrorKind, LoadOptions, Policy, ToolHost};

use crate::common::{assert_clean_failure, cache_dir, component, run, stdout, temp_dir};
use crate::postgres::Postgres;

fn shared() -> &'static Postgres {
    static CLUSTER: OnceLock<Postgres> = OnceLock::new();
    CLUSTER.get_or_init(Postgres::start)
}

/// `wasm-agent call` of the fixture's `tool` in session `s` of the store at `url`.
fn call_fixture(url: &str, tool: &str, arguments: &str, who: &[&str]) -> std::process::Output {
    let fixture = component("fixture_tool");
    let mut args = vec!["call", fixture.to_str().unwrap(), tool, arguments];
    args.extend(["--store", url, "--session", "s"]);
    args.extend_from_slice(who);
    run(&args)
}

#[test]
fn state_written_by_one_process_is_read_by_another_and_only_by_its_owner() {
    let url = shared().url();
    let session = uuid::Uuid::new_v4().to_string();
    let set = format!(r#"{{"key": "{session}", "value": {{"n": 1}}}}"#);
    let get = format!(r#"{{"key": "{session}"}}"#);
    let alice = ["--tenant", "acme", "--user", "alice"];
    let output = call_fixture(&url, "state_set", &set, &alice);
    assert!(
        output.status.success(),
        "{}",
        crate::common::stderr(&output)
    );

    let output = call_fixture(&url, "state_get", &get, &alice);
    assert_eq!(stdout(&output).trim(), r#"{"n":1}"#);
    for other in [
        &["--tenant", "acme", "--user", "bob"][..],
        &["--tenant", "other", "--user", "alice"][..],
        &[][..],
    ] {
        let output = call_fixture(&url, "state_get", &get, other);
        assert_eq!(
            stdout(&output).trim(),
            "null",
            "{other:?} read alice's state"
        );
    }
}

#[test]
fn a_store_url_that_names_no_store_is_refused() {
    let fixture = component("fixture_tool");
    let fixture = fixture.to_str().unwrap();
    let output = run(&[
        "call",
        fixture,
        "echo",
        "{}",
        "--store",
        "redis://:hunter2@127.0.0.1",
    ]);
    assert_clean_failure(&output, 2, "a redis: URL names no store; use sqlite:PATH");
    assert!(!crate::common::stderr(&output).contains("hunter2"));
    let output = run(&[
        "call",
        fixture,
        "echo",
        "{}",
        "--store",
        "postgres://u:pw@127.0.0.1:1/db",
    ]);
    assert_clean_failure(
        &output,
        2,
        "session store failed: postgres://u@127.0.0.1:1/db",
    );
    assert!(!crate::common::stderr(&output).contains("pw"));

    let dir = temp_dir();
    let config = dir.path().join("wasm-agent.toml");
    std::fs::write(&config, "store = \"sessions.db\"\n").unwrap();
    let output = run(&[
        "call",
        fixture,
        "echo",
        "{}",
        "--config",
        config.to_str().unwrap(),
    ]);
    assert_clean_failure(&output, 2, "wasm-agent.toml:1: store: not a store URL");
    std::fs::write(&config, "store = \"memory:\"\n").unwrap();
    let output = run(&[
        "call",
        fixture,
        "echo",
        r#"{"text": "hi"}"#,
        "--config",
        config.to_str().unwrap(),
    ]);
    assert!(
        output.status.success(),
        "{}",
        crate::common::stderr(&output)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_store_that_is_down_fails_state_calls_in_time_and_loses_nothing() {
    let cluster = Postgres::start();
    let store = PostgresSessionStore::connect(&cluster.url()).await.unwrap();
    let host = ToolHost::builder()
        .cache_dir(cache_dir())
        .session_store(Arc::new(store))
        .build()
        .unwrap();
    let policy = Policy {
        timeout: Duration::from_secs(2),
        ..Policy::default()
    };
    host.load_with(
        component("fixture_tool"),
        LoadOptions::new(policy).name("fixture"),
    )
    .await
    .unwrap();
    let context = CallContext::new().session("down");
    let call = async |tool: &str, arguments: serde_json::Value| {
        host.call(tool, &arguments.to_string(), &context).await
    };
    let written = call("state_set", json!({"key": "k", "value": 1})).await;
    assert!(written.is_ok(), "{written:?}");

    cluster.stop();
    for (tool, arguments) in [
        ("state_set", json!({"key": "k2", "value": 2})),
        ("state_get", json!({"key": "k"})),
    ] {
        let started = Instant::now();
        let result = call(tool, arguments).await;
        let error = result.error.expect("the call fails");
        assert_eq!(error.kind, ErrorKind::StoreUnavailable, "{}", error.message);
        assert!(error.message.contains("session store"), "{}", error.message);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }
    // Calls that keep no state go on.
    let echoed = call("echo", json!({"text": "still here"})).await;
    assert!(echoed.is_ok(), "{echoed:?}");

    cluster.resume();
    let read = call("state_get", json!({"key": "k"})).await;
    assert_eq!(read.content, "1", "{read:?}");
    let lost = call("state_get", json!({"key": "k2"})).await;
    assert_eq!(lost.content, "null", "{lost:?}");
}
