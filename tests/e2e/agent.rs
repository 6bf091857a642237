//! The agent loop through the library API, against the scripted provider on
//! loopback and real sandboxed components: tools, approval, cache, limits,
//! cancellation, context and delegation. Wire formats: `providers.rs`;
//! routers: `agent_routers.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use wasm_agent::agent::{
    Agent, AgentBuilder, AgentEvent, AgentTool, Approval, ApprovalRequest, ApprovalRule,
    OverflowStrategy, RunOptions, RunOutput, RunStream, Shortened, StopReason,
};
use wasm_agent::provider::{HttpProvider, ModelSpec, Provider, RetryPolicy};
use wasm_agent::{CallContext, ErrorKind, LoadOptions, Policy, ToolHost};

use crate::common::{component, host};
use crate::provider_server::{ProviderServer, Reply, openai};

pub(crate) fn model(spec: &str, server: &ProviderServer) -> Arc<dyn Provider> {
    let spec: ModelSpec = spec.parse().unwrap();
    let url = match spec.kind {
        wasm_agent::provider::ProviderKind::Anthropic
        | wasm_agent::provider::ProviderKind::Gemini => server.url(),
        _ => server.openai_url(),
    };
    let provider = HttpProvider::with_key(&spec, Some(&url), Some("sk-test".into()))
        .unwrap()
        .retry(RetryPolicy {
            max_retries: 2,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_secs(1),
        });
    Arc::new(provider)
}

pub(crate) async fn calculator() -> ToolHost {
    let host = host();
    host.load(component("calculator"), Policy::default())
        .await
        .unwrap();
    host
}

pub(crate) async fn fixture(timeout: Duration) -> ToolHost {
    let host = host();
    host.load_with(
        component("fixture_tool"),
        LoadOptions::new(Policy::default().timeout(timeout)).name("fixture"),
    )
    .await
    .unwrap();
    host
}

pub(crate) fn agent(spec: &str, server: &ProviderServer, host: &ToolHost) -> AgentBuilder {
    Agent::builder("test")
        .instructions("Use the tools.")
        .model(model(spec, server))
        .tools(AgentTool::all_from(host))
}

/// Feeds every event of a streamed run to `on`; returns the run's output.
pub(crate) async fn drain(mut events: RunStream, mut on: impl FnMut(AgentEvent)) -> RunOutput {
    loop {
        match events.next().await.expect("the stream ends with Done") {
            AgentEvent::Done(outcome) => return outcome.expect("the run succeeds"),
            event => on(event),
        }
    }
}

/// Messages of the `index`-th request.
pub(crate) fn messages(server: &ProviderServer, index: usize) -> Vec<Value> {
    server.requests()[index].body["messages"]
        .as_array()
        .unwrap()
        .clone()
}

/// A host tool counting its calls and echoing its arguments.
pub(crate) fn counting_tool(name: &str, calls: Arc<AtomicUsize>) -> AgentTool {
    AgentTool::host(
        name,
        format!("{name} something"),
        json!({"type": "object", "properties": {"table": {"type": "string"}}, "additionalProperties": false}),
        move |arguments: Value, _| {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok::<_, String>(format!("done with {arguments}"))
            }
        },
    )
    .unwrap()
}

#[tokio::test]
async fn calls_run_in_parallel_batches_of_the_configured_size() {
    let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (r, m) = (running.clone(), most.clone());
    let slow = AgentTool::host(
        "slow",
        "Takes a while.",
        json!({"type": "object"}),
        move |_, _| {
            let (running, most) = (r.clone(), m.clone());
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(100)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, String>("ok")
            }
        },
    )
    .unwrap();
    let ids: Vec<String> = (0..12).map(|i| format!("c{i}")).collect();
    let calls: Vec<(&str, &str, &str)> = ids.iter().map(|id| (id.as_str(), "slow", "{}")).collect();
    let server =
        ProviderServer::start(vec![openai::tool_calls(&calls), openai::text("done")]).await;
    let agent = Agent::builder("batches")
        .model(model("openai:m", &server))
        .tool(slow)
        .parallel_tool_calls(5)
        .build()
        .unwrap();
    let output = agent.run("go", RunOptions::default()).await.unwrap();
    assert_eq!(output.tool_calls.len(), 12);
    assert_eq!(
        most.load(Ordering::SeqCst),
        5,
        "at most one batch of 5 at a time"
    );
    let order: Vec<&str> = output.tool_calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(order, ids, "results keep the model's order");
}

