//! Cosign keyed signatures, verified in-process: the signature artifact at
//! tag `sha256-HEX.sig` beside the component holds simple-signing payloads
//! (JSON naming the manifest digest) as layers, each with its ECDSA P-256
//! signature (DER, base64) in an annotation. Verified signatures are kept in
//! the store, so verification works offline.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use p256::ecdsa::signature::{Signer as _, Verifier as _};
use p256::ecdsa::{DerSignature, Signature};
use p256::pkcs8::{DecodePrivateKey, DecodePublicKey};
use serde_json::{Value, json};

use crate::digest::Digest;
use crate::layout;
use crate::pull::{Pulled, Registry};
use crate::reference::ComponentRef;
use crate::{RegistryError, shorten};

/// The media type of a simple-signing payload layer.
pub const PAYLOAD_LAYER: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation that holds the signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The payload's `critical.type`.
const PAYLOAD_TYPE: &str = "cosign container image signature";
/// The largest payload read.
pub(crate) const MAX_PAYLOAD: u64 = 64 << 10;
/// The most signature layers read from (or kept in) one `.sig` artifact.
pub(crate) const MAX_SIGNATURES: usize = 64;

/// Which signature check failed.
#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    /// No signature artifact in the registry.
    #[error("unsigned: the registry has no signature at {tag}, and a key is configured")]
    Unsigned {
        /// The signature tag looked for.
        tag: String,
    },
    /// Offline, and the store has no signature.
    #[error("no signature in the local store ({tag}); verify once without --offline")]
    NotStored {
        /// The signature tag.
        tag: String,
    },
    /// A signature that the key does not verify.
    #[error(
        "the signature does not verify with the key {key}: signed by another key, or tampered with"
    )]
    BadSignature {
        /// The key file.
        key: String,
    },
    /// A valid signature over a payload for other content.
    #[error("the signed payload names {named}, not this component's manifest {manifest}")]
    WrongSubject {
        /// What the payload names.
        named: String,
        /// The component's manifest digest.
        manifest: Digest,
    },
    /// A valid signature over this manifest, made for another repository
    /// (a manifest and its signature copied from elsewhere).
    #[error(
        "the signature vouches for {named}, not for {expected}: a manifest and its signature \
         copied from another repository do not verify under this name"
    )]
    WrongName {
        /// The repository the payload names (`critical.identity.docker-reference`).
        named: String,
        /// The registry and repository loaded.
        expected: String,
    },
    /// The signature artifact is not in cosign's format.
    #[error("the signature artifact is malformed: {0}")]
    Malformed(String),
    /// A key file that cannot be used.
    #[error("{path}: {reason}")]
    Key {
        /// The key file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

/// A public key that signatures are checked against.
#[derive(Clone, Debug)]
pub struct VerifyKey {
    key: p256::ecdsa::VerifyingKey,
    /// Where it came from, for messages.
    label: String,
}

impl VerifyKey {
    /// Reads a PEM public key (`cosign.pub`).
    pub fn from_file(path: &Path) -> Result<Self, SignatureError> {
        let key_error = |reason: String| SignatureError::Key {
            path: path.to_path_buf(),
            reason,
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| key_error(format!("cannot read the public key: {e}")))?;
        Self::from_pem(&text, &path.display().to_string()).map_err(key_error)
    }

    /// Parses a PEM public key; `label` names it in messages.
    pub fn from_pem(text: &str, label: &str) -> Result<Self, String> {
        let key = p256::PublicKey::from_public_key_pem(text.trim()).map_err(|e| {
            format!(
                "not an ECDSA P-256 public key in PEM (-----BEGIN PUBLIC KEY-----, as cosign \
                 generate-key-pair writes): {e}"
            )
        })?;
        Ok(Self {
            key: key.into(),
            label: label.to_string(),
        })
    }

    /// Checks a base64 DER signature over `payload`.
    fn verifies(&self, payload: &[u8], signature_base64: &str) -> bool {
        let Ok(der) = BASE64.decode(signature_base64.trim()) else {
            return false;
        };
        let Ok(signature) = Signature::from_der(&der) else {
            return false;
        };
        self.key.verify(payload, &signature).is_ok()
    }
}

/// A private key for `wasm-agent sign`.
pub struct SigningKey(p256::ecdsa::SigningKey);

impl SigningKey {
    /// Reads a PEM ECDSA P-256 private key (PKCS#8 or SEC1, as openssl writes).
    pub fn from_file(path: &Path) -> Result<Self, SignatureError> {
        let key_error = |reason: String| SignatureError::Key {
            path: path.to_path_buf(),
            reason,
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| key_error(format!("cannot read the private key: {e}")))?;
        if text.contains("ENCRYPTED") {
            return Err(key_error(
                "an encrypted key (cosign's own format, or PKCS#8 with a password); give an \
                 unencrypted P-256 key in PEM, e.g. from `openssl ecparam -genkey -name prime256v1`"
                    .into(),
            ));
        }
        let secret = p256::SecretKey::from_pkcs8_pem(text.trim())
            .or_else(|_| p256::SecretKey::from_sec1_pem(text.trim()))
            .map_err(|_| key_error("not an ECDSA P-256 private key in PEM".into()))?;
        Ok(Self(secret.into()))
    }

    pub(crate) fn sign(&self, payload: &[u8]) -> String {
        let signature: Signature = self.0.sign(payload);
        let der: DerSignature = signature.to_der();
        BASE64.encode(der.as_bytes())
    }
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey(<redacted>)")
    }
}

