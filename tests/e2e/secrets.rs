//! Secrets reach no record, log line or error message: a tool that logs
//! credentials, fails naming a password, sends a request with a key in its
//! URL, and is called with secret-looking arguments leaves none of them in the
//! terminal's output or the audit log; the arguments digest is keyed with
//! the log's own secret, so hashing a guess confirms nothing.

use std::path::Path;

use serde_json::{Value, json};

use crate::audit::{calls, http_server};
use crate::common::{component, run, stderr, stdout, temp_dir};

fn path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

const JWT: &str = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLWJ5dGVz";
const GITHUB: &str = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
const PEM: &str =
    "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49\n-----END PRIVATE KEY-----";

/// What must appear nowhere: the tell-tale tail of each secret.
const SECRETS: [&str; 6] = [
    "bnF0dXJlLWJ5dGVz",
    "yz0123456789",
    "MBMGByqGSM49",
    "hunter2",
    "QSECRET",
    "8c0ffee8",
];

/// HMAC-SHA256 of `text` under the hex key in `key_file`, by openssl.
pub(crate) fn openssl_hmac(key_file: &Path, text: &str) -> String {
    use std::io::Write as _;
    let key = std::fs::read_to_string(key_file).unwrap();
    let mut child = std::process::Command::new("openssl")
        .args(["dgst", "-sha256", "-mac", "HMAC", "-macopt"])
        .arg(format!("hexkey:{}", key.trim()))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("openssl runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap();
    format!("hmac-sha256:{}", out.trim().rsplit(' ').next().unwrap())
}

#[test]
fn secrets_reach_no_record_log_line_or_error_message() {
    let dir = temp_dir();
    let audit = dir.path().join("audit.jsonl");
    let fixture = path(&component("fixture_tool"));
    let server = http_server();
    let log_file = path(&audit);
    let audited = |args: &[&str]| {
        let mut all = vec!["call", &fixture];
        all.extend(args);
        all.extend(["--audit", &log_file, "--audit-arguments", "-v"]);
        run(&all)
    };

    // A tool logs credentials (a JWT, a GitHub token, a PEM key).
    let message = format!("token {JWT} and {GITHUB} and {PEM}");
    let logged = audited(&[
        "log",
        &json!({"level": "info", "message": message}).to_string(),
    ]);
    assert!(logged.status.success(), "{}", stderr(&logged));
    assert!(stderr(&logged).contains("token [redacted] and [redacted] and [redacted]"));

    // A tool's own error naming a password in a URL.
    let panicked = audited(&[
        "panic",
        &json!({"message": "cannot reach postgres://app:hunter2@db:5432/app"}).to_string(),
    ]);
    assert_eq!(panicked.status.code(), Some(1), "{}", stderr(&panicked));
    assert!(
        stderr(&panicked).contains("postgres://[redacted]@db:5432/app"),
        "{}",
        stderr(&panicked)
    );

    // A request with a key in its query: refused, then let through.
    let url = format!("http://{server}/items?api_key=QSECRET#frag");
    let denied = audited(&["http_get", &json!({"url": url}).to_string()]);
    assert_eq!(denied.status.code(), Some(1), "{}", stderr(&denied));
    let grant = format!("http://{server}");
    let allowed = audited(&[
        "http_get",
        &json!({"url": url}).to_string(),
        "--allow-host",
        &grant,
    ]);
    assert!(allowed.status.success(), "{}", stderr(&allowed));

    // Arguments under secret-looking keys, and a credential by shape.
    let arguments = json!({"text": "hi", "passcode": "8c0ffee8", "x-auth": "8c0ffee8",
        "jwt": "8c0ffee8", "otp": "8c0ffee8", "session": "8c0ffee8",
        "note": "Bearer 8c0ffee8abcdef"})
    .to_string();
    let refused = audited(&["echo", &arguments]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));

    for (what, output) in [
        ("log", &logged),
        ("panic", &panicked),
        ("denied", &denied),
        ("allowed", &allowed),
        ("arguments", &refused),
    ] {
        let shown = format!("{}{}", stdout(output), stderr(output));
        for secret in SECRETS {
            assert!(!shown.contains(secret), "{what}: {secret} shown: {shown}");
        }
    }
    let log = std::fs::read_to_string(&audit).unwrap();
    for secret in SECRETS {
        assert!(!log.contains(secret), "{secret} in the audit log: {log}");
    }

    let records = calls(&audit);
    assert_eq!(records.len(), 5, "{records:?}");
    let bare = format!("GET http://{server}/items");
    assert_eq!(records[2]["denials"][0]["attempt"], bare);
    // The caller's arguments keep the URL, not the key in its query.
    assert_eq!(
        records[2]["arguments"]["url"],
        format!("http://{server}/items?api_key=[redacted]#frag")
    );
    assert_eq!(records[3]["requests"][0]["request"], bare);
    assert_eq!(
        records[4]["arguments"],
        json!({"text": "hi", "passcode": "[redacted]", "x-auth": "[redacted]",
            "jwt": "[redacted]", "otp": "[redacted]", "session": "[redacted]",
            "note": "[redacted]"})
    );

    // The digest is keyed by the log's secret, kept owner-only beside it.
    let key = dir.path().join(".audit.jsonl.key");
    let mode = std::os::unix::fs::PermissionsExt::mode(&key.metadata().unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(
        records[4]["arguments_digest"],
        openssl_hmac(&key, &arguments)
    );
    let unkeyed = {
        use sha2::Digest as _;
        format!("sha256:{}", hex::encode(sha2::Sha256::digest(&arguments)))
    };
    assert_ne!(records[4]["arguments_digest"], Value::String(unkeyed));
}
