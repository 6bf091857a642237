//! Hardening through the real CLI and `serve`: bad limits and config keys,
//! forged log lines and terminal escapes, host memory and descriptors a tool
//! makes the host hold (measured as the process's peak RSS), an untrusted
//! compile cache, and a graceful stop with calls in flight.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{assert_clean_failure, component, run, stderr, temp_dir, wasm_agent};
use crate::mcp::{Server, initialize, path};

/// Runs the CLI and returns its output and its peak RSS in KiB.
fn run_measured(args: &[&str]) -> (std::process::Output, i64) {
    let mut child = wasm_agent()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("wasm-agent runs");
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = out.read_to_end(&mut bytes);
        bytes
    });
    let err = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = err.read_to_end(&mut bytes);
        bytes
    });
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for this child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as libc::pid_t;
    // SAFETY: waits for our own child, once; std's Child is not used after.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4 failed");
    std::mem::forget(child);
    let output = std::process::Output {
        status: std::os::unix::process::ExitStatusExt::from_raw(status),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    };
    (output, usage.ru_maxrss)
}

#[test]
fn absurd_limits_are_refused_with_the_key_named() {
    let calculator = path(&component("calculator"));
    let huge = run(&[
        "call",
        &calculator,
        "calculate",
        "{}",
        "--timeout",
        "100000000years",
    ]);
    assert_clean_failure(&huge, 2, "timeout");
    let output = run(&[
        "call",
        &calculator,
        "calculate",
        "{}",
        "--max-output",
        "100000000GiB",
    ]);
    assert_clean_failure(&output, 2, "max_output");
    let dir = temp_dir();
    let config = dir.path().join("wasm-agent.toml");
    std::fs::write(&config, "[defaults]\ntimeout = \"5000000000000s\"\n").unwrap();
    let output = run(&[
        "call",
        &calculator,
        "calculate",
        "{}",
        "--config",
        &path(&config),
    ]);
    assert_clean_failure(&output, 2, "timeout");
}

#[test]
fn a_huge_tool_list_stops_tools_and_serve_quickly_naming_the_cap() {
    let hostile = path(&component("hostile_tool"));
    let specs = r#"specs={"count": 100000}"#;
    for command in [
        &["tools", &hostile][..],
        &["serve", "--stdio", "--tools", &hostile][..],
    ] {
        let started = Instant::now();
        let mut args = command.to_vec();
        args.extend(["--dependency", specs]);
        let output = run(&args);
        assert_clean_failure(&output, 2, "max_tools");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{command:?}: {:?}",
            started.elapsed()
        );
    }
    let output = run(&[
        "tools",
        &hostile,
        "--dependency",
        r#"specs={"count": 1, "description": 50000}"#,
    ]);
    assert_clean_failure(&output, 2, "max_description");
}

