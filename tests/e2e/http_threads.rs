//! Over streamable HTTP each connection is served on one of a few threads,
//! which runs the calls that finish in their first polls. A call that loops
//! goes on elsewhere: it never holds up a quick call on a connection that
//! shares its thread.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::component;
use crate::mcp::{Server, path};

#[tokio::test]
async fn a_loop_never_holds_up_the_connections_on_its_thread() {
    let fixture = path(&component("fixture_tool"));
    let server = Server::start(&["--tools", &fixture, "--timeout", "4s"]);
    let session = server.session(None).await;

    let looping = async {
        let answer = server.call_tool(&session, 100, "spin", json!({})).await;
        (answer, Instant::now())
    };
    let echoes = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        // Each on a connection of its own: they go to the threads in turn,
        // so some share the loop's.
        for i in 0..12 {
            let text = format!("echo {i}");
            let echoed = echo_on_a_new_connection(&server, &session, i, &text).await;
            assert_eq!(echoed["result"]["content"][0]["text"], text, "{echoed}");
        }
        Instant::now()
    };
    let ((looped, loop_ended), echoes_ended) = tokio::join!(looping, echoes);

    assert!(
        echoes_ended < loop_ended,
        "the echoes waited for the loop to end"
    );
    assert_eq!(
        looped["result"]["structuredContent"]["error"]["kind"], "timeout",
        "{looped}"
    );
    // The loop ran for its 4 s, and not on a connection's thread.
    let (connections, all) = cpu_seconds(server.child.id());
    assert!(all > 2.0, "the loop did not run: {all} s of CPU");
    assert!(
        connections < 1.0,
        "the connection threads ran the loop: {connections} of {all} s of CPU"
    );
}

/// CPU seconds of process `pid`'s connection threads, and of all its threads.
fn cpu_seconds(pid: u32) -> (f64, f64) {
    let tick = 100.0; // USER_HZ on Linux
    let (mut connections, mut all) = (0.0, 0.0);
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let task = task.unwrap().path();
        let (Ok(name), Ok(stat)) = (read(&task, "comm"), read(&task, "stat")) else {
            continue; // the thread ended
        };
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        let seconds =
            (fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap()) / tick;
        all += seconds;
        if name.trim().starts_with("wasm-agent-http") {
            connections += seconds;
        }
    }
    (connections, all)
}

fn read(task: &Path, file: &str) -> std::io::Result<String> {
    std::fs::read_to_string(task.join(file))
}

async fn echo_on_a_new_connection(server: &Server, session: &str, id: u64, text: &str) -> Value {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let params = json!({"name": "echo", "arguments": {"text": text}});
    let response = client
        .post(server.at("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .json(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}))
        .send()
        .await
        .expect("the echo is answered");
    response.json().await.expect("a JSON answer")
}
