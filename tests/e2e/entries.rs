//! The ways a tool is called, each driven through the real binary: `call`,
//! `run` (against the scripted provider), `serve --stdio` (JSON-RPC lines,
//! answering elicitations as a person would) and `serve --http`. The
//! pipeline's promises are checked through every one of them
//! (`pipeline_promises`), from one description of a call.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio as Piped};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::agent_cli::run;
use crate::common::{stderr, stdout, wasm_agent};
use crate::mcp::Server;
use crate::provider_server::{ProviderServer, openai};

/// An entry point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    /// `wasm-agent call`.
    Call,
    /// `wasm-agent run`: the model calls the tool.
    Run,
    /// `wasm-agent serve --stdio`.
    Stdio,
    /// `wasm-agent serve --http`.
    Http,
}

/// Every entry point.
pub(crate) const ENTRIES: [Entry; 4] = [Entry::Call, Entry::Run, Entry::Stdio, Entry::Http];

/// One call to make: of `tool` (offered by the config's `alias`, with the
/// config's other aliases in `with`), under `config`, with `flags` added to
/// the command line.
pub(crate) struct Request<'a> {
    pub config: &'a str,
    pub alias: &'a str,
    pub with: &'a [&'a str],
    pub tool: &'a str,
    pub arguments: Value,
    pub flags: &'a [&'a str],
}

/// What a call gave, in the same terms whatever the entry point.
#[derive(Debug)]
pub(crate) struct Answer {
    /// The error's kind (`denied`, `audit_unavailable`), `None` on success.
    pub kind: Option<String>,
    /// The content, or the error's message.
    pub text: String,
    /// The process's stderr (for `call` and `run`).
    pub stderr: String,
}

impl Answer {
    fn ok(text: &str, stderr: String) -> Self {
        Self {
            kind: None,
            text: text.to_string(),
            stderr,
        }
    }
}

/// Makes one call through `entry`.
pub(crate) async fn call_through(entry: Entry, request: &Request<'_>) -> Answer {
    match entry {
        Entry::Call => call(request).await,
        Entry::Run => run_once(request).await,
        Entry::Stdio => {
            let args = serve_args(request);
            let (tool, arguments) = (request.tool.to_string(), request.arguments.clone());
            tokio::task::spawn_blocking(move || {
                let mut server = StdioServer::start(&args, Vec::new());
                mcp_answer(server.call(&tool, arguments), String::new())
            })
            .await
            .unwrap()
        }
        Entry::Http => {
            let args = serve_args(request);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let server = Server::start(&args);
            let session = server.session(None).await;
            let answer = server
                .call_tool(&session, 2, request.tool, request.arguments.clone())
                .await;
            stop(server).await;
            mcp_answer(answer["result"].clone(), String::new())
        }
    }
}