#[test]
fn misspelled_keys_in_a_tool_section_are_refused_with_file_and_line() {
    let dir = temp_dir();
    let config = dir.path().join("wasm-agent.toml");
    let text = format!(
        "[tools.calc]\ncomponent = {:?}\nmax_ouptut = \"1KiB\"\n",
        path(&component("calculator"))
    );
    std::fs::write(&config, text).unwrap();
    let output = run(&["tools", "--config", &path(&config)]);
    assert_clean_failure(&output, 2, "wasm-agent.toml:3");
    assert!(
        stderr(&output).contains("tools.calc.max_ouptut"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_tools_control_characters_never_reach_the_terminal_or_logs_raw() {
    let hostile = path(&component("hostile_tool"));
    let forged =
        "done\n2026-12-01T00:00:00Z  INFO approved: rm -rf /\r\u{1b}[2J\u{1b}]0;owned\u{7}";
    let args = json!({"text": forged}).to_string();
    let output = run(&["call", &hostile, "forge", &args, "-v"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(
        !err.contains('\u{1b}'),
        "a raw escape reached stderr: {err:?}"
    );
    assert!(!err.contains('\r') && !err.contains('\u{7}'), "{err:?}");
    assert!(
        !err.lines()
            .any(|line| line.starts_with("2026-12-01T00:00:00Z")),
        "a forged log line: {err}"
    );
    assert!(
        err.contains("\\u{1b}[2J"),
        "the escape is not shown escaped: {err}"
    );
    assert!(err.contains("error: failed: done\\n2026"), "{err}");
    // Text a component puts in its schema, quoted back by a load error.
    let specs = json!({"count": 1, "ref": "\u{1b}]0;owned\u{7}#/nowhere"}).to_string();
    let output = run(&["tools", &hostile, "--dependency", &format!("specs={specs}")]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(!stderr(&output).contains('\u{1b}'), "{:?}", stderr(&output));
    let json_out = run(&["call", &hostile, "forge", &args, "--json"]);
    let value: Value = serde_json::from_slice(&json_out.stdout).unwrap();
    assert_eq!(
        value["error"]["message"], forged,
        "--json keeps the exact text"
    );
}

#[test]
fn host_memory_a_tool_makes_the_host_hold_stays_bounded() {
    let hostile = path(&component("hostile_tool"));
    let (small, baseline) = run_measured(&[
        "call",
        &hostile,
        "long_error",
        r#"{"bytes": 10}"#,
        "--memory",
        "16MiB",
    ]);
    assert_eq!(small.status.code(), Some(1));
    // Each set of headers filled close to the host's 32 KiB per set.
    let flood = r#"{"count": 1000000, "bytes": 24000}"#;
    let started = Instant::now();
    let (output, peak) =
        run_measured(&["call", &hostile, "flood_fields", flood, "--memory", "16MiB"]);
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("capability_denied") && err.contains("max_resources"),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    let grown_mib = (peak - baseline) / 1024;
    // The tool's 16 MiB plus the documented host overhead (max_resources x 64 KiB).
    assert!(
        grown_mib <= 16 + 16,
        "host RSS grew {grown_mib} MiB over its baseline"
    );
}

#[test]
fn descriptors_a_tool_holds_stop_at_its_limit() {
    let dir = temp_dir();
    std::fs::write(dir.path().join("f"), "x").unwrap();
    let hostile = path(&component("hostile_tool"));
    let grant = format!("{}:/data:ro", dir.path().display());
    let args = r#"{"path": "/data/f", "count": 1000000}"#;
    let output = run(&[
        "call",
        &hostile,
        "hold_files",
        args,
        "--allow-dir",
        &grant,
        "--max-resources",
        "50",
    ]);
    assert_clean_failure(&output, 1, "capability_denied");
    assert!(
        stderr(&output).contains("more than 50 host resources"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_tool_spinning_on_its_state_ends_at_its_deadline_as_a_timeout() {
    // A healthy store answers every read; the call's own deadline ends it,
    // and the error says so rather than blame the store.
    let hostile = path(&component("hostile_tool"));
    let output = run(&["call", &hostile, "state_spin", "{}", "--timeout", "1s"]);
    assert_clean_failure(&output, 1, "timeout");
    assert!(!stderr(&output).contains("store"), "{}", stderr(&output));
}

#[test]
fn writes_past_max_write_fail_the_call_naming_the_key() {
    let dir = temp_dir();
    let files = path(&component("files"));
    let grant = format!("{}:/out:rw", dir.path().display());
    let args = json!({"path": "/out/f.txt", "content": "y".repeat(2048)}).to_string();
    let output = run(&[
        "call",
        &files,
        "write_file",
        &args,
        "--allow-dir",
        &grant,
        "--max-write",
        "1KiB",
    ]);
    assert_clean_failure(&output, 1, "max_write");
    let within = run(&[
        "call",
        &files,
        "write_file",
        &args,
        "--allow-dir",
        &grant,
        "--max-write",
        "8KiB",
    ]);
    assert_eq!(within.status.code(), Some(0), "{}", stderr(&within));
    assert_eq!(std::fs::read(dir.path().join("f.txt")).unwrap().len(), 2048);
}

#[cfg(unix)]
#[test]
fn a_cache_folder_others_can_write_is_not_trusted() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir();
    let cache = dir.path().join("shared-cache");
    std::fs::create_dir(&cache).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let calculator = path(&component("calculator"));
    let args = [
        "call",
        &calculator,
        "calculate",
        r#"{"expression": "1+1"}"#,
        "--cache-dir",
        &path(&cache),
    ];
    let output = run(&args);
    assert_eq!(
        crate::common::stdout(&output).trim(),
        "2",
        "{}",
        stderr(&output)
    );
    assert!(
        stderr(&output).contains("not using the compile cache"),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        std::fs::read_dir(&cache).unwrap().count(),
        0,
        "entries were written"
    );
}

/// SIGTERM while a call runs: the call finishes and its result is sent, then
/// the server exits cleanly.
#[tokio::test]
async fn sigterm_over_http_lets_the_call_in_flight_finish() {
    let fixture = path(&component("fixture_tool"));
    let server = Server::start(&["--tools", &fixture]);
    let session = server.session(None).await;
    let pid = server.child.id() as libc::pid_t;
    let signal = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(400)).await;
        // SAFETY: signals our own child.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    });
    let started = Instant::now();
    let result = server
        .call_tool(&session, 7, "sleep", json!({"ms": 1500}))
        .await;
    signal.await.unwrap();
    assert_eq!(result["result"]["content"][0]["text"], "slept", "{result}");
    assert!(started.elapsed() >= Duration::from_millis(1400));
    let mut server = server;
    let status = wait_exit(&mut server.child, Duration::from_secs(8));
    assert!(status.success(), "{status:?}");
}

#[test]
fn sigterm_over_stdio_lets_the_call_in_flight_finish() {
    let fixture = path(&component("fixture_tool"));
    let mut child = wasm_agent()
        .args(["serve", "--stdio", "--tools", &fixture])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = |message: Value| writeln!(stdin, "{message}").unwrap();
    send(initialize());
    let answer = lines.next().unwrap().unwrap();
    assert!(answer.contains("\"id\":0"), "{answer}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "sleep", "arguments": {"ms": 1500}}}));
    std::thread::sleep(Duration::from_millis(400));
    // SAFETY: signals our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let result: Value = lines
        .map_while(Result::ok)
        .filter_map(|line| serde_json::from_str::<Value>(&line).ok())
        .find(|message| message["id"] == 1)
        .expect("the call in flight was answered");
    assert_eq!(result["result"]["content"][0]["text"], "slept", "{result}");
    let status = wait_exit(&mut child, Duration::from_secs(8));
    assert!(status.success(), "{status:?}");
    drop(stdin);
}

/// A hostile tool served over MCP gets the same typed errors.
#[tokio::test]
async fn hostile_calls_over_mcp_get_typed_errors() {
    let hostile = path(&component("hostile_tool"));
    let server = Server::start(&["--tools", &hostile, "--max-output", "64KiB"]);
    let session = server.session(None).await;
    for (id, tool, args, kind) in [
        (
            1,
            "flood_fields",
            json!({"count": 1_000_000, "bytes": 20_000}),
            "capability_denied",
        ),
        (
            2,
            "many_artifacts",
            json!({"count": 100_000}),
            "output_too_large",
        ),
        (
            3,
            "long_error",
            json!({"bytes": 1_000_000}),
            "output_too_large",
        ),
        (4, "forge", json!({"text": "x\u{1b}[2J"}), "failed"),
    ] {
        let result = server.call_tool(&session, id, tool, args).await;
        assert_eq!(result["result"]["isError"], true, "{tool}: {result}");
        assert_eq!(
            result["result"]["structuredContent"]["error"]["kind"], kind,
            "{tool}: {result}"
        );
    }
}

fn wait_exit(child: &mut std::process::Child, within: Duration) -> std::process::ExitStatus {
    let until = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < until, "the server did not exit");
        std::thread::sleep(Duration::from_millis(50));
    }
}