/// The tag cosign keeps a manifest's signatures under.
pub fn signature_tag(manifest: &Digest) -> String {
    format!("sha256-{}.sig", manifest.hex())
}

/// The simple-signing payload for a manifest.
pub(crate) fn payload(reference: &ComponentRef, manifest: &Digest) -> Vec<u8> {
    let identity = format!("{}/{}", reference.registry, reference.repository);
    serde_json::to_vec(&json!({
        "critical": {
            "identity": {"docker-reference": identity},
            "image": {"docker-manifest-digest": manifest.to_string()},
            "type": PAYLOAD_TYPE,
        },
        "optional": null,
    }))
    .expect("JSON values serialize")
}

/// Checks a verified payload's claims: cosign's type, this manifest, and
/// this registry and repository (as cosign's policy controller does).
fn check_payload(
    bytes: &[u8],
    manifest: &Digest,
    reference: &ComponentRef,
) -> Result<(), SignatureError> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| SignatureError::Malformed(format!("the payload is not JSON: {e}")))?;
    let critical = &value["critical"];
    if critical["type"] != PAYLOAD_TYPE {
        return Err(SignatureError::Malformed(format!(
            "the payload's critical.type is {}, not {PAYLOAD_TYPE:?}",
            shorten(&critical["type"].to_string())
        )));
    }
    let named = critical["image"]["docker-manifest-digest"]
        .as_str()
        .unwrap_or_default();
    if named != manifest.to_string() {
        return Err(SignatureError::WrongSubject {
            named: shorten(named),
            manifest: *manifest,
        });
    }
    let Some(identity) = critical["identity"]["docker-reference"].as_str() else {
        return Err(SignatureError::Malformed(
            "the payload names no critical.identity.docker-reference".into(),
        ));
    };
    if !names_repository(identity, reference) {
        return Err(SignatureError::WrongName {
            named: shorten(identity),
            expected: format!("{}/{}", reference.registry, reference.repository),
        });
    }
    Ok(())
}

/// Whether a payload's `docker-reference` (`registry/repository`, perhaps
/// with a tag or digest) names `reference`'s registry and repository.
fn names_repository(named: &str, reference: &ComponentRef) -> bool {
    let named = named.split('@').next().unwrap_or(named);
    let named = match (named.rfind(':'), named.rfind('/')) {
        (Some(colon), Some(slash)) if colon > slash => &named[..colon],
        _ => named,
    };
    let Some((registry, repository)) = named.split_once('/') else {
        return false;
    };
    registry_name(registry) == registry_name(&reference.registry)
        && repository == reference.repository
}