/// Stops `server` as an operator would (SIGTERM): it drains and writes
/// its audit records before it exits (killed after 10 s).
pub(crate) async fn stop(mut server: Server) {
    let pid = server.child.id().to_string();
    tokio::task::spawn_blocking(move || {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status();
        for _ in 0..100 {
            if let Ok(Some(_)) = server.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    })
    .await
    .unwrap();
}

/// `serve`'s flags for `request` (the transport is the driver's).
fn serve_args(request: &Request<'_>) -> Vec<String> {
    let mut args = vec!["--config".to_string(), request.config.to_string()];
    args.extend(request.flags.iter().map(|f| f.to_string()));
    args
}

async fn call(request: &Request<'_>) -> Answer {
    let mut args = vec![
        "call".to_string(),
        request.alias.to_string(),
        request.tool.to_string(),
        request.arguments.to_string(),
        "--json".into(),
        "--config".into(),
        request.config.to_string(),
    ];
    if !request.with.is_empty() {
        args.push("--with".into());
        args.extend(request.with.iter().map(|w| w.to_string()));
    }
    args.extend(request.flags.iter().map(|f| f.to_string()));
    let output = tokio::task::spawn_blocking(move || {
        wasm_agent()
            .args(&args)
            .stdin(Piped::null())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    printed_answer(&output, |printed| printed)
}

async fn run_once(request: &Request<'_>) -> Answer {
    let provider = ProviderServer::start(vec![
        openai::tool_calls(&[("call_1", request.tool, &request.arguments.to_string())]),
        openai::text("done"),
    ])
    .await;
    let mut args: Vec<String> = ["Go.", "--model", "openai:m", "--json", "--config"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.push(request.config.to_string());
    args.extend(["--base-url".to_string(), provider.openai_url()]);
    args.extend(request.flags.iter().map(|f| f.to_string()));
    let output = run(args, "").await;
    printed_answer(&output, |printed| &printed["tool_calls"][0])
}

/// The call `pick` finds in the JSON a command printed, as an answer;
/// nothing printed means the call was refused before a result (exit 2).
fn printed_answer(output: &std::process::Output, pick: impl Fn(&Value) -> &Value) -> Answer {
    let err = stderr(output);
    let Ok(printed) = serde_json::from_str::<Value>(stdout(output).trim()) else {
        return Answer {
            kind: Some("no_result".into()),
            text: String::new(),
            stderr: err,
        };
    };
    let call = pick(&printed);
    match call["error"].as_object() {
        None => Answer::ok(call["content"].as_str().unwrap_or_default(), err),
        Some(error) => Answer {
            kind: error["kind"].as_str().map(str::to_string),
            text: error["message"].as_str().unwrap_or_default().to_string(),
            stderr: err,
        },
    }
}

/// An MCP `tools/call` result as an answer.
fn mcp_answer(result: Value, stderr: String) -> Answer {
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    match result["isError"].as_bool() {
        Some(true) => Answer {
            kind: result["structuredContent"]["error"]["kind"]
                .as_str()
                .map(str::to_string),
            text,
            stderr,
        },
        Some(false) => Answer {
            kind: None,
            text,
            stderr,
        },
        // A JSON-RPC error, or no answer at all.
        None => Answer {
            kind: Some("no_result".into()),
            text: result.to_string(),
            stderr,
        },
    }
}

/// `wasm-agent serve --stdio` driven line by line, as an MCP client that
/// (given answers) declared elicitation and answers each question in turn.
pub(crate) struct StdioServer {
    child: Child,
    /// Closed first when dropped, so the server drains and exits.
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Value>,
    /// Answers to give, in order (`allow_once`, `allow_session`, `deny`).
    answers: Vec<&'static str>,
    /// The questions asked (their messages).
    pub asked: Vec<String>,
    next_id: u64,
}

impl StdioServer {
    /// Starts the server with `args` and initializes; declares elicitation
    /// when `answers` is not empty.
    pub(crate) fn start(args: &[String], answers: Vec<&'static str>) -> Self {
        let mut command = wasm_agent();
        command.args(["serve", "--stdio"]).args(args);
        Self::start_command(command, answers)
    }

    /// [`start`](Self::start) with the whole command given (a server run
    /// under `unshare`, say).
    pub(crate) fn start_command(mut command: Command, answers: Vec<&'static str>) -> Self {
        let mut child = command
            .stdin(Piped::piped())
            .stdout(Piped::piped())
            .stderr(Piped::inherit())
            .spawn()
            .expect("wasm-agent serve --stdio starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(message) = serde_json::from_str::<Value>(&line)
                    && tx.send(message).is_err()
                {
                    return;
                }
            }
        });
        let capabilities = match answers.is_empty() {
            true => json!({}),
            false => json!({"elicitation": {"form": {}}}),
        };
        let mut server = Self {
            child,
            stdin: Some(stdin),
            lines,
            answers,
            asked: Vec::new(),
            next_id: 1,
        };
        server.request(
            "initialize",
            json!({
                "protocolVersion": "2025-11-25",
                "capabilities": capabilities,
                "clientInfo": {"name": "e2e", "version": "0"},
            }),
        );
        server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes one message.
    pub(crate) fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().expect("open until dropped");
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a request without waiting for its response; its id.
    pub(crate) fn start_request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// The next message from the server, if one comes within `wait`.
    pub(crate) fn next_message(&self, wait: Duration) -> Option<Value> {
        self.lines.recv_timeout(wait).ok()
    }

    /// Sends a request; answers the server's questions meanwhile; the
    /// response's result (or its error object).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.start_request(method, params);
        loop {
            let message = self
                .lines
                .recv_timeout(Duration::from_secs(120))
                .expect("the server answers");
            if message["method"] == "elicitation/create" {
                self.asked
                    .push(message["params"]["message"].as_str().unwrap().to_string());
                let decision = match self.answers.is_empty() {
                    true => "deny",
                    false => self.answers.remove(0),
                };
                let result = json!({"action": "accept", "content": {"decision": decision}});
                let reply = json!({"jsonrpc": "2.0", "id": message["id"], "result": result});
                self.send(reply);
                continue;
            }
            if message["id"] == id {
                return match message.get("result") {
                    Some(result) => result.clone(),
                    None => message["error"].clone(),
                };
            }
        }
    }

    /// `tools/call` of `tool` with `arguments`; its result.
    pub(crate) fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
    }
}

impl Drop for StdioServer {
    /// Ends stdin, as a client that goes away does, and waits for the exit
    /// (its audit records written); kills it after 10 s.
    fn drop(&mut self) {
        drop(self.stdin.take());
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
