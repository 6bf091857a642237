//! Registry components through the long-running entry points (`serve
//! --tools oci://`, `run --tools oci://`), registry content that does not
//! match its digest, and signature keys named per tool.

use std::path::Path;

use serde_json::{Value, json};

use crate::agent_cli::run;
use crate::common::{assert_clean_failure, component, stderr, stdout, temp_dir};
use crate::mcp::Server;
use crate::oci::{Setup, assert_calculates, sha256_of};
use crate::oci_trust::openssl_keys;
use crate::provider_server::{ProviderServer, openai};

const SIX_BY_SEVEN: &str = r#"{"expression": "6*7"}"#;

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// `serve --tools REFERENCE` through this setup's registry and store.
fn serve(setup: &Setup, reference: &str, extra: &[&str]) -> Server {
    let cache = path(setup.cache.path());
    let host = setup.registry.host();
    let mut args = vec![
        "--tools",
        reference,
        "--cache-dir",
        &cache,
        "--insecure-registry",
        &host,
    ];
    args.extend_from_slice(extra);
    Server::start(&args)
}

async fn calculates_over_mcp(server: &Server) {
    let session = server.session(None).await;
    server
        .wait_for_tools(&session, |names| names.iter().any(|n| n == "calculate"))
        .await;
    let called = server
        .call_tool(&session, 7, "calculate", json!({"expression": "6*7"}))
        .await;
    assert_eq!(called["result"]["content"][0]["text"], "42", "{called}");
}

