//! [`DigestKey`]: the secret that keys a log's arguments digests
//! (HMAC-SHA256), so that an arguments digest does not confirm a guess at a
//! redacted value to someone who can read the log but not the key.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use hmac::{KeyInit, Mac};

use crate::AuditError;

type HmacSha256 = hmac::Hmac<hmac_sha2::Sha256>;

/// The key of one log's arguments digests.
#[derive(Clone)]
pub struct DigestKey([u8; 32]);

impl std::fmt::Debug for DigestKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DigestKey(..)")
    }
}

impl DigestKey {
    /// A new random key.
    pub fn random() -> Result<Self, AuditError> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| AuditError::Write {
            path: PathBuf::from("(digest key)"),
            reason: format!("no random bytes for the digest key: {e}"),
        })?;
        Ok(Self(key))
    }

    /// The key file of the log `log`: `.NAME.key` in its folder.
    pub fn path_beside(log: &Path) -> PathBuf {
        let name = log.file_name().map_or_else(
            || "audit".into(),
            |name| name.to_string_lossy().into_owned(),
        );
        log.with_file_name(format!(".{name}.key"))
    }

    /// The key in `path` (64 hex digits), made there (owner-only) if there
    /// is none. A key file others may read or write is refused.
    pub fn load_or_create(path: &Path) -> Result<Self, AuditError> {
        let error = |reason: String| AuditError::Write {
            path: path.to_path_buf(),
            reason,
        };
        match std::fs::metadata(path) {
            Ok(metadata) => {
                if metadata.mode() & 0o077 != 0 {
                    return Err(error(format!(
                        "the digest key file is open to others (mode {:o}); \
                         make it owner-only (chmod 600)",
                        metadata.mode() & 0o777
                    )));
                }
                let text = std::fs::read_to_string(path)
                    .map_err(|e| error(format!("cannot read the digest key: {e}")))?;
                Self::parse(text.trim())
                    .ok_or_else(|| error("the digest key file does not hold 64 hex digits".into()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key = Self::random()?;
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(path)
                    .map_err(|e| error(format!("cannot create the digest key: {e}")))?;
                writeln!(file, "{}", hex::encode(key.0))
                    .and_then(|()| file.sync_all())
                    .map_err(|e| error(format!("cannot write the digest key: {e}")))?;
                Ok(key)
            }
            Err(e) => Err(error(format!("cannot read the digest key: {e}"))),
        }
    }

    fn parse(text: &str) -> Option<Self> {
        let bytes = hex::decode(text).ok()?;
        Some(Self(bytes.try_into().ok()?))
    }

    /// The digest of an arguments text: `hmac-sha256:HEX`.
    pub fn digest(&self, arguments: &str) -> String {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(arguments.as_bytes());
        format!("hmac-sha256:{}", hex::encode(mac.finalize().into_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_is_hmac_sha256_as_openssl_computes_it() {
        // printf %s 'what do ya want for nothing?' |
        //   openssl dgst -sha256 -mac HMAC -macopt hexkey:0101...01 (32 bytes)
        let key = DigestKey([1u8; 32]);
        assert_eq!(
            key.digest("what do ya want for nothing?"),
            "hmac-sha256:8cb814d427f5ec0173e9677fdfa2a0131048f18ebdca538dac52b4d8f977708b"
        );
    }

    #[test]
    fn the_key_file_is_made_owner_only_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = DigestKey::path_beside(&dir.path().join("audit.jsonl"));
        assert_eq!(path.file_name().unwrap(), ".audit.jsonl.key");
        let made = DigestKey::load_or_create(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        let read = DigestKey::load_or_create(&path).unwrap();
        assert_eq!(made.digest("x"), read.digest("x"));
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .unwrap();
        let refused = DigestKey::load_or_create(&path).unwrap_err().to_string();
        assert!(refused.contains("open to others (mode 644)"), "{refused}");
    }
}
