//! Pinning and signatures of registry components: `wasm-agent lock` and
//! `--locked` (a moved tag, a changed file, `serve --watch`), and cosign
//! keyed signatures made by `wasm-agent sign` and, independently, by the
//! openssl CLI, verified online and offline; tampered, foreign-key and
//! missing signatures refused with the check that failed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine;
use serde_json::json;

use crate::common::{assert_clean_failure, component, stderr, stdout, temp_dir};
use crate::oci::{Setup, assert_calculates, manifest_of, sha256_of};

const SIX_BY_SEVEN: &str = r#"{"expression": "6*7"}"#;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn lock_pins_every_component_and_locked_refuses_a_moved_tag_or_a_changed_file() {
    let setup = Setup::new();
    let reference = setup.push("calc:1", "calculator");
    let dir = temp_dir();
    std::fs::copy(component("json"), dir.path().join("json.wasm")).unwrap();
    let config = write(
        dir.path(),
        "wasm-agent.toml",
        &format!(
            "[tools.calc]\ncomponent = \"{reference}\"\n\n[tools.json]\ncomponent = \"json.wasm\"\n"
        ),
    );
    let config_arg = path(&config);
    let locked = setup.run(&["lock", "--config", &config_arg]);
    assert!(locked.status.success(), "{}", stderr(&locked));
    let lock_text = std::fs::read_to_string(dir.path().join("wasm-agent.lock")).unwrap();
    let calc_digest = sha256_of(&std::fs::read(component("calculator")).unwrap());
    let json_digest = sha256_of(&std::fs::read(component("json")).unwrap());
    assert!(lock_text.contains(&calc_digest), "{lock_text}");
    assert!(lock_text.contains(&json_digest), "{lock_text}");
    assert!(
        lock_text.contains("component = \"json.wasm\""),
        "relative to the lock: {lock_text}"
    );
    assert!(stdout(&locked).contains(&calc_digest));

    let call = |extra: &[&str]| {
        let mut args = vec![
            "call",
            "calc",
            "calculate",
            SIX_BY_SEVEN,
            "--config",
            &config_arg,
        ];
        args.extend_from_slice(extra);
        setup.run(&args)
    };
    assert_calculates(&call(&["--locked"]));

    // The tag moves to other content: refused under --locked, naming both.
    setup.push("calc:1", "json");
    let output = call(&["--locked"]);
    assert_clean_failure(&output, 2, "pinned in");
    let err = stderr(&output);
    assert!(
        err.contains(&calc_digest) && err.contains(&json_digest),
        "{err}"
    );
    // `locked = true` in the config does the same.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("locked = true\n{text}")).unwrap();
    assert_clean_failure(&call(&[]), 2, &calc_digest);

    // A changed file is refused too; a component outside the lock as well.
    std::fs::write(&config, &text).unwrap();
    std::fs::copy(component("echo_tool"), dir.path().join("json.wasm")).unwrap();
    let output = setup.run(&[
        "call",
        "json",
        "json_query",
        "{}",
        "--config",
        &config_arg,
        "--locked",
    ]);
    assert_clean_failure(&output, 2, &json_digest);
    let calc_file = path(&component("calculator"));
    let output = setup.run(&[
        "call",
        &calc_file,
        "calculate",
        "{}",
        "--config",
        &config_arg,
        "--locked",
    ]);
    assert_clean_failure(&output, 2, "not in");
    // Without a lock file, --locked says how to write one.
    std::fs::remove_file(dir.path().join("wasm-agent.lock")).unwrap();
    assert_clean_failure(&call(&["--locked"]), 2, "wasm-agent lock --config");
}

