//! `make bench`: code mode against normal mode on one multi-step task (four
//! dependent tool calls among every example tool), with the scripted model
//! on loopback: model requests and tokens (o200k_base) per run.

#[path = "../../../tests/e2e/code_mode_task.rs"]
mod code_mode_task;
#[allow(dead_code)]
#[path = "../../../tests/e2e/provider_server.rs"]
mod provider_server;

use std::path::Path;

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
}
