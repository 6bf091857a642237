//! Pulling: a reference's manifest, then its component layer, into the
//! store; from the store alone when offline or when a digest names it.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use std::collections::HashMap;
use std::sync::Arc;

use crate::RegistryError;
use crate::credentials::Credentials;
use crate::digest::Digest;
use crate::layout::{self, Blob, MANIFEST_TYPES, MAX_MANIFEST};
use crate::reference::{ComponentRef, host_of};
use crate::store::Store;
use crate::wire::{self, Wire};

/// The default cap on a component's size.
pub const DEFAULT_MAX_COMPONENT: u64 = 256 << 20;
/// The default deadline of one pull.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How to reach registries and where pulled components go.
#[derive(Clone, Debug)]
pub struct RegistryOptions {
    /// The local store's folder.
    pub store: PathBuf,
    /// Never use the network: only what the store holds.
    pub offline: bool,
    /// Registries (`host:port`) spoken to over plain HTTP; loopback only.
    pub insecure: Vec<String>,
    /// The largest component pulled.
    pub max_component_size: u64,
    /// How long one pull (manifest and blobs) may take.
    pub timeout: Duration,
}

impl RegistryOptions {
    /// Defaults, with the store in `store`.
    pub fn new(store: impl Into<PathBuf>) -> Self {
        Self {
            store: store.into(),
            offline: false,
            insecure: Vec::new(),
            max_component_size: DEFAULT_MAX_COMPONENT,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// A component in the store.
#[derive(Clone, Debug)]
pub struct Pulled {
    /// What was asked for.
    pub reference: ComponentRef,
    /// The manifest's digest (what signatures and `@sha256:` name).
    pub manifest: Digest,
    /// The component's content digest (what the lock pins and the host reports).
    pub digest: Digest,
    /// The component file in the store.
    pub path: PathBuf,
}

/// Pulls components from OCI registries into a local store.
pub struct Registry {
    options: RegistryOptions,
    store: Store,
    wires: tokio::sync::Mutex<HashMap<String, Arc<Wire>>>,
}

impl Registry {
    /// A registry client; refuses plain HTTP for registries off this machine.
    pub fn new(options: RegistryOptions) -> Result<Self, RegistryError> {
        for registry in &options.insecure {
            if !is_loopback(host_of(registry)) {
                return Err(RegistryError::InsecureNotLoopback {
                    registry: registry.clone(),
                });
            }
        }
        // reqwest's rustls is built without a provider: use ring, as the host
        // does elsewhere. Already installed is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Ok(Self {
            store: Store::new(&options.store),
            options,
            wires: Default::default(),
        })
    }

    /// The local store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The options it was made with.
    pub fn options(&self) -> &RegistryOptions {
        &self.options
    }

    /// Pulls a component into the store (or finds it there) and returns where
    /// it is. With `pinned`, a component whose content digest differs is
    /// refused before it is downloaded.
    pub async fn pull(
        &self,
        reference: &ComponentRef,
        pinned: Option<&Digest>,
    ) -> Result<Pulled, RegistryError> {
        self.within_deadline(reference, async {
            let (manifest, bytes) = self.manifest(reference).await?;
            let text = reference.to_string();
            let parsed =
                layout::parse_manifest(&bytes).map_err(|reason| RegistryError::MediaType {
                    reference: text.clone(),
                    reason,
                })?;
            let layer =
                layout::component_layer(&parsed).map_err(|reason| RegistryError::MediaType {
                    reference: text.clone(),
                    reason,
                })?;
            if let Some(pinned) = pinned
                && *pinned != layer.digest
            {
                return Err(RegistryError::Pinned {
                    reference: text,
                    pinned: *pinned,
                    actual: layer.digest,
                });
            }
            let path = self
                .blob(
                    reference,
                    &layer,
                    self.options.max_component_size,
                    "the component",
                )
                .await?;
            // The tag names what was stored only once all of it is.
            if let (Some(tag), None, false) =
                (&reference.tag, &reference.digest, self.options.offline)
            {
                self.store.set_tag(reference, tag, &manifest)?;
            }
            Ok(Pulled {
                reference: reference.clone(),
                manifest,
                digest: layer.digest,
                path,
            })
        })
        .await
    }

    /// Runs `work` under the pull deadline.
    pub(crate) async fn within_deadline<T>(
        &self,
        reference: &ComponentRef,
        work: impl Future<Output = Result<T, RegistryError>>,
    ) -> Result<T, RegistryError> {
        tokio::time::timeout(self.options.timeout, work)
            .await
            .map_err(|_| RegistryError::Deadline {
                reference: reference.to_string(),
                after: self.options.timeout,
            })?
    }

    /// A manifest and its digest: from the store when a digest names one it
    /// holds (or when offline), else from the registry (and then stored).
    pub(crate) async fn manifest(
        &self,
        reference: &ComponentRef,
    ) -> Result<(Digest, Vec<u8>), RegistryError> {
        let stored = match (&reference.digest, &reference.tag) {
            (Some(digest), _) => Some(*digest),
            (None, Some(tag)) if self.options.offline => self.store.tag(reference, tag),
            _ => None,
        };
        if let Some(digest) = stored
            && let Some(bytes) = self.store.read_small(&digest, MAX_MANIFEST)
        {
            return Ok((digest, bytes));
        }
        if self.options.offline {
            return Err(self.not_stored(reference));
        }
        let wire = self.wire(&reference.registry).await?;
        let text = reference.to_string();
        let name = match (&reference.digest, &reference.tag) {
            (Some(digest), _) => digest.to_string(),
            (None, Some(tag)) => tag.clone(),
            (None, None) => unreachable!("a parsed reference has a tag or a digest"),
        };
        let response = wire
            .get(
                &text,
                &reference.repository,
                &format!("manifests/{name}"),
                &MANIFEST_TYPES.join(", "),
            )
            .await?;
        let claimed = match response.headers().get("docker-content-digest") {
            Some(header) => Some(
                header
                    .to_str()
                    .ok()
                    .and_then(|h| h.parse::<Digest>().ok())
                    .ok_or_else(|| RegistryError::Registry {
                        reference: text.clone(),
                        reason:
                            "the manifest's Docker-Content-Digest header is not a sha256 digest"
                                .into(),
                    })?,
            ),
            None => None,
        };
        let bytes = wire::read_capped(response, MAX_MANIFEST)
            .await
            .map_err(|e| self.read_error(&wire, reference, e, "the manifest", MAX_MANIFEST))?;
        // The content must be what the reference names, and what the
        // registry's header says it is.
        let actual = Digest::of(&bytes);
        let expected = reference.digest.or(claimed).unwrap_or(actual);
        if actual != expected || claimed.is_some_and(|c| c != actual) {
            return Err(RegistryError::WrongContent {
                what: format!("{reference}: the manifest"),
                expected: claimed.filter(|c| *c != actual).unwrap_or(expected),
                actual,
            });
        }
        self.store.write_small(&bytes)?;
        Ok((actual, bytes))
    }

    /// A blob in the store, downloaded (at most `limit` bytes, checked
    /// against its digest) unless the store has it.
    pub(crate) async fn blob(
        &self,
        reference: &ComponentRef,
        blob: &Blob,
        limit: u64,
        what: &'static str,
    ) -> Result<PathBuf, RegistryError> {
        let path = self.store.blob_path(&blob.digest);
        if self.store.has_blob(&blob.digest) {
            return Ok(path);
        }
        if self.options.offline {
            return Err(self.not_stored(reference));
        }
        let too_large = |size| too_large(reference, what, size, limit);
        if blob.size > limit {
            return Err(too_large(blob.size));
        }
        let wire = self.wire(&reference.registry).await?;
        // By digest alone: a descriptor's `urls` would send the host elsewhere.
        let mut response = wire
            .get(
                &reference.to_string(),
                &reference.repository,
                &format!("blobs/{}", blob.digest),
                "*/*",
            )
            .await?;
        if let Some(length) = response.content_length()
            && length > limit
        {
            return Err(too_large(length));
        }
        let mut writer = self.store.blob_writer()?;
        let wrong_content = |expected: Digest, actual: Digest| RegistryError::WrongContent {
            what: format!("{reference}: {what}"),
            expected,
            actual,
        };
        while let Some(piece) = response.chunk().await.map_err(|e| {
            self.read_error(&wire, reference, wire::ReadError::Broken(e), what, limit)
        })? {
            writer.write(&piece)?;
            if writer.written() > limit {
                return Err(too_large(writer.written()));
            }
            if writer.written() > blob.size {
                return Err(RegistryError::Registry {
                    reference: reference.to_string(),
                    reason: format!(
                        "{what} is larger than the {} bytes its manifest declares",
                        blob.size
                    ),
                });
            }
        }
        writer.finish(&blob.digest).map_err(|e| match e {
            RegistryError::WrongContent {
                expected, actual, ..
            } => wrong_content(expected, actual),
            other => other,
        })
    }

    /// The client for `registry`, made once per registry.
    pub(crate) async fn wire(&self, registry: &str) -> Result<Arc<Wire>, RegistryError> {
        let mut wires = self.wires.lock().await;
        if let Some(wire) = wires.get(registry) {
            return Ok(wire.clone());
        }
        let credentials = Credentials::for_registry(registry)?;
        let insecure = self.options.insecure.iter().any(|r| r == registry);
        let wire = Wire::new(registry, insecure, self.options.timeout, credentials)
            .await
            .map_err(|e| RegistryError::Unreachable {
                reference: registry.to_string(),
                reason: wire::describe(&e),
            })?;
        let wire = Arc::new(wire);
        if wire.resolved() {
            wires.insert(registry.to_string(), wire.clone());
        }
        Ok(wire)
    }

    /// A capped read that stopped, as the host's error.
    fn read_error(
        &self,
        wire: &Wire,
        reference: &ComponentRef,
        error: wire::ReadError,
        what: &'static str,
        limit: u64,
    ) -> RegistryError {
        match error {
            wire::ReadError::TooLarge(size) => too_large(reference, what, size, limit),
            wire::ReadError::Broken(e) if !e.is_timeout() => RegistryError::Unreachable {
                reference: reference.to_string(),
                reason: format!("the download of {what} broke off: {}", wire::describe(&e)),
            },
            wire::ReadError::Broken(e) => wire.request_error(&reference.to_string(), &e),
        }
    }

    pub(crate) fn not_stored(&self, reference: &ComponentRef) -> RegistryError {
        RegistryError::NotStored {
            reference: reference.to_string(),
            store: self.store.root().to_path_buf(),
        }
    }
}

/// `what` is over `limit`, naming which limit it is.
fn too_large(reference: &ComponentRef, what: &'static str, size: u64, limit: u64) -> RegistryError {
    RegistryError::TooLarge {
        reference: reference.to_string(),
        what,
        size,
        limit,
        of: match what {
            "the component" => "(--max-component-size)",
            "the manifest" => "of a manifest",
            _ => "of a signature payload",
        },
    }
}

/// `localhost`, 127.0.0.0/8 or ::1.
fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_only_for_loopback_registries() {
        let dir = tempfile::tempdir().unwrap();
        let mut options = RegistryOptions::new(dir.path());
        options.insecure = vec![
            "127.0.0.1:5000".into(),
            "localhost:5001".into(),
            "[::1]:5".into(),
        ];
        assert!(Registry::new(options.clone()).is_ok());
        options.insecure.push("registry.example.com:5000".into());
        let error = Registry::new(options).err().unwrap().to_string();
        assert!(error.contains("registry.example.com:5000"), "{error}");
        assert!(error.contains("loopback"), "{error}");
    }

    #[tokio::test]
    async fn offline_pulls_say_what_is_missing_and_where() {
        let dir = tempfile::tempdir().unwrap();
        let mut options = RegistryOptions::new(dir.path());
        options.offline = true;
        let registry = Registry::new(options).unwrap();
        let reference: ComponentRef = "oci://127.0.0.1:1/calc:1".parse().unwrap();
        let error = registry
            .pull(&reference, None)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("oci://127.0.0.1:1/calc:1: not in the local store"),
            "{error}"
        );
        assert!(error.contains(&dir.path().display().to_string()), "{error}");
    }
}
