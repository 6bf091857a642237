//! `wasm-agent serve` over HTTP, spoken to directly: the refusals (token,
//! Host, Origin, body size, path), the JSON-RPC exchange and `--watch`.
//! The official Python MCP SDK drives the same server in `tests/mcp`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use wasm_agent::mcp::{HttpOptions, McpServer, serve_http};

use crate::common::{assert_clean_failure, component, run, temp_dir, wasm_agent};

/// A running `wasm-agent serve --http 127.0.0.1:0`, killed on drop.
pub(crate) struct Server {
    pub(crate) child: Child,
    url: String,
    /// Where `--metrics-addr` serves health, if given.
    pub(crate) health: Option<String>,
    http: reqwest::Client,
}

impl Server {
    pub(crate) fn start(args: &[&str]) -> Self {
        Self::start_with_env(args, &[])
    }

    /// [`start`](Self::start) with variables added to its environment.
    pub(crate) fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = wasm_agent()
            .args(["serve", "--http", "127.0.0.1:0"])
            .args(args)
            .envs(env.iter().copied())
            .stderr(Stdio::piped())
            .spawn()
            .expect("wasm-agent serve starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("wasm-agent: serving MCP on ") {
                    let _ = tx.send((true, url.to_string()));
                }
                if let Some(url) = line.strip_prefix("wasm-agent: health on ") {
                    let url = url.split(',').next().unwrap_or(url);
                    let _ = tx.send((false, url.to_string()));
                }
                eprintln!("[server] {line}");
            }
        });
        let mut health = None;
        let url = loop {
            match rx.recv_timeout(Duration::from_secs(60)) {
                Ok((true, url)) => break url,
                Ok((false, url)) => health = Some(url),
                Err(_) => panic!("the server prints its URL"),
            }
        };
        Self {
            child,
            url,
            health,
            http: reqwest::Client::new(),
        }
    }

    /// `path` on the server's own address (beside `/mcp`).
    pub(crate) fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url.trim_end_matches("/mcp"))
    }

    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        self.http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .json(body)
    }

    /// Initializes a session and returns its id.
    pub(crate) async fn session(&self, token: Option<&str>) -> String {
        let mut request = self.post(&initialize());
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("initialize is answered");
        assert_eq!(response.status(), StatusCode::OK);
        let session = response.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        let mut notify = self
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .header("mcp-session-id", &session);
        if let Some(token) = token {
            notify = notify.bearer_auth(token);
        }
        let status = notify.send().await.unwrap().status();
        assert!(status.is_success(), "initialized: {status}");
        session
    }

    /// One request in `session`; returns the JSON-RPC response.
    async fn rpc(&self, session: &str, id: u64, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        answer_to(self.post(&body).header("mcp-session-id", session), id).await
    }

    /// `tools/call` with these `params` (`_meta` and all) in `session`.
    pub(crate) fn call_tool_with(
        &self,
        session: &str,
        id: u64,
        params: Value,
    ) -> reqwest::RequestBuilder {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        self.post(&body).header("mcp-session-id", session)
    }

    /// `message` (a notification) posted in `session`.
    pub(crate) fn notify(&self, session: &str, message: &Value) -> reqwest::RequestBuilder {
        self.post(message).header("mcp-session-id", session)
    }

    /// `tools/call` of `name` with `arguments` in `session`, sent now.
    pub(crate) fn call_tool_request(
        &self,
        session: &str,
        id: u64,
        name: &str,
        arguments: Value,
    ) -> reqwest::RequestBuilder {
        let params = json!({"name": name, "arguments": arguments});
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        self.post(&body).header("mcp-session-id", session)
    }

    /// `tools/call` of `name` with `arguments` in `session`, with `token`.
    pub(crate) async fn call_tool_authorized(
        &self,
        session: &str,
        token: &str,
        id: u64,
        name: &str,
        arguments: Value,
    ) -> Value {
        let request = self.call_tool_request(session, id, name, arguments);
        answer_to(request.bearer_auth(token), id).await
    }

    /// `tools/call` of `name` with `arguments` in `session`.
    pub(crate) async fn call_tool(
        &self,
        session: &str,
        id: u64,
        name: &str,
        arguments: Value,
    ) -> Value {
        let params = json!({"name": name, "arguments": arguments});
        self.rpc(session, id, "tools/call", params).await
    }

    /// Polls the tool list (ids from 1000 up) until `done` holds; at most 20 s.
    pub(crate) async fn wait_for_tools(
        &self,
        session: &str,
        done: impl Fn(&[String]) -> bool,
    ) -> Vec<String> {
        let mut id = 1000;
        wait_for(
            || {
                id += 1;
                self.tool_names(session, id)
            },
            |names| done(names),
        )
        .await
    }

    async fn tool_names(&self, session: &str, id: u64) -> Vec<String> {
        let listed = self.rpc(session, id, "tools/list", json!({})).await;
        listed["result"]["tools"]
            .as_array()
            .expect("a tool list")
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }
}