#[tokio::test]
async fn invalid_arguments_and_tool_errors_go_back_to_the_model() {
    let server = ProviderServer::start(vec![
        openai::tool_calls(&[
            ("bad_json", "calculate", r#"{"expression": "#),
            ("bad_schema", "calculate", r#"{"expr": 1}"#),
            ("unknown", "no_such_tool", "{}"),
            ("loops", "spin", "{}"),
        ]),
        openai::text("Some calls failed."),
    ])
    .await;
    let host = calculator().await;
    host.load_with(
        component("fixture_tool"),
        LoadOptions::new(Policy::default().timeout(Duration::from_millis(300))).name("fixture"),
    )
    .await
    .unwrap();
    let agent = agent("openai:m", &server, &host).build().unwrap();
    let output = agent.run("try", RunOptions::default()).await.unwrap();

    assert_eq!(output.text, "Some calls failed.");
    let kinds: Vec<ErrorKind> = output
        .tool_calls
        .iter()
        .map(|c| c.error.as_ref().unwrap().kind)
        .collect();
    assert_eq!(
        kinds,
        [
            ErrorKind::InvalidArguments,
            ErrorKind::InvalidArguments,
            ErrorKind::UnknownTool,
            ErrorKind::Timeout
        ]
    );
    let sent = messages(&server, 1);
    let results: Vec<&str> = sent[3..]
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(
        results[0].starts_with("Error: the arguments are not valid JSON"),
        "{}",
        results[0]
    );
    assert!(
        results[1].contains("expression") && results[1].contains("/: "),
        "names the pointer and the missing property: {}",
        results[1]
    );
    assert!(
        results[2].contains("no tool named \"no_such_tool\"") && results[2].contains("calculate"),
        "{}",
        results[2]
    );
    assert!(
        results[3].starts_with("Error: ") && results[3].contains("300ms"),
        "{}",
        results[3]
    );
}

#[tokio::test]
async fn approval_denied_is_reported_and_granted_runs() {
    let script = || {
        vec![
            openai::tool_calls(&[
                ("c1", "drop_table", r#"{"table": "users"}"#),
                ("c2", "drop_table", r#"{"table": "logs"}"#),
            ]),
            openai::text("ok"),
        ]
    };
    let rule = Approval::rules(vec![ApprovalRule {
        pointer: "/table".into(),
        values: vec![json!("users"), json!("orders")],
    }]);
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));

    for approve in [false, true] {
        let server = ProviderServer::start(script()).await;
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = asked.clone();
        let agent = Agent::builder("approval")
            .model(model("openai:m", &server))
            .tool(counting_tool("drop_table", calls.clone()).requires_approval(rule.clone()))
            .approval_handler(Arc::new(move |request: &ApprovalRequest| {
                seen.lock().unwrap().push(request.arguments.clone());
                approve
            }))
            .build()
            .unwrap();
        let output = agent.run("clean up", RunOptions::default()).await.unwrap();
        let users = &output.tool_calls[0];
        if approve {
            assert!(users.is_ok(), "{users:?}");
            assert_eq!(calls.load(Ordering::SeqCst), 2);
        } else {
            assert_eq!(users.error.as_ref().unwrap().kind, ErrorKind::Denied);
            assert!(users.model_content.contains("did not approve"));
            assert_eq!(
                calls.load(Ordering::SeqCst),
                1,
                "only the call needing no approval ran"
            );
        }
        assert!(output.tool_calls[1].is_ok(), "logs needs no approval");
    }
    assert_eq!(
        *asked.lock().unwrap(),
        vec![json!({"table": "users"}), json!({"table": "users"})],
        "asked only for the rule's values"
    );
}

#[tokio::test]
async fn cached_results_are_reused_per_tenant_only() {
    let server = ProviderServer::with(|_, index| {
        if index % 2 == 0 {
            // The same arguments, keys in another order each time.
            let arguments = if index % 4 == 0 {
                r#"{"table": "t", "limit": 1}"#
            } else {
                r#"{"limit": 1, "table": "t"}"#
            };
            openai::tool_calls(&[("c", "lookup", arguments)])
        } else {
            openai::text("ok")
        }
    })
    .await;
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let lookup =
        AgentTool::host(
            "lookup",
            "Look up rows.",
            json!({"type": "object"}),
            move |_, _| {
                let calls = counter.clone();
                async move {
                    Ok::<_, String>(format!("result {}", calls.fetch_add(1, Ordering::SeqCst)))
                }
            },
        )
        .unwrap()
        .cache_ttl(Duration::from_secs(60));
    let agent = Agent::builder("cache")
        .model(model("openai:m", &server))
        .tool(lookup)
        .build()
        .unwrap();
    let run = |tenant: &str| {
        let options = RunOptions::new().context(CallContext::new().tenant(tenant));
        let agent = agent.clone();
        async move {
            agent
                .run("look", options)
                .await
                .unwrap()
                .tool_calls
                .remove(0)
        }
    };
    let first = run("acme").await;
    let second = run("acme").await;
    let other = run("globex").await;
    assert!(!first.cached && second.cached && !other.cached);
    assert_eq!(second.content, first.content);
    assert_eq!(
        other.content, "result 1",
        "another tenant never sees acme's result"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

pub(crate) fn offered(server: &ProviderServer, index: usize) -> Vec<String> {
    server.requests()[index].body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn oversized_results_are_truncated_or_summarized_for_the_model_only() {
    let rows: Vec<Value> = (0..200)
        .map(|i| json!({"id": i, "name": format!("row {i}")}))
        .collect();
    let big = Value::Array(rows).to_string();
    let big_tool = |strategy| {
        let big = big.clone();
        AgentTool::host(
            "rows",
            "All rows.",
            json!({"type": "object"}),
            move |_, _| {
                let big = big.clone();
                async move { Ok::<_, String>(big) }
            },
        )
        .unwrap()
        .max_chars(500, strategy)
    };
    // Summarizer works, then fails (400): the second falls back to truncation.
    let server = ProviderServer::start(vec![
        openai::tool_calls(&[("c", "rows", "{}")]),
        openai::text("200 rows with ids 0-199."),
        openai::text("ok"),
        openai::tool_calls(&[("c", "rows", "{}")]),
        Reply::Error {
            status: 400,
            retry_after: None,
            body: json!({"error": {"message": "context too long"}}),
        },
        openai::text("ok"),
    ])
    .await;
    for (strategy, shortened) in [
        (OverflowStrategy::Summarize, Shortened::Summarized),
        (OverflowStrategy::Summarize, Shortened::Truncated),
    ] {
        let agent = Agent::builder("limits")
            .model(model("openai:m", &server))
            .tool(big_tool(strategy))
            .build()
            .unwrap();
        let output = agent.run("rows?", RunOptions::default()).await.unwrap();
        let call = &output.tool_calls[0];
        assert_eq!(call.content, big, "the full result stays in the output");
        assert_eq!(call.shortened, Some(shortened));
        assert!(call.model_content.chars().count() <= 500);
        if shortened == Shortened::Truncated {
            assert!(
                call.model_content.starts_with("[{\"id\":0"),
                "{}",
                call.model_content
            );
            assert!(
                call.model_content.contains("omitted"),
                "{}",
                call.model_content
            );
        } else {
            assert_eq!(call.model_content, "200 rows with ids 0-199.");
        }
    }
    let requests = server.requests();
    let summary_prompt = requests[1].body["messages"][0]["content"].as_str().unwrap();
    assert!(
        summary_prompt.contains("\"name\":\"row 199\""),
        "the summarizer sees it all"
    );
}

#[tokio::test]
async fn cancelling_a_run_stops_its_sandboxed_call() {
    let server = ProviderServer::start(vec![
        openai::tool_calls(&[("c", "sleep", r#"{"ms": 20000}"#)]),
        openai::text("unreachable"),
    ])
    .await;
    let host = fixture(Duration::from_secs(60)).await;
    let agent = agent("openai:m", &server, &host).build().unwrap();
    let context = CallContext::new();
    let cancel = context.cancellation.clone();
    let events = agent.stream("sleep", RunOptions::new().context(context));
    let outcome = drain(events, |event| {
        if let AgentEvent::ToolCallStarted { .. } = event {
            // Cancel once the guest is asleep inside the sandbox.
            let cancel = cancel.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                cancel.cancel();
            });
        }
    })
    .await;
    assert_eq!(outcome.stop_reason, StopReason::Cancelled);
    assert_eq!(
        outcome.tool_calls[0].error.as_ref().unwrap().kind,
        ErrorKind::Cancelled
    );
    let duration = outcome.tool_calls[0].duration;
    assert!(
        duration >= Duration::from_millis(300) && duration < Duration::from_secs(5),
        "stopped mid-sleep, not before it or at its end: {duration:?}"
    );
    assert_eq!(
        server.requests().len(),
        1,
        "no model request after cancelling"
    );
}

#[tokio::test]
async fn the_roundtrip_limit_stops_a_model_that_never_answers() {
    let server = ProviderServer::with(|_, index| {
        openai::tool_calls(&[(
            &format!("c{index}"),
            "calculate",
            r#"{"expression": "1+1"}"#,
        )])
    })
    .await;
    let host = calculator().await;
    let agent = agent("openai:m", &server, &host)
        .max_tool_roundtrips(2)
        .build()
        .unwrap();
    let output = agent.run("loop", RunOptions::default()).await.unwrap();
    assert_eq!(output.stop_reason, StopReason::MaxToolRoundtrips);
    assert_eq!(output.roundtrips, 2);
    assert_eq!(output.tool_calls.len(), 2);
    assert!(output.text.contains("2 roundtrips"), "{}", output.text);
    assert_eq!(server.requests().len(), 3);
    // The history stays valid: the unanswered call got a result.
    let last = output.messages.last().unwrap();
    assert!(matches!(last, wasm_agent::provider::Message::ToolResult(r) if r.is_error));
}

#[tokio::test]
async fn truncation_keeps_the_first_items_that_fit_and_says_how_many_were_cut() {
    let server = ProviderServer::start(vec![
        openai::tool_calls(&[("c", "big_output", r#"{"bytes": 5000}"#)]),
        openai::text("ok"),
    ])
    .await;
    let host = fixture(Duration::from_secs(5)).await;
    let tools = AgentTool::all_from(&host)
        .into_iter()
        .map(|t| t.max_chars(300, OverflowStrategy::Truncate));
    let agent = Agent::builder("limits")
        .model(model("openai:m", &server))
        .tools(tools)
        .build()
        .unwrap();
    let output = agent.run("big", RunOptions::default()).await.unwrap();
    let call = &output.tool_calls[0];
    assert_eq!(call.content.len(), 5000);
    assert_eq!(call.shortened, Some(Shortened::Truncated));
    assert!(call.model_content.chars().count() <= 300);
    assert!(
        call.model_content.contains("characters omitted"),
        "{}",
        call.model_content
    );
    let sent = messages(&server, 1);
    assert_eq!(sent.last().unwrap()["content"], call.model_content.as_str());
}

/// Keeps every report the host gives it.
#[derive(Default)]
struct Reports(std::sync::Mutex<Vec<wasm_agent::report::CallReport>>);

impl wasm_agent::report::CallAuditor for Reports {
    fn admit(&self) -> Result<(), String> {
        Ok(())
    }
    fn wants_arguments(&self) -> bool {
        false
    }
    fn record(&self, report: wasm_agent::report::CallReport) {
        self.0.lock().unwrap().push(report);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_result_from_the_cache_is_reported_to_the_auditor_as_cached() {
    let server = ProviderServer::with(|_, n| {
        if n % 2 == 0 {
            openai::tool_calls(&[("c", "calculate", r#"{"expression": "6*7"}"#)])
        } else {
            openai::text("42")
        }
    })
    .await;
    let reports = Arc::new(Reports::default());
    let host = ToolHost::builder()
        .cache_dir(crate::common::cache_dir())
        .auditor(reports.clone())
        .build()
        .unwrap();
    host.load(component("calculator"), Policy::default())
        .await
        .unwrap();
    let calculate = AgentTool::sandboxed(&host, host.tool("calculate").unwrap())
        .cache_ttl(Duration::from_secs(60));
    let agent = Agent::builder("cached")
        .model(model("openai:m", &server))
        .tool(calculate)
        .build()
        .unwrap();
    for cached in [false, true] {
        let output = agent.run("6*7?", RunOptions::new()).await.unwrap();
        assert_eq!(output.tool_calls[0].cached, cached);
        assert_eq!(output.tool_calls[0].content, "42");
    }
    let reports = reports.0.lock().unwrap();
    assert_eq!(reports.len(), 2, "{reports:#?}");
    assert!(!reports[0].cached && reports[0].usage.is_some());
    assert!(reports[1].cached && reports[1].usage.is_none());
    assert_eq!(reports[1].outcome, None);
    assert_eq!(reports[1].tool, "calculate");
    assert_eq!(reports[1].arguments_digest, reports[0].arguments_digest);
}
