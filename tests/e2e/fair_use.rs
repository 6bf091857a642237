//! Fair use of one server by many: a request cannot fan out past its budget
//! of calls in any entry point, one tenant cannot take every call slot or
//! every session, and state is bounded per owner and tenant in total.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::common::{component, temp_dir};
use crate::entries::{ENTRIES, Request, call_through};
use crate::identity::tokens_file;
use crate::mcp::{Server, initialize, path};
use crate::polyglot::polyglot;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_cannot_fan_out_past_its_budget_in_any_entry_point() {
    let dir = temp_dir();
    let config = dir.path().join("wasm-agent.toml");
    std::fs::write(
        &config,
        format!(
            "[tools.py]\ncomponent = \"{}\"\ncall_tools = [\"echo\"]\n\n\
             [tools.fixture]\ncomponent = \"{}\"\n",
            path(&polyglot("run_python")),
            path(&component("fixture_tool")),
        ),
    )
    .unwrap();
    let config = path(&config);
    let code =
        json!({"code": "for i in range(12):\n    tools.echo(text=str(i))\nprint('all twelve')"});
    for entry in ENTRIES {
        let request = |flags| Request {
            config: &config,
            alias: "py",
            with: &["fixture"],
            tool: "run_python",
            arguments: code.clone(),
            flags,
        };
        // The root call and 9 of its calls fit a budget of 10; the 10th does not.
        let refused = call_through(entry, &request(&["--max-request-calls", "10"])).await;
        assert!(
            refused.kind.is_some() && refused.text.contains("budget of 10 tool calls"),
            "{entry:?}: {refused:?}"
        );
        let done = call_through(entry, &request(&["--max-request-calls", "13"])).await;
        assert!(
            done.kind.is_none() && done.text.contains("all twelve"),
            "{entry:?}: {done:?}"
        );
    }
}

/// `serve --http` with the fixture, the tokens file and `flags` (the
/// folder holding the tokens file goes with it).
fn fixture_server(flags: &[&str]) -> (tempfile::TempDir, Server) {
    let dir = temp_dir();
    let tokens = path(&tokens_file(dir.path()));
    let fixture = path(&component("fixture_tool"));
    let mut args = vec!["--tools", &fixture, "--tokens", &tokens];
    args.extend(flags);
    let server = Server::start(&args);
    (dir, server)
}

