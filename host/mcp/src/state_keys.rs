//! The keys that seal `requestState`s: shared by replicas, rotated by
//! putting a new key first while the old one still opens what it sealed.

use std::path::{Path, PathBuf};

use rmcp::model::{RequestStateCodec, SealOptions};
use serde::Deserialize;

/// Shortest key accepted for sealing request states.
pub const MIN_KEY_BYTES: usize = RequestStateCodec::MIN_KEY_LENGTH;

/// Why request-state keys were refused.
#[derive(Debug, thiserror::Error)]
pub enum StateKeyError {
    /// No key was given.
    #[error("no request-state key: give at least one")]
    None,
    /// A key is too short to be a secret.
    #[error("request-state key {id:?} has {bytes} bytes; at least {MIN_KEY_BYTES} are needed")]
    TooShort {
        /// The key's id.
        id: String,
        /// Its length.
        bytes: usize,
    },
    /// A key is one byte repeated: a sample value, not a secret.
    #[error(
        "request-state key {id:?} is one byte repeated, a placeholder: make a secret with \
         `openssl rand -hex 32`"
    )]
    Placeholder {
        /// The key's id.
        id: String,
    },
    /// The keys do not make a key ring (an empty or repeated id).
    #[error("request-state keys: {0}")]
    Ring(String),
    /// The keys file cannot be read or is not a keys file.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// The keys that seal and open `requestState`s: the first seals, every one
/// opens. Replicas share them; to rotate, put the new key first and keep
/// the old one until the states it sealed expired (the ask wait).
#[derive(Clone)]
pub struct StateKeys {
    codec: RequestStateCodec,
}

impl std::fmt::Debug for StateKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateKeys(<redacted>)")
    }
}

impl StateKeys {
    /// Keys by id, the first sealing.
    pub fn new(keys: Vec<(String, Vec<u8>)>) -> Result<Self, StateKeyError> {
        let Some((active, _)) = keys.first() else {
            return Err(StateKeyError::None);
        };
        let active = active.clone();
        if let Some((id, key)) = keys.iter().find(|(_, key)| key.len() < MIN_KEY_BYTES) {
            return Err(StateKeyError::TooShort {
                id: id.clone(),
                bytes: key.len(),
            });
        }
        if let Some((id, _)) = keys
            .iter()
            .find(|(_, key)| key.iter().all(|b| *b == key[0]))
        {
            return Err(StateKeyError::Placeholder { id: id.clone() });
        }
        let codec = RequestStateCodec::new_with_keyring(active, keys)
            .map_err(|error| StateKeyError::Ring(error.to_string()))?;
        Ok(Self { codec })
    }

    /// Reads keys from a file of `[[keys]]` entries (`id`, and `secret`: at
    /// least 64 hex digits, e.g. `openssl rand -hex 32`); the first seals.
    pub fn load(path: &Path) -> Result<Self, StateKeyError> {
        let at = |message: String| StateKeyError::File {
            path: path.to_path_buf(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| at(format!("cannot read it: {e}")))?;
        let raw: RawFile = toml::from_str(&text).map_err(|e| at(e.message().to_string()))?;
        let mut keys = Vec::new();
        for (number, entry) in raw.keys.into_iter().enumerate() {
            let secret = hex::decode(entry.secret.trim()).map_err(|_| {
                at(format!(
                    "key {} ({:?}): secret must be hex digits (openssl rand -hex 32)",
                    number + 1,
                    entry.id
                ))
            })?;
            keys.push((entry.id, secret));
        }
        Self::new(keys).map_err(|e| at(e.to_string()))
    }

    /// `value` sealed for `purpose` (which [`open`](Self::open) must name
    /// again, so a value sealed for one use is refused for another), good
    /// for `ttl`.
    pub fn seal<T: serde::Serialize>(
        &self,
        purpose: &str,
        value: &T,
        ttl: std::time::Duration,
    ) -> String {
        let options = SealOptions::new()
            .associated_data(purpose.as_bytes())
            .ttl(ttl);
        self.codec
            .seal_json_with(value, &options)
            .unwrap_or_default()
    }

    /// What [`seal`](Self::seal) sealed for `purpose`, if `sealed` is intact,
    /// unexpired and sealed by one of these keys for that purpose.
    pub fn open<T: serde::de::DeserializeOwned>(&self, purpose: &str, sealed: &str) -> Option<T> {
        self.codec.open_json_with(sealed, purpose.as_bytes()).ok()
    }

    pub(crate) fn codec(&self) -> &RequestStateCodec {
        &self.codec
    }

    /// A key of this process alone: states it seals are opened only here.
    pub fn random() -> Self {
        let key: Vec<u8> = (0..2)
            .flat_map(|_| *uuid::Uuid::new_v4().as_bytes())
            .collect();
        Self::new(vec![("local".into(), key)]).expect("a 32-byte key")
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    keys: Vec<RawKey>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKey {
    id: String,
    secret: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn keys_files_name_what_is_wrong() {
        let good = format!(
            "[[keys]]\nid = \"new\"\nsecret = \"{}\"\n[[keys]]\nid = \"old\"\nsecret = \"{}\"\n",
            "0123456789abcdef".repeat(4),
            "fedcba9876543210".repeat(4)
        );
        let (_dir, path) = write(&good);
        StateKeys::load(&path).unwrap();
        for (text, says) in [
            ("keys = []".to_string(), "no request-state key"),
            (
                format!("[[keys]]\nid = \"k\"\nsecret = \"{}\"", "ab".repeat(8)),
                "at least 32",
            ),
            (
                "[[keys]]\nid = \"k\"\nsecret = \"zz\"".to_string(),
                "hex digits",
            ),
            (
                format!(
                    "[[keys]]\nid = \"k\"\nsecret = \"{0}\"\n[[keys]]\nid = \"k\"\nsecret = \"{0}\"",
                    "0123456789abcdef".repeat(4)
                ),
                "duplicate",
            ),
            ("[[keys]]\nid = \"k\"".to_string(), "secret"),
            (
                format!("[[keys]]\nid = \"k\"\nsecret = \"{}\"", "0".repeat(64)),
                "placeholder",
            ),
        ] {
            let (_dir, path) = write(&text);
            let error = StateKeys::load(&path).unwrap_err().to_string();
            assert!(error.contains(says), "{text}: {error}");
            assert!(error.contains("keys.toml"), "{error}");
            assert!(!error.contains("0123456789abcdef"), "{error}");
        }
    }

    #[test]
    fn an_old_key_still_opens_what_it_sealed() {
        let (old_key, new_key): (Vec<u8>, Vec<u8>) = ((0..32).collect(), (32..64).collect());
        let old = StateKeys::new(vec![("old".into(), old_key.clone())]).unwrap();
        let rotated =
            StateKeys::new(vec![("new".into(), new_key), ("old".into(), old_key)]).unwrap();
        let sealed = old.codec().seal(b"state");
        assert_eq!(rotated.codec().open(&sealed).unwrap(), b"state");
        let other = StateKeys::random();
        assert!(other.codec().open(&sealed).is_err());
    }
}
