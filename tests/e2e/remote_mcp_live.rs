//! Remote MCP tools while a run goes on: progress shown, a tool list that
//! changes between chat turns (`list_changed`), a cancelled run telling the
//! server (`notifications/cancelled`), and streamable HTTP with a bearer
//! token from the environment.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::agent_cli::run;
use crate::common::{assert_clean_failure, component, root, stderr, stdout, temp_dir, wasm_agent};
use crate::mcp::Server;
use crate::provider_server::{ProviderServer, openai};
use crate::remote_mcp::{offered, py_server, python, strings};

fn model_args(provider: &ProviderServer) -> Vec<String> {
    strings(&[
        "--model",
        "openai:gpt-4o-mini",
        "--base-url",
        &provider.openai_url(),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_is_shown_and_a_changed_tool_list_reaches_the_next_chat_turn() {
    let provider = ProviderServer::start(vec![
        openai::tool_calls(&[("c1", "count", r#"{"n": 3}"#), ("c2", "add_tool", "{}")]),
        openai::text("First done."),
        openai::tool_calls(&[("c3", "late", r#"{"word": "hi"}"#)]),
        openai::text("Second done."),
    ])
    .await;
    let mut args = model_args(&provider);
    args.extend(strings(&["--mcp", &py_server(), "--mcp-trust-annotations"]));
    let mut child = wasm_agent()
        .arg("run")
        .args(&args)
        .env("OPENAI_API_KEY", "sk-test")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout_pipe = child.stdout.take().unwrap();
    // The second prompt goes in once the first turn has answered.
    let (seen_tx, seen_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        for line in BufReader::new(stdout_pipe).lines().map_while(Result::ok) {
            if line.contains("First done.") {
                let _ = seen_tx.send(());
            }
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    writeln!(stdin, "Count, then add a tool.").unwrap();
    seen_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the first turn answers");
    writeln!(stdin, "Use the new tool.").unwrap();
    drop(stdin);
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let printed = reader.join().unwrap();
    let err = stderr(&output);
    assert!(output.status.success(), "{err}");
    for step in 1..=3 {
        assert!(
            err.contains(&format!("[progress] {step}/3 step {step}")),
            "{err}"
        );
    }
    assert!(!offered(&provider, 0).iter().any(|t| t == "late"));
    assert!(
        offered(&provider, 2).iter().any(|t| t == "late"),
        "{:?}",
        offered(&provider, 2)
    );
    assert!(printed.contains("Second done."), "{printed}");
    let to_model = provider.requests()[3].body["messages"].to_string();
    assert!(to_model.contains("late hi"), "{to_model}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_tells_the_server_to_stop_the_call() {
    let marks = temp_dir();
    let dir = temp_dir();
    let config = dir.path().join("wasm-agent.toml");
    std::fs::write(
        &config,
        format!(
            "[agent.mcp.py]\ncommand = [{:?}, {:?}]\nenv = [\"MARKS={}\"]\ntrust_annotations = true\n",
            python().display().to_string(),
            root()
                .join("tests/remote-mcp/server.py")
                .display()
                .to_string(),
            marks.path().display()
        ),
    )
    .unwrap();
    let provider = ProviderServer::start(vec![
        openai::tool_calls(&[("c1", "hang", "{}")]),
        openai::text("unused"),
    ])
    .await;
    let mut args = strings(&["Wait."]);
    args.extend(model_args(&provider));
    args.extend(strings(&["--config", &config.display().to_string()]));
    let child = wasm_agent()
        .arg("run")
        .args(&args)
        .env("OPENAI_API_KEY", "sk-test")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !marks.path().join("hang.started").exists() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "hang never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Ctrl-C, as at a terminal.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let err = stderr(&output);
    assert!(err.contains("cancel"), "{err}");
    assert!(
        marks.path().join("hang.cancelled").exists(),
        "the server was not told: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_servers_get_the_bearer_token_from_the_environment() {
    let fixture = component("fixture_tool").display().to_string();
    let server = Server::start_with_env(
        &["--tools", &fixture],
        &[("WASM_AGENT_MCP_TOKEN", "t0ken-for-tests")],
    );
    let url = server.at("/mcp");
    let provider = ProviderServer::start(vec![
        openai::tool_calls(&[("c1", "echo", r#"{"text": "over http"}"#)]),
        openai::text("Echoed."),
    ])
    .await;
    let mut args = strings(&["Echo."]);
    args.extend(model_args(&provider));
    args.extend(strings(&[
        "--mcp",
        &url,
        "--mcp-bearer-env",
        "REMOTE_TOKEN",
        "--mcp-trust-annotations",
        "--json",
    ]));
    let with_token = {
        let args = args.clone();
        tokio::task::spawn_blocking(move || {
            wasm_agent()
                .arg("run")
                .args(&args)
                .env("OPENAI_API_KEY", "sk-test")
                .env("REMOTE_TOKEN", "t0ken-for-tests")
                .output()
                .unwrap()
        })
        .await
        .unwrap()
    };
    let err = stderr(&with_token);
    assert!(with_token.status.success(), "{err}");
    assert!(!err.contains("t0ken"), "the token is never shown: {err}");
    let result: Value = serde_json::from_str(stdout(&with_token).trim()).unwrap();
    assert_eq!(result["tool_calls"][0]["content"], "over http", "{result}");

    // No token in the environment: the flag says which variable is missing.
    let output = run(args.clone(), "").await;
    assert_clean_failure(
        &output,
        2,
        "--mcp-bearer-env names REMOTE_TOKEN, which is not set",
    );
    // A wrong one: the server refuses, and the run stops before the model.
    let wrong = tokio::task::spawn_blocking(move || {
        wasm_agent()
            .arg("run")
            .args(&args)
            .env("OPENAI_API_KEY", "sk-test")
            .env("REMOTE_TOKEN", "wrong")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_clean_failure(&wrong, 2, "initialize failed");
    assert!(stderr(&wrong).contains(&url), "{}", stderr(&wrong));
    assert_eq!(
        provider.requests().len(),
        2,
        "only the first run asked the model"
    );
}
