//! Content digests: `sha256:` and 64 lowercase hex digits.

use std::fmt;
use std::io::Read;
use std::path::Path;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest as _, Sha256};

/// A SHA-256 content digest, written `sha256:HEX` as OCI and the host do.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest([u8; 32]);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// The digest of a file's content, read in pieces.
    pub fn of_file(path: &Path) -> std::io::Result<Self> {
        let mut file = std::fs::File::open(path)?;
        let mut sha = Sha256::new();
        let mut buffer = vec![0; 1 << 16];
        loop {
            let read = file.read(&mut buffer)?;
            if read == 0 {
                return Ok(Self(sha.finalize().into()));
            }
            sha.update(&buffer[..read]);
        }
    }

    /// From a finished hash.
    pub fn from_sha256(sha: Sha256) -> Self {
        Self(sha.finalize().into())
    }

    /// The 64 hex digits alone.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The raw 32 bytes.
    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Digest {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let Some(hex_digits) = text.strip_prefix("sha256:") else {
            return Err(format!(
                "{text:?} is not a sha256:HEX digest (only sha256 is supported)"
            ));
        };
        let mut bytes = [0u8; 32];
        if hex_digits.len() != 64
            || hex_digits.bytes().any(|b| b.is_ascii_uppercase())
            || hex::decode_to_slice(hex_digits, &mut bytes).is_err()
        {
            return Err(format!(
                "{text:?} is not a digest: sha256: takes 64 hex digits (lowercase)"
            ));
        }
        Ok(Self(bytes))
    }
}

impl Serialize for Digest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_malformed_digests() {
        let digest = Digest::of(b"abc");
        assert_eq!(
            digest.to_string(),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(digest.to_string().parse::<Digest>().unwrap(), digest);
        assert!(
            "sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"
                .parse::<Digest>()
                .is_err()
        );
        assert!(
            "sha512:00"
                .parse::<Digest>()
                .unwrap_err()
                .contains("only sha256")
        );
        assert!(
            "sha256:zz"
                .parse::<Digest>()
                .unwrap_err()
                .contains("64 hex digits")
        );
    }

    #[test]
    fn hashes_files_as_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x");
        let bytes = vec![7u8; 200_000];
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(Digest::of_file(&path).unwrap(), Digest::of(&bytes));
    }
}
