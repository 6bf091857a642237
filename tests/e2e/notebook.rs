//! Notebook sessions (`keep_instance`): an interpreter's variables persist
//! across the calls of one session and no further, within the policy's
//! memory, dropped on failure, when idle, and when the host needs the room.

use std::time::Duration;

use serde_json::json;
use wasm_agent::{ByteSize, CallContext, ErrorKind, LoadOptions, Policy, ToolCallResult, ToolHost};

use crate::common::cache_dir;
use crate::polyglot::polyglot;

/// A host with both interpreters keeping their instances under `policy`.
async fn notebooks(policy: Policy, kept: u32) -> ToolHost {
    let host = ToolHost::builder()
        .cache_dir(cache_dir())
        .max_kept_instances(kept)
        .build()
        .unwrap();
    for name in ["run_python", "run_javascript"] {
        host.load_with(polyglot(name), LoadOptions::new(policy.clone()).name(name))
            .await
            .unwrap();
    }
    host
}

fn kept_policy() -> Policy {
    Policy::default().keep_instance(Duration::from_secs(600))
}

async fn run(host: &ToolHost, tool: &str, code: &str, context: &CallContext) -> ToolCallResult {
    host.call(tool, &json!({ "code": code }).to_string(), context)
        .await
}

fn session(id: &str) -> CallContext {
    CallContext::new().session(id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variables_persist_within_a_session_and_no_further() {
    let host = notebooks(kept_policy(), 16).await;
    let a = session("a");
    assert!(
        run(
            &host,
            "run_python",
            "x = 41\ndef twice(n):\n    return 2 * n",
            &a
        )
        .await
        .is_ok()
    );
    let result = run(&host, "run_python", "twice(x + 1) // 2", &a).await;
    assert_eq!(result.content, "value:\n42", "{result:?}");
    // Another session, or the same session id of another tenant or user,
    // starts empty.
    for other in [
        session("b"),
        session("a").tenant("other"),
        session("a").user("mallory"),
    ] {
        let result = run(&host, "run_python", "x", &other).await;
        let error = result.error.expect("x is not defined there");
        assert_eq!(error.kind, ErrorKind::Failed);
        assert!(error.message.contains("NameError"), "{error}");
    }
    // A later call's traceback names its own cell.
    let result = run(&host, "run_python", "1 / 0", &a).await;
    let error = result.error.expect("ZeroDivisionError");
    assert!(error.message.contains("File \"<code #"), "{error}");
    assert!(error.message.contains("ZeroDivisionError"), "{error}");
    // The exception did not end the session.
    let result = run(&host, "run_python", "x", &a).await;
    assert_eq!(result.content, "value:\n41", "{result:?}");

    // JavaScript: `var`, functions and globalThis persist.
    assert!(
        run(
            &host,
            "run_javascript",
            "var count = 1; function bump() { return ++count; }",
            &a
        )
        .await
        .is_ok()
    );
    let result = run(&host, "run_javascript", "bump(); bump()", &a).await;
    assert_eq!(result.content, "value:\n3", "{result:?}");
    let result = run(&host, "run_javascript", "typeof count", &session("b")).await;
    assert_eq!(result.content, "value:\n\"undefined\"", "{result:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_drops_the_instance_and_memory_stays_within_the_limit() {
    let policy = kept_policy()
        .timeout(Duration::from_secs(2))
        .memory(ByteSize::mib(96));
    let host = notebooks(policy, 16).await;
    let a = session("a");
    assert!(run(&host, "run_python", "x = 1", &a).await.is_ok());
    let result = run(&host, "run_python", "while True:\n    pass", &a).await;
    assert_eq!(result.error.map(|e| e.kind), Some(ErrorKind::Timeout));
    let result = run(&host, "run_python", "x", &a).await;
    assert!(
        result
            .error
            .is_some_and(|e| e.message.contains("NameError")),
        "a timed-out instance is not kept"
    );
    // Memory held across calls counts against the one limit.
    assert!(run(&host, "run_python", "blocks = []", &a).await.is_ok());
    let grow = "blocks.append(bytearray(16 << 20))\nlen(blocks)";
    let mut refused = None;
    for _ in 0..8 {
        let result = run(&host, "run_python", grow, &a).await;
        if let Some(error) = result.error {
            refused = Some(error);
            break;
        }
    }
    let error = refused.expect("the session reached its memory limit");
    assert_eq!(error.kind, ErrorKind::MemoryLimit, "{error}");
    // The session goes on, and can let go of what it holds.
    let result = run(
        &host,
        "run_python",
        "n = len(blocks)\nblocks.clear()\nn > 0",
        &a,
    )
    .await;
    assert_eq!(result.content, "value:\nTrue", "{result:?}");
    let result = run(&host, "run_python", grow, &a).await;
    assert_eq!(result.content, "value:\n1", "{result:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_least_recently_used_instances_are_dropped() {
    let host = notebooks(kept_policy(), 2).await;
    for id in ["a", "b", "c"] {
        let code = format!("name = {id:?}");
        assert!(run(&host, "run_python", &code, &session(id)).await.is_ok());
    }
    // Room for two: the least recently used session, a, lost its instance.
    let result = run(&host, "run_python", "name", &session("c")).await;
    assert_eq!(result.content, "value:\n'c'", "{result:?}");
    let result = run(&host, "run_python", "name", &session("a")).await;
    assert!(
        result
            .error
            .is_some_and(|e| e.message.contains("NameError"))
    );

    let idle = notebooks(Policy::default().keep_instance(Duration::from_secs(1)), 4).await;
    assert!(
        run(&idle, "run_python", "y = 2", &session("a"))
            .await
            .is_ok()
    );
    let result = run(&idle, "run_python", "y", &session("a")).await;
    assert_eq!(result.content, "value:\n2", "{result:?}");
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let result = run(&idle, "run_python", "y", &session("a")).await;
    assert!(
        result
            .error
            .is_some_and(|e| e.message.contains("NameError")),
        "an instance idle past kept_idle is dropped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_of_one_session_take_turns() {
    let host = notebooks(kept_policy(), 16).await;
    let code = "import time\nn = globals().get('n', 0)\ntime.sleep(0.2)\nn = n + 1\nn";
    let a = session("a");
    let (first, second) = tokio::join!(
        run(&host, "run_python", code, &a),
        run(&host, "run_python", code, &a)
    );
    let mut values = vec![first.content, second.content];
    values.sort();
    assert_eq!(values, ["value:\n1", "value:\n2"], "one call at a time");
}
