//! The audit trail through the real CLI: `call` and `serve` write the
//! right records (component digest, arguments digest, redacted arguments,
//! network requests and denials, outcomes, usage); `audit verify` finds
//! tampering at its line; a log that cannot be written fails closed.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;

use serde_json::{Value, json};
use sha2::Digest as _;

use crate::common::{assert_clean_failure, component, run, stderr, stdout, temp_dir};
use crate::mcp::Server;

fn path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The call records of the log at `file`.
pub(crate) fn calls(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|record| record["event"] == "call")
        .collect()
}

/// An HTTP server on loopback answering every request with `hi`.
pub(crate) fn http_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buffer = [0u8; 4096];
            let _ = stream.read(&mut buffer);
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\nconnection: close\r\n\r\nhi",
            );
        }
    });
    addr
}

#[test]
fn a_call_is_recorded_with_its_component_arguments_outcome_and_usage() {
    let dir = temp_dir();
    let audit = dir.path().join("audit.jsonl");
    let calculator = component("calculator");
    let arguments = r#"{"expression":"6*7","api_key":"sk-do-not-log"}"#;
    // The calculator's schema refuses the extra key: the refusal is recorded too.
    let output = run(&[
        "call",
        &path(&calculator),
        "calculate",
        r#"{"expression":"6*7"}"#,
        "--audit",
        &path(&audit),
        "--audit-arguments",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("42"));
    let output = run(&[
        "call",
        &path(&calculator),
        "calculate",
        arguments,
        "--audit",
        &path(&audit),
        "--audit-arguments",
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));

    let records = calls(&audit);
    assert_eq!(records.len(), 2, "{records:?}");
    let ok = &records[0];
    let digest = hex::encode(sha2::Sha256::digest(std::fs::read(&calculator).unwrap()));
    assert_eq!(ok["tool"], "calculate");
    assert_eq!(ok["component"], "calculator");
    assert_eq!(ok["source"], path(&calculator));
    assert_eq!(ok["digest"], format!("sha256:{digest}"));
    let key = dir.path().join(".audit.jsonl.key");
    assert_eq!(
        ok["arguments_digest"],
        crate::secrets::openssl_hmac(&key, r#"{"expression":"6*7"}"#)
    );
    assert_eq!(ok["arguments"], json!({"expression": "6*7"}));
    assert_eq!(ok["outcome"], "ok");
    assert_eq!(ok["session_id"], "default");
    assert!(ok["fuel_used"].as_u64().unwrap() > 0, "{ok}");
    assert!(ok["peak_memory"].as_u64().unwrap() > 0, "{ok}");
    assert!(ok["duration_us"].as_u64().is_some());
    assert!(ok["time"].as_str().unwrap().ends_with('Z'));
    let refused = &records[1];
    assert_eq!(refused["outcome"], "invalid_arguments");
    assert_eq!(refused["arguments"]["api_key"], "[redacted]");
    let text = std::fs::read_to_string(&audit).unwrap();
    assert!(!text.contains("sk-do-not-log"), "{text}");

    let verified = run(&["audit", "verify", &path(&audit)]);
    assert!(verified.status.success(), "{}", stderr(&verified));
    assert!(
        stdout(&verified).contains("ok: 4 records"),
        "{}",
        stdout(&verified)
    );
}

#[test]
fn network_requests_denials_and_timeouts_are_recorded() {
    let dir = temp_dir();
    let audit = dir.path().join("audit.jsonl");
    let server = http_server();
    let fetch = path(&component("fetch"));
    let url = format!("http://{server}/page");
    let grant = format!("http://{server}");
    let allowed = run(&[
        "call",
        &fetch,
        "fetch",
        &json!({"url": url}).to_string(),
        "--allow-host",
        &grant,
        "--audit",
        &path(&audit),
    ]);
    assert!(allowed.status.success(), "{}", stderr(&allowed));
    let denied = run(&[
        "call",
        &fetch,
        "fetch",
        &json!({"url": url}).to_string(),
        "--audit",
        &path(&audit),
    ]);
    assert_eq!(denied.status.code(), Some(1), "{}", stderr(&denied));
    let spin = run(&[
        "call",
        &path(&component("fixture_tool")),
        "spin",
        "--timeout",
        "300ms",
        "--audit",
        &path(&audit),
    ]);
    assert_eq!(spin.status.code(), Some(1), "{}", stderr(&spin));

    let records = calls(&audit);
    assert_eq!(records.len(), 3, "{records:?}");
    assert_eq!(records[0]["outcome"], "ok");
    assert_eq!(
        records[0]["requests"],
        json!([{"request": format!("GET {url}"), "decision": "allowed"}])
    );
    assert_eq!(records[0]["denials"], json!([]));
    assert_eq!(records[1]["outcome"], "capability_denied");
    assert_eq!(records[1]["requests"][0]["decision"], "denied");
    let denial = &records[1]["denials"][0];
    assert_eq!(denial["kind"], "network");
    assert_eq!(denial["attempt"], format!("GET {url}"));
    assert!(
        denial["reason"].as_str().unwrap().contains("--allow-host"),
        "the denial names the grant that would allow it: {denial}"
    );
    assert_eq!(records[2]["tool"], "spin");
    assert_eq!(records[2]["outcome"], "timeout");
    assert!(records[2]["duration_us"].as_u64().unwrap() >= 300_000);
}

#[test]
fn editing_deleting_or_reordering_a_line_fails_verify_at_that_line() {
    let dir = temp_dir();
    let audit = dir.path().join("audit.jsonl");
    let calculator = path(&component("calculator"));
    for expression in ["1+1", "2+2", "3+3"] {
        let args = json!({"expression": expression}).to_string();
        let output = run(&[
            "call",
            &calculator,
            "calculate",
            &args,
            "--audit",
            &path(&audit),
        ]);
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let original: Vec<String> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(original.len(), 6, "an open and a call record per run");
    let check = |lines: &[String], line: usize, needle: &str| {
        std::fs::write(&audit, lines.join("\n") + "\n").unwrap();
        let output = run(&["audit", "verify", &path(&audit)]);
        assert_clean_failure(&output, 2, &format!("line {line}: {needle}"));
    };
    let mut edited = original.clone();
    edited[3] = edited[3].replace("\"outcome\":\"ok\"", "\"outcome\":\"failed\"");
    check(&edited, 4, "the record was changed");
    let mut deleted = original.clone();
    deleted.remove(3);
    check(&deleted, 4, "seq 4 follows seq 2");
    let mut reordered = original.clone();
    reordered.swap(1, 2);
    check(&reordered, 2, "seq 2 follows seq 0");
}

#[test]
fn a_log_that_cannot_be_written_refuses_calls_unless_failing_open() {
    let dir = temp_dir();
    let calculator = path(&component("calculator"));
    let full = dir.path().join("audit.jsonl");
    std::os::unix::fs::symlink("/dev/full", &full).unwrap();
    let full_path = path(&full);
    let call = |extra: &[&str]| {
        let base = ["call", &calculator, "calculate", r#"{"expression":"1"}"#];
        run(&[&base[..], &["--audit", &full_path], extra].concat())
    };
    let closed = call(&[]);
    assert_clean_failure(&closed, 2, "No space left on device");
    assert!(stdout(&closed).is_empty(), "no result without its record");

    let open = call(&["--audit-fail", "open"]);
    // The call runs; the record that could not be written is an error at exit.
    assert!(stdout(&open).contains('1'), "{}", stderr(&open));
    assert!(
        stderr(&open).contains("No space left on device"),
        "{}",
        stderr(&open)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_records_calls_over_mcp() {
    let dir = temp_dir();
    let audit = dir.path().join("audit.jsonl");
    let calculator = path(&component("calculator"));
    let server = Server::start(&["--tools", &calculator, "--audit", &path(&audit)]);
    let session = server.session(None).await;
    let answer = server
        .call_tool(&session, 2, "calculate", json!({"expression": "2+3"}))
        .await;
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let record = crate::mcp::wait_for(
        || async { calls(&audit) },
        |records: &Vec<Value>| !records.is_empty(),
    )
    .await;
    assert_eq!(record[0]["tool"], "calculate");
    assert_eq!(record[0]["session_id"], format!("mcp-{session}"));
    assert_eq!(record[0]["outcome"], "ok");
    drop(server);
    let lines = std::fs::read_to_string(&audit).unwrap();
    assert!(
        lines
            .lines()
            .next()
            .unwrap()
            .contains("\"entry\":\"serve\"")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_served_from_the_cache_is_recorded_as_cached() {
    let dir = temp_dir();
    let audit = dir.path().join("audit.jsonl");
    let config = dir.path().join("wasm-agent.toml");
    std::fs::write(
        &config,
        format!(
            "[tools.calc]\ncomponent = \"{}\"\n\n[calls.calculate]\ncache_ttl = \"5m\"\n",
            path(&component("calculator"))
        ),
    )
    .unwrap();
    let server = Server::start(&["--config", &path(&config), "--audit", &path(&audit)]);
    let session = server.session(None).await;
    for id in [2, 3] {
        let answer = server
            .call_tool(&session, id, "calculate", json!({"expression": "6*7"}))
            .await;
        assert_eq!(answer["result"]["content"][0]["text"], "42", "{answer}");
    }
    let records = crate::mcp::wait_for(
        || async { calls(&audit) },
        |records: &Vec<Value>| records.len() >= 2,
    )
    .await;
    assert_eq!(records.len(), 2, "{records:#?}");
    assert_eq!(records[0].get("cached"), None, "the first call ran");
    assert!(records[0]["fuel_used"].is_u64(), "{}", records[0]);
    assert_eq!(records[1]["cached"], true, "{}", records[1]);
    assert_eq!(records[1]["outcome"], "ok");
    assert_eq!(records[1]["tool"], "calculate");
    assert_eq!(
        records[1]["arguments_digest"],
        records[0]["arguments_digest"]
    );
    assert_ne!(records[1]["call_id"], records[0]["call_id"]);
}
