//! Components from a real OCI registry (Debian's `docker-registry` on
//! loopback), pushed by a third-party client (`wkg oci push`) or by raw
//! distribution-API requests, and loaded by the real CLI: by tag, by digest,
//! offline, with credentials, and refused with a clear message when the
//! reference, the artifact or the registry is wrong.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sha2::Digest as _;

use crate::common::{assert_clean_failure, component, stderr, stdout, temp_dir, wasm_agent};
use crate::registry::{Registry, wkg_push};

/// A registry and a store of our own (so nothing is pulled already).
pub(crate) struct Setup {
    pub(crate) registry: Registry,
    pub(crate) cache: tempfile::TempDir,
}

impl Setup {
    pub(crate) fn new() -> Self {
        Self::with(Registry::start())
    }

    pub(crate) fn with(registry: Registry) -> Self {
        Self {
            registry,
            cache: temp_dir(),
        }
    }

    /// The CLI with this store and plain HTTP to `registries`.
    pub(crate) fn cli_for(&self, args: &[&str], registries: &[String]) -> std::process::Command {
        let mut command = wasm_agent();
        command.args(args).arg("--cache-dir").arg(self.cache.path());
        for registry in registries {
            command.args(["--insecure-registry", registry]);
        }
        command
    }

    /// `call REFERENCE calculate {}` through `registry` with a registry deadline.
    fn call_within(&self, reference: &str, deadline: &str, registry: &str) -> Output {
        self.cli_for(
            &[
                "call",
                reference,
                "calculate",
                "{}",
                "--registry-timeout",
                deadline,
            ],
            &[registry.to_string()],
        )
        .output()
        .expect("wasm-agent runs")
    }

    /// Runs the CLI against this registry.
    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.cli_for(args, &[self.registry.host()])
            .output()
            .expect("wasm-agent runs")
    }

    /// Pushes a built component with wkg to `path` (`repo:tag`).
    pub(crate) fn push(&self, path: &str, name: &str) -> String {
        wkg_push(&self.registry, path, &component(name));
        self.registry.reference(path)
    }
}

pub(crate) fn sha256_of(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

pub(crate) fn assert_calculates(output: &Output) {
    assert!(output.status.success(), "stderr: {}", stderr(output));
    assert_eq!(stdout(output).trim(), "42", "stderr: {}", stderr(output));
}

/// The manifest digest `pull` printed.
pub(crate) fn manifest_of(pull: &Output) -> String {
    let text = stdout(pull);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("manifest"))
        .unwrap_or_else(|| panic!("no manifest line in {text}"));
    line.split_whitespace().nth(1).unwrap().to_string()
}

#[test]
fn a_component_wkg_pushed_loads_by_tag_by_digest_and_offline() {
    let setup = Setup::new();
    let reference = setup.push("tools/calc:1.0", "calculator");
    let expected = sha256_of(&std::fs::read(component("calculator")).unwrap());

    let pulled = setup.run(&["pull", &reference]);
    assert!(pulled.status.success(), "{}", stderr(&pulled));
    let text = stdout(&pulled);
    assert!(text.contains(&format!("component {expected}")), "{text}");
    let manifest = manifest_of(&pulled);
    let by_digest = setup.registry.reference(&format!("tools/calc@{manifest}"));
    assert!(
        text.contains(&by_digest),
        "the pinned form is printed: {text}"
    );

    let args = r#"{"expression": "6*7"}"#;
    assert_calculates(&setup.run(&["call", &reference, "calculate", args]));
    assert_calculates(&setup.run(&["call", &by_digest, "calculate", args]));
    let listed = setup.run(&["tools", &reference, "--json"]);
    let tools: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(tools[0]["name"], "calculate");
    assert_eq!(tools[0]["component"], "calc");
    assert_eq!(tools[0]["digest"], expected.as_str());

    // The registry is gone: the store has what was pulled.
    setup.registry.stop();
    assert_calculates(&setup.run(&["call", &reference, "calculate", args, "--offline"]));
    assert_calculates(&setup.run(&["call", &by_digest, "calculate", args, "--offline"]));
    // A digest names fixed content: no network needed even without --offline.
    assert_calculates(&setup.run(&["call", &by_digest, "calculate", args]));
    // A tag is asked for again online, and the registry is down.
    let output = setup.run(&["call", &reference, "calculate", args]);
    assert_clean_failure(
        &output,
        2,
        &format!("{reference}: cannot reach the registry"),
    );
    // Never pulled: offline says so, and where it looked.
    let other = setup.registry.reference("tools/other:1");
    let output = setup.run(&["call", &other, "calculate", args, "--offline"]);
    assert_clean_failure(&output, 2, &format!("{other}: not in the local store"));
}

