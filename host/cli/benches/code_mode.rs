//! `make bench`: code mode against normal mode on one multi-step task (four
//! dependent tool calls among every example tool), with the scripted model
//! on loopback: model requests and tokens (o200k_base) per run. Then a
//! script making 3 and 10 tool calls end to end, side by side: on Monty
//! (`run_monty`, a fresh instance per segment, the state leaving it at each
//! call), on CPython (`run_python`, one instance calling out), and as the
//! agent loop makes them, one model roundtrip per call.

#[path = "../../../tests/e2e/code_mode_task.rs"]
mod code_mode_task;
#[allow(dead_code)]
#[path = "../../../tests/e2e/provider_server.rs"]
mod provider_server;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use wasm_agent::agent::{Agent, AgentTool, RunOptions};
use wasm_agent::pipeline::{HostTools, Pipeline, PipelineCaller};
use wasm_agent::provider::{HttpProvider, ModelSpec};
use wasm_agent::{CallContext, LoadOptions, Policy, ToolHost};

use provider_server::{ProviderServer, openai};

/// Runs of each figure; the median is shown.
const RUNS: usize = 15;

#[tokio::main]
async fn main() {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
    let host = code_mode_task::example_host(&target, &target.join("bench-cache")).await;
    let tools = host.tools().len();
    let normal = code_mode_task::measure(&host, false).await;
    let code = code_mode_task::measure(&host, true).await;
    assert_eq!(code.answer, normal.answer, "both modes reach one answer");
    println!(
        "\ncode mode: a 4-step task ({tools} tools loaded), scripted model, o200k_base tokens"
    );
    println!(
        "{:<8} {:>14} {:>11} {:>14} {:>18}",
        "mode", "model requests", "tool calls", "prompt tokens", "completion tokens"
    );
    for (mode, run) in [("normal", &normal), ("code", &code)] {
        println!(
            "{mode:<8} {:>14} {:>11} {:>14} {:>18}",
            run.model_requests, run.model_tool_calls, run.prompt_tokens, run.completion_tokens
        );
    }
    println!(
        "code mode: {:.1}x fewer model requests, {:.1}x fewer prompt tokens, {:.2}x the completion tokens",
        normal.model_requests as f64 / code.model_requests as f64,
        normal.prompt_tokens as f64 / code.prompt_tokens as f64,
        code.completion_tokens as f64 / normal.completion_tokens as f64,
    );
    scripts(&host, &target).await;
}

/// A script of N sequential calls of `calculate`, end to end, three ways.
async fn scripts(host: &ToolHost, target: &Path) {
    let monty = target.join("wasm32-wasip2/release/run_monty.wasm");
    let policy = Policy::default().allow_call_tool("*");
    host.load_with(monty, LoadOptions::new(policy).name("run_monty"))
        .await
        .expect("run_monty loads (make setup)");
    println!("\nscripts of N tool calls (calculate), end to end, median of {RUNS} runs");
    println!(
        "{:>3} {:>12} {:>12} {:>24} {:>9} {:>9}",
        "N", "monty", "cpython", "agent loop (N+1 turns)", "cpy/mty", "loop/mty"
    );
    for calls in [3usize, 10] {
        let monty = median(|| {
            let code = format!(
                "for i in range({calls}):\n    await calculate(expression='1 + ' + str(i))\n'done'"
            );
            call_script(host, "run_monty", code)
        })
        .await;
        let cpython = median(|| {
            let code = format!(
                "for i in range({calls}):\n    tools.calculate(expression=f'1 + {{i}}')\n'done'"
            );
            call_script(host, "run_python", code)
        })
        .await;
        let agent = median(|| agent_loop(host, calls)).await;
        println!(
            "{calls:>3} {:>12} {:>12} {:>24} {:>8.1}x {:>8.1}x",
            shown(monty),
            shown(cpython),
            shown(agent),
            cpython.as_secs_f64() / monty.as_secs_f64(),
            agent.as_secs_f64() / monty.as_secs_f64(),
        );
    }
}

/// One call of interpreter `tool` with `code`, its calls down the pipeline.
async fn call_script(host: &ToolHost, tool: &str, code: String) -> Duration {
    let tools = HostTools::new(host.clone(), Default::default());
    let caller = PipelineCaller::new(Pipeline::builder().build(), Arc::new(tools), "bench");
    let context = CallContext::new().tool_caller(Arc::new(caller));
    let arguments = json!({ "code": code }).to_string();
    let started = Instant::now();
    let result = host.call(tool, &arguments, &context).await;
    let took = started.elapsed();
    assert!(result.is_ok(), "{tool}: {result:?}");
    assert!(
        result.content.contains("done"),
        "{tool}: {}",
        result.content
    );
    took
}

/// The agent loop making `calls` calls, one per model turn, then answering.
async fn agent_loop(host: &ToolHost, calls: usize) -> Duration {
    let server = ProviderServer::with(move |_, index| {
        if index < calls {
            let arguments = json!({ "expression": format!("1 + {index}") }).to_string();
            openai::tool_calls(&[(&format!("call_{index}"), "calculate", &arguments)])
        } else {
            openai::text("done")
        }
    })
    .await;
    let spec: ModelSpec = "openai:gpt-4o-mini".parse().unwrap();
    let model =
        HttpProvider::with_key(&spec, Some(&server.openai_url()), Some("sk-test".into())).unwrap();
    let agent = Agent::builder("bench")
        .model(Arc::new(model))
        .tools(AgentTool::all_from(host))
        .max_tool_roundtrips(calls + 1)
        .build()
        .unwrap();
    let started = Instant::now();
    let output = agent
        .run("Go.", RunOptions::new().context(CallContext::new()))
        .await
        .unwrap();
    let took = started.elapsed();
    assert_eq!(output.tool_calls.len(), calls, "{:?}", output.tool_calls);
    assert_eq!(output.text, "done");
    took
}

async fn median<F, Fut>(run: F) -> Duration
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Duration>,
{
    run().await; // warm
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        times.push(run().await);
    }
    times.sort();
    times[RUNS / 2]
}

fn shown(duration: Duration) -> String {
    let micros = duration.as_secs_f64() * 1e6;
    if micros < 10_000.0 {
        format!("{micros:.0} µs")
    } else {
        format!("{:.1} ms", micros / 1000.0)
    }
}
