//! The audit trail against what happens to real logs: a server killed with
//! SIGKILL under load, a disk filled to the brim (a tmpfs in a mount
//! namespace of the server's own), and a log cut at its end. Failing
//! closed, no call is answered without its record; a full disk leaves no
//! torn record and `verify` stays green; a cut is found, by the writer and
//! by `verify`, against the head noted beside the log and one kept elsewhere.

use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::audit::calls;
use crate::common::{assert_clean_failure, component, run, stderr, stdout, temp_dir};
use crate::entries::StdioServer;

fn path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The texts of the `echo` calls a log recorded as answered ok.
fn recorded_ok(log: &Path) -> HashSet<String> {
    calls(log)
        .iter()
        .filter(|r| r["outcome"] == "ok")
        .filter_map(|r| r["arguments"]["text"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn a_server_killed_under_load_answered_no_call_without_its_record() {
    let dir = temp_dir();
    let log = dir.path().join("audit.jsonl");
    let fixture = path(&component("fixture_tool"));
    let mut child = crate::common::wasm_agent()
        .args(["serve", "--stdio", "--tools", &fixture, "--audit"])
        .arg(&log)
        .arg("--audit-arguments")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let output = child.stdout.take().unwrap();
    let (tx, answers) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(output)
            .lines()
            .map_while(Result::ok)
        {
            if let Ok(message) = serde_json::from_str(&line)
                && tx.send(message).is_err()
            {
                return;
            }
        }
    });
    let send = |stdin: &mut std::process::ChildStdin, message: Value| {
        use std::io::Write;
        let _ = writeln!(stdin, "{message}");
    };
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "e2e", "version": "0"}}}),
    );
    answers.recv_timeout(Duration::from_secs(60)).unwrap();
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    // Calls go on being sent while answers come back; the server is
    // killed once many are answered, with many more in flight.
    let writer = std::thread::spawn(move || {
        for id in 1..=20_000u64 {
            let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": format!("call-{id}")}}});
            use std::io::Write;
            if writeln!(stdin, "{call}").is_err() {
                return;
            }
        }
    });
    let mut answered = Vec::new();
    while answered.len() < 1500 {
        let message = answers.recv_timeout(Duration::from_secs(60)).unwrap();
        if message["result"]["isError"] == false {
            answered.push(format!("call-{}", message["id"]));
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // Answers already on the pipe were answered too.
    while let Ok(message) = answers.recv_timeout(Duration::from_millis(200)) {
        if message["result"]["isError"] == false {
            answered.push(format!("call-{}", message["id"]));
        }
    }
    let _ = writer.join();

    let recorded = recorded_ok(&log);
    let missing: Vec<&String> = answered.iter().filter(|t| !recorded.contains(*t)).collect();
    assert!(
        missing.is_empty(),
        "{} of {} answered calls have no record, e.g. {:?}",
        missing.len(),
        answered.len(),
        &missing[..missing.len().min(5)]
    );
    // The log holds (a record the kill cut short is reported as torn), and
    // the next writer goes on from it.
    let verified = run(&["audit", "verify", &path(&log)]);
    assert!(verified.status.success(), "{}", stderr(&verified));
    let again = run(&[
        "call",
        &fixture,
        "echo",
        r#"{"text":"after"}"#,
        "--audit",
        &path(&log),
        "--audit-arguments",
    ]);
    assert!(again.status.success(), "{}", stderr(&again));
    let verified = run(&["audit", "verify", &path(&log)]);
    assert!(verified.status.success(), "{}", stderr(&verified));
    assert!(!stdout(&verified).contains("torn"), "{}", stdout(&verified));
}

/// A call of `echo` through `server`; whether it was answered ok, else the
/// error's text.
fn echo(server: &mut StdioServer, text: &str) -> Result<(), String> {
    let result = server.call("echo", json!({"text": text}));
    match result["isError"] == false {
        true => Ok(()),
        false => Err(result.to_string()),
    }
}

#[test]
fn a_full_disk_refuses_calls_and_leaves_a_log_that_verifies() {
    let dir = temp_dir();
    let disk = dir.path().join("disk");
    std::fs::create_dir(&disk).unwrap();
    let log = disk.join("audit.jsonl");
    let fixture = path(&component("fixture_tool"));
    // The server in a mount namespace of its own, its log on a 256 KiB tmpfs.
    let mut command = Command::new("unshare");
    command
        .args(["--mount", "--map-root-user", "--propagation", "private"])
        .args([
            "sh",
            "-c",
            r#"mount -t tmpfs -o size=256k tmpfs "$0" && exec "$@""#,
        ])
        .arg(&disk)
        .arg(env!("CARGO_BIN_EXE_wasm-agent"))
        .args(["serve", "--stdio", "--tools", &fixture, "--audit"])
        .arg(&log)
        .arg("--audit-arguments")
        .env(
            "WASM_AGENT_CACHE_DIR",
            crate::common::wasm_agent()
                .get_envs()
                .find_map(|(k, v)| (k == "WASM_AGENT_CACHE_DIR").then(|| v.unwrap().to_owned()))
                .unwrap(),
        );
    let mut server = StdioServer::start_command(command, Vec::new());
    // The server's view of the tmpfs.
    let seen = Path::new("/proc")
        .join(server.pid().to_string())
        .join("root")
        .join(disk.strip_prefix("/").unwrap());
    let mut answered = Vec::new();
    for n in 0..3 {
        let text = format!("before-{n}");
        echo(&mut server, &text).unwrap();
        answered.push(text);
    }

    // Fill the disk to the brim.
    let filler = seen.join("filler");
    {
        use std::io::Write;
        let mut file = std::fs::File::create(&filler).unwrap();
        while file.write_all(&[b'x'; 512]).is_ok() {}
        while file.write_all(b"x").is_ok() {}
    }
    let mut refused = 0;
    for n in 0..20 {
        let text = format!("full-{n}");
        match echo(&mut server, &text) {
            Ok(()) => answered.push(text),
            Err(error) => {
                assert!(error.contains("audit"), "{error}");
                refused += 1;
            }
        }
    }
    assert!(refused > 0, "a full disk refuses calls");

    // Room again: calls are answered, and recorded, again.
    std::fs::remove_file(&filler).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut n = 0;
    loop {
        let text = format!("after-{n}");
        n += 1;
        if echo(&mut server, &text).is_ok() {
            answered.push(text);
            break;
        }
        assert!(Instant::now() < deadline, "calls are answered again");
        std::thread::sleep(Duration::from_millis(200));
    }
    for n in 0..3 {
        let text = format!("then-{n}");
        echo(&mut server, &text).unwrap();
        answered.push(text);
    }
    // The log and its head, copied out before the namespace goes.
    let copy = dir.path().join("audit.jsonl");
    std::fs::copy(seen.join("audit.jsonl"), &copy).unwrap();
    std::fs::copy(
        seen.join("audit.jsonl.head"),
        dir.path().join("audit.jsonl.head"),
    )
    .unwrap();
    drop(server);

    let verified = run(&["audit", "verify", &path(&copy)]);
    assert!(verified.status.success(), "{}", stderr(&verified));
    assert!(!stdout(&verified).contains("torn"), "{}", stdout(&verified));
    let recorded = recorded_ok(&copy);
    for text in &answered {
        assert!(
            recorded.contains(text),
            "{text} was answered but not recorded"
        );
    }
}

#[test]
fn a_log_cut_at_its_end_is_refused_by_the_writer_and_found_by_verify() {
    let dir = temp_dir();
    let log = dir.path().join("audit.jsonl");
    let calculator = path(&component("calculator"));
    let call = || {
        run(&[
            "call",
            &calculator,
            "calculate",
            r#"{"expression":"6*7"}"#,
            "--audit",
            &path(&log),
        ])
    };
    for _ in 0..3 {
        assert!(call().status.success());
    }
    let verified = run(&["audit", "verify", &path(&log), "--json"]);
    let head = serde_json::from_str::<Value>(stdout(&verified).trim()).unwrap()["head"]
        .as_str()
        .unwrap()
        .to_string();

    // The last call's two records (open, call) cut off, whole lines.
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    std::fs::write(&log, lines[..4].join("\n") + "\n").unwrap();
    assert_clean_failure(&call(), 2, "records were cut from its end");
    assert_clean_failure(
        &run(&["audit", "verify", &path(&log)]),
        2,
        "the log ends at seq 3, but its head says seq 5 was written",
    );
    // The head file removed as well: the head kept elsewhere finds the cut.
    std::fs::remove_file(dir.path().join("audit.jsonl.head")).unwrap();
    assert!(run(&["audit", "verify", &path(&log)]).status.success());
    assert_clean_failure(
        &run(&["audit", "verify", &path(&log), "--head", &head]),
        2,
        "no record has the head",
    );
}
