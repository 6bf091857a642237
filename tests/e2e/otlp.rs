//! OpenTelemetry through the real CLI: `serve`, `call` and `run` export
//! spans (and `serve` its metrics) over OTLP/HTTP to a collector on
//! loopback that decodes the protobuf wire format. The spans nest as the
//! work did, take the client's `traceparent` (MCP `_meta` or HTTP header)
//! as parent, carry the semantic conventions' attributes, and a tool's
//! requests carry the trace only when its policy grants it.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::common::{assert_clean_failure, component, run, stderr, wasm_agent};
use crate::mcp::{Server, initialize, response_in, wait_for};
use crate::otlp_receiver::{Collector, Received};
use crate::provider_server::{ProviderServer, openai};

/// Exports every 50 ms (spans) and 200 ms (metrics), so a test need not
/// stop the server to see them.
const QUICK_EXPORT: &[(&str, &str)] = &[
    ("OTEL_BSP_SCHEDULE_DELAY", "50"),
    ("OTEL_METRIC_EXPORT_INTERVAL", "200"),
];

const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";
const HEADER_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const HEADER_SPAN: &str = "b7ad6b7169203331";

fn traceparent(trace: &str, span: &str) -> String {
    format!("00-{trace}-{span}-01")
}

/// An HTTP server on loopback that answers `hi` and keeps each request's
/// header lines.
fn backend() -> (String, Arc<Mutex<Vec<Vec<String>>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream);
            let mut lines = Vec::new();
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                lines.push(line.trim_end().to_ascii_lowercase());
                line.clear();
            }
            kept.lock().unwrap().push(lines);
            let _ = reader.get_mut().write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\nconnection: close\r\n\r\nhi",
            );
        }
    });
    (addr, seen)
}

fn the<'a>(spans: &'a [Received], what: &str, test: impl Fn(&Received) -> bool) -> &'a Received {
    let found: Vec<_> = spans.iter().filter(|s| test(s)).collect();
    assert_eq!(found.len(), 1, "one {what} among {spans:#?}");
    found[0]
}

fn child<'a>(spans: &'a [Received], parent: &Received, name: &str) -> &'a Received {
    the(spans, name, |s| {
        s.name == name && s.parent_span_id == parent.span_id
    })
}

