//! A hostile registry, on loopback, written for these tests: it answers a
//! manifest far over the cap, redirects blobs and names token realms where
//! a registry may not send the host, and the real CLI pulling from it must
//! refuse each with the rule it broke, hold no more than the cap in memory
//! and send nothing (credentials least of all) where it was sent.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex, OnceLock};

use crate::common::{assert_clean_failure, component, stderr, stdout, temp_dir, wasm_agent};
use crate::oci::sha256_of;

/// What the fake registry answers.
enum Body {
    Bytes(Vec<u8>),
    /// Chunked, without end (until the client hangs up).
    Endless,
    /// A declared length of this many bytes, sent as zeros until the client
    /// hangs up.
    Declared(u64),
}

struct Reply {
    status: &'static str,
    headers: Vec<(String, String)>,
    body: Body,
}

impl Reply {
    fn json(status: &'static str, body: &str) -> Self {
        Reply {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: Body::Bytes(body.as_bytes().to_vec()),
        }
    }

    fn redirect(to: &str) -> Self {
        Reply {
            status: "307 Temporary Redirect",
            headers: vec![("Location".into(), to.into())],
            body: Body::Bytes(Vec::new()),
        }
    }

    fn with(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// One request as the server saw it: its line and its Authorization.
#[derive(Clone, Debug)]
struct Seen {
    line: String,
    authorization: Option<String>,
}

type Route = dyn Fn(&Seen) -> Reply + Send + Sync;

/// A listener on 127.0.0.1 answering with `route`, noting every request.
struct Server {
    addr: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    fn start(route: Arc<Route>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let noted = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (route, noted) = (route.clone(), noted.clone());
                std::thread::spawn(move || serve(stream, &*route, &noted));
            }
        });
        Server { addr, seen }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn serve(stream: TcpStream, route: &Route, seen: &Mutex<Vec<Seen>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let mut authorization = None;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("authorization")
        {
            authorization = Some(value.trim().to_string());
        }
    }
    let request = Seen {
        line: line.trim().to_string(),
        authorization,
    };
    seen.lock().unwrap().push(request.clone());
    let reply = route(&request);
    let mut out = stream;
    let mut head = format!("HTTP/1.1 {}\r\nConnection: close\r\n", reply.status);
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    let zeros = vec![b' '; 64 << 10];
    match reply.body {
        Body::Bytes(bytes) => {
            head.push_str(&format!("Content-Length: {}\r\n\r\n", bytes.len()));
            let _ = out.write_all(head.as_bytes());
            let _ = out.write_all(&bytes);
        }
        Body::Endless => {
            head.push_str("Transfer-Encoding: chunked\r\n\r\n");
            let _ = out.write_all(head.as_bytes());
            let chunk = [format!("{:x}\r\n", zeros.len()).as_bytes(), &zeros, b"\r\n"].concat();
            while out.write_all(&chunk).is_ok() {}
        }
        Body::Declared(length) => {
            head.push_str(&format!("Content-Length: {length}\r\n\r\n"));
            let _ = out.write_all(head.as_bytes());
            let mut sent = 0;
            while sent < length && out.write_all(&zeros).is_ok() {
                sent += zeros.len() as u64;
            }
        }
    }
}

/// `call oci://ADDR/calc:1 calculate 6*7` with plain HTTP to `addr`; its output
/// and the largest resident size the process reached, in KiB.
fn call(addr: &str, env: &[(&str, &str)]) -> (Output, i64) {
    let cache = temp_dir();
    let mut command = wasm_agent();
    command
        .args(["call", &format!("oci://{addr}/calc:1"), "calculate"])
        .arg(r#"{"expression": "6*7"}"#)
        .args(["--insecure-registry", addr, "--registry-timeout", "20s"])
        .arg("--cache-dir")
        .arg(cache.path())
        .env_remove("DOCKER_CONFIG")
        .env("HOME", cache.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().unwrap();
    let (stdout_pipe, stderr_pipe) = (child.stdout.take(), child.stderr.take());
    let out = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut stdout_pipe.unwrap(), &mut bytes).unwrap();
        bytes
    });
    let err = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut stderr_pipe.unwrap(), &mut bytes).unwrap();
        bytes
    });
    // The process's own high-water mark (VmHWM, which starts afresh at exec,
    // unlike rusage's, which keeps the forking test's), sampled until it ends.
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0;
    let status = loop {
        if let Some(hwm) = std::fs::read_to_string(&status_file).ok().and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("VmHWM:"))?.to_string();
            line.split_whitespace().nth(1)?.parse::<i64>().ok()
        }) {
            peak_kib = peak_kib.max(hwm);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let output = Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    };
    (output, peak_kib)
}

