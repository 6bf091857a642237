//! `wasm-agent run` with tools from other MCP servers: `wasm-agent serve`
//! itself and a server written with the official Python SDK
//! (tests/remote-mcp/server.py), started over stdio, against the scripted
//! provider. Parallel calls across both, approvals, a slow server, a server
//! that dies mid-run, and bad `--mcp` input.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::agent_cli::run;
use crate::common::{assert_clean_failure, cache_dir, component, root, stderr, stdout, temp_dir};
use crate::provider_server::{ProviderServer, openai};

/// The test venv's Python (`make mcp-venv`), which has the official SDK.
pub(crate) fn python() -> PathBuf {
    let python = root().join("target/mcp-venv/bin/python");
    assert!(
        python.is_file(),
        "{} is missing: run `make mcp-venv`",
        python.display()
    );
    python
}

/// The command line that starts the Python SDK server over stdio.
pub(crate) fn py_server() -> String {
    format!(
        "{} {}",
        python().display(),
        root().join("tests/remote-mcp/server.py").display()
    )
}

/// `wasm-agent serve` (stdio) of the fixture component, `extra` appended.
pub(crate) fn serve_fixture(extra: &str) -> String {
    format!(
        "{} serve --stdio --cache-dir {} --tools {} {extra}",
        env!("CARGO_BIN_EXE_wasm-agent"),
        cache_dir().display(),
        component("fixture_tool").display()
    )
}

pub(crate) fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// `run PROMPT --json` against `provider` with `extra` flags; the output.
async fn run_json(provider: &ProviderServer, extra: &[&str]) -> (Value, String) {
    let mut args = strings(&[
        "Go.",
        "--model",
        "openai:gpt-4o-mini",
        "--base-url",
        &provider.openai_url(),
        "--json",
    ]);
    args.extend(strings(extra));
    let output = run(args, "").await;
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    (serde_json::from_str(stdout(&output).trim()).unwrap(), err)
}

