//! Hardening through the library API: everything the host does or allocates
//! for a hostile component (`tests/hostile-tool`) is bounded and charged to
//! its call, with the exact error kind and within a wall-time bound.

use std::time::{Duration, Instant};

use serde_json::json;
use wasm_agent::{CallContext, ErrorKind, HostError, LoadOptions, Policy, ToolHost};

use crate::common::{component, fixture_host, host, temp_dir};

/// Tools the hostile component always lists (besides those of `specs`).
const FIXED_TOOLS: usize = 8;

fn kind(result: &wasm_agent::ToolCallResult) -> Option<ErrorKind> {
    result.error.as_ref().map(|e| e.kind)
}

/// The hostile component loaded under `policy`, its extra specs shaped by
/// `specs` (see the component's `specs` dependency).
async fn load_hostile(
    host: &ToolHost,
    policy: Policy,
    specs: serde_json::Value,
) -> Result<wasm_agent::LoadReport, HostError> {
    let policy = policy.dependency("specs", specs.to_string());
    host.load_with(
        component("hostile_tool"),
        LoadOptions::new(policy).name("hostile"),
    )
    .await
}

async fn hostile_host(policy: Policy) -> ToolHost {
    let host = host();
    load_hostile(&host, policy, json!({}))
        .await
        .expect("hostile loads");
    host
}

async fn call(host: &ToolHost, tool: &str, args: serde_json::Value) -> wasm_agent::ToolCallResult {
    host.call(tool, &args.to_string(), &CallContext::new())
        .await
}

#[tokio::test]
async fn tool_lists_past_the_caps_are_refused_quickly_naming_the_cap() {
    let host = host();
    for (specs, cap) in [
        (json!({"count": 100_000}), "max_tools"),
        (
            json!({"count": 1, "description": 20_000}),
            "max_description",
        ),
        (json!({"count": 1, "schema": 70_000}), "max_schema"),
    ] {
        let started = Instant::now();
        let err = load_hostile(&host, Policy::default(), specs.clone())
            .await
            .unwrap_err();
        assert!(matches!(err, HostError::Spec { .. }), "{specs}: {err}");
        assert!(err.to_string().contains(cap), "{specs}: {err}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{specs}: {:?}",
            started.elapsed()
        );
    }
    // The caps are the operator's to raise.
    let raised = Policy::default().max_tools(2000);
    let report = load_hostile(&host, raised, json!({"count": 1500}))
        .await
        .unwrap();
    assert_eq!(report.tools.len(), 1500 + FIXED_TOOLS);
}