/// A component manifest for `wasm` in the CNCF layout.
fn manifest(wasm: &[u8]) -> String {
    let config = b"{}";
    serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.wasm.config.v0+json",
                   "digest": sha256_of(config), "size": config.len()},
        "layers": [{"mediaType": "application/wasm",
                    "digest": sha256_of(wasm), "size": wasm.len()}],
    })
    .to_string()
}

#[test]
fn a_manifest_over_the_cap_is_too_large_and_never_held_whole() {
    for (name, body) in [
        ("chunked", (|| Body::Endless) as fn() -> Body),
        ("declared", || Body::Declared(384 << 20)),
    ] {
        let server = Server::start(Arc::new(move |seen: &Seen| {
            if seen.line.contains("/manifests/") {
                Reply {
                    status: "200 OK",
                    headers: vec![(
                        "Content-Type".into(),
                        "application/vnd.oci.image.manifest.v1+json".into(),
                    )],
                    body: body(),
                }
            } else {
                Reply::json("404 Not Found", "{}")
            }
        }));
        let (output, peak_kib) = call(&server.addr, &[]);
        assert_clean_failure(
            &output,
            2,
            "the manifest is over the 4194304-byte limit of a manifest",
        );
        eprintln!("{name}: peak resident size {peak_kib} KiB");
        assert!(
            peak_kib < 100 << 10,
            "{name}: peak resident size {peak_kib} KiB; stderr: {}",
            stderr(&output)
        );
    }
}

#[test]
fn redirects_to_addresses_a_registry_may_not_name_are_refused_and_never_followed() {
    // A listener of our own behind an IPv4-mapped address: were a redirect
    // followed, it would be seen here.
    let elsewhere = Server::start(Arc::new(|_: &Seen| Reply::json("200 OK", "{}")));
    let port = elsewhere.addr.rsplit(':').next().unwrap().to_string();
    let wasm = std::fs::read(component("calculator")).unwrap();
    let manifest = manifest(&wasm);
    for (target, rule) in [
        (
            "http://169.254.169.254/latest/meta-data/".to_string(),
            "169.254.169.254 is not public (link-local)",
        ),
        (
            format!("http://[::ffff:127.0.0.1]:{port}/blob"),
            "::ffff:127.0.0.1 is not public (IPv4-mapped)",
        ),
        (
            format!("https://10.0.0.1:{port}/blob"),
            "10.0.0.1 is not public (private)",
        ),
        (
            "http://cdn.example.com/blob".to_string(),
            "is not https (plain http is only for loopback)",
        ),
    ] {
        let manifest = manifest.clone();
        let location = target.clone();
        let registry = Server::start(Arc::new(move |seen: &Seen| {
            if seen.line.contains("/manifests/") {
                Reply::json("200 OK", &manifest)
                    .with("Content-Type", "application/vnd.oci.image.manifest.v1+json")
            } else if seen.line.contains("/blobs/") {
                Reply::redirect(&location)
            } else {
                Reply::json("404 Not Found", "{}")
            }
        }));
        let (output, _) = call(&registry.addr, &[]);
        assert_clean_failure(
            &output,
            2,
            "the registry tried to send the host where it may not go: a redirect:",
        );
        assert!(
            stderr(&output).contains(rule),
            "{target}: {}",
            stderr(&output)
        );
    }
    assert!(elsewhere.seen().is_empty(), "{:?}", elsewhere.seen());
}