#[tokio::test]
async fn serve_watch_keeps_the_pinned_version_when_a_file_changes() {
    let dir = temp_dir();
    std::fs::copy(component("calculator"), dir.path().join("calc.wasm")).unwrap();
    std::fs::copy(component("json"), dir.path().join("json.wasm")).unwrap();
    let config = write(
        dir.path(),
        "wasm-agent.toml",
        "[tools.calc]\ncomponent = \"calc.wasm\"\n\n[tools.json]\ncomponent = \"json.wasm\"\n",
    );
    let config_arg = path(&config);
    let locked = crate::common::run(&["lock", "--config", &config_arg]);
    assert!(locked.status.success(), "{}", stderr(&locked));
    let server = crate::mcp::Server::start(&["--config", &config_arg, "--locked", "--watch"]);
    let session = server.session(None).await;
    // Both loaded (in the background) before either file changes.
    server
        .wait_for_tools(&session, |names| names.iter().any(|n| n == "json_query"))
        .await;
    // Other content where the pinned calculator was: refused, kept.
    std::fs::copy(component("echo_tool"), dir.path().join("calc.wasm")).unwrap();
    // Then a removal, which the watcher acts on two polls later: by then it
    // has looked at the changed file.
    std::fs::remove_file(dir.path().join("json.wasm")).unwrap();
    let names = server
        .wait_for_tools(&session, |names| !names.iter().any(|n| n == "json_query"))
        .await;
    assert_eq!(names, ["calculate"], "the pinned version stays");
    let called = server
        .call_tool(&session, 100, "calculate", json!({"expression": "6*7"}))
        .await;
    assert_eq!(called["result"]["content"][0]["text"], "42");
}

/// An ECDSA P-256 key pair made by the openssl CLI: (private PEM, public PEM).
pub(crate) fn openssl_keys(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let private = dir.join(format!("{name}.pem"));
    let public = dir.join(format!("{name}.pub"));
    let ok = |output: Output| assert!(output.status.success(), "{}", stderr(&output));
    ok(Command::new("openssl")
        .args([
            "ecparam",
            "-genkey",
            "-name",
            "prime256v1",
            "-noout",
            "-out",
        ])
        .arg(&private)
        .output()
        .expect("openssl"));
    ok(Command::new("openssl")
        .args(["ec", "-pubout", "-in"])
        .arg(&private)
        .arg("-out")
        .arg(&public)
        .output()
        .unwrap());
    (private, public)
}

/// Signs `payload` with openssl (DER ECDSA over SHA-256), base64.
fn openssl_sign(private: &Path, payload: &[u8]) -> String {
    let dir = temp_dir();
    let file = dir.path().join("payload.json");
    std::fs::write(&file, payload).unwrap();
    let output = Command::new("openssl")
        .args(["dgst", "-sha256", "-sign"])
        .arg(private)
        .arg(&file)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    base64::engine::general_purpose::STANDARD.encode(output.stdout)
}

/// A cosign signature artifact for `manifest`, pushed by raw API calls.
fn push_signature(
    setup: &Setup,
    repository: &str,
    manifest: &str,
    payload: &[u8],
    signature: &str,
) {
    let tag = format!("sha256-{}.sig", manifest.trim_start_matches("sha256:"));
    setup.registry.push_artifact(
        repository,
        &tag,
        ("application/vnd.oci.image.config.v1+json", b"{}"),
        &[(
            "application/vnd.dev.cosign.simplesigning.v1+json",
            payload,
            json!({"dev.cosignproject.cosign/signature": signature}),
        )],
    );
}

fn cosign_payload(setup: &Setup, repository: &str, manifest: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "critical": {
            "identity": {"docker-reference": format!("{}/{repository}", setup.registry.host())},
            "image": {"docker-manifest-digest": manifest},
            "type": "cosign container image signature"
        },
        "optional": {"creator": "openssl"}
    }))
    .unwrap()
}