/// The names of the tools the model was offered in request `index`.
pub(crate) fn offered(provider: &ProviderServer, index: usize) -> Vec<String> {
    provider.requests()[index].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_of_two_servers_are_offered_together_and_called_in_parallel() {
    let dir = temp_dir();
    let grant = format!("--allow-dir {}:/work:rw", dir.path().display());
    // The Python tool waits for the file the sandboxed one writes: it only
    // meets it if both calls run at once.
    let meeting = dir.path().join("meeting");
    let provider = ProviderServer::start(vec![
        openai::tool_calls(&[
            ("c1", "rendezvous", &json!({"path": meeting}).to_string()),
            (
                "c2",
                "write_path",
                r#"{"path": "/work/meeting", "content": "here"}"#,
            ),
        ]),
        openai::text("Both answered."),
    ])
    .await;
    // `write_path` says it is destructive: it needs the operator's approval.
    let (result, _) = run_json(
        &provider,
        &[
            "--mcp",
            &py_server(),
            "--mcp",
            &serve_fixture(&grant),
            "--approve",
            "write_path",
            "--mcp-trust-annotations",
        ],
    )
    .await;
    let calls = result["tool_calls"].as_array().unwrap();
    assert_eq!(calls[0]["content"], "met", "{result}");
    assert_eq!(calls[1]["content"], "wrote 4 bytes", "{result}");
    assert_eq!(result["text"], "Both answered.");
    let tools = offered(&provider, 0);
    for name in ["weather", "rendezvous", "delete_note", "echo", "write_path"] {
        assert!(tools.iter().any(|t| t == name), "{name} in {tools:?}");
    }
    // The answers went back to the model as tool results.
    let messages = provider.requests()[1].body["messages"].to_string();
    assert!(
        messages.contains("met") && messages.contains("wrote 4 bytes"),
        "{messages}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_deadlines_and_a_server_dying_mid_run_are_clear_errors_to_the_model() {
    let dir = temp_dir();
    let (python, script) = (python(), root().join("tests/remote-mcp/server.py"));
    let config = write(
        dir.path(),
        "wasm-agent.toml",
        &format!(
            "[agent.mcp.py]\ncommand = [{:?}, {:?}]\nprefix = \"py_\"\ntimeout = \"1s\"\n\
             trust_annotations = true\n",
            python.display().to_string(),
            script.display().to_string()
        ),
    );
    let provider = ProviderServer::start(vec![
        openai::tool_calls(&[("c1", "py_delete_note", r#"{"name": "todo"}"#)]),
        openai::tool_calls(&[("c2", "py_hang", "{}")]),
        openai::tool_calls(&[("c3", "py_crash", "{}")]),
        openai::tool_calls(&[("c4", "py_weather", r#"{"city": "Oslo"}"#)]),
        openai::tool_calls(&[("c5", "py_weather", r#"{"town": 1}"#)]),
        openai::text("Done."),
    ])
    .await;
    let audit = dir.path().join("audit.jsonl");
    let audit_flag = audit.display().to_string();
    let (result, _) = run_json(&provider, &["--config", &config, "--audit", &audit_flag]).await;
    let calls = result["tool_calls"].as_array().unwrap();
    // Every call is in the audit trail, as run elsewhere.
    let records = crate::audit::calls(&audit);
    let seen: Vec<(&str, &str)> = records
        .iter()
        .map(|r| (r["tool"].as_str().unwrap(), r["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(
        seen,
        [
            ("py_delete_note", "denied"),
            ("py_hang", "timeout"),
            ("py_crash", "failed"),
            ("py_weather", "ok"),
            ("py_weather", "invalid_arguments"),
        ],
        "{records:#?}"
    );
    for record in &records {
        assert_eq!(record["remote"]["origin"], "MCP server \"py\"", "{record}");
        assert!(
            record["remote"]["version"]
                .as_str()
                .unwrap()
                .starts_with("py/")
        );
        assert_eq!(record["component"], Value::Null, "{record}");
        assert!(
            record["arguments_digest"]
                .as_str()
                .unwrap()
                .starts_with("hmac-sha256:")
        );
    }
    assert_eq!(records[0]["approval"]["decision"], "denied", "{records:#?}");
    assert_eq!(records[0]["call_id"], "c1");
    let verified = crate::common::run(&["audit", "verify", &audit_flag]);
    assert!(verified.status.success(), "{}", stderr(&verified));
    // No annotations: it may destroy data, so it needs approval; nobody gave it.
    assert_eq!(calls[0]["error"]["kind"], "denied", "{result}");
    // No answer within the server's timeout: cancelled, and the run goes on.
    assert_eq!(calls[1]["error"]["kind"], "timeout", "{result}");
    let message = calls[1]["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("MCP server \"py\" did not finish hang within 1s"),
        "{message}"
    );
    // It dies: the model is told why, and the next call starts it again.
    assert_eq!(calls[2]["error"]["kind"], "failed", "{result}");
    let message = calls[2]["error"]["message"].as_str().unwrap();
    for part in [
        "MCP server \"py\" stopped during the call to crash",
        "exit status: 3",
        "crashing on purpose",
        "started again for the next call",
    ] {
        assert!(message.contains(part), "{part}: {message}");
    }
    assert_eq!(calls[3]["content"], "Oslo: sunny, 21 C", "{result}");
    // Checked against the tool's schema before it is sent.
    assert_eq!(calls[4]["error"]["kind"], "invalid_arguments", "{result}");
    let to_model = provider.requests()[1].body["messages"].to_string();
    assert!(to_model.contains("did not approve"), "{to_model}");

    // Approved by the operator, it runs.
    let provider = ProviderServer::start(vec![
        openai::tool_calls(&[("c1", "py_delete_note", r#"{"name": "todo"}"#)]),
        openai::text("Deleted."),
    ])
    .await;
    let (result, _) = run_json(
        &provider,
        &["--config", &config, "--approve", "py_delete_note"],
    )
    .await;
    assert_eq!(
        result["tool_calls"][0]["content"], "deleted todo",
        "{result}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_or_broken_servers_stop_the_run_before_the_model_is_asked() {
    let provider = ProviderServer::start(vec![openai::text("never asked")]).await;
    let base = provider.openai_url();
    let attempt = |mcp: Vec<String>| {
        let mut args = strings(&["Go.", "--model", "openai:gpt-4o-mini", "--base-url", &base]);
        for server in mcp {
            args.push("--mcp".into());
            args.push(server);
        }
        run(args, "")
    };
    let output = attempt(vec!["no-such-program-here --flag".into()]).await;
    assert_clean_failure(
        &output,
        2,
        "MCP server \"no-such-program-here\": cannot start `no-such-program-here --flag`",
    );
    // Nothing listens there: one line, naming the server as written (less
    // its password and query), and why.
    let output = attempt(vec!["http://user:pw@127.0.0.1:9/mcp?key=k1".into()]).await;
    assert_clean_failure(
        &output,
        2,
        "MCP server \"127.0.0.1:9\" (http://127.0.0.1:9/mcp): initialize failed: Connection refused",
    );
    let err = stderr(&output);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!err.contains("pw") && !err.contains("k1"), "{err}");
    let output = attempt(vec!["python3 'unbalanced".into()]).await;
    assert_clean_failure(
        &output,
        2,
        "--mcp \"python3 'unbalanced\": unbalanced quotes",
    );
    let exits = format!(
        "{} -c 'import sys; print(\"no config\", file=sys.stderr); sys.exit(4)'",
        python().display()
    );
    let output = attempt(vec![exits]).await;
    assert_clean_failure(&output, 2, "initialize failed (exit status: 4)");
    assert!(stderr(&output).contains("no config"), "{}", stderr(&output));
    // A URL is read as the client connects with it: a backslash ends the
    // host, so this one goes to evil.example, in the clear: no token.
    let mut args = strings(&["Go.", "--model", "openai:gpt-4o-mini", "--base-url", &base]);
    args.extend(strings(&[
        "--mcp",
        r"http://evil.example\@127.0.0.1:9/mcp",
        "--mcp-bearer-env",
        "OPENAI_API_KEY",
    ]));
    let output = run(args, "").await;
    assert_clean_failure(&output, 2, "a bearer token goes only over https://");
    // The same tool name from a server and a component: refused, naming both.
    let mut args = strings(&[
        "Go.",
        "--model",
        "openai:gpt-4o-mini",
        "--base-url",
        &base,
        "--tools",
        &component("fixture_tool").display().to_string(),
        "--mcp",
        &serve_fixture(""),
    ]);
    args.push("--json".into());
    let output = run(args, "").await;
    assert_clean_failure(
        &output,
        2,
        "is offered by MCP server \"wasm-agent\" and by a sandboxed component; give the server a prefix",
    );
    assert!(provider.requests().is_empty(), "the model was asked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_initialize_is_given_up_on_at_its_connect_timeout() {
    let dir = temp_dir();
    let config = write(
        dir.path(),
        "wasm-agent.toml",
        "[agent.mcp.mute]\ncommand = [\"sleep\", \"60\"]\nconnect_timeout = \"1s\"\n",
    );
    let started = std::time::Instant::now();
    let output = run(
        strings(&[
            "Go.",
            "--model",
            "openai:gpt-4o-mini",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--config",
            &config,
        ]),
        "",
    )
    .await;
    assert_clean_failure(
        &output,
        2,
        "MCP server \"mute\" (sleep 60): no answer to initialize and tools/list within 1s (connect_timeout)",
    );
    assert!(started.elapsed().as_secs() < 20, "{:?}", started.elapsed());
}

/// The first tool call's record of a run in which the model calls
/// `weather` of the Python server once, with `extra` flags.
async fn weather_once(extra: &[&str]) -> Value {
    let provider = ProviderServer::start(vec![
        openai::tool_calls(&[("c1", "weather", r#"{"city": "Oslo"}"#)]),
        openai::text("Done."),
    ])
    .await;
    let server = py_server();
    let mut args = vec!["--mcp", &*server];
    args.extend(extra);
    let (result, _) = run_json(&provider, &args).await;
    result["tool_calls"][0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_annotations_spare_approval_only_when_trusted() {
    // `weather` says it is read-only and reaches no open world.
    let untrusted = weather_once(&[]).await;
    assert_eq!(untrusted["error"]["kind"], "denied", "{untrusted}");
    let trusted = weather_once(&["--mcp-trust-annotations"]).await;
    assert_eq!(trusted["content"], "Oslo: sunny, 21 C", "{trusted}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_whose_definition_changes_is_a_new_tool_and_run_says_what_changed() {
    // Weather runs (trusted: read-only), then the server relabels it as
    // destructive with a new description: a call of the old definition does
    // not run, and the new one is a new tool's, which needs approval.
    let provider = ProviderServer::start(vec![
        openai::tool_calls(&[("c1", "weather", r#"{"city": "Oslo"}"#)]),
        openai::tool_calls(&[("c2", "relabel", "{}")]),
        openai::tool_calls(&[("c3", "weather", r#"{"city": "Oslo"}"#)]),
        openai::text("Done."),
    ])
    .await;
    let (result, err) = run_json(
        &provider,
        &["--mcp", &py_server(), "--mcp-trust-annotations"],
    )
    .await;
    let calls = result["tool_calls"].as_array().unwrap();
    assert_eq!(calls[0]["content"], "Oslo: sunny, 21 C", "{result}");
    assert_eq!(calls[2]["error"]["kind"], "denied", "{result}");
    assert!(
        calls[2]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("changed or removed tool \"weather\" since it was offered"),
        "{result}"
    );
    assert!(
        err.contains(
            "MCP server \"python\" changed tool weather: its description, annotations; it \
             counts as a new tool, and approvals given for it are asked again"
        ),
        "{err}"
    );
}
