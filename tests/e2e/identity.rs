//! Who is calling over HTTP (`serve --tokens FILE`): each token's principal
//! and tenant reach the tools, key their state, and own their sessions; a
//! session id or a session name alone reaches nothing of anyone else's.

use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::common::{component, temp_dir};
use crate::mcp::{Server, initialize, path};

const META_2026: &str = r#"{
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"}
}"#;

/// Tokens for alice and bob of tenant acme, and alice of globex
/// (`carol-token`).
pub(crate) fn tokens_file(dir: &std::path::Path) -> std::path::PathBuf {
    let entry = |token: &str, principal: &str, tenant: &str| {
        let digest = hex::encode(Sha256::digest(token.as_bytes()));
        format!(
            "[[tokens]]\nsha256 = \"{digest}\"\nprincipal = \"{principal}\"\ntenant = \"{tenant}\"\n\n"
        )
    };
    let text = [
        entry("alice-token", "alice", "acme"),
        entry("bob-token", "bob", "acme"),
        entry("carol-token", "alice", "globex"),
    ]
    .concat();
    let file = dir.join("tokens.toml");
    std::fs::write(&file, text).unwrap();
    file
}

/// Sends `body` to `/mcp` with `token`, in `session` if given; the status
/// and the JSON-RPC message of the answer.
async fn send(
    server: &Server,
    token: &str,
    session: Option<&str>,
    body: Value,
) -> (StatusCode, Value) {
    let mut request = reqwest::Client::new()
        .post(server.at("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .bearer_auth(token)
        .json(&body);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    if session.is_none() && body["method"] != "initialize" {
        let method = body["method"].as_str().unwrap().to_string();
        request = request
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method)
            .header(
                "mcp-name",
                body["params"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let session_id = response.headers().get("mcp-session-id").cloned();
    let text = response.text().await.unwrap();
    let data = text
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix("data: "))
        .unwrap_or(&text);
    let mut message: Value = serde_json::from_str(data).unwrap_or(Value::Null);
    if let Some(id) = session_id {
        message["session"] = json!(id.to_str().unwrap());
    }
    (status, message)
}

async fn open(server: &Server, token: &str) -> String {
    let (status, answer) = send(server, token, None, initialize()).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer["session"].as_str().unwrap().to_string()
}

fn call(id: u64, tool: &str, arguments: Value, session_name: Option<&str>) -> Value {
    let mut params = json!({"name": tool, "arguments": arguments});
    if let Some(name) = session_name {
        let mut meta: Value = serde_json::from_str(META_2026).unwrap();
        meta["io.wasm-agent/session"] = json!(name);
        params["_meta"] = meta;
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

fn text(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {answer}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn tokens_carry_principal_and_tenant_into_calls_state_and_sessions() {
    let dir = temp_dir();
    let tokens = tokens_file(dir.path());
    let fixture = path(&component("fixture_tool"));
    let server = Server::start(&[
        "--tools",
        &fixture,
        "--tokens",
        tokens.to_str().unwrap(),
        "--store",
        "memory:",
    ]);

    let (status, _) = send(&server, "guess", None, initialize()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let alice = open(&server, "alice-token").await;
    let (_, context) = send(
        &server,
        "alice-token",
        Some(&alice),
        call(1, "context", json!({}), None),
    )
    .await;
    let context: Value = serde_json::from_str(&text(&context)).unwrap();
    assert_eq!(context["user_id"], "alice");
    assert_eq!(context["tenant_id"], "acme");
    let set = call(
        2,
        "state_set",
        json!({"key": "k", "value": "alice's"}),
        None,
    );
    let (_, set) = send(&server, "alice-token", Some(&alice), set).await;
    assert_eq!(text(&set), "ok");

    // Bob holds alice's session id, and it is no session of his.
    let get = call(3, "state_get", json!({"key": "k"}), None);
    let (status, _) = send(&server, "bob-token", Some(&alice), get.clone()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, mine) = send(&server, "alice-token", Some(&alice), get).await;
    assert_eq!(text(&mine), "\"alice's\"");
}

#[tokio::test(flavor = "multi_thread")]
async fn sessionless_clients_name_their_session_and_reach_only_their_own() {
    let dir = temp_dir();
    let tokens = tokens_file(dir.path());
    let fixture = path(&component("fixture_tool"));
    let server = Server::start(&[
        "--tools",
        &fixture,
        "--tokens",
        tokens.to_str().unwrap(),
        "--store",
        "memory:",
    ]);

    let set = call(
        1,
        "state_set",
        json!({"key": "k", "value": 7}),
        Some("notes"),
    );
    let (status, answer) = send(&server, "alice-token", None, set).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(text(&answer), "ok");
    let get = call(2, "state_get", json!({"key": "k"}), Some("notes"));
    let (_, again) = send(&server, "alice-token", None, get.clone()).await;
    assert_eq!(text(&again), "7");
    // Same name, other principal or other tenant (carol is "alice" of globex).
    for token in ["bob-token", "carol-token"] {
        let (_, theirs) = send(&server, token, None, get.clone()).await;
        assert_eq!(text(&theirs), "null", "{token} read alice's notes");
    }
    // Unnamed: a fresh session per request.
    let unnamed = call(3, "state_get", json!({"key": "k"}), None);
    let mut unnamed_2026 = unnamed.clone();
    unnamed_2026["params"]["_meta"] = serde_json::from_str(META_2026).unwrap();
    let (_, fresh) = send(&server, "alice-token", None, unnamed_2026).await;
    assert_eq!(text(&fresh), "null");
    let bad = call(4, "state_get", json!({"key": "k"}), Some(&"x".repeat(200)));
    let (_, refused) = send(&server, "alice-token", None, bad).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
}

#[test]
fn a_bad_tokens_file_is_refused_naming_file_and_line() {
    let dir = temp_dir();
    let file = dir.path().join("tokens.toml");
    std::fs::write(&file, "[[tokens]]\nsha256 = \"abc\"\nprincipal = \"a\"\n").unwrap();
    let fixture = path(&component("fixture_tool"));
    let output = crate::common::run(&[
        "serve",
        "--http",
        "127.0.0.1:0",
        "--tools",
        &fixture,
        "--tokens",
        file.to_str().unwrap(),
    ]);
    crate::common::assert_clean_failure(&output, 2, "tokens.toml:1: sha256 must be 64 hex digits");
}