/// Waits until the collector holds spans of `trace` named `name`.
async fn spans_until(collector: &Collector, trace: &str, name: &str) -> Vec<Received> {
    wait_for(
        || async { collector.spans() },
        |spans: &Vec<Received>| spans.iter().any(|s| s.trace_id == trace && s.name == name),
    )
    .await
    .into_iter()
    .filter(|s| s.trace_id == trace)
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_exports_nested_spans_under_the_client_s_trace_and_its_metrics() {
    let collector = Collector::start().await;
    let (addr, requests) = backend();
    let (fetch, fixture) = (component("fetch"), component("fixture_tool"));
    let grant = format!("http://{addr}");
    let server = Server::start_with_env(
        &[
            "--otlp",
            &collector.url,
            "--tools",
            fetch.to_str().unwrap(),
            "--tools",
            fixture.to_str().unwrap(),
            "--allow-host",
            &grant,
        ],
        QUICK_EXPORT,
    );
    let session = server.session(None).await;

    // The client's span in `_meta` (SEP-414); the query may hold secrets.
    let params = json!({
        "name": "fetch",
        "arguments": {"url": format!("http://{addr}/page?token=sk-secret")},
        "_meta": {"traceparent": traceparent(CLIENT_TRACE, CLIENT_SPAN)},
    });
    let response = server
        .call_tool_with(&session, 2, params)
        .send()
        .await
        .unwrap();
    let answer = response_in(&response.text().await.unwrap(), 2).unwrap();
    assert_eq!(answer["result"]["isError"], false, "{answer}");

    let spans = spans_until(&collector, CLIENT_TRACE, "GET").await;
    let mcp = the(&spans, "MCP span", |s| s.name == "tools/call fetch");
    assert_eq!(mcp.parent_span_id, CLIENT_SPAN);
    assert_eq!(mcp.kind, 2, "a server span");
    assert_eq!(mcp.service, "wasm-agent");
    assert_eq!(mcp.attr("mcp.method.name"), Some("tools/call"));
    assert_eq!(mcp.attr("gen_ai.tool.name"), Some("fetch"));
    assert_eq!(mcp.attr("jsonrpc.request.id"), Some("2"));
    assert_eq!(mcp.attr("network.transport"), Some("tcp"));
    let call = child(&spans, mcp, "execute_tool fetch");
    assert_eq!(call.attr("gen_ai.operation.name"), Some("execute_tool"));
    assert_eq!(call.attr("gen_ai.tool.name"), Some("fetch"));
    assert!(
        call.attr("gen_ai.tool.call.id")
            .unwrap()
            .starts_with("call-")
    );
    let peak: u64 = call
        .attr("wasm_agent.peak_memory")
        .unwrap()
        .parse()
        .unwrap();
    assert!(peak > 0, "{call:?}");
    assert_eq!(call.attr("wasm_agent.requests"), Some("1"));
    assert_eq!(call.status, 0);
    child(&spans, call, "validate");
    child(&spans, call, "instantiate");
    let guest = child(&spans, call, "guest");
    let http = child(&spans, guest, "GET");
    assert_eq!(http.kind, 3, "a client span");
    assert_eq!(http.attr("http.request.method"), Some("GET"));
    assert_eq!(http.attr("http.response.status_code"), Some("200"));
    assert_eq!(http.attr("server.address"), Some("127.0.0.1"));
    assert_eq!(
        http.attr("url.full"),
        Some(format!("http://{addr}/page").as_str())
    );
    assert!(!format!("{spans:?}").contains("sk-secret"), "{spans:#?}");
    // Without a grant the tool's request carries nothing of the trace.
    let sent = requests.lock().unwrap().clone();
    assert_eq!(sent.len(), 1);
    assert!(
        !sent[0].iter().any(|l| l.starts_with("traceparent")),
        "{sent:?}"
    );

    // The HTTP request's header, when `_meta` has none; a state write.
    let params = json!({"name": "state_set", "arguments": {"key": "k", "value": "1"}});
    let response = server
        .call_tool_with(&session, 3, params)
        .header("traceparent", traceparent(HEADER_TRACE, HEADER_SPAN))
        .send()
        .await
        .unwrap();
    let answer = response_in(&response.text().await.unwrap(), 3).unwrap();
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let spans = spans_until(&collector, HEADER_TRACE, "state set").await;
    let mcp = the(&spans, "MCP span", |s| s.name == "tools/call state_set");
    assert_eq!(mcp.parent_span_id, HEADER_SPAN);
    let call = child(&spans, mcp, "execute_tool state_set");
    let state = child(&spans, child(&spans, call, "guest"), "state set");
    assert_eq!(state.kind, 3);
    assert_eq!(state.attr("db.operation.name"), Some("set"));

    // Logging, an event and a refused socket: spans of their own under the guest.
    let calls = [
        (5, "log", json!({"level": "info", "message": "hello"})),
        (6, "emit", json!({"name": "done", "payload": {"n": 1}})),
        (7, "tcp_connect", json!({"addr": "127.0.0.1:9"})),
    ];
    for (id, name, arguments) in calls {
        server.call_tool(&session, id, name, arguments).await;
    }
    let spans = wait_for(
        || async { collector.spans() },
        |spans: &Vec<Received>| {
            ["host.log", "host.emit", "connect tcp"]
                .iter()
                .all(|name| spans.iter().any(|s| s.name == *name))
        },
    )
    .await;
    for name in ["host.log", "host.emit", "connect tcp"] {
        let span = the(&spans, name, |s| s.name == name);
        let guest = the(&spans, "its guest", |s| s.span_id == span.parent_span_id);
        assert_eq!(guest.name, "guest", "{name}: {spans:#?}");
    }
    let connect = the(&spans, "connect", |s| s.name == "connect tcp");
    assert_eq!(
        connect.attr("wasm_agent.decision"),
        Some("denied"),
        "{connect:?}"
    );
    assert_eq!(connect.attr("server.port"), Some("9"), "{connect:?}");
    assert_eq!(
        connect.attr("network.transport"),
        Some("tcp"),
        "{connect:?}"
    );

    // A refused request: the span says which grant is missing.
    let denied = server
        .call_tool(&session, 4, "fetch", json!({"url": "http://127.0.0.1:9/"}))
        .await;
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    let spans = wait_for(
        || async { collector.spans() },
        |spans: &Vec<Received>| {
            spans
                .iter()
                .any(|s| s.name == "GET" && s.attr("error.type") == Some("capability_denied"))
        },
    )
    .await;
    let refused = the(&spans, "refused request", |s| {
        s.name == "GET" && s.attr("error.type") == Some("capability_denied")
    });
    assert_eq!(refused.status, 2, "{refused:?}");
    let guest = the(&spans, "its guest", |s| s.span_id == refused.parent_span_id);
    let call = the(&spans, "its call", |s| s.span_id == guest.parent_span_id);
    assert_eq!(
        call.attr("error.type"),
        Some("capability_denied"),
        "{call:?}"
    );
    assert_eq!(call.attr("wasm_agent.denials"), Some("1"));
    let mcp = the(&spans, "its MCP span", |s| s.span_id == call.parent_span_id);
    assert_eq!(mcp.attr("error.type"), Some("tool_error"));
    // No client span: a trace of its own.
    assert_ne!(mcp.trace_id, CLIENT_TRACE);

    // The Prometheus metrics, over OTLP.
    let points = wait_for(
        || async { collector.points() },
        |points: &Vec<crate::otlp_receiver::Point>| {
            points.iter().any(|p| {
                p.metric == "wasm_agent.capability.denials"
                    && p.attributes.get("kind").map(String::as_str) == Some("network")
            })
        },
    )
    .await;
    let calls = |tool: &str, outcome: &str| {
        points
            .iter()
            .filter(|p| p.metric == "wasm_agent.tool.calls")
            .filter(|p| p.attributes.get("tool").map(String::as_str) == Some(tool))
            .filter(|p| p.attributes.get("outcome").map(String::as_str) == Some(outcome))
            .map(|p| p.value)
            .fold(0.0, f64::max)
    };
    assert_eq!(calls("fetch", "ok"), 1.0, "{points:#?}");
    assert_eq!(calls("fetch", "capability_denied"), 1.0, "{points:#?}");
    assert_eq!(calls("state_set", "ok"), 1.0, "{points:#?}");
    assert!(collector.bad().is_empty(), "{:?}", collector.bad());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_granted_propagate_trace_sends_its_span_as_parent() {
    let collector = Collector::start().await;
    let (addr, requests) = backend();
    let fetch = component("fetch");
    let arguments = json!({"url": format!("http://{addr}/")}).to_string();
    let grant = format!("http://{addr}");
    let url = collector.url.clone();
    let output = tokio::task::spawn_blocking(move || {
        run(&[
            "call",
            fetch.to_str().unwrap(),
            "fetch",
            &arguments,
            "--allow-host",
            &grant,
            "--propagate-trace",
            "--otlp",
            &url,
        ])
    })
    .await
    .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let sent = requests.lock().unwrap().clone();
    let header = sent[0]
        .iter()
        .find_map(|l| l.strip_prefix("traceparent: "))
        .unwrap_or_else(|| panic!("no traceparent in {sent:?}"))
        .to_string();
    let parts: Vec<&str> = header.split('-').collect();
    assert_eq!(parts.len(), 4, "{header}");
    // `call` sent its spans before it exited; the request's parent is the
    // tool's HTTP span.
    let spans = collector.spans();
    let http = the(&spans, "HTTP span", |s| s.name == "GET");
    assert_eq!(
        (parts[1], parts[2]),
        (http.trace_id.as_str(), http.span_id.as_str())
    );
    let guest = the(&spans, "guest", |s| s.span_id == http.parent_span_id);
    let call = the(&spans, "call", |s| s.span_id == guest.parent_span_id);
    assert_eq!(call.name, "execute_tool fetch");
    assert_eq!(call.parent_span_id, "", "a root span");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_exports_the_agent_its_model_requests_and_tool_calls() {
    let collector = Collector::start().await;
    let provider = ProviderServer::start(vec![
        openai::tool_calls(&[("call_1", "calculate", r#"{"expression": "2+3"}"#)]),
        openai::text("It is 5."),
    ])
    .await;
    let (model_url, otlp) = (provider.openai_url(), collector.url.clone());
    let calculator = component("calculator");
    let output = tokio::task::spawn_blocking(move || {
        wasm_agent()
            .args([
                "run",
                "What is 2+3?",
                "--model",
                "openai:m",
                "--base-url",
                &model_url,
            ])
            .args(["--tools", calculator.to_str().unwrap()])
            // The standard variable, not the flag.
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp)
            .env("OPENAI_API_KEY", "sk-test")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let spans = collector.spans();
    let agent = the(&spans, "agent span", |s| {
        s.name == "invoke_agent wasm-agent"
    });
    assert_eq!(agent.parent_span_id, "");
    assert_eq!(agent.attr("gen_ai.operation.name"), Some("invoke_agent"));
    assert_eq!(agent.attr("wasm_agent.roundtrips"), Some("1"));
    let chats: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "chat m" && s.parent_span_id == agent.span_id)
        .collect();
    assert_eq!(chats.len(), 2, "{spans:#?}");
    for chat in &chats {
        assert_eq!(chat.kind, 3);
        assert_eq!(chat.attr("gen_ai.operation.name"), Some("chat"));
        assert_eq!(chat.attr("gen_ai.provider.name"), Some("openai"));
        assert_eq!(chat.attr("gen_ai.request.model"), Some("m"));
        assert_eq!(chat.attr("server.address"), Some("127.0.0.1"));
        assert!(chat.attr("gen_ai.usage.input_tokens").is_some(), "{chat:?}");
    }
    let call = child(&spans, agent, "execute_tool calculate");
    assert_eq!(call.attr("gen_ai.tool.name"), Some("calculate"));
    // Neither the prompt nor the arguments are in any span.
    assert!(!format!("{spans:?}").contains("2+3"), "{spans:#?}");
    // The model's server got no trace context either.
    assert!(
        provider
            .requests()
            .iter()
            .all(|r| r.header("traceparent").is_none())
    );
}

#[test]
fn bad_telemetry_settings_are_refused_by_name() {
    let output = run(&["tools", "--otlp", "127.0.0.1:4318"]);
    assert_clean_failure(&output, 2, "--otlp \"127.0.0.1:4318\"");
    let output = wasm_agent()
        .args(["tools"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .output()
        .unwrap();
    assert_clean_failure(&output, 2, "OTEL_EXPORTER_OTLP_PROTOCOL=\"grpc\"");
    assert!(
        stderr(&output).contains("http/protobuf"),
        "{}",
        stderr(&output)
    );
}

/// Over stdio the client's `_meta` parents the request's span the same way,
/// with the transport named `pipe`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_over_stdio_takes_the_client_s_trace_from_meta() {
    let collector = Collector::start().await;
    let fixture = component("fixture_tool");
    let mut server = wasm_agent()
        .args(["serve", "--stdio", "--otlp", &collector.url, "--tools"])
        .arg(&fixture)
        .envs(QUICK_EXPORT.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = server.stdin.take().unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let mut send = |message: Value| writeln!(stdin, "{message}").unwrap();
    send(initialize());
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "echo",
            "arguments": {"text": "hi"},
            "_meta": {"traceparent": traceparent(CLIENT_TRACE, CLIENT_SPAN)},
        }}),
    );
    let answer = lines
        .by_ref()
        .map_while(Result::ok)
        .filter_map(|line| serde_json::from_str::<Value>(&line).ok())
        .find(|message| message["id"] == 1)
        .expect("the call was answered");
    assert_eq!(answer["result"]["isError"], false, "{answer}");

    let spans = spans_until(&collector, CLIENT_TRACE, "guest").await;
    let mcp = the(&spans, "MCP span", |s| s.name == "tools/call echo");
    assert_eq!(mcp.parent_span_id, CLIENT_SPAN);
    assert_eq!(mcp.kind, 2, "a server span");
    assert_eq!(mcp.attr("network.transport"), Some("pipe"));
    assert_eq!(mcp.attr("jsonrpc.request.id"), Some("1"));
    let call = child(&spans, mcp, "execute_tool echo");
    child(&spans, call, "guest");
    drop(stdin);
    let _ = server.wait();
}
