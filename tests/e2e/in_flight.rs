//! A call in flight, alike in every entry point (`call`, `run`, `serve
//! --stdio`, `serve --http`), for a tool and for a tool called by a tool: it
//! reports how long it has run while it runs (`[progress]` lines at the
//! terminal, `notifications/progress` to an MCP client that passed a progress
//! token), and cancelling it (Ctrl-C at the terminal, `notifications/
//! cancelled` over MCP) ends it and every call it made, each recorded as
//! cancelled, while a server goes on serving.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::audit::calls;
use crate::common::{component, temp_dir, wasm_agent};
use crate::entries::{ENTRIES, Entry, StdioServer};
use crate::mcp::{Server, path, wait_for};
use crate::polyglot::polyglot;
use crate::provider_server::{ProviderServer, openai};

/// Longest a first progress report, or the end of a cancelled call, may take.
const WAIT: Duration = Duration::from_secs(30);

/// A call started through an entry point and not answered yet.
enum Flight {
    /// `call` or `run`: the process, its stderr lines, the scripted model.
    Process {
        child: Child,
        stderr: mpsc::Receiver<String>,
        _model: Option<ProviderServer>,
    },
    /// `serve --stdio`, and the id of the call.
    Stdio { server: StdioServer, id: u64 },
    /// `serve --http`: the session and the call's event stream.
    Http {
        server: Server,
        session: String,
        events: reqwest::Response,
    },
}

/// How a cancelled call ended.
struct Ended {
    /// What the entry point said: the process's output, or any response to
    /// the cancelled request (a client that cancelled gets none).
    said: String,
    /// Whether a server answered another request afterwards.
    still_serving: bool,
}

/// A long call: of `tool` (offered by the config's `alias`, with its other
/// aliases `with`), recorded as calls of the tools in `recorded`.
struct Case {
    alias: &'static str,
    with: &'static [&'static str],
    tool: &'static str,
    arguments: Value,
    recorded: &'static [&'static str],
}

/// Starts `case` through `entry` under `config`, asking for progress where
/// the entry point asks for it.
async fn start(entry: Entry, config: &str, case: &Case) -> Flight {
    let Case {
        alias,
        with,
        tool,
        arguments,
        ..
    } = case;
    let serve = ["--config".to_string(), config.to_string()];
    let with_flags: Vec<String> = match with.is_empty() {
        true => Vec::new(),
        false => std::iter::once("--with".to_string())
            .chain(with.iter().map(|w| w.to_string()))
            .collect(),
    };
    match entry {
        Entry::Call => {
            let mut command = wasm_agent();
            command
                .args(["call", alias, tool, &arguments.to_string(), "--json"])
                .args(&serve)
                .args(&with_flags);
            process(command, None)
        }
        Entry::Run => {
            let model = ProviderServer::start(vec![
                openai::tool_calls(&[("call_1", tool, &arguments.to_string())]),
                openai::text("done"),
            ])
            .await;
            let mut command = wasm_agent();
            command
                .args(["run", "Go.", "--model", "openai:m", "--base-url"])
                .arg(model.openai_url())
                .args(&serve)
                .env("OPENAI_API_KEY", "sk-test");
            process(command, Some(model))
        }
        Entry::Stdio => {
            let mut server = StdioServer::start(&serve, Vec::new());
            let params =
                json!({"name": tool, "arguments": arguments, "_meta": {"progressToken": "p"}});
            let id = server.start_request("tools/call", params);
            Flight::Stdio { server, id }
        }
        Entry::Http => {
            let args: Vec<&str> = serve.iter().map(String::as_str).collect();
            let server = Server::start(&args);
            let session = server.session(None).await;
            let params =
                json!({"name": tool, "arguments": arguments, "_meta": {"progressToken": "p"}});
            let events = server
                .call_tool_with(&session, 7, params)
                .send()
                .await
                .expect("the call is accepted");
            Flight::Http {
                server,
                session,
                events,
            }
        }
    }
}

/// `command` started with its stderr read line by line.
fn process(mut command: std::process::Command, model: Option<ProviderServer>) -> Flight {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("wasm-agent starts");
    let (tx, stderr) = mpsc::channel();
    let lines = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in lines.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    Flight::Process {
        child,
        stderr,
        _model: model,
    }
}

impl Flight {
    /// The first progress report, as the entry point shows it.
    async fn progress(&mut self) -> String {
        let deadline = Instant::now() + WAIT;
        let left = || deadline.saturating_duration_since(Instant::now());
        match self {
            Flight::Process { stderr, .. } => tokio::task::block_in_place(|| {
                loop {
                    let line = stderr.recv_timeout(left()).expect("a progress line");
                    if line.contains("[progress]") {
                        return line;
                    }
                }
            }),
            Flight::Stdio { server, .. } => tokio::task::block_in_place(|| {
                loop {
                    let message = server
                        .next_message(left())
                        .expect("a progress notification");
                    if message["method"] == "notifications/progress" {
                        return message["params"].to_string();
                    }
                }
            }),
            Flight::Http { events, .. } => {
                let mut seen = String::new();
                while !seen.contains("notifications/progress") {
                    let chunk = tokio::time::timeout(left(), events.chunk())
                        .await
                        .expect("a progress event in time")
                        .expect("the event stream stays open")
                        .expect("the call is not answered before its progress");
                    seen.push_str(&String::from_utf8_lossy(&chunk));
                }
                seen
            }
        }
    }