#[test]
fn signed_components_verify_and_unsigned_or_badly_signed_ones_are_refused() {
    let setup = Setup::new();
    let keys = temp_dir();
    let (private, public) = openssl_keys(keys.path(), "cosign");
    let (other_private, other_public) = openssl_keys(keys.path(), "other");
    let config_for = |reference: &str, key: &Path| {
        write(
            keys.path(),
            "wasm-agent.toml",
            &format!(
                "[defaults]\nverify = {{ key = \"{}\" }}\n\n[tools.calc]\ncomponent = \"{reference}\"\n",
                key.display()
            ),
        )
    };
    let call = |reference: &str, key: &Path, extra: &[&str]| {
        let config = config_for(reference, key);
        let mut args = vec!["call", "calc", "calculate", SIX_BY_SEVEN, "--config"];
        let config = path(&config);
        args.push(&config);
        args.extend_from_slice(extra);
        setup.run(&args)
    };

    // Signed by `wasm-agent sign`: verifies, online and then offline.
    let signed = setup.push("signed:1", "calculator");
    let output = setup.run(&["sign", &signed, "--key", &path(&private)]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains(".sig"), "{}", stdout(&output));
    assert_calculates(&call(&signed, &public, &[]));
    assert_calculates(&call(&signed, &public, &["--offline"]));
    let output = setup.run(&["pull", &signed, "--verify-key", &path(&public)]);
    assert!(
        stdout(&output).contains("signature verified"),
        "{}",
        stderr(&output)
    );
    // Another key does not verify it.
    let output = call(&signed, &other_public, &[]);
    assert_clean_failure(&output, 2, "the signature does not verify with the key");
    assert!(stderr(&output).contains("other.pub"), "{}", stderr(&output));

    // Unsigned: refused, saying so.
    let unsigned = setup.push("unsigned:1", "calculator");
    assert_clean_failure(
        &call(&unsigned, &public, &[]),
        2,
        "unsigned: the registry has no signature",
    );

    // Signed independently (openssl over a payload of our own): verifies.
    let independent = setup.push("independent:1", "calculator");
    let manifest = manifest_of(&setup.run(&["pull", &independent]));
    let payload = cosign_payload(&setup, "independent", &manifest);
    push_signature(
        &setup,
        "independent",
        &manifest,
        &payload,
        &openssl_sign(&private, &payload),
    );
    assert_calculates(&call(&independent, &public, &[]));

    // Tampered: the payload changed after signing.
    let tampered = setup.push("tampered:1", "calculator");
    let manifest = manifest_of(&setup.run(&["pull", &tampered]));
    let payload = cosign_payload(&setup, "tampered", &manifest);
    let signature = openssl_sign(&private, &payload);
    let mut changed = payload.clone();
    let at = changed.len() - 3;
    changed[at] = b'X';
    push_signature(&setup, "tampered", &manifest, &changed, &signature);
    assert_clean_failure(
        &call(&tampered, &public, &[]),
        2,
        "does not verify with the key",
    );

    // A good signature, but over another component's payload.
    let elsewhere = setup.push("elsewhere:1", "calculator");
    let manifest = manifest_of(&setup.run(&["pull", &elsewhere]));
    let payload = cosign_payload(&setup, "elsewhere", &format!("sha256:{}", "ab".repeat(32)));
    push_signature(
        &setup,
        "elsewhere",
        &manifest,
        &payload,
        &openssl_sign(&other_private, &payload),
    );
    let output = call(&elsewhere, &other_public, &[]);
    assert_clean_failure(&output, 2, "the signed payload names sha256:abab");

    // A good signature over these very bytes, made for another repository
    // (what a manifest and its `.sig` copied from elsewhere carry).
    let copied = setup.push("copied:1", "calculator");
    let manifest = manifest_of(&setup.run(&["pull", &copied]));
    let payload = cosign_payload(&setup, "origin", &manifest);
    push_signature(
        &setup,
        "copied",
        &manifest,
        &payload,
        &openssl_sign(&private, &payload),
    );
    let output = call(&copied, &public, &[]);
    assert_clean_failure(&output, 2, "the signature vouches for");
    assert!(
        stderr(&output).contains("/origin, not for") && stderr(&output).contains("/copied"),
        "{}",
        stderr(&output)
    );

    // A local file cannot carry a signature: refused under a key.
    let config = config_for(&path(&component("calculator")), &public);
    let output = setup.run(&[
        "call",
        "calc",
        "calculate",
        "{}",
        "--config",
        &path(&config),
    ]);
    assert_clean_failure(&output, 2, "only oci:// components carry signatures");
}
