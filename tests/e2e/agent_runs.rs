//! The agent loop's run context through the library API: what sandboxed and
//! host tools see of the run, tools changed between runs, and delegation to
//! other agents (by host tools, and by sandboxed tools their policy allows).

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use serde_json::{Value, json};
use wasm_agent::agent::{Agent, AgentTool, RunOptions};
use wasm_agent::budget::RequestBudget;
use wasm_agent::{CallContext, ErrorKind, LoadOptions, Policy};

use crate::agent::{agent, counting_tool, fixture, model, offered};
use crate::common::{component, host};
use crate::provider_server::{ProviderServer, openai};

#[tokio::test]
async fn run_context_reaches_sandboxed_and_host_tools() {
    let server = ProviderServer::start(vec![
        openai::tool_calls(&[("c1", "context", "{}"), ("c2", "whoami", "{}")]),
        openai::text("ok"),
    ])
    .await;
    let host = fixture(Duration::from_secs(5)).await;
    let whoami = AgentTool::host(
        "whoami",
        "Who is asking.",
        json!({"type": "object"}),
        |_, context: wasm_agent::agent::ToolContext| async move {
            context
                .set_state("seen", &json!(true))
                .await
                .map_err(|e| e.to_string())?;
            let seen = context
                .get_state("seen")
                .await
                .map_err(|e| e.to_string())?
                .unwrap();
            context.emit("asked", json!({"by": context.call.user_id}));
            Ok::<_, String>(format!(
                "{} {} {:?} {} {}",
                context.call.run_id,
                context.call.session_id,
                context.call.tenant_id,
                seen,
                context.dependency("region").unwrap_or("none")
            ))
        },
    )
    .unwrap();
    let agent = agent("openai:m", &server, &host)
        .tool(whoami)
        .dependency("region", "eu-west")
        .build()
        .unwrap();
    let mut events = agent.events().subscribe();
    let context = CallContext::new()
        .session("s-1")
        .user("u-1")
        .tenant("t-1")
        .metadata("plan", "pro");
    let run_id = context.run_id.clone();
    let output = agent
        .run("who", RunOptions::new().context(context))
        .await
        .unwrap();
    let seen: Value = serde_json::from_str(&output.tool_calls[0].content).unwrap();
    assert_eq!(seen["run_id"], run_id.as_str());
    assert_eq!(seen["session_id"], "s-1");
    assert_eq!(seen["user_id"], "u-1");
    assert_eq!(seen["tenant_id"], "t-1");
    assert_eq!(seen["metadata"]["plan"], "pro");
    assert_eq!(
        output.tool_calls[1].content,
        format!("{run_id} s-1 Some(\"t-1\") true eu-west")
    );
    match events.try_recv().unwrap() {
        wasm_agent::ToolEvent::Emitted {
            tool,
            name,
            payload,
            ..
        } => {
            assert_eq!((tool.as_str(), name.as_str()), ("whoami", "asked"));
            assert_eq!(payload, json!({"by": "u-1"}));
        }
        other => panic!("unexpected event {other:?}"),
    }
}

#[tokio::test]
async fn tools_can_be_added_removed_and_resolved_per_run() {
    let server = ProviderServer::with(|_, _| openai::text("ok")).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let agent = Agent::builder("live")
        .model(model("openai:m", &server))
        .tool(counting_tool("alpha", calls.clone()))
        .tool_resolver(Arc::new(|context: &CallContext, tools: &[AgentTool]| {
            // Tenant "basic" gets no tool whose name starts with "admin".
            tools
                .iter()
                .filter(|t| {
                    context.tenant_id.as_deref() != Some("basic") || !t.name().starts_with("admin")
                })
                .cloned()
                .collect()
        }))
        .build()
        .unwrap();
    agent.run("1", RunOptions::default()).await.unwrap();
    agent
        .add_tool(counting_tool("admin_reset", calls.clone()))
        .unwrap();
    assert!(
        agent
            .add_tool(counting_tool("alpha", calls.clone()))
            .is_err()
    );
    agent.run("2", RunOptions::default()).await.unwrap();
    agent
        .run(
            "3",
            RunOptions::new().context(CallContext::new().tenant("basic")),
        )
        .await
        .unwrap();
    assert!(agent.remove_tool("alpha").is_some());
    agent.run("4", RunOptions::default()).await.unwrap();
    assert_eq!(offered(&server, 0), ["alpha"]);
    assert_eq!(offered(&server, 1), ["admin_reset", "alpha"]);
    assert_eq!(offered(&server, 2), ["alpha"]);
    assert_eq!(offered(&server, 3), ["admin_reset"]);
}