/// Sends `request` and returns the JSON-RPC response `id` in its answer.
async fn answer_to(request: reqwest::RequestBuilder, id: u64) -> Value {
    let response = request.send().await.expect("the request is answered");
    assert_eq!(response.status(), StatusCode::OK);
    let text = response.text().await.unwrap();
    response_in(&text, id).unwrap_or_else(|| panic!("no response {id} in {text:?}"))
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn initialize() -> Value {
    json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "e2e", "version": "0"}
        }
    })
}

/// The JSON-RPC response with `id` in a JSON or SSE body.
pub(crate) fn response_in(body: &str, id: u64) -> Option<Value> {
    let candidates = body
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .chain(std::iter::once(body));
    candidates
        .filter_map(|text| serde_json::from_str::<Value>(text.trim()).ok())
        .find(|message| message["id"] == id)
}

fn calculator_args() -> Vec<String> {
    vec!["--tools".into(), path(&component("calculator"))]
}

pub(crate) fn path(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

#[tokio::test]
async fn tools_are_listed_and_called_with_errors_as_results() {
    let fixture = path(&component("fixture_tool"));
    let server = Server::start(&["--tools", &fixture, "--timeout", "300ms"]);
    let session = server.session(None).await;

    let listed = server.rpc(&session, 1, "tools/list", json!({})).await;
    let tools = listed["result"]["tools"].as_array().unwrap();
    let echo = tools.iter().find(|t| t["name"] == "echo").expect("echo");
    assert_eq!(echo["title"], "Echo");
    assert_eq!(echo["inputSchema"]["type"], "object");
    // The fixture's echo is read-only and idempotent.
    assert_eq!(echo["annotations"]["readOnlyHint"], true);
    assert_eq!(echo["annotations"]["idempotentHint"], true);
    assert_eq!(echo["annotations"]["destructiveHint"], false);

    let called = server
        .call_tool(&session, 2, "echo", json!({"text": "hi"}))
        .await;
    assert_eq!(called["result"]["isError"], false, "{called}");
    assert_eq!(called["result"]["content"][0]["text"], "hi");

    let spun = server.call_tool(&session, 3, "spin", json!({})).await;
    assert_eq!(spun["result"]["isError"], true, "{spun}");
    assert_eq!(
        spun["result"]["structuredContent"]["error"]["kind"],
        "timeout"
    );

    let unknown = server.call_tool(&session, 4, "ehco", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("echo"),
        "the message suggests the near name: {unknown}"
    );

    // Still serving after all of that.
    let again = server
        .call_tool(&session, 5, "echo", json!({"text": "on"}))
        .await;
    assert_eq!(again["result"]["content"][0]["text"], "on");
}

#[tokio::test]
async fn tokens_are_required_when_set() {
    let mut args = calculator_args();
    args.extend(["--token".into(), "s3cret".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = Server::start(&args);

    let missing = server.post(&initialize()).send().await.unwrap();
    assert_eq!(missing.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(missing.headers()["www-authenticate"], "Bearer");
    let wrong = server
        .post(&initialize())
        .bearer_auth("guess")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);

    let session = server.session(Some("s3cret")).await;
    assert!(!session.is_empty());
    // The scheme is case-insensitive (RFC 7235).
    let lower = server
        .post(&initialize())
        .header("authorization", "bearer s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(lower.status(), StatusCode::OK);
}

#[test]
fn an_empty_token_is_refused() {
    let calculator = path(&component("calculator"));
    let output = run(&[
        "serve",
        "--http",
        "127.0.0.1:0",
        "--token",
        " ",
        "--tools",
        &calculator,
    ]);
    assert_clean_failure(&output, 2, "empty");
}

#[tokio::test]
async fn sessions_beyond_the_limit_are_refused_until_one_closes() {
    let host = crate::common::host();
    host.load(component("calculator"), wasm_agent::Policy::default())
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let options = HttpOptions {
        max_sessions: 2,
        ..HttpOptions::default()
    };
    let shutdown = wasm_agent::CancellationToken::new();
    let server = McpServer::builder(host).build();
    let serving = tokio::spawn(serve_http(server, listener, options, shutdown.clone()));
    let http = reqwest::Client::new();
    let open = || {
        http.post(&url)
            .header("accept", "application/json, text/event-stream")
            .json(&initialize())
            .send()
    };
    let first = open().await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let first_id = first.headers()["mcp-session-id"].clone();
    assert_eq!(open().await.unwrap().status(), StatusCode::OK);
    let third = open().await.unwrap();
    assert_eq!(third.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        third
            .text()
            .await
            .unwrap()
            .contains("too many open MCP sessions")
    );

    let closed = http
        .delete(&url)
        .header("mcp-session-id", first_id)
        .send()
        .await
        .unwrap();
    assert!(closed.status().is_success(), "{}", closed.status());
    let fourth = wait_for(open, |r| match r {
        Ok(response) => response.status() == StatusCode::OK,
        Err(_) => false,
    })
    .await;
    assert!(fourth.is_ok());

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(15), serving)
        .await
        .expect("the server stops after shutdown")
        .unwrap();
}

#[tokio::test]
async fn forged_host_and_origin_headers_are_refused() {
    let args = calculator_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = Server::start(&args);

    let forged_host = server
        .post(&initialize())
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert!(
        forged_host.status().is_client_error(),
        "{}",
        forged_host.status()
    );

    let forged_origin = server
        .post(&initialize())
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(forged_origin.status(), StatusCode::FORBIDDEN);

    let local_origin = server
        .post(&initialize())
        .header("origin", "http://localhost:6274")
        .send()
        .await
        .unwrap();
    assert_eq!(
        local_origin.status(),
        StatusCode::OK,
        "loopback origins are fine"
    );
}

#[tokio::test]
async fn oversized_bodies_and_other_paths_are_refused() {
    let mut args = calculator_args();
    args.extend(["--max-body".into(), "1KiB".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = Server::start(&args);

    let mut big = initialize();
    big["params"]["clientInfo"]["name"] = json!("x".repeat(4096));
    let response = server.post(&big).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);

    let elsewhere = server.url.replace("/mcp", "/admin");
    let response = server.http.get(elsewhere).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}

#[test]
fn binding_beyond_loopback_needs_a_token() {
    let calculator = path(&component("calculator"));
    let output = run(&["serve", "--http", "0.0.0.0:0", "--tools", &calculator]);
    assert_clean_failure(&output, 2, "--token");
}

#[test]
fn serve_needs_a_transport() {
    let output = run(&["serve", "--tools", "x.wasm"]);
    assert_clean_failure(&output, 2, "--stdio");
}

#[tokio::test]
async fn watch_reloads_changes_and_keeps_the_old_version_of_a_broken_file() {
    let dir = temp_dir();
    std::fs::copy(component("calculator"), dir.path().join("calc.wasm")).unwrap();
    let folder = path(dir.path());
    let server = Server::start(&["--tools", &folder, "--watch"]);
    let session = server.session(None).await;
    assert_eq!(server.tool_names(&session, 1).await, ["calculate"]);

    // A broken file where a component was: the working version stays.
    std::fs::write(dir.path().join("calc.wasm"), b"not wasm").unwrap();
    // Added beside it: picked up.
    let staged = dir.path().join("json.tmp");
    std::fs::copy(component("json"), &staged).unwrap();
    std::fs::rename(&staged, dir.path().join("json.wasm")).unwrap();
    let names = server
        .wait_for_tools(&session, |names| names.iter().any(|n| n == "json_query"))
        .await;
    assert!(names.contains(&"calculate".to_string()), "{names:?}");

    let called = server
        .call_tool(&session, 100, "calculate", json!({"expression": "6*7"}))
        .await;
    assert_eq!(called["result"]["content"][0]["text"], "42");

    // Removed: its tools go.
    std::fs::remove_file(dir.path().join("json.wasm")).unwrap();
    server
        .wait_for_tools(&session, |names| !names.iter().any(|n| n == "json_query"))
        .await;
}

#[tokio::test]
async fn a_new_file_never_displaces_another_files_component() {
    let (first, second) = (temp_dir(), temp_dir());
    std::fs::copy(component("calculator"), first.path().join("calc.wasm")).unwrap();
    let (a, b) = (path(first.path()), path(second.path()));
    let server = Server::start(&["--tools", &a, "--tools", &b, "--watch"]);
    let session = server.session(None).await;
    // Same file name in the other folder: a clash, refused.
    std::fs::copy(component("json"), second.path().join("calc.wasm")).unwrap();
    // A later, unrelated addition shows the watcher has looked meanwhile.
    std::fs::copy(component("echo_tool"), second.path().join("echo.wasm")).unwrap();
    let names = server
        .wait_for_tools(&session, |names| names.iter().any(|n| n == "echo"))
        .await;
    assert!(names.contains(&"calculate".to_string()), "{names:?}");
    assert!(!names.contains(&"json_query".to_string()), "{names:?}");
}

#[test]
fn watch_refuses_folders_someone_else_could_write() {
    let dir = temp_dir();
    let folder = dir.path().join("tools");
    std::fs::create_dir(&folder).unwrap();
    std::fs::copy(component("calculator"), folder.join("calc.wasm")).unwrap();
    let watch =
        |target: &std::path::Path| run(&["serve", "--stdio", "--tools", &path(target), "--watch"]);
    let mode = |mode: u32| {
        std::fs::set_permissions(&folder, std::os::unix::fs::PermissionsExt::from_mode(mode))
            .unwrap()
    };
    mode(0o777);
    assert_clean_failure(
        &watch(&folder),
        2,
        "group or others may write it (mode 777)",
    );
    // A file in such a folder: the folder could swap it.
    assert_clean_failure(&watch(&folder.join("calc.wasm")), 2, "mode 777");
    mode(0o700);
    // Owned by another local user (nobody), as root can arrange.
    let chowned = std::process::Command::new("chown")
        .args(["nobody"])
        .arg(&folder)
        .status()
        .is_ok_and(|s| s.success());
    if chowned {
        assert_clean_failure(&watch(&folder), 2, "it is owned by another user");
    } else {
        eprintln!("chown to nobody is not possible here: the owner check is not run");
    }
}

/// Polls `probe` until `done` holds (at most 20 s).
pub(crate) async fn wait_for<F, Fut, T>(mut probe: F, done: impl Fn(&T) -> bool) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
    T: std::fmt::Debug,
{
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let value = probe().await;
        if done(&value) {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "gave up waiting; last: {value:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