fn result_of(answer: &Value) -> (bool, String, Option<String>) {
    let result = &answer["result"];
    (
        result["isError"].as_bool().unwrap_or(true),
        result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        result["structuredContent"]["error"]["kind"]
            .as_str()
            .map(str::to_string),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tenant_cannot_take_every_call_slot() {
    let (_dir, server) = fixture_server(&["--max-concurrency", "4", "--max-tenant-calls", "2"]);
    let alice = server.session(Some("alice-token")).await;
    let bob = server.session(Some("bob-token")).await;
    let carol = server.session(Some("carol-token")).await;
    let slow = || json!({"ms": 3000});
    let mut held = Vec::new();
    for id in 1..=2 {
        let request = server.call_tool_request(&alice, id, "sleep", slow());
        held.push(tokio::spawn(request.bearer_auth("alice-token").send()));
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    // Acme has its two calls in flight: bob, of acme too, is refused at once.
    let refused = server
        .call_tool_authorized(&bob, "bob-token", 3, "sleep", json!({"ms": 1}))
        .await;
    let (is_error, text, kind) = result_of(&refused);
    assert!(is_error, "{refused}");
    assert_eq!(kind.as_deref(), Some("rate_limited"), "{refused}");
    assert!(
        text.contains("tenant \"acme\" has 2 calls in flight")
            && text.contains("--max-tenant-calls"),
        "{text}"
    );
    // Globex is not held up by acme.
    let other = server
        .call_tool_authorized(&carol, "carol-token", 4, "sleep", json!({"ms": 1}))
        .await;
    assert!(!result_of(&other).0, "{other}");
    for call in held {
        let response = call.await.unwrap().unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
    // Once acme's calls end, bob's go through.
    let again = server
        .call_tool_authorized(&bob, "bob-token", 5, "sleep", json!({"ms": 1}))
        .await;
    assert!(!result_of(&again).0, "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tenant_cannot_take_every_session() {
    let (_dir, server) = fixture_server(&["--max-tenant-sessions", "2"]);
    server.session(Some("alice-token")).await;
    server.session(Some("bob-token")).await;
    let third = reqwest::Client::new()
        .post(server.at("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .bearer_auth("alice-token")
        .json(&initialize())
        .send()
        .await
        .unwrap();
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(third.headers().contains_key("retry-after"));
    let text = third.text().await.unwrap();
    assert!(
        text.contains("tenant \"acme\" holds 2 open MCP sessions")
            && text.contains("--max-tenant-sessions"),
        "{text}"
    );
    // Another tenant still opens one.
    server.session(Some("carol-token")).await;
}

/// `call fixture TOOL ARGS` as `user` of `tenant` in `session`, on the
/// SQLite store `store`, with `limits` as flags.
fn state_call(
    store: &str,
    (tenant, user, session): (&str, &str, &str),
    tool: &str,
    arguments: Value,
    limits: &[&str],
) -> std::process::Output {
    let fixture = path(&component("fixture_tool"));
    let mut args = vec!["call", &fixture, tool];
    let arguments = arguments.to_string();
    args.push(&arguments);
    args.extend(["--store", store, "--tenant", tenant, "--user", user]);
    args.extend(["--session", session]);
    args.extend(limits);
    crate::common::run(&args)
}

#[test]
fn state_is_bounded_per_principal_and_tenant_and_idle_sessions_are_collected() {
    let dir = temp_dir();
    let store = format!("sqlite:{}", path(&dir.path().join("sessions.db")));
    // Each entry is the key "k" and the JSON text "xxxxxxxxxx" with its
    // quotes, with 64 bytes of overhead: 77 bytes.
    let set = json!({"key": "k", "value": "xxxxxxxxxx"});
    let limits = [
        "--state-per-principal",
        "160B",
        "--state-per-tenant",
        "240B",
    ];
    let ok = |output: &std::process::Output| {
        assert!(output.status.success(), "{}", crate::common::stderr(output));
    };
    let refused = |output: &std::process::Output, needle: &str| {
        let stderr = crate::common::stderr(output);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(needle), "{stderr}");
    };
    let set_as = |tenant, user, session| {
        state_call(
            &store,
            (tenant, user, session),
            "state_set",
            set.clone(),
            &limits,
        )
    };
    ok(&set_as("acme", "ann", "a"));
    ok(&set_as("acme", "ann", "b"));
    // A third session of ann's would take her past 160 bytes in all.
    refused(
        &set_as("acme", "ann", "c"),
        "capability_denied: the tool's write to its session state was refused: session state \
         is full (160 bytes of keys and values per principal",
    );
    // Bob, of acme too, has room for one entry before acme's 240 bytes.
    ok(&set_as("acme", "bob", "a"));
    refused(
        &set_as("acme", "bob", "b"),
        "session state is full (240 bytes of keys and values per tenant",
    );
    // Another tenant is not held back by acme.
    ok(&set_as("globex", "ann", "a"));

    // Idle sessions are collected: ann's sessions, last written over a
    // second ago, go with the next write (of anyone), and their bytes with
    // them.
    let idle = [
        "--state-per-principal",
        "160B",
        "--state-per-tenant",
        "240B",
        "--state-idle",
        "1s",
    ];
    std::thread::sleep(Duration::from_millis(2200));
    let fresh = state_call(
        &store,
        ("globex", "cy", "z"),
        "state_set",
        set.clone(),
        &idle,
    );
    ok(&fresh);
    let read = state_call(
        &store,
        ("acme", "ann", "a"),
        "state_get",
        json!({"key": "k"}),
        &idle,
    );
    ok(&read);
    assert_eq!(crate::common::stdout(&read).trim(), "null");
    ok(&state_call(
        &store,
        ("acme", "ann", "c"),
        "state_set",
        set.clone(),
        &idle,
    ));
}