/// A registry's name as cosign writes it (Docker Hub has several).
fn registry_name(registry: &str) -> String {
    let registry = registry.to_ascii_lowercase();
    match registry.as_str() {
        "docker.io" | "registry-1.docker.io" => "index.docker.io".into(),
        _ => registry,
    }
}

/// Checks a simple-signing payload as a verified one is checked, against a
/// fixed manifest and reference (for the fuzz target).
#[cfg(feature = "fuzz")]
pub fn fuzz_payload(bytes: &[u8]) {
    let reference: ComponentRef = "oci://registry.example:5000/team/tool:1"
        .parse()
        .expect("the fuzz reference parses");
    let manifest = Digest::of(b"manifest");
    let _ = check_payload(bytes, &manifest, &reference);
}

impl Registry {
    /// Verifies a pulled component's cosign signature with `key`. Online,
    /// the signature is fetched (and stored); offline, the stored one is used.
    pub async fn verify(&self, pulled: &Pulled, key: &VerifyKey) -> Result<(), RegistryError> {
        let tag = signature_tag(&pulled.manifest);
        let signatures = pulled.reference.with_tag(tag.clone());
        let fail = |reason| RegistryError::Signature {
            reference: pulled.reference.to_string(),
            reason,
        };
        let (digest, bytes) = self
            .within_deadline(&signatures, self.manifest(&signatures))
            .await
            .map_err(|e| match e {
                RegistryError::NotFound { .. } => {
                    fail(SignatureError::Unsigned { tag: tag.clone() })
                }
                RegistryError::NotStored { .. } => {
                    fail(SignatureError::NotStored { tag: tag.clone() })
                }
                other => other,
            })?;
        let manifest =
            layout::parse_manifest(&bytes).map_err(|e| fail(SignatureError::Malformed(e)))?;
        let mut failure = None;
        for layer in manifest
            .layers
            .iter()
            .filter(|l| l.media_type == PAYLOAD_LAYER)
            .take(MAX_SIGNATURES)
        {
            let Some(signature) = layer
                .annotations
                .as_ref()
                .and_then(|a| a.get(SIGNATURE_ANNOTATION))
            else {
                failure.get_or_insert(SignatureError::Malformed(format!(
                    "a payload layer without the {SIGNATURE_ANNOTATION} annotation"
                )));
                continue;
            };
            let blob =
                layout::descriptor_blob(layer).map_err(|e| fail(SignatureError::Malformed(e)))?;
            let path = self
                .within_deadline(
                    &signatures,
                    self.blob(&signatures, &blob, MAX_PAYLOAD, "a signature payload"),
                )
                .await?;
            let payload = self
                .store()
                .read_small(&blob.digest, MAX_PAYLOAD)
                .ok_or_else(|| {
                    fail(SignatureError::Malformed(format!(
                        "cannot read {}",
                        path.display()
                    )))
                })?;
            if !key.verifies(&payload, signature) {
                // A bad signature says more than a malformed neighbour.
                if !matches!(failure, Some(SignatureError::WrongSubject { .. })) {
                    failure = Some(SignatureError::BadSignature {
                        key: key.label.clone(),
                    });
                }
                continue;
            }
            match check_payload(&payload, &pulled.manifest, &pulled.reference) {
                Ok(()) => {
                    // Kept for offline checks once it has verified.
                    if !self.options().offline {
                        self.store().set_tag(&signatures, &tag, &digest)?;
                    }
                    return Ok(());
                }
                Err(error) => failure = Some(error),
            }
        }
        Err(fail(failure.unwrap_or_else(|| {
            SignatureError::Malformed(format!("no {PAYLOAD_LAYER} layer"))
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixed test key, through its PEM form as openssl would write it.
    fn keys() -> (SigningKey, VerifyKey) {
        use p256::pkcs8::{EncodePrivateKey, LineEnding};
        let secret = p256::SecretKey::from_slice(&[7u8; 32]).unwrap();
        let pem = secret.to_pkcs8_pem(LineEnding::LF).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.pem");
        std::fs::write(&path, pem.as_bytes()).unwrap();
        let signing = SigningKey::from_file(&path).unwrap();
        let public = *signing.0.verifying_key();
        (
            signing,
            VerifyKey {
                key: public,
                label: "test.pub".into(),
            },
        )
    }

    #[test]
    fn signatures_verify_only_over_the_signed_bytes() {
        let (signing, verify) = keys();
        let reference: ComponentRef = "oci://r:5000/calc:1".parse().unwrap();
        let manifest = Digest::of(b"manifest");
        let payload = payload(&reference, &manifest);
        let signature = signing.sign(&payload);
        assert!(verify.verifies(&payload, &signature));
        check_payload(&payload, &manifest, &reference).unwrap();

        let mut tampered = payload.clone();
        tampered[10] ^= 1;
        assert!(!verify.verifies(&tampered, &signature));
        assert!(!verify.verifies(&payload, "not base64!"));
        assert!(matches!(
            check_payload(&payload, &Digest::of(b"other"), &reference),
            Err(SignatureError::WrongSubject { .. })
        ));
        let other_type = br#"{"critical":{"type":"x","image":{"docker-manifest-digest":"y"}}}"#;
        assert!(matches!(
            check_payload(other_type, &manifest, &reference),
            Err(SignatureError::Malformed(_))
        ));
    }

    #[test]
    fn a_signature_vouches_only_for_the_repository_it_names() {
        let manifest = Digest::of(b"manifest");
        let signed_for: ComponentRef = "oci://r:5000/team/calc:1".parse().unwrap();
        let payload = payload(&signed_for, &manifest);
        // Another tag of the same repository, the registry in capitals.
        for same in ["oci://r:5000/team/calc:2", "oci://R:5000/team/calc:1"] {
            check_payload(&payload, &manifest, &same.parse().unwrap()).unwrap();
        }
        for elsewhere in [
            "oci://r:5000/team/calc-copy:1",
            "oci://r:5000/calc:1",
            "oci://other:5000/team/calc:1",
            "oci://r:5001/team/calc:1",
        ] {
            let loaded: ComponentRef = elsewhere.parse().unwrap();
            assert!(
                matches!(
                    check_payload(&payload, &manifest, &loaded),
                    Err(SignatureError::WrongName { .. })
                ),
                "{elsewhere}"
            );
        }
        // Tags and digests in the payload's name, and Docker Hub's names.
        let hub: ComponentRef = "oci://docker.io/library/calc:1".parse().unwrap();
        for named in [
            "index.docker.io/library/calc",
            "docker.io/library/calc:1",
            "registry-1.docker.io/library/calc@sha256:ab",
        ] {
            assert!(names_repository(named, &hub), "{named}");
        }
        assert!(!names_repository("index.docker.io/library/calc2", &hub));
        assert!(!names_repository("calc", &hub));
        let unnamed = json!({"critical": {
            "type": PAYLOAD_TYPE,
            "image": {"docker-manifest-digest": manifest.to_string()},
        }});
        let unnamed = serde_json::to_vec(&unnamed).unwrap();
        assert!(matches!(
            check_payload(&unnamed, &manifest, &signed_for),
            Err(SignatureError::Malformed(_))
        ));
    }

    #[test]
    fn keys_of_other_kinds_are_refused_saying_what_is_expected() {
        let error = VerifyKey::from_pem(
            "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
            "k",
        )
        .unwrap_err();
        assert!(error.contains("ECDSA P-256"), "{error}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cosign.key");
        std::fs::write(&path, "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n").unwrap();
        let error = SigningKey::from_file(&path).unwrap_err().to_string();
        assert!(error.contains("encrypted"), "{error}");
    }
}