/// `run` with one scripted `calculate` call, tools from `reference`.
async fn run_with(setup: &Setup, reference: &str, extra: &[&str]) -> std::process::Output {
    let provider = ProviderServer::start(vec![
        openai::tool_calls(&[("call_1", "calculate", SIX_BY_SEVEN)]),
        openai::text("It is 42."),
    ])
    .await;
    let mut args: Vec<String> = [
        "What is 6*7?",
        "--model",
        "openai:gpt-4o-mini",
        "--base-url",
        &provider.openai_url(),
        "--tools",
        reference,
        "--cache-dir",
        &path(setup.cache.path()),
        "--insecure-registry",
        &setup.registry.host(),
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    run(args, "").await
}

fn assert_ran_calculate(output: &std::process::Output) {
    assert_eq!(output.status.code(), Some(0), "{}", stderr(output));
    let result: Value = serde_json::from_str(stdout(output).trim()).unwrap();
    assert_eq!(result["tool_calls"][0]["name"], "calculate", "{result}");
    assert_eq!(result["tool_calls"][0]["content"], "42", "{result}");
    assert_eq!(result["text"], "It is 42.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_and_run_take_components_from_a_registry_and_then_from_the_store() {
    let setup = Setup::new();
    let reference = setup.push("tools/calc:1", "calculator");

    let server = serve(&setup, &reference, &[]);
    calculates_over_mcp(&server).await;
    drop(server);
    assert_ran_calculate(&run_with(&setup, &reference, &[]).await);

    // The registry is gone: both start from what the store holds.
    setup.registry.stop();
    let server = serve(&setup, &reference, &["--offline"]);
    calculates_over_mcp(&server).await;
    drop(server);
    assert_ran_calculate(&run_with(&setup, &reference, &["--offline"]).await);

    // Online, a tag is asked for again and the registry is down: `run`
    // stops before the model is asked, naming the reference.
    let output = run_with(&setup, &reference, &[]).await;
    assert_clean_failure(
        &output,
        2,
        &format!("{reference}: cannot reach the registry"),
    );
}

/// The component blob's digest in the store, and whether any partial
/// download or that blob is left there.
fn stored(setup: &Setup, digest: &str) -> (bool, Vec<String>) {
    let blobs = setup.cache.path().join("oci/blobs/sha256");
    let names: Vec<String> = std::fs::read_dir(&blobs)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let hex = digest.trim_start_matches("sha256:");
    let partial = names
        .iter()
        .filter(|n| n.starts_with(".partial"))
        .cloned()
        .collect();
    (names.iter().any(|n| n == hex), partial)
}

#[test]
fn a_registry_serving_other_content_than_its_digest_is_refused_and_nothing_is_stored() {
    let setup = Setup::new();
    let reference = setup.push("calc:1", "calculator");
    let bytes = std::fs::read(component("calculator")).unwrap();
    let digest = sha256_of(&bytes);
    // Same length, one byte changed: only the digest can tell.
    let mut changed = bytes.clone();
    let middle = changed.len() / 2;
    changed[middle] ^= 0x55;
    std::fs::write(setup.registry.blob_file(&digest), &changed).unwrap();

    let output = setup.run(&["call", &reference, "calculate", SIX_BY_SEVEN]);
    assert_clean_failure(
        &output,
        2,
        &format!("{reference}: the component: content is"),
    );
    let err = stderr(&output);
    assert!(
        err.contains(&format!("but {digest} was expected")) && err.contains(&sha256_of(&changed)),
        "{err}"
    );
    let (kept, partial) = stored(&setup, &digest);
    assert!(!kept && partial.is_empty(), "stored: {kept}, {partial:?}");
    // Nothing was kept to fall back on offline either.
    let output = setup.run(&["call", &reference, "calculate", "{}", "--offline"]);
    assert_clean_failure(&output, 2, "not in the local store");

    // The registry serves the right bytes again: the pull works.
    std::fs::write(setup.registry.blob_file(&digest), &bytes).unwrap();
    assert_calculates(&setup.run(&["call", &reference, "calculate", SIX_BY_SEVEN]));
    assert!(stored(&setup, &digest).0);
}

#[test]
fn a_key_named_for_one_tool_binds_that_tool_only_and_overrides_the_default() {
    let setup = Setup::new();
    let keys = temp_dir();
    let (private, public) = openssl_keys(keys.path(), "cosign");
    let (_, other_public) = openssl_keys(keys.path(), "other");
    let signed = setup.push("signed:1", "calculator");
    let output = setup.run(&["sign", &signed, "--key", &path(&private)]);
    assert!(output.status.success(), "{}", stderr(&output));
    let unsigned = setup.push("unsigned:1", "calculator");

    let call = |config: &str, tool: &str| {
        let file = keys.path().join("wasm-agent.toml");
        std::fs::write(&file, config).unwrap();
        setup.run(&[
            "call",
            tool,
            "calculate",
            SIX_BY_SEVEN,
            "--config",
            &path(&file),
        ])
    };
    let tools = |signed_verify: &str, unsigned_verify: &str| {
        format!(
            "[tools.signed]\ncomponent = \"{signed}\"\n{signed_verify}\n\n\
             [tools.plain]\ncomponent = \"{unsigned}\"\n{unsigned_verify}\n"
        )
    };
    let verify = |key: &Path| format!("verify = {{ key = \"{}\" }}", key.display());

    // A key on one tool: that tool verifies, the other needs no signature.
    let config = tools(&verify(&public), "");
    assert_calculates(&call(&config, "signed"));
    assert_calculates(&call(&config, "plain"));
    // A key on the unsigned one refuses it, and only it.
    let config = tools(&verify(&public), &verify(&public));
    assert_clean_failure(&call(&config, "plain"), 2, "unsigned");
    assert_calculates(&call(&config, "signed"));
    // The tool's own key wins over the default's.
    let config = format!(
        "[defaults]\n{}\n\n{}",
        verify(&other_public),
        tools(&verify(&public), "")
    );
    assert_calculates(&call(&config, "signed"));
    let output = call(&config, "plain");
    assert_clean_failure(&output, 2, "unsigned");
    // The default key alone does not verify the signed one.
    let config = format!("[defaults]\n{}\n\n{}", verify(&other_public), tools("", ""));
    let output = call(&config, "signed");
    assert_clean_failure(&output, 2, "does not verify with the key");
    assert!(stderr(&output).contains("other.pub"), "{}", stderr(&output));
}

#[tokio::test]
async fn a_watched_file_never_replaces_a_registry_component() {
    let setup = Setup::new();
    let reference = setup.push("calc:1", "calculator");
    let folder = temp_dir();
    let watched = path(folder.path());
    let server = serve(&setup, &reference, &["--tools", &watched, "--watch"]);
    let session = server.session(None).await;
    server
        .wait_for_tools(&session, |names| names.iter().any(|n| n == "calculate"))
        .await;
    // A file named as the registry's component: it may not take its place.
    std::fs::copy(component("echo_tool"), folder.path().join("calc.wasm")).unwrap();
    // A later, unrelated addition shows the watcher has looked meanwhile.
    std::fs::copy(component("json"), folder.path().join("json.wasm")).unwrap();
    let names = server
        .wait_for_tools(&session, |names| names.iter().any(|n| n == "json_query"))
        .await;
    assert!(!names.contains(&"echo".to_string()), "{names:?}");
    let called = server
        .call_tool(&session, 100, "calculate", json!({"expression": "6*7"}))
        .await;
    assert_eq!(called["result"]["content"][0]["text"], "42");
}
