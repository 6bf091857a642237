//! Code mode under `wasm-agent run` and the agent library: the model is
//! offered one `run_code` tool, its script calls the run's tools on the
//! path the model's own calls take (approval included), and cancelling the
//! run stops the script and its inner calls.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wasm_agent::agent::{Agent, AgentTool, CodeMode, RunOptions, StopReason};
use wasm_agent::provider::{HttpProvider, ModelSpec};
use wasm_agent::{CallContext, ErrorKind, LoadOptions, Policy};

use crate::code_mode::assert_inner_call_cancelled;
use crate::code_mode_task::{Measured, example_host, measure};
use crate::common::{assert_clean_failure, cache_dir, component, root, stderr, stdout, temp_dir};
use crate::polyglot::polyglot;
use crate::provider_server::{ProviderServer, openai};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_step_task_takes_two_model_requests_in_code_mode() {
    let host = example_host(&root().join("target"), &cache_dir()).await;
    let normal: Measured = measure(&host, false).await;
    let code = measure(&host, true).await;
    assert_eq!(
        (normal.model_requests, normal.model_tool_calls),
        (5, 4),
        "{normal:?}"
    );
    assert_eq!(
        (code.model_requests, code.model_tool_calls),
        (2, 1),
        "{code:?}"
    );
    assert_eq!(code.answer, normal.answer, "both modes reach one answer");
    // 3*12.5 + 8.25 + 2*24.99 + 4*6.4 = 121.33; with 8% tax 131.0364.
    assert!(
        normal
            .answer
            .starts_with("With 8% sales tax the orders come to $131.0364."),
        "{}",
        normal.answer
    );
    assert!(
        normal.answer.contains("| A-103 | desk lamp"),
        "{}",
        normal.answer
    );
    assert!(code.completion_tokens > 0 && normal.completion_tokens > 0);
    assert!(
        code.prompt_tokens * 3 < normal.prompt_tokens,
        "code mode {} against normal {} prompt tokens",
        code.prompt_tokens,
        normal.prompt_tokens
    );
}

