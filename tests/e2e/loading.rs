//! Loading: what is refused and why, the compile cache, and name clashes.

use crate::common::{component, host, temp_dir};
use wasm_agent::registry::RegistryError;
use wasm_agent::sandbox::CacheOutcome;
use wasm_agent::{ComponentSource, DirMode, HostError, LoadOptions, Policy, ToolHost};

async fn load_bytes(bytes: Vec<u8>) -> String {
    let err = host()
        .load(
            ComponentSource::Bytes {
                name: "bad".into(),
                bytes,
            },
            Policy::default(),
        )
        .await
        .expect_err("must be refused");
    err.to_string()
}

#[tokio::test]
async fn random_bytes_are_not_a_component() {
    let message = load_bytes(b"definitely not wasm".to_vec()).await;
    assert!(message.contains("not a WebAssembly component"), "{message}");
}

#[tokio::test]
async fn a_core_module_is_refused_with_a_hint() {
    let message = load_bytes(wat::parse_str("(module)").unwrap()).await;
    assert!(message.contains("core WebAssembly module"), "{message}");
    assert!(message.contains("wasm32-wasip2"), "{message}");
}

#[tokio::test]
async fn a_component_of_another_world_is_refused() {
    let message = load_bytes(wat::parse_str("(component)").unwrap()).await;
    assert!(
        message.contains("does not export wasm-agent:tool/tool"),
        "{message}"
    );
}

#[tokio::test]
async fn an_unknown_import_is_named() {
    let wat = r#"(component (import "acme:vault/secrets@1.0.0" (instance (export "get" (func (result string))))))"#;
    let message = load_bytes(wat::parse_str(wat).unwrap()).await;
    assert!(message.contains("acme:vault/secrets@1.0.0"), "{message}");
}

#[tokio::test]
async fn a_truncated_component_is_refused() {
    let bytes = std::fs::read(component("calculator")).unwrap();
    let message = load_bytes(bytes[..bytes.len() / 2].to_vec()).await;
    assert!(
        message.contains("invalid WebAssembly component"),
        "{message}"
    );
}

#[tokio::test]
async fn a_missing_file_is_named() {
    let err = host()
        .load("/no/such/tool.wasm", Policy::default())
        .await
        .unwrap_err();
    assert!(matches!(err, HostError::Read { .. }));
    assert!(err.to_string().contains("/no/such/tool.wasm"));
}

#[tokio::test]
async fn an_expected_digest_is_checked_against_the_bytes_loaded() {
    use sha2::Digest;
    let path = component("calculator");
    let actual = format!(
        "sha256:{}",
        hex::encode(sha2::Sha256::digest(std::fs::read(&path).unwrap()))
    );
    let host = host();
    let wrong = format!("sha256:{}", "0".repeat(64));
    let options = LoadOptions::new(Policy::default()).expected_digest(&wrong);
    let err = host.load_with(path.clone(), options).await.unwrap_err();
    assert!(matches!(err, HostError::WrongDigest { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains(&wrong) && text.contains(&actual), "{text}");
    assert!(host.tools().is_empty(), "nothing of it was added");
    let options = LoadOptions::new(Policy::default()).expected_digest(&actual);
    let report = host.load_with(path, options).await.unwrap();
    assert_eq!(host.tools()[0].digest, actual, "{report:?}");
}

#[tokio::test]
async fn compiled_components_come_from_the_cache_and_corrupt_entries_are_recompiled() {
    let cache = temp_dir();
    let new_host = || ToolHost::builder().cache_dir(cache.path()).build().unwrap();
    let first = new_host()
        .load(component("calculator"), Policy::default())
        .await
        .unwrap();
    assert_eq!(first.cache, CacheOutcome::Compiled);
    let second = new_host()
        .load(component("calculator"), Policy::default())
        .await
        .unwrap();
    assert_eq!(second.cache, CacheOutcome::Hit);

    // A change to an entry after it was written (here one flipped byte).
    for entry in std::fs::read_dir(cache.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "cwasm") {
            continue;
        }
        let mut bytes = std::fs::read(&path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0xff;
        std::fs::write(&path, bytes).unwrap();
    }
    let host = new_host();
    let third = host
        .load(component("calculator"), Policy::default())
        .await
        .unwrap();
    assert_eq!(
        third.cache,
        CacheOutcome::Compiled,
        "a corrupt entry must not be trusted"
    );
    let result = host
        .call(
            "calculate",
            r#"{"expression":"6*7"}"#,
            &wasm_agent::CallContext::new(),
        )
        .await;
    assert_eq!(result.content.trim(), "42", "{result:?}");
}

#[tokio::test]
async fn two_components_may_not_offer_the_same_name_without_a_prefix() {
    let host = host();
    host.load(component("calculator"), Policy::default())
        .await
        .unwrap();
    let err = host
        .load_with(
            component("calculator"),
            LoadOptions::new(Policy::default()).name("calc2"),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            HostError::Registry(RegistryError::DuplicateTool { .. })
        ),
        "{err}"
    );
    assert!(err.to_string().contains("prefix"), "{err}");
    let report = host
        .load_with(
            component("calculator"),
            LoadOptions::new(Policy::default())
                .name("calc2")
                .prefix("alt_"),
        )
        .await
        .unwrap();
    assert_eq!(report.tools, vec!["alt_calculate".to_string()]);
}

#[tokio::test]
async fn reloading_swaps_a_component_and_a_failed_reload_keeps_the_old_one() {
    let host = host();
    let named = |policy| LoadOptions::new(policy).name("tools");
    host.load_with(component("calculator"), named(Policy::default()))
        .await
        .unwrap();
    // Another component under the same name replaces it in one step.
    let report = host
        .reload_with(component("json"), named(Policy::default()))
        .await
        .unwrap();
    assert!(
        report.tools.contains(&"json_query".to_string()),
        "{report:?}"
    );
    assert!(host.tool("calculate").is_none(), "the old tools are gone");
    assert!(host.tool("json_query").is_some());

    // A version that fails to load leaves the loaded one serving.
    let err = host
        .reload_with(
            ComponentSource::Bytes {
                name: "tools".into(),
                bytes: b"not wasm".to_vec(),
            },
            named(Policy::default()),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, HostError::Load { .. }), "{err}");
    assert!(host.tool("json_query").is_some());

    // A clash with another component's tools is refused, and nothing changes.
    host.load_with(component("calculator"), LoadOptions::new(Policy::default()))
        .await
        .unwrap();
    let err = host
        .reload_with(component("calculator"), named(Policy::default()))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            HostError::Registry(RegistryError::DuplicateTool { .. })
        ),
        "{err}"
    );
    assert!(host.tool("json_query").is_some());
}

