//! The audit log against real files: records chained and rotated, every
//! kind of tampering found at its line, and a file that cannot be written.

use std::path::Path;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use wasm_agent_audit::{AuditError, AuditLog, AuditOptions, Expect, FailMode, GENESIS, verify};
use wasm_agent_sandbox::{CallAuditor, CallReport, ErrorKind};

fn report(n: usize, arguments: &str) -> CallReport {
    CallReport {
        started: SystemTime::now(),
        call_id: format!("call-{n}"),
        run_id: "run".into(),
        session_id: "s".into(),
        principal: Some("alice".into()),
        tenant: None,
        tool: "calculate".into(),
        component: None,
        remote: None,
        arguments_digest: wasm_agent_sandbox::report::arguments_digest(arguments),
        arguments: Some(arguments.into()),
        approval: None,
        usage: None,
        outcome: (n % 2 == 1).then_some(ErrorKind::Timeout),
        duration: Duration::from_micros(n as u64),
        depth: 0,
        cached: false,
        decided_by: None,
    }
}

fn write(path: &Path, calls: usize, options: impl FnOnce(&mut AuditOptions)) {
    let mut opened = AuditOptions::new(path);
    options(&mut opened);
    let log = AuditLog::open(opened).unwrap();
    for n in 0..calls {
        log.record(report(n, r#"{"expression":"1+1","api_key":"sk-secret"}"#));
    }
    log.flush().unwrap();
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

fn broken_at(path: &Path) -> (usize, String) {
    match verify(path, &Expect::default()) {
        Err(AuditError::Broken { line, reason, .. }) => (line, reason),
        other => panic!("expected a broken chain, got {other:?}"),
    }
}

#[test]
fn records_chain_in_order_and_reopening_continues_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    write(&path, 5, |_| {});
    write(&path, 3, |o| o.entry = "serve".into());
    let records: Vec<Value> = lines(&path)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 10, "two open records and eight calls");
    for (seq, record) in records.iter().enumerate() {
        assert_eq!(record["seq"], seq as u64);
    }
    assert_eq!(records[0]["event"], "open");
    assert_eq!(records[0]["prev"], GENESIS);
    assert_eq!(records[6]["event"], "open");
    assert_eq!(records[6]["entry"], "serve");
    assert_eq!(records[6]["prev"], records[5]["hash"]);
    assert_eq!(records[2]["outcome"], "timeout");
    assert_eq!(records[1]["outcome"], "ok");
    assert_eq!(records[1]["principal"], "alice");
    // Arguments were not asked for: only their digest is written.
    assert!(records[1].get("arguments").is_none());
    assert!(
        records[1]["arguments_digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    let verified = verify(&path, &Expect::default()).unwrap();
    assert_eq!(verified.records, 10);
    assert_eq!(verified.seqs, Some((0, 9)));
    assert_eq!(verified.head, records[9]["hash"]);
    let mode = std::os::unix::fs::PermissionsExt::mode(&path.metadata().unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn arguments_when_asked_for_have_secret_values_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    write(&path, 1, |o| o.arguments = true);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("sk-secret"), "{text}");
    let record: Value = serde_json::from_str(&lines(&path)[1]).unwrap();
    assert_eq!(
        record["arguments"],
        serde_json::json!({"expression": "1+1", "api_key": "[redacted]"})
    );
}

#[test]
fn editing_deleting_or_reordering_a_record_fails_verification_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    write(&path, 6, |_| {});
    let original = lines(&path);
    let save = |lines: &[String]| std::fs::write(&path, lines.join("\n") + "\n").unwrap();

    let mut edited = original.clone();
    edited[3] = edited[3].replace("\"outcome\":\"ok\"", "\"outcome\":\"failed\"");
    edited[3] = edited[3].replace("\"outcome\":\"timeout\"", "\"outcome\":\"ok\"");
    save(&edited);
    let (line, reason) = broken_at(&path);
    assert_eq!(line, 4);
    assert!(reason.contains("changed"), "{reason}");

    let mut deleted = original.clone();
    deleted.remove(2);
    save(&deleted);
    let (line, reason) = broken_at(&path);
    assert_eq!(line, 3);
    assert!(reason.contains("seq 3 follows seq 1"), "{reason}");

    let mut reordered = original.clone();
    reordered.swap(4, 5);
    save(&reordered);
    assert_eq!(broken_at(&path).0, 5);

    let mut first_gone = original.clone();
    first_gone.remove(0);
    save(&first_gone);
    let (line, reason) = broken_at(&path);
    assert_eq!(line, 1);
    assert!(reason.contains("--partial"), "{reason}");
    assert_eq!(
        verify(
            &path,
            &Expect {
                partial: true,
                head: None
            }
        )
        .unwrap()
        .records,
        6
    );

    save(&original);
    assert_eq!(verify(&path, &Expect::default()).unwrap().records, 7);
}

#[test]
fn rotation_by_size_keeps_one_chain_across_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    for _ in 0..4 {
        write(&path, 20, |o| o.max_size = 4096);
    }
    let rotated: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("audit.jsonl.") && !name.ends_with(".head"))
        .collect();
    assert!(rotated.len() >= 3, "{rotated:?}");
    let verified = verify(&path, &Expect::default()).unwrap();
    assert_eq!(verified.records, 84);
    assert_eq!(verified.files.len(), rotated.len() + 1);
    // Removing a rotated file in the middle breaks the chain at the next.
    std::fs::remove_file(dir.path().join("audit.jsonl.2")).unwrap();
    match verify(&path, &Expect::default()) {
        Err(AuditError::Broken { path, line, .. }) => {
            assert!(path.ends_with("audit.jsonl.3"), "{path:?}");
            assert_eq!(line, 1);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_torn_last_record_is_reported_as_torn_and_cut_off_when_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    write(&path, 2, |_| {});
    // A write cut short by a crash: part of a record, no newline.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut file, b"{\"seq\":3,\"time\":\"2026").unwrap();
    drop(file);
    let verified = verify(&path, &Expect::default()).unwrap();
    assert_eq!((verified.records, verified.torn_bytes), (3, 21));
    write(&path, 1, |_| {});
    let verified = verify(&path, &Expect::default()).unwrap();
    assert_eq!((verified.records, verified.torn_bytes), (5, 0));
    let text = std::fs::read_to_string(&path).unwrap();
    let open: Value = serde_json::from_str(text.lines().nth(3).unwrap()).unwrap();
    assert_eq!(
        (&open["event"], &open["torn_bytes"]),
        (&json!("open"), &json!(21))
    );
}

#[test]
fn a_log_cut_at_its_end_is_found_against_its_head() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    write(&path, 4, |_| {});
    let noted = verify(&path, &Expect::default()).unwrap().head;
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // The last two records removed, whole lines: the chain itself holds.
    std::fs::write(&path, lines[..3].join("\n") + "\n").unwrap();
    let cut = |error: AuditError| match error {
        AuditError::Cut { reason, .. } => reason,
        other => panic!("{other}"),
    };
    let reason = cut(verify(&path, &Expect::default()).unwrap_err());
    assert!(
        reason.contains("ends at seq 2, but its head says seq 4"),
        "{reason}"
    );
    // The writer will not go on from the cut.
    let refused = AuditLog::open(AuditOptions::new(&path)).err().unwrap();
    assert!(
        refused
            .to_string()
            .contains("records were cut from its end"),
        "{refused}"
    );
    // With the head file gone too, the head kept elsewhere still finds it.
    std::fs::remove_file(dir.path().join("audit.jsonl.head")).unwrap();
    assert!(verify(&path, &Expect::default()).is_ok());
    let expect = Expect {
        partial: false,
        head: Some(noted),
    };
    let reason = cut(verify(&path, &expect).unwrap_err());
    assert!(reason.contains("no record has the head"), "{reason}");
}

#[test]
fn a_log_that_cannot_be_written_is_refused_when_failing_closed_and_retried_when_open() {
    let dir = tempfile::tempdir().unwrap();
    let read_only = dir.path().join("ro.jsonl");
    std::fs::write(&read_only, "").unwrap();
    let mut perms = read_only.metadata().unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o400);
    std::fs::set_permissions(&read_only, perms).unwrap();
    if std::fs::OpenOptions::new()
        .append(true)
        .open(&read_only)
        .is_ok()
    {
        eprintln!("running as a user who may write read-only files; /dev/full is checked below");
    } else {
        let error = AuditLog::open(AuditOptions::new(&read_only)).err().unwrap();
        assert!(
            error.to_string().contains("cannot open it for appending"),
            "{error}"
        );
    }

    // /dev/full takes the open but no write: the first write fails.
    let full = Path::new("/dev/full");
    let error = AuditLog::open(AuditOptions::new(full)).err().unwrap();
    assert!(error.to_string().contains("/dev/full"), "{error}");
    assert!(error.to_string().contains("No space left"), "{error}");

    // Failing open, the log opens, calls are admitted, and it keeps trying.
    let mut options = AuditOptions::new(full);
    options.fail = FailMode::Open;
    let log = AuditLog::open(options).unwrap();
    assert!(log.admit().is_ok());
    log.record(report(1, "{}"));
    let error = log.flush().unwrap_err();
    assert!(error.to_string().contains("No space left"), "{error}");
}

#[test]
fn one_process_writes_a_log_and_an_emptied_head_is_a_cut() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let first = AuditLog::open(AuditOptions::new(&path)).unwrap();
    // A second writer would fork the chain and cut the first one's records.
    let second = AuditLog::open(AuditOptions::new(&path)).err().unwrap();
    assert!(
        second
            .to_string()
            .contains("another process writes this audit log"),
        "{second}"
    );
    drop(first);
    // Emptying the head file does not hide a cut.
    std::fs::write(dir.path().join("audit.jsonl.head"), "").unwrap();
    let error = AuditLog::open(AuditOptions::new(&path)).err().unwrap();
    assert!(
        error.to_string().contains("its head file is empty"),
        "{error}"
    );
    assert!(verify(&path, &Expect::default()).is_err());
}
