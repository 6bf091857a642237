//! Instances made ahead of calls (`host/sandbox/src/runtime/call/ahead.rs`):
//! each used by one call only, fresh, and run with that call's own
//! capabilities, context, deadline and session, never the idle ones it was
//! made with; a component whose instantiation runs code is never made ahead.

use std::time::{Duration, Instant};

use crate::common::{TIMEOUT, fixture_host, host};
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
const STARTS: &str = r#"
(component
  (import "wasm-agent:tool/host@0.1.3" (instance $host
    (export "cancelled" (func (result bool)))))
  (alias export $host "cancelled" (func $cancelled))
  (core func $cancelled_lowered (canon lower (func $cancelled)))
  (core module $m
    (import "host" "cancelled" (func $cancelled (result i32)))
    (memory (export "memory") 1)
    (global $bump (mut i32) (i32.const 4096))
    (global $seen (mut i32) (i32.const -1))
    (func $start (global.set $seen (call $cancelled)))
    (start $start)
    (data (i32.const 100) "seen")
    (data (i32.const 110) "seen at start")
    (data (i32.const 200) "{\"type\":\"object\"}")
    ;; The tool spec: name, description, parameters, annotations.
    (data (i32.const 300) "\64\00\00\00\04\00\00\00\6e\00\00\00\0d\00\00\00\c8\00\00\00\11\00\00\00\00")
    ;; list-tools' answer: one spec, at 300.
    (data (i32.const 400) "\2c\01\00\00\01\00\00\00")
    (data (i32.const 500) "true")
    (data (i32.const 510) "false")
    (func (export "list-tools") (result i32) (i32.const 400))
    (func (export "call")
      (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)
      (i32.store8 (i32.const 600) (i32.const 0))
      (if (global.get $seen)
        (then (i32.store (i32.const 604) (i32.const 500)) (i32.store (i32.const 608) (i32.const 4)))
        (else (i32.store (i32.const 604) (i32.const 510)) (i32.store (i32.const 608) (i32.const 5))))
      (i32.store (i32.const 612) (i32.const 0))
      (i32.store (i32.const 616) (i32.const 0))
      (i32.const 600))
    (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
      (local $at i32)
      (local.set $at (global.get $bump))
      (global.set $bump
        (i32.and (i32.add (i32.add (local.get $at) (local.get 3)) (i32.const 7)) (i32.const -8)))
      (local.get $at)))
  (core instance $i (instantiate $m
    (with "host" (instance (export "cancelled" (func $cancelled_lowered))))))
  (alias core export $i "memory" (core memory $mem))
  (alias core export $i "cabi_realloc" (core func $realloc))
  (type $annotations (flags "read-only" "destructive" "idempotent" "open-world"))
  (type $spec (record (field "name" string) (field "description" string)
    (field "parameters" string) (field "annotations" $annotations)))
  (type $artifact (record (field "kind" string) (field "mime-type" (option string))
    (field "data" (list u8))))
  (type $output (record (field "content" string) (field "artifacts" (list $artifact))))
  (type $error (variant (case "invalid-arguments" string) (case "failed" string)
    (case "unknown-tool" string)))
  (type $context (record (field "run-id" string) (field "session-id" string)
    (field "user-id" (option string)) (field "tenant-id" (option string))
    (field "metadata" string)))
  (func $list (result (list $spec))
    (canon lift (core func $i "list-tools") (memory $mem) (realloc $realloc)))
  (func $call (param "name" string) (param "arguments" string) (param "context" $context)
    (result (result $output (error $error)))
    (canon lift (core func $i "call") (memory $mem) (realloc $realloc)))
  ;; The interface's shape: its types exported beside the functions using them.
  (component $shape
    (type $a (flags "read-only" "destructive" "idempotent" "open-world"))
    (import "a" (type $a_i (eq $a)))
    (type $s (record (field "name" string) (field "description" string)
      (field "parameters" string) (field "annotations" $a_i)))
    (import "s" (type $s_i (eq $s)))
    (type $ar (record (field "kind" string) (field "mime-type" (option string))
      (field "data" (list u8))))
    (import "ar" (type $ar_i (eq $ar)))
    (type $o (record (field "content" string) (field "artifacts" (list $ar_i))))
    (import "o" (type $o_i (eq $o)))
    (type $e (variant (case "invalid-arguments" string) (case "failed" string)
      (case "unknown-tool" string)))
    (import "e" (type $e_i (eq $e)))
    (type $c (record (field "run-id" string) (field "session-id" string)
      (field "user-id" (option string)) (field "tenant-id" (option string))
      (field "metadata" string)))
    (import "c" (type $c_i (eq $c)))
    (import "list" (func $l (result (list $s_i))))
    (import "call" (func $k (param "name" string) (param "arguments" string)
      (param "context" $c_i) (result (result $o_i (error $e_i)))))
    (export $a_e "annotations" (type $a_i))
    (type $s2 (record (field "name" string) (field "description" string)
      (field "parameters" string) (field "annotations" $a_e)))
    (export $s_e "tool-spec" (type $s2))
    (export $ar_e "artifact" (type $ar_i))
    (type $o2 (record (field "content" string) (field "artifacts" (list $ar_e))))
    (export $o_e "tool-output" (type $o2))
    (export $e_e "tool-error" (type $e_i))
    (export $c_e "call-context" (type $c_i))
    (export "list-tools" (func $l) (func (result (list $s_e))))
    (export "call" (func $k) (func (param "name" string) (param "arguments" string)
      (param "context" $c_e) (result (result $o_e (error $e_e))))))
  (instance $tool (instantiate $shape
    (with "a" (type $annotations)) (with "s" (type $spec)) (with "ar" (type $artifact))
    (with "o" (type $output)) (with "e" (type $error)) (with "c" (type $context))
    (with "list" (func $list)) (with "call" (func $call))))
  (export "wasm-agent:tool/tool@0.1.3" (instance $tool))
)
"#;

#[tokio::test]
async fn a_component_whose_instantiation_runs_code_is_never_made_ahead() {
    let host = host();
    let bytes = wat::parse_str(STARTS).expect("the component assembles");
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

/// [`STARTS`] with a start function that only computes (it burns about
/// 600k fuel and calls nothing, so its instances are made ahead), and a
/// `seen` that burns about 180k.
fn computing() -> Vec<u8> {
    let spin = "(func $spin (param $n i32) (result i32)
      (loop $l
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br_if $l (local.get $n)))
      (i32.const 0))";
    let wat = STARTS
        .replace(
            "(func $start (global.set $seen (call $cancelled)))",
            &format!("{spin} (func $start (global.set $seen (call $spin (i32.const 100000))))"),
        )
        .replace(
            "(i32.store8 (i32.const 600) (i32.const 0))",
            "(drop (call $spin (i32.const 30000))) (i32.store8 (i32.const 600) (i32.const 0))",
        );
    wat::parse_str(&wat).expect("the component assembles")
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
