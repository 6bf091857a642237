//! `wasm-agent run` end to end: the real binary against the scripted provider
//! on loopback.

use std::io::Write;
use std::process::{Output, Stdio};

use serde_json::{Value, json};

use crate::common::{assert_clean_failure, component, stderr, stdout, temp_dir, wasm_agent};
use crate::provider_server::{ProviderServer, anthropic, openai};

/// Runs `wasm-agent run ARGS` with `stdin` and provider keys set.
pub(crate) async fn run(args: Vec<String>, stdin: &str) -> Output {
    let stdin = stdin.to_string();
    tokio::task::spawn_blocking(move || {
        let mut child = wasm_agent()
            .arg("run")
            .args(&args)
            .env("OPENAI_API_KEY", "sk-test")
            .env("ANTHROPIC_API_KEY", "sk-ant-test")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("wasm-agent runs");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap()
}

fn args(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn calculator() -> String {
    component("calculator").display().to_string()
}

fn fixture() -> String {
    component("fixture_tool").display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_output_has_text_calls_and_usage() {
    let server = ProviderServer::start(vec![
        openai::tool_calls(&[("call_1", "calculate", r#"{"expression": "2+3"}"#)]),
        openai::text("It is 5."),
    ])
    .await;
    let url = server.openai_url();
    let calc = calculator();
    let output = run(
        args(&[
            "What is 2+3?",
            "--model",
            "openai:gpt-4o-mini",
            "--base-url",
            &url,
            "--tools",
            &calc,
            "--json",
        ]),
        "",
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let result: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(result["text"], "It is 5.");
    assert_eq!(result["stop_reason"], "answered");
    assert_eq!(result["roundtrips"], 1);
    assert_eq!(result["tool_calls"][0]["name"], "calculate");
    assert_eq!(result["tool_calls"][0]["content"], "5");
    assert_eq!(result["tool_calls"][0]["cached"], false);
    assert!(result["tool_calls"][0]["duration_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(result["usage"]["total_tokens"], 198);
    assert_eq!(server.requests()[0].body["model"], "gpt-4o-mini");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_the_answer_and_shows_each_tool_call() {
    let server = ProviderServer::start(vec![
        anthropic::stream_tool_uses(&[("toolu_1", "calculate", r#"{"expression": "6*7"}"#)]),
        anthropic::stream_text(&["The answer ", "is 42."]),
    ])
    .await;
    let url = server.url();
    let calc = calculator();
    let output = run(
        args(&[
            "6*7?",
            "--model",
            "anthropic:claude-sonnet-4-5",
            "--base-url",
            &url,
            "--tools",
            &calc,
        ]),
        "",
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "The answer is 42.\n");
    let err = stderr(&output);
    assert!(
        err.contains("[tool] calculate {\"expression\":\"6*7\"}"),
        "{err}"
    );
    assert!(err.contains(" ms  ok"), "{err}");
    assert!(
        err.contains("usage: 50 prompt + 30 completion = 80 tokens"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_state_and_conversation_survive_two_runs() {
    let data = temp_dir();
    let server = ProviderServer::start(vec![
        openai::tool_calls(&[("c1", "state_set", r#"{"key": "city", "value": "Lyon"}"#)]),
        openai::text("Noted."),
        openai::tool_calls(&[("c2", "state_get", r#"{"key": "city"}"#)]),
        openai::text("You said Lyon."),
    ])
    .await;
    let url = server.openai_url();
    let fixture = fixture();
    let data_dir = data.path().display().to_string();
    for prompt in ["Remember Lyon", "Which city?"] {
        let output = run(
            args(&[
                prompt,
                "--model",
                "openai:m",
                "--base-url",
                &url,
                "--tools",
                &fixture,
                "--session",
                "trip",
                "--data-dir",
                &data_dir,
                "--json",
            ]),
            "",
        )
        .await;
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    }
    let requests = server.requests();
    let last = requests[3].body["messages"].as_array().unwrap();
    let tool_result = last.last().unwrap();
    assert_eq!(
        tool_result["content"], "\"Lyon\"",
        "state written by the first process"
    );
    let contents: Vec<&str> = last.iter().filter_map(|m| m["content"].as_str()).collect();
    assert!(
        contents.contains(&"Remember Lyon"),
        "the conversation continued: {contents:?}"
    );
    assert!(contents.contains(&"Noted."), "{contents:?}");
}

/// A config loading the fixture, whose `state_set` always needs approval.
fn approval_config(dir: &std::path::Path) -> std::path::PathBuf {
    let config = dir.join("wasm-agent.toml");
    std::fs::write(
        &config,
        format!(
            "[tools.fixture]\ncomponent = {:?}\n\n[agent.tools.state_set]\nrequires_approval = \"always\"\n",
            fixture()
        ),
    )
    .unwrap();
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_is_denied_without_a_terminal_unless_given() {
    let dir = temp_dir();
    let config = approval_config(dir.path());
    let data_dir = dir.path().join("data").display().to_string();
    let config = config.display().to_string();
    let audit = dir.path().join("audit.jsonl");
    for (extra, expected) in [(None, "denied"), (Some("state_set"), "ok")] {
        let server = ProviderServer::start(vec![
            openai::tool_calls(&[("c1", "state_set", r#"{"key": "k", "value": 1}"#)]),
            openai::text("done"),
        ])
        .await;
        let url = server.openai_url();
        let mut list = args(&[
            "set it",
            "--model",
            "openai:m",
            "--base-url",
            &url,
            "--config",
            &config,
            "--data-dir",
            &data_dir,
            "--json",
            "--audit",
            audit.to_str().unwrap(),
        ]);
        if let Some(tool) = extra {
            list.extend(args(&["--approve", tool]));
        }
        let output = run(list, "").await;
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let result: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
        let call = &result["tool_calls"][0];
        if expected == "denied" {
            assert_eq!(call["error"]["kind"], "denied");
            assert!(
                stderr(&output).contains("--approve state_set"),
                "{}",
                stderr(&output)
            );
        } else {
            assert_eq!(call["error"], Value::Null);
        }
    }
    // Both runs are in the audit trail, with who decided.
    let records = crate::audit::calls(&audit);
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!(records[0]["tool"], "state_set");
    assert_eq!(records[0]["outcome"], "denied");
    assert_eq!(records[0]["approval"]["decision"], "denied");
    assert_eq!(records[0]["approval"]["by"], "nobody: no terminal to ask");
    assert_eq!(records[0]["fuel_used"], Value::Null, "it never ran");
    assert_eq!(records[1]["outcome"], "ok");
    assert_eq!(records[1]["approval"]["decision"], "approved");
    assert_eq!(records[1]["approval"]["by"], "the operator (--approve)");
    assert!(records[1]["fuel_used"].as_u64().unwrap() > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_mode_reads_prompts_line_by_line() {
    let server =
        ProviderServer::start(vec![openai::text("Hello!"), openai::text("Still here.")]).await;
    let url = server.openai_url();
    let output = run(
        args(&["--model", "openai:m", "--base-url", &url]),
        "hi\n\nare you there?\n",
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "Hello!\nStill here.\n");
    let second = server.requests()[1].body["messages"].clone();
    assert_eq!(
        second,
        json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "are you there?"}
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_models_and_missing_keys_get_clear_messages() {
    let output = run(args(&["hi", "--model", "gpt-4o"]), "").await;
    assert_clean_failure(&output, 2, "PROVIDER:MODEL");
    let output = run(args(&["hi", "--model", "mistral:large"]), "").await;
    assert_clean_failure(&output, 2, "unknown provider \"mistral\"");
    let output = run(args(&["hi"]), "").await;
    assert_clean_failure(&output, 2, "no model: pass --model");
    let output = tokio::task::spawn_blocking(|| {
        wasm_agent()
            .args(["run", "hi", "--model", "gemini:gemini-2.5-flash"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_clean_failure(&output, 2, "GEMINI_API_KEY");
    let output = run(args(&["hi", "--model", "openai-compatible:qwen"]), "").await;
    assert_clean_failure(&output, 2, "--base-url");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_failures_end_with_exit_1_and_the_reason() {
    let server = ProviderServer::start(vec![crate::provider_server::Reply::Error {
        status: 401,
        retry_after: None,
        body: json!({"error": {"message": "Incorrect API key provided"}}),
    }])
    .await;
    let url = server.openai_url();
    let output = run(args(&["hi", "--model", "openai:m", "--base-url", &url]), "").await;
    assert_clean_failure(
        &output,
        1,
        "Incorrect API key provided (check OPENAI_API_KEY)",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_cancels_the_run_and_its_sandboxed_call() {
    let server = ProviderServer::start(vec![
        openai::tool_calls(&[("c1", "sleep", r#"{"ms": 30000}"#)]),
        openai::text("unreachable"),
    ])
    .await;
    let url = server.openai_url();
    let fixture = fixture();
    let child = wasm_agent()
        .args([
            "run",
            "sleep",
            "--model",
            "openai:m",
            "--base-url",
            &url,
            "--tools",
            &fixture,
        ])
        .args(["--timeout", "60s", "--json"])
        .env("OPENAI_API_KEY", "sk-test")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while server.requests().is_empty() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Let the tool start sleeping inside the sandbox, then interrupt.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let result: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(result["stop_reason"], "cancelled");
    assert_eq!(result["tool_calls"][0]["error"]["kind"], "cancelled");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_is_asked_on_a_terminal() {
    let dir = temp_dir();
    let config = approval_config(dir.path());
    for (answer, expected) in [("y", Value::Null), ("n", json!("denied"))] {
        let server = ProviderServer::start(vec![
            openai::tool_calls(&[("c1", "state_set", r#"{"key": "k", "value": 1}"#)]),
            openai::text("done"),
        ])
        .await;
        // `script` gives the CLI a pseudo-terminal, as an operator's shell would.
        let command = format!(
            "{} run 'set it' --model openai:m --base-url {} --config {} --data-dir {} --json",
            env!("CARGO_BIN_EXE_wasm-agent"),
            server.openai_url(),
            config.display(),
            dir.path().join("data").display()
        );
        let output = crate::common::on_a_terminal(command, answer).await;
        let text = stdout(&output);
        // The question names the component version that would run.
        assert!(
            text.contains("[approval] Allow the tool \"state_set\" (component sha256:"),
            "{text}"
        );
        assert!(
            text.contains(") to run with {\"key\":\"k\",\"value\":1}? [y/N]"),
            "{text}"
        );
        // The terminal interleaves the echoed answer and the prompt with the output.
        let start = text.find("{\"run_id\"").expect(&text);
        let json_line = text[start..].lines().next().unwrap_or_default();
        let result: Value = serde_json::from_str(json_line.trim()).unwrap();
        assert_eq!(
            result["tool_calls"][0]["error"]["kind"].clone(),
            expected,
            "{text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_keeps_session_state_across_processes() {
    let data = temp_dir();
    let data_dir = data.path().display().to_string();
    let fixture = fixture();
    let call = |tool: &str, arguments: &str| {
        let args = args(&[
            "call",
            &fixture,
            tool,
            arguments,
            "--session",
            "p1",
            "--data-dir",
            &data_dir,
        ]);
        async move {
            tokio::task::spawn_blocking(move || wasm_agent().args(&args).output().unwrap())
                .await
                .unwrap()
        }
    };
    let set = call("state_set", r#"{"key": "k", "value": [7]}"#).await;
    assert_eq!(set.status.code(), Some(0), "{}", stderr(&set));
    let get = call("state_get", r#"{"key": "k"}"#).await;
    assert_eq!(stdout(&get).trim(), "[7]");
}