#[test]
fn a_stored_component_changed_on_disk_is_refused() {
    let setup = Setup::new();
    let reference = setup.push("calc:1", "calculator");
    let pulled = setup.run(&["pull", &reference, "--json"]);
    let list: serde_json::Value = serde_json::from_slice(&pulled.stdout).unwrap();
    let path = list[0]["path"].as_str().unwrap().to_string();
    std::fs::write(&path, std::fs::read(component("json")).unwrap()).unwrap();
    let output = setup.run(&["call", &reference, "calculate", "{}", "--offline"]);
    assert_clean_failure(&output, 2, "its content is sha256:");
    assert!(stderr(&output).contains(list[0]["digest"].as_str().unwrap()));
}

#[test]
fn bad_references_and_artifacts_get_errors_naming_the_reference() {
    let setup = Setup::new();
    setup.push("calc:1", "calculator");
    let call = |reference: &str, extra: &[&str]| {
        let mut args = vec!["call", reference, "calculate", "{}"];
        args.extend_from_slice(extra);
        setup.run(&args)
    };
    let missing_tag = setup.registry.reference("calc:2");
    assert_clean_failure(
        &call(&missing_tag, &[]),
        2,
        &format!("{missing_tag}: the registry has no such tag"),
    );
    let missing_repo = setup.registry.reference("nothing-here:1");
    assert_clean_failure(
        &call(&missing_repo, &[]),
        2,
        &format!("{missing_repo}: the registry has no such"),
    );
    let unknown = "oci://no-such-registry.invalid/calc:1";
    assert_clean_failure(
        &call(unknown, &[]),
        2,
        &format!("{unknown}: cannot reach the registry"),
    );
    assert_clean_failure(&call("oci://127.0.0.1/calc", &[]), 2, "no implied :latest");
    assert_clean_failure(
        &call(
            &setup.registry.reference("calc:1"),
            &["--insecure-registry", "example.com:5000"],
        ),
        2,
        "plain HTTP is only allowed for loopback registries",
    );

    // Not a Wasm component: an OCI image with a tar layer.
    let image = setup.registry.push_artifact(
        "image",
        "1",
        ("application/vnd.oci.image.config.v1+json", b"{}"),
        &[(
            "application/vnd.oci.image.layer.v1.tar+gzip",
            b"layer",
            serde_json::Value::Null,
        )],
    );
    assert!(image.starts_with("sha256:"));
    let output = call(&setup.registry.reference("image:1"), &[]);
    assert_clean_failure(&output, 2, "not a Wasm component artifact");
    assert!(stderr(&output).contains("application/vnd.oci.image.layer.v1.tar+gzip"));

    // Larger than allowed: refused from the manifest, before downloading.
    let output = call(
        &setup.registry.reference("calc:1"),
        &["--max-component-size", "64KiB"],
    );
    assert_clean_failure(
        &output,
        2,
        "over the 65536-byte limit (--max-component-size)",
    );

    // A manifest whose blob is not what it says: refused, nothing stored.
    let wrong = setup.registry.push_blob("liar", b"the real bytes");
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.wasm.config.v0+json",
                   "digest": setup.registry.push_blob("liar", b"{}"), "size": 2},
        "layers": [{"mediaType": "application/wasm", "digest": wrong, "size": 3}],
    });
    setup.registry.push_manifest("liar", "1", &manifest);
    let output = call(&setup.registry.reference("liar:1"), &[]);
    assert_clean_failure(&output, 2, "larger than the 3 bytes its manifest declares");
}