/// A lead agent with `tool`, and a researcher it may delegate to, both
/// answered by `server`.
fn lead_with_researcher(server: &ProviderServer, tool: AgentTool) -> Agent {
    let researcher = Agent::builder("researcher")
        .model(model("openai:researcher", server))
        .build()
        .unwrap();
    Agent::builder("lead")
        .model(model("openai:lead", server))
        .tool(tool)
        .sub_agent(researcher)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_host_tool_delegates_to_another_agent() {
    let server = ProviderServer::start(vec![
        openai::tool_calls(&[(
            "c1",
            "ask_researcher",
            r#"{"question": "capital of France?"}"#,
        )]),
        openai::text("Paris"),
        openai::text("The researcher says: Paris."),
    ])
    .await;
    let ask = AgentTool::host(
        "ask_researcher",
        "Ask the research agent.",
        json!({"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}),
        |arguments: Value, context: wasm_agent::agent::ToolContext| async move {
            let question = arguments["question"].as_str().unwrap_or_default().to_string();
            context
                .delegate("researcher", &question)
                .await
                .map_err(|e| e.to_string())
        },
    )
    .unwrap();
    let lead = lead_with_researcher(&server, ask);
    let output = lead
        .run("What is the capital of France?", RunOptions::default())
        .await
        .unwrap();
    assert_eq!(output.tool_calls[0].content, "Paris");
    assert_eq!(output.text, "The researcher says: Paris.");
    let requests = server.requests();
    assert_eq!(requests[1].body["model"], "researcher");
    assert_eq!(
        requests[1].body["messages"][0]["content"],
        "capital of France?"
    );
    assert!(
        lead.delegate("nobody", "x", &CallContext::new())
            .await
            .is_err(),
        "unknown agents are refused"
    );
}

#[tokio::test]
async fn a_host_tool_cannot_delegate_past_its_requests_budget_of_runs() {
    // The lead calls a tool that delegates three times; the request allows two runs.
    let server = ProviderServer::start(vec![
        openai::tool_calls(&[("c1", "ask_thrice", "{}")]),
        openai::text("one"),
        openai::text("two"),
        openai::text("done"),
    ])
    .await;
    let ask = AgentTool::host(
        "ask_thrice",
        "Ask the research agent three times.",
        json!({"type": "object"}),
        |_: Value, context: wasm_agent::agent::ToolContext| async move {
            let mut answers = Vec::new();
            for _ in 0..3 {
                answers.push(match context.delegate("researcher", "?").await {
                    Ok(answer) => answer,
                    Err(error) => format!("refused: {error}"),
                });
            }
            Ok::<_, String>(answers.join(" | "))
        },
    )
    .unwrap();
    let lead = lead_with_researcher(&server, ask);
    let context = CallContext::new().budget(RequestBudget::new(1000, 2));
    let output = lead
        .run("go", RunOptions::new().context(context))
        .await
        .unwrap();
    assert_eq!(
        output.tool_calls[0].content,
        "one | two | refused: this request has used its budget of 2 delegated runs"
    );
    assert_eq!(server.requests().len(), 4, "no third run asked the model");
}

#[tokio::test]
async fn sandboxed_tools_delegate_only_to_agents_their_policy_names() {
    let researcher = |server: &ProviderServer| {
        Agent::builder("researcher")
            .model(model("openai:researcher", server))
            .build()
            .unwrap()
    };
    let delegate_call = r#"{"agent": "researcher", "input": "capital of France?"}"#;

    // Granted: the guest's host.delegate runs the researcher and gets its answer.
    let server = ProviderServer::start(vec![
        openai::tool_calls(&[("c1", "delegate", delegate_call)]),
        openai::text("Paris"),
        openai::text("Paris, says the researcher."),
    ])
    .await;
    let host = host();
    let policy = Policy::default().allow_delegate("researcher");
    host.load_with(
        component("fixture_tool"),
        LoadOptions::new(policy).name("fixture"),
    )
    .await
    .unwrap();
    let lead = agent("openai:lead", &server, &host)
        .sub_agent(researcher(&server))
        .build()
        .unwrap();
    let output = lead.run("capital?", RunOptions::default()).await.unwrap();
    assert_eq!(output.tool_calls[0].content, "Paris");
    assert_eq!(server.requests()[1].body["model"], "researcher");

    // Not granted: refused before any model request, as a denied capability.
    let server = ProviderServer::start(vec![
        openai::tool_calls(&[("c1", "delegate", delegate_call)]),
        openai::text("I could not ask."),
    ])
    .await;
    let host = fixture(Duration::from_secs(5)).await;
    let lead = agent("openai:lead", &server, &host)
        .sub_agent(researcher(&server))
        .build()
        .unwrap();
    let output = lead.run("capital?", RunOptions::default()).await.unwrap();
    let error = output.tool_calls[0].error.as_ref().unwrap();
    assert_eq!(error.kind, ErrorKind::CapabilityDenied);
    assert!(
        error.message.contains("--allow-delegate researcher"),
        "{}",
        error.message
    );
    assert_eq!(server.requests().len(), 2, "the researcher was never asked");

    // Outside an agent run there is nobody to delegate to.
    let host = crate::common::host();
    host.load_with(
        component("fixture_tool"),
        LoadOptions::new(Policy::default().allow_delegate("*")).name("fixture"),
    )
    .await
    .unwrap();
    let result = host
        .call("delegate", delegate_call, &CallContext::new())
        .await;
    assert!(
        result
            .error
            .as_ref()
            .unwrap()
            .message
            .contains("no agent is running this call"),
        "{result:?}"
    );
}