#[tokio::test]
async fn list_tools_runs_under_the_policy() {
    let host = host();
    let err = host
        .load(component("fixture_tool"), Policy::default().fuel(10))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("list-tools failed"), "{err}");
    assert!(err.to_string().contains("fuel"), "{err}");
}

#[tokio::test]
async fn tool_specs_are_checked_and_exposed() {
    let host = host();
    host.load(component("files"), Policy::default())
        .await
        .unwrap();
    let tools = host.tools();
    let write = tools.iter().find(|t| t.name == "write_file").unwrap();
    assert!(write.annotations.destructive);
    assert_eq!(write.parameters["type"], "object");
    let read = tools.iter().find(|t| t.name == "read_file").unwrap();
    assert!(read.annotations.read_only);
    assert!(!read.description.is_empty());
}

#[tokio::test]
async fn a_tool_built_against_contract_0_1_0_still_loads_and_runs() {
    let host = host();
    let report = host
        .load(component("compat_tool"), Policy::default())
        .await
        .expect("0.1.x hosts load 0.1.0 tools");
    assert_eq!(report.tools, ["legacy_echo"]);
    let result = host
        .call(
            "legacy_echo",
            r#"{"text": "hi"}"#,
            &wasm_agent::CallContext::new().session("s9"),
        )
        .await;
    assert_eq!(result.error, None);
    assert_eq!(
        result.content,
        r#"0.1.0 tool in session s9: {"text": "hi"}"#
    );
}

#[tokio::test]
async fn check_refuses_what_load_would_without_compiling() {
    let host = host();
    let missing = ComponentSource::from(std::path::Path::new("/no/such/tool.wasm"));
    let err = host
        .check(&missing, &LoadOptions::new(Policy::default()))
        .await
        .unwrap_err();
    assert!(matches!(err, HostError::Read { .. }), "{err}");

    let calculator = ComponentSource::from(component("calculator").as_path());
    let bad_prefix = LoadOptions::new(Policy::default()).prefix("no spaces");
    let err = host.check(&calculator, &bad_prefix).await.unwrap_err();
    assert!(matches!(err, HostError::BadName(_)), "{err}");

    let no_folder = Policy::default().allow_dir("/no/such/folder", "/data", DirMode::Ro);
    let err = host
        .check(&calculator, &LoadOptions::new(no_folder))
        .await
        .unwrap_err();
    // Named after the file, as a load would name it.
    assert!(
        matches!(&err, HostError::Policy { component, .. } if component == "calculator"),
        "{err}"
    );

    // Checking does not compile: bytes that are no component pass it.
    let dir = temp_dir();
    let not_wasm = dir.path().join("broken.wasm");
    std::fs::write(&not_wasm, b"definitely not wasm").unwrap();
    let source = ComponentSource::from(not_wasm.as_path());
    host.check(&source, &LoadOptions::new(Policy::default()))
        .await
        .expect("the check opens the file, no more");
    assert!(host.load(source, Policy::default()).await.is_err());
    assert!(host.tools().is_empty());
}

#[tokio::test]
async fn a_call_pinned_to_a_version_never_runs_the_one_reloaded_after_it() {
    // The same calculator with a custom section appended: other bytes, so
    // another digest, and the same tools.
    let original = std::fs::read(component("calculator")).unwrap();
    let mut changed = original.clone();
    changed.extend_from_slice(&[0x00, 0x06, 0x05, b'p', b'a', b'd', b'd', b'y']);
    let host = host();
    let named = |bytes: Vec<u8>| {
        let source = ComponentSource::Bytes {
            name: "calc".into(),
            bytes,
        };
        (source, LoadOptions::new(Policy::default()).name("calc"))
    };
    let (source, options) = named(original);
    host.load_with(source, options).await.unwrap();
    let arguments = serde_json::json!({"expression": "6*7"});
    let approved = host.check_for_call("calculate", &arguments).unwrap();
    let (source, options) = named(changed);
    host.reload_with(source, options).await.unwrap();
    let now = host.digest_of("calculate").unwrap();
    assert_ne!(approved, now, "the reload changed the version");

    let context = wasm_agent::CallContext::new();
    let stale = host
        .call_pinned("calculate", &arguments, &approved, &context)
        .await;
    let error = stale.error.expect("the new version must not run");
    assert_eq!(error.kind, wasm_agent::ErrorKind::Denied);
    assert!(error.message.contains("was reloaded"), "{}", error.message);
    let current = host
        .call_pinned("calculate", &arguments, &now, &context)
        .await;
    assert_eq!(current.content, "42", "{current:?}");
}