/// A server that accepts connections and never answers.
fn stalling_server() -> (String, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let handle = std::thread::spawn(move || {
        let mut held = Vec::new();
        listener.set_nonblocking(true).unwrap();
        let until = Instant::now() + Duration::from_secs(20);
        while Instant::now() < until {
            if let Ok((stream, _)) = listener.accept() {
                held.push(stream);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    (addr, handle)
}

#[test]
fn a_registry_that_stalls_is_given_up_on_at_the_deadline() {
    let setup = Setup::new();
    let (addr, _server) = stalling_server();
    let reference = format!("oci://{addr}/calc:1");
    let started = Instant::now();
    let output = setup.call_within(&reference, "1s", &addr);
    assert_clean_failure(
        &output,
        2,
        &format!("{reference}: the registry did not finish within 1s"),
    );
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
}

/// Forwards connections to `target`; the first response longer than
/// `cut_after` bytes is cut there, and `on_cut` runs (it stops the registry).
fn cutting_proxy(
    target: String,
    cut_after: usize,
    on_cut: impl Fn() + Send + Sync + 'static,
) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let cut = Arc::new(AtomicBool::new(false));
    let on_cut = Arc::new(on_cut);
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect(&target) else {
                continue;
            };
            let (cut, on_cut) = (cut.clone(), on_cut.clone());
            let (mut client_read, mut server_write) =
                (client.try_clone().unwrap(), server.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut client_read, &mut server_write);
            });
            std::thread::spawn(move || {
                let (mut server, mut client) = (server, client);
                let mut sent = 0;
                let mut buffer = [0u8; 8192];
                while let Ok(read) = server.read(&mut buffer) {
                    if read == 0 {
                        break;
                    }
                    if sent + read > cut_after && !cut.swap(true, Ordering::SeqCst) {
                        let _ = client.write_all(&buffer[..cut_after.saturating_sub(sent)]);
                        on_cut();
                        let _ = client.shutdown(std::net::Shutdown::Both);
                        return;
                    }
                    if client.write_all(&buffer[..read]).is_err() {
                        break;
                    }
                    sent += read;
                }
                let _ = client.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    addr
}

#[test]
fn a_registry_stopped_mid_pull_is_a_clear_error_and_leaves_nothing_half_stored() {
    let setup = Arc::new(Setup::new());
    setup.push("calc:1", "calculator");
    let stopper = setup.clone();
    let proxy = cutting_proxy(setup.registry.host(), 64 << 10, move || {
        stopper.registry.stop()
    });
    let reference = format!("oci://{proxy}/calc:1");
    let started = Instant::now();
    let output = setup.call_within(&reference, "10s", &proxy);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains(&reference), "{err}");
    assert!(
        err.contains("broke off") || err.contains("cannot reach the registry"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    // Nothing half-stored: no partial download, no component blob, no tag.
    let digest = sha256_of(&std::fs::read(component("calculator")).unwrap());
    let store = setup.cache.path().join("oci");
    let files = files_under(&store);
    assert!(
        files.iter().all(|f| !f.contains(".partial")
            && !f.ends_with(digest.trim_start_matches("sha256:"))
            && !f.contains("@tags")),
        "{files:?}"
    );
    // Back up: the pull starts afresh and the component works.
    setup.registry.resume();
    let output = setup
        .cli_for(
            &["call", &reference, "calculate", r#"{"expression": "6*7"}"#],
            &[proxy],
        )
        .output()
        .unwrap();
    assert_calculates(&output);
}

/// Every file under `dir`, as paths.
fn files_under(dir: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

#[test]
fn credentials_come_from_the_environment_or_the_docker_config_and_are_never_shown() {
    let setup = Setup::with(Registry::with_auth("ci", "s3cret-pass"));
    let reference = setup.push("fixture:1", "fixture_tool");
    let call = |tool: &str, args: &str, env: &[(&str, String)]| {
        let mut command = setup.cli_for(
            &["call", &reference, tool, args, "-vv"],
            &[setup.registry.host()],
        );
        command
            .env_remove("DOCKER_CONFIG")
            .env("HOME", setup.cache.path());
        for (name, value) in env {
            command.env(name, value);
        }
        command.output().unwrap()
    };
    let output = call("echo", r#"{"text": "hi"}"#, &[]);
    assert_clean_failure(&output, 2, "the registry refused access");
    assert!(stderr(&output).contains("WASM_AGENT_REGISTRY_USERNAME"));

    let env = [
        ("WASM_AGENT_REGISTRY", setup.registry.host()),
        ("WASM_AGENT_REGISTRY_USERNAME", "ci".to_string()),
        ("WASM_AGENT_REGISTRY_PASSWORD", "s3cret-pass".to_string()),
    ];
    let output = call("echo", r#"{"text": "hi"}"#, &env);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        !stderr(&output).contains("s3cret-pass"),
        "never logged: {}",
        stderr(&output)
    );
    // The tool sees none of it, and cannot reach the registry itself.
    let seen = call("env", "{}", &env);
    assert!(seen.status.success(), "{}", stderr(&seen));
    assert!(!stdout(&seen).contains("s3cret") && !stdout(&seen).contains("WASM_AGENT"));
    let url = format!(r#"{{"url": "http://{}/v2/"}}"#, setup.registry.host());
    let fetched = call("http_get", &url, &env);
    assert_eq!(fetched.status.code(), Some(1), "{}", stderr(&fetched));
    assert!(
        stderr(&fetched).contains("capability_denied"),
        "{}",
        stderr(&fetched)
    );

    // Credentials named for another registry are not sent here.
    let mut elsewhere = env.clone();
    elsewhere[0].1 = "ghcr.io".into();
    assert_clean_failure(
        &call("echo", "{}", &elsewhere),
        2,
        "the registry refused access",
    );
    assert_clean_failure(
        &call("echo", "{}", &env[1..]),
        2,
        "need all of WASM_AGENT_REGISTRY",
    );

    // The Docker convention: config.json's auths.
    let docker = temp_dir();
    use base64::Engine;
    let auth = base64::engine::general_purpose::STANDARD.encode("ci:s3cret-pass");
    let config = serde_json::json!({"auths": {setup.registry.host(): {"auth": auth}}});
    std::fs::write(docker.path().join("config.json"), config.to_string()).unwrap();
    let docker_env = [("DOCKER_CONFIG", docker.path().display().to_string())];
    let output = call("echo", r#"{"text": "hi"}"#, &docker_env);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!stderr(&output).contains("s3cret-pass"));

    // `sign` pushes with the same credentials, and the signature verifies.
    let keys = temp_dir();
    let (private, public) = crate::oci_trust::openssl_keys(keys.path(), "cosign");
    let with_env = |args: &[&str]| {
        let mut command = setup.cli_for(args, &[setup.registry.host()]);
        command
            .env_remove("DOCKER_CONFIG")
            .env("HOME", setup.cache.path())
            .envs(env.iter().map(|(name, value)| (*name, value.as_str())));
        command.output().unwrap()
    };
    let key = private.display().to_string();
    let signed = with_env(&["sign", &reference, "--key", &key]);
    assert!(signed.status.success(), "{}", stderr(&signed));
    let public = public.display().to_string();
    let verified = with_env(&["pull", &reference, "--verify-key", &public]);
    assert!(
        stdout(&verified).contains("signature verified"),
        "{}",
        stderr(&verified)
    );
}