#[test]
fn token_realms_get_credentials_only_where_the_rules_allow() {
    let wasm = std::fs::read(component("calculator")).unwrap();
    let manifest = manifest(&wasm);
    let credentials = [
        ("WASM_AGENT_REGISTRY_USERNAME", "ci"),
        ("WASM_AGENT_REGISTRY_PASSWORD", "s3cret-pass"),
    ];
    // A realm behind an IPv4-mapped address, where a listener of ours waits.
    let realm_server = Server::start(Arc::new(|_: &Seen| {
        Reply::json("200 OK", r#"{"token": "stolen"}"#)
    }));
    let port = realm_server.addr.rsplit(':').next().unwrap().to_string();
    // The realm is set once the server's own address is known.
    // Blobs are sent to `cdn` when given (another origin on loopback).
    let token_server = |manifest: String, wasm: Vec<u8>, cdn: Option<String>| {
        let realm = Arc::new(OnceLock::<String>::new());
        let named = realm.clone();
        let server = Server::start(Arc::new(move |seen: &Seen| {
            let realm = named.get().cloned().unwrap_or_default();
            let authorized = seen.authorization.as_deref() == Some("Bearer t0ken");
            if seen.line.contains("/token") {
                let basic = seen.authorization.as_deref().unwrap_or("");
                if basic.starts_with("Basic ") {
                    Reply::json("200 OK", r#"{"token": "t0ken", "expires_in": 300}"#)
                } else {
                    Reply::json("401 Unauthorized", "{}")
                }
            } else if !authorized {
                Reply::json(
                    "401 Unauthorized",
                    r#"{"errors": [{"code": "UNAUTHORIZED"}]}"#,
                )
                .with(
                    "WWW-Authenticate",
                    &format!(r#"Bearer realm="{realm}",service="fake""#),
                )
            } else if seen.line.contains("/manifests/") {
                Reply::json("200 OK", &manifest)
                    .with("Content-Type", "application/vnd.oci.image.manifest.v1+json")
            } else if seen.line.contains("/blobs/") {
                match &cdn {
                    Some(cdn) => Reply::redirect(&format!("{cdn}/blob")),
                    None => Reply {
                        status: "200 OK",
                        headers: vec![],
                        body: Body::Bytes(wasm.clone()),
                    },
                }
            } else {
                Reply::json("404 Not Found", "{}")
            }
        }));
        (server, realm)
    };

    for (realm, rule) in [
        (
            format!("http://[::ffff:127.0.0.1]:{port}/token"),
            "the token realm: ::ffff:127.0.0.1 is not public (IPv4-mapped)",
        ),
        (
            "http://auth.example.com/token".to_string(),
            "the token realm: http://auth.example.com/token is not https",
        ),
        (
            "https://169.254.169.254/token".to_string(),
            "the token realm: 169.254.169.254 is not public (link-local)",
        ),
    ] {
        let (registry, named) = token_server(manifest.clone(), wasm.clone(), None);
        named.set(realm.clone()).unwrap();
        let registry_env = ("WASM_AGENT_REGISTRY", registry.addr.as_str());
        let env = [registry_env, credentials[0], credentials[1]];
        let (output, _) = call(&registry.addr, &env);
        assert_clean_failure(&output, 2, rule);
        assert!(!stderr(&output).contains("s3cret"), "{}", stderr(&output));
    }
    assert!(realm_server.seen().is_empty(), "{:?}", realm_server.seen());

    // The same flow with a realm the rules allow: the token is had with the
    // credentials, and the pull goes on with it.
    // A pull with the registry itself as its realm, which must succeed.
    let pull_from = |registry: &Server, named: &OnceLock<String>| {
        named
            .set(format!("http://{}/token", registry.addr))
            .unwrap();
        let registry_env = ("WASM_AGENT_REGISTRY", registry.addr.as_str());
        let (output, _) = call(
            &registry.addr,
            &[registry_env, credentials[0], credentials[1]],
        );
        assert!(output.status.success(), "{}", stderr(&output));
        assert_eq!(stdout(&output).trim(), "42");
    };
    let (registry, named) = token_server(manifest.clone(), wasm.clone(), None);
    pull_from(&registry, &named);
    let seen = registry.seen();
    let token = seen.iter().find(|s| s.line.contains("/token")).unwrap();
    assert!(
        token.line.contains("scope=repository%3Acalc%3Apull"),
        "{token:?}"
    );
    assert!(
        token
            .authorization
            .as_deref()
            .unwrap()
            .starts_with("Basic ")
    );
    let blob = seen.iter().find(|s| s.line.contains("/blobs/")).unwrap();
    assert_eq!(blob.authorization.as_deref(), Some("Bearer t0ken"));

    // A blob redirected to another origin is fetched there without the
    // registry's token.
    let served = wasm.clone();
    let cdn = Server::start(Arc::new(move |_: &Seen| Reply {
        status: "200 OK",
        headers: vec![],
        body: Body::Bytes(served.clone()),
    }));
    let (registry, named) = token_server(manifest, wasm, Some(format!("http://{}", cdn.addr)));
    pull_from(&registry, &named);
    let fetched = cdn.seen();
    assert_eq!(fetched.len(), 1, "{fetched:?}");
    assert_eq!(fetched[0].authorization, None, "{fetched:?}");
}