    /// Cancels the call as the entry point's user does.
    async fn cancel(&mut self) {
        let cancelled = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 7, "reason": "the user stopped it"}});
        match self {
            Flight::Process { child, .. } => {
                let status = std::process::Command::new("kill")
                    .args(["-INT", &child.id().to_string()])
                    .status()
                    .unwrap();
                assert!(status.success());
            }
            Flight::Stdio { server, id } => {
                let mut message = cancelled;
                message["params"]["requestId"] = json!(*id);
                server.send(message);
            }
            Flight::Http {
                server, session, ..
            } => {
                let status = server
                    .notify(session, &cancelled)
                    .send()
                    .await
                    .unwrap()
                    .status();
                assert!(
                    status.is_success(),
                    "the cancellation is accepted: {status}"
                );
            }
        }
    }

    /// Waits for the end of a cancelled call.
    async fn ended(self) -> Ended {
        match self {
            Flight::Process {
                mut child, stderr, ..
            } => tokio::task::block_in_place(|| {
                let started = Instant::now();
                while child.try_wait().unwrap().is_none() {
                    assert!(
                        started.elapsed() < WAIT,
                        "the process outlived its cancelled call"
                    );
                    std::thread::sleep(Duration::from_millis(50));
                }
                let mut said = String::new();
                std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut said).unwrap();
                said.extend(stderr.try_iter().map(|line| line + "\n"));
                Ended {
                    said,
                    still_serving: false,
                }
            }),
            Flight::Stdio { mut server, id } => tokio::task::block_in_place(|| {
                // A response to the cancelled request would come now if ever.
                let mut said = String::new();
                while let Some(message) = server.next_message(Duration::from_secs(3)) {
                    if message["id"] == id {
                        said = message.to_string();
                    }
                }
                let answered = server.call("echo", json!({"text": "still here"}));
                Ended {
                    said,
                    still_serving: answered.to_string().contains("still here"),
                }
            }),
            Flight::Http {
                server,
                session,
                mut events,
            } => {
                // The call's stream ends, without a response.
                let mut said = String::new();
                while let Ok(Ok(Some(chunk))) = tokio::time::timeout(WAIT, events.chunk()).await {
                    said.push_str(&String::from_utf8_lossy(&chunk));
                }
                let said = crate::mcp::response_in(&said, 7)
                    .map(|r| r.to_string())
                    .unwrap_or_default();
                let answered = server
                    .call_tool(&session, 8, "echo", json!({"text": "still here"}))
                    .await;
                crate::entries::stop(server).await;
                Ended {
                    said,
                    still_serving: answered.to_string().contains("still here"),
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_reports_progress_and_is_cancelled_alike_in_every_entry_point() {
    let dir = temp_dir();
    let config = dir.path().join("wasm-agent.toml");
    let cases = [
        Case {
            alias: "fixture",
            with: &[],
            tool: "sleep",
            arguments: json!({"ms": 20000}),
            recorded: &["sleep"],
        },
        Case {
            alias: "py",
            with: &["fixture"],
            tool: "run_python",
            arguments: json!({"code": "tools.sleep(ms=20000)"}),
            recorded: &["run_python", "sleep"],
        },
    ];
    for entry in ENTRIES {
        for case in &cases {
            let (tool, recorded) = (case.tool, case.recorded);
            let log = dir.path().join(format!("{entry:?}-{tool}.jsonl"));
            let text = format!(
                "[audit]\nfile = \"{}\"\n\n[tools.py]\ncomponent = \"{}\"\ncall_tools = [\"sleep\"]\n\
                 timeout = \"60s\"\n\n[tools.fixture]\ncomponent = \"{}\"\ntimeout = \"60s\"\n",
                path(&log),
                path(&polyglot("run_python")),
                path(&component("fixture_tool")),
            );
            std::fs::write(&config, text).unwrap();
            let what = format!("{entry:?} {tool}");
            let mut flight = start(entry, &path(&config), case).await;
            let progress = flight.progress().await;
            assert!(progress.contains("running for 1 s"), "{what}: {progress}");
            let cancelled = Instant::now();
            flight.cancel().await;
            let ended = flight.ended().await;
            match entry {
                Entry::Call => assert!(
                    ended.said.contains(r#""kind":"cancelled""#),
                    "{what}: {}",
                    ended.said
                ),
                Entry::Run => assert!(ended.said.contains("cancelled"), "{what}: {}", ended.said),
                // A client that cancelled a request gets no response to it.
                Entry::Stdio | Entry::Http => {
                    assert_eq!(ended.said, "", "{what}");
                    assert!(ended.still_serving, "{what}: the server stopped serving");
                }
            }
            // The call and each call it made are recorded as cancelled, and
            // none of them ran on (the sleep asked for 20 s).
            let records = wait_for(
                || async { calls(&log) },
                |records: &Vec<Value>| {
                    recorded
                        .iter()
                        .all(|tool| records.iter().any(|r| r["tool"] == *tool))
                },
            )
            .await;
            for tool in recorded {
                let of_tool: Vec<_> = records.iter().filter(|r| r["tool"] == *tool).collect();
                assert_eq!(of_tool.len(), 1, "{what}: one record each: {of_tool:?}");
                let record = of_tool[0];
                assert_eq!(record["outcome"], "cancelled", "{what}: {record}");
                let ran = Duration::from_micros(record["duration_us"].as_u64().unwrap());
                assert!(ran < Duration::from_secs(10), "{what}: {tool} ran {ran:?}");
            }
            assert!(
                cancelled.elapsed() < WAIT,
                "{what}: the cancelled call took {:?} to end",
                cancelled.elapsed()
            );
        }
    }
}
