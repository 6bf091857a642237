//! Every policy knob allows what it grants and denies what it does not,
//! checked against a real component.

use std::path::Path;

use crate::common::{TIMEOUT, fixture_host, temp_dir};
use serde_json::json;
use wasm_agent::{CallContext, DirMode, ErrorKind, Policy, ToolCallResult, ToolHost};

async fn call(host: &ToolHost, tool: &str, args: serde_json::Value) -> ToolCallResult {
    host.call(tool, &args.to_string(), &CallContext::new())
        .await
}

fn kind(result: &ToolCallResult) -> Option<ErrorKind> {
    result.error.as_ref().map(|e| e.kind)
}

/// A grant with a file inside and a secret beside it (outside the grant).
struct Layout {
    _root: tempfile::TempDir,
    granted: std::path::PathBuf,
    secret: std::path::PathBuf,
}

fn layout() -> Layout {
    let root = temp_dir();
    let granted = root.path().join("granted");
    std::fs::create_dir(&granted).unwrap();
    std::fs::write(granted.join("hello.txt"), "hello from the grant").unwrap();
    let secret = root.path().join("secret.txt");
    std::fs::write(&secret, "TOP SECRET").unwrap();
    Layout {
        granted,
        secret,
        _root: root,
    }
}

fn policy_with(dir: &Path, mode: DirMode) -> Policy {
    Policy::default()
        .timeout(TIMEOUT)
        .allow_dir(dir, "/data", mode)
}

#[tokio::test]
async fn no_grant_means_no_filesystem() {
    let fs = layout();
    let host = fixture_host(Policy::default()).await;
    let abs = fs.granted.join("hello.txt");
    let result = call(&host, "read_path", json!({"path": abs})).await;
    assert_eq!(kind(&result), Some(ErrorKind::Failed), "{result:?}");
    let result = call(&host, "list_path", json!({"path": "/"})).await;
    assert!(!result.content.contains("granted"), "{result:?}");
}

#[tokio::test]
async fn read_only_grant_reads_but_never_writes() {
    let fs = layout();
    let host = fixture_host(policy_with(&fs.granted, DirMode::Ro)).await;
    let read = call(&host, "read_path", json!({"path": "/data/hello.txt"})).await;
    assert_eq!(read.content, "hello from the grant", "{read:?}");
    let listed = call(&host, "list_path", json!({"path": "/data"})).await;
    assert!(listed.content.contains("hello.txt"), "{listed:?}");

    let write = call(
        &host,
        "write_path",
        json!({"path": "/data/new.txt", "content": "x"}),
    )
    .await;
    assert_eq!(kind(&write), Some(ErrorKind::Failed), "{write:?}");
    assert!(!fs.granted.join("new.txt").exists());
    let overwrite = call(
        &host,
        "write_path",
        json!({"path": "/data/hello.txt", "content": "x"}),
    )
    .await;
    assert_eq!(kind(&overwrite), Some(ErrorKind::Failed), "{overwrite:?}");
    assert_eq!(
        std::fs::read_to_string(fs.granted.join("hello.txt")).unwrap(),
        "hello from the grant"
    );
}

#[tokio::test]
async fn read_write_grant_writes_inside_only() {
    let fs = layout();
    let host = fixture_host(policy_with(&fs.granted, DirMode::Rw)).await;
    let write = call(
        &host,
        "write_path",
        json!({"path": "/data/new.txt", "content": "written"}),
    )
    .await;
    assert!(write.is_ok(), "{write:?}");
    assert_eq!(
        std::fs::read_to_string(fs.granted.join("new.txt")).unwrap(),
        "written"
    );
    let escape = call(
        &host,
        "write_path",
        json!({"path": "/data/../escaped.txt", "content": "x"}),
    )
    .await;
    assert_eq!(kind(&escape), Some(ErrorKind::Failed), "{escape:?}");
    assert!(!fs.granted.parent().unwrap().join("escaped.txt").exists());
}

#[tokio::test]
async fn dot_dot_cannot_leave_a_grant() {
    let fs = layout();
    let host = fixture_host(policy_with(&fs.granted, DirMode::Rw)).await;
    let result = call(&host, "read_path", json!({"path": "/data/../secret.txt"})).await;
    assert_eq!(kind(&result), Some(ErrorKind::Failed), "{result:?}");
    assert!(!format!("{result:?}").contains("TOP SECRET"));
}

#[tokio::test]
async fn absolute_host_paths_outside_grants_are_unreachable() {
    let fs = layout();
    let host = fixture_host(policy_with(&fs.granted, DirMode::Ro)).await;
    for path in [
        fs.secret.to_string_lossy().into_owned(),
        "/etc/passwd".into(),
    ] {
        let result = call(&host, "read_path", json!({ "path": path })).await;
        assert_eq!(kind(&result), Some(ErrorKind::Failed), "{path}: {result:?}");
        assert!(!result.content.contains("TOP SECRET") && !result.content.contains("root:"));
    }
}

#[cfg(unix)]
#[tokio::test]
async fn symlinks_out_of_a_grant_are_refused() {
    let fs = layout();
    std::os::unix::fs::symlink(&fs.secret, fs.granted.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(fs.secret.parent().unwrap(), fs.granted.join("up")).unwrap();
    let host = fixture_host(policy_with(&fs.granted, DirMode::Rw)).await;
    for path in ["/data/link.txt", "/data/up/secret.txt"] {
        let result = call(&host, "read_path", json!({ "path": path })).await;
        assert_eq!(kind(&result), Some(ErrorKind::Failed), "{path}: {result:?}");
        assert!(!format!("{result:?}").contains("TOP SECRET"));
    }
    let write = call(
        &host,
        "write_path",
        json!({"path": "/data/link.txt", "content": "pwned"}),
    )
    .await;
    assert_eq!(kind(&write), Some(ErrorKind::Failed), "{write:?}");
    assert_eq!(std::fs::read_to_string(&fs.secret).unwrap(), "TOP SECRET");
}

#[tokio::test]
async fn environment_is_only_what_is_granted() {
    // The host process has variables of its own (PATH, HOME, ...): none may leak.
    assert!(std::env::var_os("PATH").is_some());
    let host = fixture_host(Policy::default().env("GREETING", "hi")).await;
    let result = call(&host, "env", json!({})).await;
    assert_eq!(result.content.trim(), "GREETING=hi", "{result:?}");

    let host = fixture_host(Policy::default()).await;
    let result = call(&host, "env", json!({})).await;
    assert_eq!(result.content.trim(), "", "{result:?}");
}

#[tokio::test]
async fn limits_of_one_policy_do_not_touch_another_component() {
    let tight = Policy::default()
        .timeout(TIMEOUT)
        .fuel(50_000_000)
        .max_output(wasm_agent::ByteSize::kib(64));
    let host = fixture_host(tight).await;
    host.load_with(
        crate::common::component("fixture_tool"),
        wasm_agent::LoadOptions::new(Policy::default())
            .name("roomy")
            .prefix("roomy_"),
    )
    .await
    .unwrap();
    let tight = call(&host, "big_output", json!({"bytes": 500_000})).await;
    assert_eq!(kind(&tight), Some(ErrorKind::OutputTooLarge), "{tight:?}");
    let spin = call(&host, "spin", json!({})).await;
    assert_eq!(kind(&spin), Some(ErrorKind::OutOfFuel), "{spin:?}");
    let roomy = call(&host, "roomy_big_output", json!({"bytes": 500_000})).await;
    assert!(roomy.is_ok(), "{roomy:?}");
}
