//! `GET /metrics` of `wasm-agent serve --http`: Prometheus text with calls
//! by tool and outcome, durations, calls in flight, denials by kind, the
//! instance pool and the session store, needing no token; on its own
//! address with `--metrics-addr`.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::common::component;
use crate::mcp::{Server, path};

async fn scrape(url: &str) -> String {
    let response = reqwest::get(url).await.expect("answered");
    assert_eq!(response.status(), StatusCode::OK);
    let kind = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(kind.starts_with("application/openmetrics-text"), "{kind}");
    let text = response.text().await.unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    text
}

/// The value of the sample `name` (with its labels, as written), if present.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .map(|value| value.parse().expect("a number"))
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_count_calls_denials_the_pool_and_the_store() {
    let fixture = path(&component("fixture_tool"));
    let server = Server::start(&["--tools", &fixture, "--token", "s3cret"]);
    let session = server.session(Some("s3cret")).await;
    let call = |id, name: &'static str, arguments| {
        let request = server.call_tool_request(&session, id, name, arguments);
        async move {
            request
                .bearer_auth("s3cret")
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        }
    };
    for id in 1..=2 {
        let answer = call(id, "echo", json!({"text": "hi"})).await;
        assert!(answer.contains("\"isError\":false"), "{answer}");
    }
    call(3, "tcp_connect", json!({"addr": "127.0.0.1:9"})).await;
    call(4, "state_set", json!({"key": "k", "value": 1})).await;

    let slow = tokio::spawn(call(5, "sleep", json!({"ms": 1500})));
    let url = server.at("/metrics");
    let mut during = String::new();
    for _ in 0..50 {
        during = scrape(&url).await;
        if sample(&during, "wasm_agent_tool_calls_in_flight") == Some(1.0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        sample(&during, "wasm_agent_tool_calls_in_flight"),
        Some(1.0),
        "{during}"
    );
    assert!(
        sample(&during, "wasm_agent_pool_instances_in_use").unwrap() >= 1.0,
        "{during}"
    );
    slow.await.unwrap();

    let text = scrape(&url).await;
    let echo_ok = r#"wasm_agent_tool_calls_total{tool="echo",outcome="ok"}"#;
    assert_eq!(sample(&text, echo_ok), Some(2.0), "{text}");
    let echo_count = r#"wasm_agent_tool_call_duration_seconds_count{tool="echo"}"#;
    assert_eq!(sample(&text, echo_count), Some(2.0), "{text}");
    let slept = r#"wasm_agent_tool_call_duration_seconds_sum{tool="sleep"}"#;
    assert!(sample(&text, slept).unwrap() >= 1.5, "{text}");
    assert_eq!(sample(&text, "wasm_agent_tool_calls_in_flight"), Some(0.0));
    let network = r#"wasm_agent_capability_denials_total{kind="network"}"#;
    assert_eq!(sample(&text, network), Some(1.0), "{text}");
    let listen = r#"wasm_agent_capability_denials_total{kind="listen"}"#;
    assert_eq!(sample(&text, listen), Some(0.0), "{text}");
    assert!(sample(&text, "wasm_agent_pool_instance_slots").unwrap() >= 128.0);
    let set = r#"wasm_agent_store_operation_duration_seconds_count{operation="set"}"#;
    assert_eq!(sample(&text, set), Some(1.0), "{text}");
    // The session's record went to the store before its id was returned.
    let saved =
        r#"wasm_agent_store_operation_duration_seconds_count{operation="save_protocol_session"}"#;
    assert_eq!(sample(&text, saved), Some(1.0), "{text}");
    assert!(!text.contains("s3cret"));
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_addr_takes_metrics_off_the_mcp_address() {
    let fixture = path(&component("fixture_tool"));
    let server = Server::start(&["--tools", &fixture, "--metrics-addr", "127.0.0.1:0"]);
    let health = server
        .health
        .clone()
        .expect("--metrics-addr prints its address");
    let base = health.trim_end_matches("/readyz");
    let text = scrape(&format!("{base}/metrics")).await;
    assert!(text.contains("wasm_agent_tool_calls_in_flight 0"), "{text}");
    let main = reqwest::get(server.at("/metrics")).await.unwrap();
    assert_ne!(main.status(), StatusCode::OK);
    assert!(!main.text().await.unwrap().contains("wasm_agent_"));
}
