//! A private OCI registry for tests: Debian's `docker-registry` (the CNCF
//! distribution registry) on its own loopback port, storing into a
//! temporary folder; optionally behind htpasswd basic auth. Also raw
//! distribution-API pushes (blobs, manifests), for artifacts no client
//! would write, and `wkg` (a third-party client) to push components.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::Digest as _;

/// A running registry, killed when dropped.
pub struct Registry {
    port: u16,
    dir: tempfile::TempDir,
    child: Mutex<Option<Child>>,
    /// `user:password`, when it wants basic auth.
    pub credentials: Option<(String, String)>,
}

impl Registry {
    /// An open registry (anyone may push and pull).
    pub fn start() -> Self {
        Self::start_with(None)
    }

    /// A registry that wants `user` and `password` for everything.
    pub fn with_auth(user: &str, password: &str) -> Self {
        Self::start_with(Some((user.to_string(), password.to_string())))
    }

    fn start_with(credentials: Option<(String, String)>) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|addr| addr.port())
            .expect("a free loopback port");
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = format!(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n\
             storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
             http:\n  addr: 127.0.0.1:{port}\n",
            dir.path().join("data").display()
        );
        if let Some((user, password)) = &credentials {
            let htpasswd = dir.path().join("htpasswd");
            let out = Command::new("htpasswd")
                .args(["-Bbn", user, password])
                .output()
                .expect("htpasswd (install apache2-utils: tests/install-servers.sh)");
            std::fs::write(&htpasswd, out.stdout).unwrap();
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: test\n    path: {}\n",
                htpasswd.display()
            ));
        }
        std::fs::write(dir.path().join("config.yml"), config).unwrap();
        let registry = Self {
            port,
            dir,
            child: Mutex::new(None),
            credentials,
        };
        registry.resume();
        registry
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `oci://127.0.0.1:PORT/PATH`.
    pub fn reference(&self, path: &str) -> String {
        format!("oci://{}/{path}", self.host())
    }

    /// Where the registry keeps the blob `digest` (`sha256:HEX`) on disk, so
    /// a test can make it serve content that does not match its name.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.dir
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// Kills the registry at once (its storage stays for [`Registry::resume`]).
    pub fn stop(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the registry again on the same port and storage.
    pub fn resume(&self) {
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(self.dir.path().join("config.yml"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("docker-registry (install docker-registry: tests/install-servers.sh)");
        *self.child.lock().unwrap() = Some(child);
        let deadline = Instant::now() + Duration::from_secs(15);
        while self.request("GET", "/v2/", &[], None).is_none() {
            assert!(Instant::now() < deadline, "docker-registry did not start");
            std::thread::sleep(Duration::from_millis(30));
        }
    }

    /// One HTTP/1.1 request; the status and body (None if it cannot connect).
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Option<(u16, Vec<u8>, String)> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .ok()?;
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
            self.host()
        );
        if let Some((user, password)) = &self.credentials {
            use base64::Engine;
            let token =
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            head.push_str(&format!("Authorization: Basic {token}\r\n"));
        }
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        let body = body.unwrap_or_default();
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        stream.write_all(head.as_bytes()).ok()?;
        stream.write_all(body).ok()?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).ok()?;
        let split = answer.windows(4).position(|w| w == b"\r\n\r\n")?;
        let head = String::from_utf8_lossy(&answer[..split]).into_owned();
        let status = head.split_whitespace().nth(1)?.parse().ok()?;
        Some((status, answer[split + 4..].to_vec(), head))
    }

    /// Uploads a blob (monolithic) and returns its digest.
    pub fn push_blob(&self, repository: &str, bytes: &[u8]) -> String {
        let digest = format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)));
        let (status, _, head) = self
            .request(
                "POST",
                &format!("/v2/{repository}/blobs/uploads/"),
                &[],
                None,
            )
            .expect("registry answers");
        assert_eq!(status, 202, "{head}");
        let location = head
            .lines()
            .find_map(|l| {
                l.strip_prefix("Location: ")
                    .or_else(|| l.strip_prefix("location: "))
            })
            .expect("an upload location")
            .trim()
            .to_string();
        let path = location
            .strip_prefix(&format!("http://{}", self.host()))
            .unwrap_or(&location)
            .to_string();
        let separator = if path.contains('?') { '&' } else { '?' };
        let (status, body, _) = self
            .request(
                "PUT",
                &format!("{path}{separator}digest={digest}"),
                &[("Content-Type", "application/octet-stream")],
                Some(bytes),
            )
            .expect("registry answers");
        assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
        digest
    }

    /// Puts a manifest at `reference` (a tag or digest) and returns its digest.
    pub fn push_manifest(
        &self,
        repository: &str,
        reference: &str,
        manifest: &serde_json::Value,
    ) -> String {
        let bytes = serde_json::to_vec(manifest).unwrap();
        let media_type = manifest["mediaType"]
            .as_str()
            .unwrap_or("application/vnd.oci.image.manifest.v1+json");
        let (status, body, _) = self
            .request(
                "PUT",
                &format!("/v2/{repository}/manifests/{reference}"),
                &[("Content-Type", media_type)],
                Some(&bytes),
            )
            .expect("registry answers");
        assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
        format!("sha256:{}", hex::encode(sha2::Sha256::digest(&bytes)))
    }

    /// Pushes an artifact: `config` and `layers` as (media type, bytes,
    /// annotations); returns the manifest digest.
    pub fn push_artifact(
        &self,
        repository: &str,
        tag: &str,
        config: (&str, &[u8]),
        layers: &[(&str, &[u8], serde_json::Value)],
    ) -> String {
        let descriptor =
            |media_type: &str, bytes: &[u8], annotations: Option<&serde_json::Value>| {
                let mut d = serde_json::json!({
                    "mediaType": media_type,
                    "digest": self.push_blob(repository, bytes),
                    "size": bytes.len(),
                });
                if let Some(a) = annotations.filter(|a| !a.is_null()) {
                    d["annotations"] = a.clone();
                }
                d
            };
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": descriptor(config.0, config.1, None),
            "layers": layers.iter().map(|(t, b, a)| descriptor(t, b, Some(a))).collect::<Vec<_>>(),
        });
        self.push_manifest(repository, tag, &manifest)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The `wkg` binary: `target/tools/bin/wkg` (`make test-tools`), else PATH.
pub fn wkg() -> PathBuf {
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/bin/wkg");
    if local.is_file() {
        return local;
    }
    PathBuf::from("wkg")
}

/// `wkg oci push` of a component file to `host/path` (plain HTTP).
pub fn wkg_push(registry: &Registry, path: &str, file: &Path) {
    let mut command = Command::new(wkg());
    command
        .args(["oci", "push", "--insecure", &registry.host()])
        .arg(format!("{}/{path}", registry.host()))
        .arg(file)
        .env("HOME", registry.dir.path())
        .env_remove("DOCKER_CONFIG");
    if let Some((user, password)) = &registry.credentials {
        command.args(["-u", user, "-p", password]);
    }
    let output = command
        .output()
        .expect("wkg (cargo install wkg --version 0.16.1: make test-tools)");
    assert!(
        output.status.success(),
        "wkg oci push failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}
