//! Calls through the library API into real components: results, errors,
//! limits and the `host` imports.

use std::time::{Duration, Instant};

use crate::common::{TIMEOUT, fixture_host};
use serde_json::{Value, json};
use wasm_agent::{ByteSize, CallContext, ErrorKind, Policy, ToolEvent};

fn ctx() -> CallContext {
    CallContext::new()
}

fn kind(result: &wasm_agent::ToolCallResult) -> Option<ErrorKind> {
    result.error.as_ref().map(|e| e.kind)
}

/// A hostile call must end with its typed error within the timeout plus
/// 100 ms, and the host must then serve the next call.
async fn assert_stopped(
    host: &wasm_agent::ToolHost,
    tool: &str,
    args: Value,
    expected: ErrorKind,
) -> String {
    let result = host.call(tool, &args.to_string(), &ctx()).await;
    assert_eq!(kind(&result), Some(expected), "{tool}: {result:?}");
    assert!(
        result.duration < TIMEOUT + Duration::from_millis(100),
        "{tool} took {:?}",
        result.duration
    );
    let next = host.call("echo", r#"{"text":"still here"}"#, &ctx()).await;
    assert_eq!(
        next.content, "still here",
        "host did not recover after {tool}: {next:?}"
    );
    result.error.unwrap().message
}

#[tokio::test]
async fn echo_returns_its_input() {
    let host = fixture_host(Policy::default()).await;
    let result = host.call("echo", r#"{"text":"hello"}"#, &ctx()).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(result.content, "hello");
    assert_eq!(result.tool, "echo");
    assert!(result.call_id.starts_with("call-"));
}

#[tokio::test]
async fn call_context_reaches_the_tool() {
    let host = fixture_host(Policy::default()).await;
    let context = CallContext::new()
        .session("s-1")
        .user("u-1")
        .tenant("t-1")
        .metadata("channel", "test");
    let result = host.call("context", "{}", &context).await;
    let seen: Value = serde_json::from_str(&result.content).unwrap();
    assert_eq!(seen["run_id"], context.run_id.as_str());
    assert_eq!(seen["session_id"], "s-1");
    assert_eq!(seen["user_id"], "u-1");
    assert_eq!(seen["tenant_id"], "t-1");
    assert_eq!(seen["metadata"], json!({"channel": "test"}));
}

#[tokio::test]
async fn invalid_json_arguments_are_refused_before_the_guest_runs() {
    let host = fixture_host(Policy::default()).await;
    let result = host.call("echo", "{not json", &ctx()).await;
    assert_eq!(kind(&result), Some(ErrorKind::InvalidArguments));
    assert!(result.error.unwrap().message.contains("not valid JSON"));
}

#[tokio::test]
async fn schema_violations_list_every_pointer() {
    let host = fixture_host(Policy::default()).await;
    let result = host.call("echo", r#"{"text": 5}"#, &ctx()).await;
    let message = result.error.unwrap().message;
    assert!(message.contains("/text:"), "{message}");
    assert!(message.contains("string"), "{message}");

    let result = host
        .call("state_set", r#"{"value": 1, "extra": true}"#, &ctx())
        .await;
    assert_eq!(kind(&result), Some(ErrorKind::InvalidArguments));
    let message = result.error.clone().unwrap().message;
    assert!(
        message.contains("key"),
        "names the missing property: {message}"
    );
    assert!(
        message.contains("extra"),
        "names the unexpected property: {message}"
    );
    assert_eq!(result.model_text(), format!("Error: {message}"));
}

#[tokio::test]
async fn unknown_tool_names_the_available_ones() {
    let host = fixture_host(Policy::default()).await;
    let result = host.call("nope", "{}", &ctx()).await;
    assert_eq!(kind(&result), Some(ErrorKind::UnknownTool));
    assert!(result.error.unwrap().message.contains("echo"));
}

#[tokio::test]
async fn tool_failures_are_results() {
    let host = fixture_host(Policy::default()).await;
    let result = host
        .call("read_path", r#"{"path":"/nowhere/file"}"#, &ctx())
        .await;
    assert_eq!(kind(&result), Some(ErrorKind::Failed), "{result:?}");
    assert!(result.error.unwrap().message.contains("/nowhere/file"));
}

#[tokio::test]
async fn artifacts_come_back_typed() {
    let host = fixture_host(Policy::default()).await;
    let result = host.call("artifacts", "{}", &ctx()).await;
    assert_eq!(result.content, "ok");
    let data = &result.artifacts[0];
    assert_eq!(data.kind, "data");
    assert_eq!(data.mime_type.as_deref(), Some("application/json"));
    let value: Value = serde_json::from_slice(&data.data).unwrap();
    assert_eq!(value["answer"], 42);
    let image = &result.artifacts[1];
    assert_eq!(image.mime_type.as_deref(), Some("image/png"));
    assert_eq!(&image.data[..4], b"\x89PNG");
}

#[tokio::test]
async fn infinite_loop_times_out() {
    let host = fixture_host(Policy::default().timeout(TIMEOUT)).await;
    let message = assert_stopped(&host, "spin", json!({}), ErrorKind::Timeout).await;
    assert!(message.contains("500ms"), "{message}");
}

#[tokio::test]
async fn blocking_sleep_times_out() {
    let host = fixture_host(Policy::default().timeout(TIMEOUT)).await;
    assert_stopped(&host, "sleep", json!({"ms": 60_000}), ErrorKind::Timeout).await;
}

#[tokio::test]
async fn fuel_budget_stops_a_loop() {
    let host = fixture_host(Policy::default().timeout(TIMEOUT).fuel(5_000_000)).await;
    let message = assert_stopped(&host, "spin", json!({}), ErrorKind::OutOfFuel).await;
    assert!(message.contains("5000000"), "{message}");
}

#[tokio::test]
async fn endless_allocation_hits_the_memory_limit() {
    let host = fixture_host(Policy::default().timeout(TIMEOUT).memory(ByteSize::mib(32))).await;
    let message = assert_stopped(&host, "alloc", json!({}), ErrorKind::MemoryLimit).await;
    assert!(message.contains("32MiB"), "{message}");
}

#[tokio::test]
async fn unbounded_recursion_overflows_the_stack() {
    let host = fixture_host(Policy::default().timeout(TIMEOUT)).await;
    assert_stopped(&host, "recurse", json!({}), ErrorKind::StackOverflow).await;
}

#[tokio::test]
async fn a_panic_is_a_trap_with_its_message() {
    let host = fixture_host(Policy::default().timeout(TIMEOUT)).await;
    let message = assert_stopped(
        &host,
        "panic",
        json!({"message": "boom-42"}),
        ErrorKind::Trap,
    )
    .await;
    assert!(message.contains("boom-42"), "{message}");
}

#[tokio::test]
async fn oversized_output_is_refused() {
    let host = fixture_host(
        Policy::default()
            .timeout(TIMEOUT)
            .max_output(ByteSize::kib(64)),
    )
    .await;
    let message = assert_stopped(
        &host,
        "big_output",
        json!({"bytes": 200_000}),
        ErrorKind::OutputTooLarge,
    )
    .await;
    assert!(message.contains("64KiB"), "{message}");
    let fits = host.call("big_output", r#"{"bytes": 1000}"#, &ctx()).await;
    assert_eq!(fits.content.len(), 1000);
}

#[tokio::test]
async fn stdout_flood_is_capped_and_never_reaches_the_host() {
    let host = fixture_host(Policy::default().timeout(Duration::from_secs(5))).await;
    let result = host
        .call("stdout_flood", r#"{"bytes": 20000000}"#, &ctx())
        .await;
    assert_eq!(result.content, "flooded", "{result:?}");
    let next = host.call("echo", r#"{"text":"ok"}"#, &ctx()).await;
    assert_eq!(next.content, "ok");
}

#[tokio::test]
async fn raw_tcp_is_denied_and_the_listener_sees_nothing() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let host = fixture_host(Policy::default().timeout(TIMEOUT)).await;
    let message = assert_stopped(
        &host,
        "tcp_connect",
        json!({"addr": addr.to_string()}),
        ErrorKind::CapabilityDenied,
    )
    .await;
    assert!(message.contains(&addr.to_string()), "{message}");
    let accepted = listener.accept();
    assert!(
        matches!(&accepted, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the listener saw a connection: {accepted:?}"
    );
}

#[tokio::test]
async fn cancellation_stops_a_running_call() {
    let host = fixture_host(Policy::default().timeout(Duration::from_secs(30))).await;
    let context = ctx();
    let token = context.cancellation.clone();
    let started = Instant::now();
    let call = tokio::spawn({
        let host = host.clone();
        async move { host.call("spin", "{}", &context).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    token.cancel();
    let result = call.await.unwrap();
    assert_eq!(kind(&result), Some(ErrorKind::Cancelled), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn cancelled_import_is_false_for_a_live_call() {
    let host = fixture_host(Policy::default()).await;
    assert_eq!(host.call("cancelled", "{}", &ctx()).await.content, "false");
}

#[tokio::test]
async fn session_state_is_scoped_to_session_and_component() {
    let host = fixture_host(Policy::default()).await;
    host.load_with(
        crate::common::component("fixture_tool"),
        // The same bytes share state unless the operator names them apart.
        wasm_agent::LoadOptions::new(Policy::default())
            .name("other")
            .prefix("other_")
            .state_scope("other"),
    )
    .await
    .unwrap();
    let s1 = ctx().session("s1");
    let set = host
        .call("state_set", r#"{"key":"k","value":{"n":1}}"#, &s1)
        .await;
    assert!(set.is_ok(), "{set:?}");
    let got = host.call("state_get", r#"{"key":"k"}"#, &s1).await;
    assert_eq!(
        serde_json::from_str::<Value>(&got.content).unwrap(),
        json!({"n": 1})
    );
    let other_session = host
        .call("state_get", r#"{"key":"k"}"#, &ctx().session("s2"))
        .await;
    assert_eq!(other_session.content, "null");
    let other_component = host.call("other_state_get", r#"{"key":"k"}"#, &s1).await;
    assert_eq!(other_component.content, "null");
}

#[tokio::test]
async fn dependencies_come_from_the_policy() {
    let host = fixture_host(Policy::default().dependency("api_base", "http://127.0.0.1:9")).await;
    let set = host
        .call("dependency", r#"{"name":"api_base"}"#, &ctx())
        .await;
    assert_eq!(set.content, "http://127.0.0.1:9");
    let unset = host.call("dependency", r#"{"name":"other"}"#, &ctx()).await;
    assert_eq!(unset.content, "(none)");
}

#[tokio::test]
async fn events_are_published_on_the_bus() {
    let host = fixture_host(Policy::default()).await;
    let mut events = host.subscribe();
    let result = host
        .call(
            "emit",
            r#"{"name":"progress","payload":{"done":3}}"#,
            &ctx(),
        )
        .await;
    assert!(result.is_ok(), "{result:?}");
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        seen.push(event);
    }
    assert!(matches!(&seen[0], ToolEvent::Started { tool, .. } if tool == "emit"));
    assert!(seen.iter().any(|e| matches!(e,
        ToolEvent::Emitted { name, payload, .. } if name == "progress" && payload["done"] == 3)));
    assert!(matches!(
        seen.last(),
        Some(ToolEvent::Finished { error: None, .. })
    ));
}

#[tokio::test]
async fn removed_tools_are_unknown() {
    let host = fixture_host(Policy::default()).await;
    assert!(host.remove("echo"));
    assert!(!host.remove("echo"));
    let result = host.call("echo", r#"{"text":"x"}"#, &ctx()).await;
    assert_eq!(kind(&result), Some(ErrorKind::UnknownTool));
    assert!(host.tools().iter().any(|t| t.name == "context"));
}

#[tokio::test]
async fn every_call_gets_a_fresh_instance() {
    let host = fixture_host(Policy::default().timeout(TIMEOUT)).await;
    let _ = host.call("panic", r#"{"message":"x"}"#, &ctx()).await;
    let counter1 = host.call("counter", "{}", &ctx()).await;
    let counter2 = host.call("counter", "{}", &ctx()).await;
    assert_eq!(counter1.content, "1", "{counter1:?}");
    assert_eq!(counter2.content, "1", "globals leaked between calls");
}