/// `wasm-agent run ARGS` with an OpenAI key set and `stdin` piped in (not a terminal).
pub(crate) async fn run_cli(args: Vec<String>) -> std::process::Output {
    tokio::task::spawn_blocking(move || {
        crate::common::wasm_agent()
            .arg("run")
            .args(&args)
            .env("OPENAI_API_KEY", "sk-test")
            .stdin(std::process::Stdio::piped())
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The model calls `run_code` with `code`, then answers "done".
async fn scripted(code: &str) -> ProviderServer {
    let arguments = json!({ "code": code }).to_string();
    ProviderServer::start(vec![
        openai::tool_calls(&[("call_1", "run_code", &arguments)]),
        openai::text("done"),
    ])
    .await
}

/// The paths of the calculator, the JSON tools and an interpreter.
fn tool_args(interpreter: &str) -> Vec<String> {
    let mut args = Vec::new();
    for path in [
        component("calculator"),
        component("json"),
        polyglot(interpreter),
    ] {
        args.push("--tools".to_string());
        args.push(path.display().to_string());
    }
    args
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_offers_one_tool_that_lists_the_others_as_functions() {
    let code = "total = tools.calculate(expression='6 * 7')\n\
                name = tools.json_query(document='{\"who\": \"ada\"}', path='who')\n\
                print(name, total)";
    let server = scripted(code).await;
    let mut args = strings(&["Who and how much?", "--model", "openai:gpt-4o-mini"]);
    args.extend(strings(&[
        "--base-url",
        &server.openai_url(),
        "--code-mode",
        "--json",
    ]));
    args.extend(tool_args("run_python"));
    let output = run_cli(args).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let result: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(result["tools_offered"], json!(["run_code"]));
    assert_eq!(result["tool_calls"][0]["name"], "run_code");
    assert_eq!(result["tool_calls"][0]["content"], "stdout:\n\"ada\" 42");
    let requests = server.requests();
    let offered = requests[0].body["tools"].as_array().unwrap().clone();
    assert_eq!(offered.len(), 1, "{offered:?}");
    let description = offered[0]["function"]["description"].as_str().unwrap();
    for line in [
        "- tools.calculate(expression: str) -> str",
        "- tools.json_query(document: str, path: str) -> str",
        "- tools.json_format(document: str, indent: int | None = None, sort_keys: bool | None = None) -> str",
    ] {
        assert!(description.contains(line), "{line:?} in {description}");
    }
    assert!(!description.contains("tools.run_python"), "{description}");
    assert_eq!(
        offered[0]["function"]["parameters"]["required"],
        json!(["code"])
    );
    let messages = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(messages.last().unwrap()["content"], "stdout:\n\"ada\" 42");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_s_call_needing_approval_is_asked_for_as_the_model_s_would_be() {
    let dir = temp_dir();
    let config = dir.path().join("wasm-agent.toml");
    std::fs::write(
        &config,
        "[calls.calculate]\nrequires_approval = \"always\"\n",
    )
    .unwrap();
    let code = "try:\n    print(tools.calculate(expression='2 + 2'))\n\
                except ToolCallError as e:\n    print(e.error_kind)";
    for (approve, printed) in [(None, "stdout:\ndenied"), (Some("calculate"), "stdout:\n4")] {
        let server = scripted(code).await;
        let mut args = strings(&["Add.", "--model", "openai:gpt-4o-mini", "--json"]);
        args.extend(strings(&[
            "--base-url",
            &server.openai_url(),
            "--code-mode=python",
        ]));
        args.extend(strings(&["--config", &config.display().to_string()]));
        if let Some(tool) = approve {
            args.extend(strings(&["--approve", tool]));
        }
        args.extend(tool_args("run_python"));
        let output = run_cli(args).await;
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let result: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
        assert_eq!(result["tool_calls"][0]["content"], printed, "{approve:?}");
        if approve.is_none() {
            assert!(
                stderr(&output).contains(
                    "[approval] calculate needs approval and there is no terminal to ask: denied"
                ),
                "{}",
                stderr(&output)
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_call_tool_narrows_what_javascript_code_may_call() {
    let code = "const sum = tools.calculate({ expression: '1 + 2' });\n\
                let refused;\n\
                try { tools.json_query({ document: '{}', path: 'a' }); }\n\
                catch (e) { refused = e.errorKind; }\n\
                `${sum} ${refused}`";
    let server = scripted(code).await;
    let mut args = strings(&["Go.", "--model", "openai:gpt-4o-mini", "--json"]);
    args.extend(strings(&[
        "--base-url",
        &server.openai_url(),
        "--code-mode=javascript",
    ]));
    args.extend(strings(&["--allow-call-tool", "calculate"]));
    args.extend(tool_args("run_javascript"));
    let output = run_cli(args).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let result: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(
        result["tool_calls"][0]["content"],
        "value:\n\"3 capability_denied\""
    );
    let description = server.requests()[0].body["tools"][0]["function"]["description"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        description.contains("- tools.calculate({ expression: string }) -> string"),
        "{description}"
    );
    assert!(!description.contains("json_query"), "{description}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_code_mode_input_gets_a_clear_error() {
    let calc = component("calculator").display().to_string();
    let base = ["Hi", "--model", "openai:gpt-4o-mini", "--tools", &calc];
    let mut args = strings(&base);
    args.push("--code-mode=ruby".into());
    let output = run_cli(args).await;
    assert_clean_failure(
        &output,
        2,
        "--code-mode: \"ruby\" is not a code-mode language",
    );
    let mut args = strings(&base);
    args.push("--code-mode".into());
    let output = run_cli(args).await;
    assert_clean_failure(
        &output,
        2,
        "code mode needs an interpreter tool: load run_monty.wasm or run_python.wasm or \
         run_javascript.wasm with --tools",
    );
    let mut args = strings(&base);
    args.push("--code-mode=javascript".into());
    let output = run_cli(args).await;
    assert_clean_failure(&output, 2, "load run_javascript.wasm with --tools");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_the_run_stops_the_script_and_its_inner_call() {
    let host = crate::common::host();
    host.load(component("fixture_tool"), Policy::default())
        .await
        .unwrap();
    host.load_with(
        polyglot("run_python"),
        LoadOptions::new(Policy::default().allow_call_tool("sleep")).name("run_python"),
    )
    .await
    .unwrap();
    let arguments = json!({ "code": "tools.sleep(ms=30000)" }).to_string();
    let server = ProviderServer::start(vec![openai::tool_calls(&[(
        "call_1", "run_code", &arguments,
    )])])
    .await;
    let spec: ModelSpec = "openai:gpt-4o-mini".parse().unwrap();
    let model =
        HttpProvider::with_key(&spec, Some(&server.openai_url()), Some("sk-test".into())).unwrap();
    let agent = Agent::builder("cancelled")
        .model(Arc::new(model))
        .tools(AgentTool::all_from(&host))
        .code_mode(CodeMode::cpython())
        .build()
        .unwrap();
    let mut events = host.subscribe();
    let context = CallContext::new();
    let cancel = context.cancellation.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let output = agent
        .run("Sleep.", RunOptions::new().context(context))
        .await
        .unwrap();
    assert_eq!(output.stop_reason, StopReason::Cancelled);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let error = output.tool_calls[0].error.as_ref().expect("cancelled");
    assert_eq!(error.kind, ErrorKind::Cancelled, "{error}");
    assert_inner_call_cancelled(&mut events, "sleep");
}

#[tokio::test]
async fn an_agent_without_the_interpreter_is_refused_at_build() {
    let host = crate::common::host();
    host.load(component("calculator"), Policy::default())
        .await
        .unwrap();
    let spec: ModelSpec = "openai:gpt-4o-mini".parse().unwrap();
    let model =
        HttpProvider::with_key(&spec, Some("http://127.0.0.1:9/v1"), Some("sk-test".into()))
            .unwrap();
    let error = Agent::builder("refused")
        .model(Arc::new(model))
        .tools(AgentTool::all_from(&host))
        .code_mode(CodeMode::javascript())
        .build()
        .err()
        .expect("refused");
    assert!(
        error
            .to_string()
            .contains("with tool \"run_javascript\", which this agent does not have"),
        "{error}"
    );
}