#[tokio::test]
async fn the_largest_list_the_defaults_allow_loads_in_bounded_time() {
    // 128 tools (the fixed ones and the rest), each at the description and
    // schema caps.
    let specs = json!({"count": 128 - FIXED_TOOLS, "description": 16_000, "schema": 60_000});
    let started = Instant::now();
    let report = load_hostile(&host(), Policy::default(), specs)
        .await
        .unwrap();
    assert_eq!(report.tools.len(), 128);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn backtracking_patterns_cannot_stall_validation() {
    let host = host();
    let specs = json!({"count": 1, "pattern": "^(a+)+$"});
    load_hostile(&host, Policy::default(), specs).await.unwrap();
    let text = format!("{}!", "a".repeat(100_000));
    let started = Instant::now();
    let result = call(&host, "t0", json!({"text": text})).await;
    assert_eq!(
        kind(&result),
        Some(ErrorKind::InvalidArguments),
        "{result:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    let ok = call(&host, "t0", json!({"text": "aaaa"})).await;
    assert_eq!(ok.content, "ok", "{ok:?}");
}

#[tokio::test]
async fn look_around_patterns_are_refused_at_load_naming_the_tool() {
    let specs = json!({"count": 1, "pattern": "^(?=a)a$"});
    let err = load_hostile(&host(), Policy::default(), specs)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("\"t0\""), "{err}");
}

#[tokio::test]
async fn oversized_arguments_are_refused_before_parsing() {
    let host = fixture_host(Policy::default()).await;
    let text = "x".repeat(2 * 1024 * 1024);
    let started = Instant::now();
    let result = call(&host, "echo", json!({"text": text})).await;
    assert_eq!(
        kind(&result),
        Some(ErrorKind::InvalidArguments),
        "{:?}",
        result.error
    );
    assert!(result.error.unwrap().message.contains("max_arguments"));
    assert!(started.elapsed() < Duration::from_millis(500));
    let small = fixture_host(Policy::default().max_arguments(wasm_agent::ByteSize(64))).await;
    let refused = call(&small, "echo", json!({"text": "y".repeat(100)})).await;
    assert_eq!(kind(&refused), Some(ErrorKind::InvalidArguments));
}

#[tokio::test]
async fn header_floods_hit_the_resource_limit() {
    let host = hostile_host(Policy::default().memory(wasm_agent::ByteSize::mib(16))).await;
    let started = Instant::now();
    let result = call(
        &host,
        "flood_fields",
        json!({"count": 1_000_000, "bytes": 20_000}),
    )
    .await;
    assert_eq!(
        kind(&result),
        Some(ErrorKind::CapabilityDenied),
        "{result:?}"
    );
    assert!(result.error.unwrap().message.contains("max_resources"));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // One set of headers is capped too.
    let one = call(
        &host,
        "flood_fields",
        json!({"count": 1, "bytes": 10_000_000}),
    )
    .await;
    assert_eq!(kind(&one), Some(ErrorKind::CapabilityDenied), "{one:?}");
    assert!(one.error.unwrap().message.contains("32 KiB"));
    let fits = call(&host, "flood_fields", json!({"count": 3, "bytes": 8_000})).await;
    assert!(fits.content.starts_with("held 3 header sets"), "{fits:?}");
}

#[tokio::test]
async fn held_descriptors_stop_at_the_calls_limit() {
    let dir = temp_dir();
    std::fs::write(dir.path().join("f"), "x").unwrap();
    let policy = Policy::default()
        .allow_dir(dir.path(), "/data", wasm_agent::DirMode::Ro)
        .max_resources(64);
    let host = hostile_host(policy).await;
    let result = call(
        &host,
        "hold_files",
        json!({"path": "/data/f", "count": 100_000}),
    )
    .await;
    assert_eq!(
        kind(&result),
        Some(ErrorKind::CapabilityDenied),
        "{result:?}"
    );
    let message = result.error.unwrap().message;
    assert!(
        message.contains("64") && message.contains("max_resources"),
        "{message}"
    );
    let within = call(&host, "hold_files", json!({"path": "/data/f", "count": 40})).await;
    assert_eq!(within.content, "held 40 descriptors", "{within:?}");
}

/// Seven calls at once open every descriptor they may, over and over, while
/// another tool keeps opening its own granted folder: it never fails.
#[tokio::test]
async fn one_tools_descriptors_never_starve_another_tools_call() {
    let dir = temp_dir();
    std::fs::write(dir.path().join("f"), "x").unwrap();
    let grant = |p: Policy| p.allow_dir(dir.path(), "/data", wasm_agent::DirMode::Ro);
    let host = ToolHost::builder()
        .cache_dir(crate::common::cache_dir())
        .max_concurrency(8)
        .build()
        .unwrap();
    load_hostile(
        &host,
        grant(Policy::default().max_resources(65_536)),
        json!({}),
    )
    .await
    .unwrap();
    host.load_with(
        component("fixture_tool"),
        LoadOptions::new(grant(Policy::default())).name("fixture"),
    )
    .await
    .unwrap();
    let until = Instant::now() + Duration::from_secs(2);
    let mut hogs = Vec::new();
    for _ in 0..7 {
        let host = host.clone();
        hogs.push(tokio::spawn(async move {
            let mut calls = 0;
            while Instant::now() < until {
                let r = call(
                    &host,
                    "hold_files",
                    json!({"path": "/data/f", "count": 1_000_000}),
                )
                .await;
                assert_eq!(kind(&r), Some(ErrorKind::CapabilityDenied), "{r:?}");
                calls += 1;
            }
            calls
        }));
    }
    let mut reads = 0;
    while Instant::now() < until {
        let r = call(&host, "list_path", json!({"path": "/data"})).await;
        assert_eq!(r.content, "f", "the other tool's call failed: {r:?}");
        reads += 1;
    }
    for hog in hogs {
        assert!(hog.await.unwrap() > 0);
    }
    assert!(reads > 0);
}

#[tokio::test]
async fn writes_past_max_write_are_refused_and_never_reach_the_disk() {
    let dir = temp_dir();
    let policy = Policy::default()
        .allow_dir(dir.path(), "/out", wasm_agent::DirMode::Rw)
        // A new file costs 4 KiB and its name, then its bytes.
        .max_write(wasm_agent::ByteSize::kib(8));
    let host = fixture_host(policy).await;
    let write = |path: &str, bytes: usize| json!({"path": path, "content": "x".repeat(bytes)});
    let ok = call(&host, "write_path", write("/out/small", 3000)).await;
    assert_eq!(ok.content, "wrote 3000 bytes", "{ok:?}");
    let big = call(&host, "write_path", write("/out/big", 5000)).await;
    assert!(
        big.error
            .as_ref()
            .is_some_and(|e| e.message.contains("5000 bytes")),
        "{big:?}"
    );
    assert_eq!(kind(&big), Some(ErrorKind::CapabilityDenied), "{big:?}");
    assert!(big.error.unwrap().message.contains("max_write"));
    assert_eq!(
        std::fs::metadata(dir.path().join("big"))
            .map(|m| m.len())
            .unwrap_or(0),
        0
    );
    // The budget is per call: the next call may write again.
    let again = call(&host, "write_path", write("/out/again", 3000)).await;
    assert!(again.is_ok(), "{again:?}");
}

#[tokio::test]
async fn empty_files_and_folders_count_against_max_write_too() {
    let dir = temp_dir();
    let policy = Policy::default()
        .allow_dir(dir.path(), "/out", wasm_agent::DirMode::Rw)
        .max_write(wasm_agent::ByteSize::kib(64));
    let host = hostile_host(policy).await;
    let result = call(
        &host,
        "make_entries",
        json!({"path": "/out", "count": 100_000}),
    )
    .await;
    assert_eq!(
        kind(&result),
        Some(ErrorKind::CapabilityDenied),
        "{result:?}"
    );
    assert!(result.error.unwrap().message.contains("max_write"));
    let made = std::fs::read_dir(dir.path()).unwrap().count();
    assert!(
        (10..=16).contains(&made),
        "{made} entries made under a 64 KiB budget"
    );
    let few = call(
        &host,
        "make_entries",
        json!({"path": "/out/d1", "count": 4}),
    )
    .await;
    assert_eq!(few.content, "made 4 entries", "{few:?}");
}

#[tokio::test]
async fn every_part_of_a_result_counts_against_max_output() {
    let host = hostile_host(Policy::default().max_output(wasm_agent::ByteSize::kib(64))).await;
    for (args, cap) in [
        (json!({"count": 10_000}), "max_artifacts"),
        (json!({"count": 60, "kind_bytes": 2000}), "max_output"),
        (json!({"count": 1, "mime_bytes": 100_000}), "max_output"),
        (json!({"count": 64, "data_bytes": 1000}), "max_output"),
    ] {
        let result = call(&host, "many_artifacts", args.clone()).await;
        assert_eq!(
            kind(&result),
            Some(ErrorKind::OutputTooLarge),
            "{args}: {:?}",
            result.error
        );
        assert!(result.error.unwrap().message.contains(cap), "{args}");
    }
    let ok = call(
        &host,
        "many_artifacts",
        json!({"count": 10, "data_bytes": 100}),
    )
    .await;
    assert!(ok.is_ok(), "{:?}", ok.error);
    let long = call(&host, "long_error", json!({"bytes": 100_000})).await;
    assert_eq!(
        kind(&long),
        Some(ErrorKind::OutputTooLarge),
        "{:?}",
        long.error
    );
    let short = call(&host, "long_error", json!({"bytes": 10})).await;
    assert_eq!(kind(&short), Some(ErrorKind::Failed));
}

#[tokio::test]
async fn state_is_scoped_by_digest_or_alias_never_by_file_name() {
    use wasm_agent::SessionStore;
    let dir = temp_dir();
    // Another component under the fixture's file name: the same code with a
    // custom section appended, so other bytes and another digest.
    let impostor = dir.path().join("fixture_tool.wasm");
    let mut bytes = std::fs::read(component("fixture_tool")).unwrap();
    bytes.extend_from_slice(&[0x00, 0x03, 0x01, b'x', b'y']);
    std::fs::write(&impostor, &bytes).unwrap();
    let sessions = std::sync::Arc::new(wasm_agent::InMemorySessionStore::default());
    let host_with = |sessions: std::sync::Arc<wasm_agent::InMemorySessionStore>| {
        ToolHost::builder()
            .cache_dir(crate::common::cache_dir())
            .session_store(sessions)
            .build()
            .unwrap()
    };
    let first = host_with(sessions.clone());
    first
        .load(component("fixture_tool"), Policy::default())
        .await
        .unwrap();
    let set = call(&first, "state_set", json!({"key": "secret", "value": "s3"})).await;
    assert!(set.is_ok(), "{set:?}");
    let digest = sha256_of(&component("fixture_tool"));
    let scope = |component: String| wasm_agent::session::StateScope {
        owner: wasm_agent::session::Owner::default(),
        session: "default".into(),
        component: component.into(),
    };
    let stored = sessions
        .get(&scope(format!("sha256:{digest}")), "secret")
        .await;
    assert_eq!(stored.unwrap().as_deref(), Some("\"s3\""));
    let by_name = sessions.get(&scope("fixture_tool".into()), "secret").await;
    assert_eq!(by_name.unwrap(), None);

    let stranger = host_with(sessions.clone());
    stranger
        .load(impostor.as_path(), Policy::default())
        .await
        .unwrap();
    let seen = call(&stranger, "state_get", json!({"key": "secret"})).await;
    assert_eq!(
        seen.content, "null",
        "a same-named component read the state"
    );

    let same_bytes = host_with(sessions.clone());
    same_bytes
        .load(component("fixture_tool"), Policy::default())
        .await
        .unwrap();
    let seen = call(&same_bytes, "state_get", json!({"key": "secret"})).await;
    assert_eq!(seen.content, "\"s3\"", "{seen:?}");

    // An alias is a scope of its own, kept across versions of the component.
    let aliased = host_with(sessions.clone());
    aliased
        .load_with(
            impostor.as_path(),
            LoadOptions::default().state_scope("calc"),
        )
        .await
        .unwrap();
    assert_eq!(
        call(&aliased, "state_get", json!({"key": "secret"}))
            .await
            .content,
        "null"
    );
    call(&aliased, "state_set", json!({"key": "k", "value": 1})).await;
    let aliased_state = sessions.get(&scope("alias:calc".into()), "k").await;
    assert_eq!(aliased_state.unwrap().as_deref(), Some("1"));
}

fn sha256_of(path: &std::path::Path) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(std::fs::read(path).unwrap()))
}
