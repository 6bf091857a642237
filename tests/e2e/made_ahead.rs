//! Instances made ahead of calls (`host/sandbox/src/runtime/call/ahead.rs`):
//! each used by one call only, fresh, and run with that call's own
//! capabilities, context, deadline and session, never the idle ones it was
//! made with; a component whose instantiation runs code is never made ahead.

use std::time::{Duration, Instant};

use crate::common::{TIMEOUT, fixture_host, host};
use crate::wat_tool;
use serde_json::Value;
use wasm_agent::{CallContext, ComponentSource, Policy, ToolHost};

/// Waits until `host` holds an instance made ahead.
async fn made_ahead(host: &ToolHost) {
    let until = Instant::now() + Duration::from_secs(10);
    while host.gauges().made_ahead() == 0 {
        assert!(Instant::now() < until, "no instance was made ahead");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test]
async fn each_instance_made_ahead_serves_one_call_fresh() {
    let host = fixture_host(Policy::default().timeout(TIMEOUT)).await;
    for _ in 0..3 {
        made_ahead_after_a_call(&host).await;
        let counter = host.call("counter", "{}", &CallContext::new()).await;
        assert_eq!(counter.content, "1", "globals leaked: {counter:?}");
    }
    // Back to back, the second call finds none made yet: it makes its own.
    let first = host.call("counter", "{}", &CallContext::new()).await;
    let second = host.call("counter", "{}", &CallContext::new()).await;
    assert_eq!((&*first.content, &*second.content), ("1", "1"));
}

async fn made_ahead_after_a_call(host: &ToolHost) {
    let echo = host
        .call("echo", r#"{"text":"x"}"#, &CallContext::new())
        .await;
    assert!(echo.is_ok(), "{echo:?}");
    made_ahead(host).await;
}

#[tokio::test]
async fn an_instance_made_ahead_runs_with_the_call_s_own_capabilities() {
    let policy = Policy::default()
        .timeout(Duration::from_secs(5))
        .env("MODE", "made-ahead");
    let host = fixture_host(policy).await;

    made_ahead_after_a_call(&host).await;
    let env = host.call("env", "{}", &CallContext::new()).await;
    assert!(env.content.contains("MODE=made-ahead"), "{env:?}");

    // The call's context, not the empty one the instance was made with.
    made_ahead_after_a_call(&host).await;
    let context = CallContext::new().session("s-ahead").user("u-ahead");
    let seen = host.call("context", "{}", &context).await;
    let seen: Value = serde_json::from_str(&seen.content).unwrap();
    assert_eq!(seen["run_id"], context.run_id.as_str());
    assert_eq!(seen["user_id"], "u-ahead");

    // Not cancelled, and not past a deadline: it may take its time.
    made_ahead_after_a_call(&host).await;
    let cancelled = host.call("cancelled", "{}", &CallContext::new()).await;
    assert_eq!(cancelled.content, "false", "{cancelled:?}");
    made_ahead_after_a_call(&host).await;
    let slept = host
        .call("sleep", r#"{"ms":50}"#, &CallContext::new())
        .await;
    assert_eq!(slept.content, "slept", "{slept:?}");

    // The session's state, not a store of the instance's own.
    let session = CallContext::new().session("s-state");
    made_ahead_after_a_call(&host).await;
    let set = r#"{"key":"k","value":{"n":1}}"#;
    assert!(host.call("state_set", set, &session).await.is_ok());
    made_ahead_after_a_call(&host).await;
    let got = host.call("state_get", r#"{"key":"k"}"#, &session).await;
    assert_eq!(got.content, r#"{"n":1}"#, "{got:?}");
}

/// A tool whose core module has a start function, which asks the host
/// whether the call is cancelled; its one tool, `seen`, answers what the
/// start function was told. Made ahead, it would have been told `true`.
fn starts() -> String {
    let answer = wat_tool::answer("(global.get $seen)", (500, 4), (510, 5));
    let realloc = wat_tool::REALLOC;
    let spec = wat_tool::spec("seen", "seen at start");
    format!(
        r#"
  (core module $m
    (import "host" "cancelled" (func $cancelled (result i32)))
    (memory (export "memory") 1)
    (global $bump (mut i32) (i32.const 4096))
    (global $seen (mut i32) (i32.const -1))
    (func $start (global.set $seen (call $cancelled)))
    (start $start)
    {spec}
    (data (i32.const 500) "true")
    (data (i32.const 510) "false")
    (func (export "list-tools") (result i32) (i32.const 400))
    (func (export "call")
      (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)
      {answer}
{realloc}"#
    )
}

#[tokio::test]
async fn a_component_whose_instantiation_runs_code_is_never_made_ahead() {
    let host = host();
    let bytes = wat_tool::component(&starts());
    let source = ComponentSource::Bytes {
        name: "starts".into(),
        bytes,
    };
    host.load(source, Policy::default()).await.expect("loads");
    for _ in 0..3 {
        let seen = host.call("seen", "{}", &CallContext::new()).await;
        assert_eq!(seen.content, "false", "{seen:?}");
        // Long enough for an instance to be made, were one made.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(host.gauges().made_ahead(), 0);
    }
}

/// [`starts`] with a start function that only computes (it burns about
/// 600k fuel and calls nothing, so its instances are made ahead), and a
/// `seen` that burns about 180k.
fn computing() -> Vec<u8> {
    let spin = "(func $spin (param $n i32) (result i32)
      (loop $l
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br_if $l (local.get $n)))
      (i32.const 0))";
    let wat = starts()
        .replace(
            "(func $start (global.set $seen (call $cancelled)))",
            &format!("{spin} (func $start (global.set $seen (call $spin (i32.const 100000))))"),
        )
        .replace(
            "(i32.store8 (i32.const 600) (i32.const 0))",
            "(drop (call $spin (i32.const 30000))) (i32.store8 (i32.const 600) (i32.const 0))",
        );
    wat_tool::component(&wat)
}

#[tokio::test]
async fn the_fuel_making_an_instance_burned_is_charged_to_its_call() {
    for (fuel, runs) in [(700_000, false), (1_000_000, true)] {
        let host = host();
        let source = ComponentSource::Bytes {
            name: "computes".into(),
            bytes: computing(),
        };
        host.load(source, Policy::default().fuel(fuel))
            .await
            .expect("loads");
        for made in [false, true] {
            if made {
                made_ahead(&host).await;
            }
            let seen = host.call("seen", "{}", &CallContext::new()).await;
            if runs {
                assert_eq!(seen.content, "false", "{seen:?}");
            } else {
                let kind = seen.error.as_ref().map(|e| e.kind);
                assert_eq!(kind, Some(wasm_agent::ErrorKind::OutOfFuel), "{seen:?}");
            }
        }
    }
}
