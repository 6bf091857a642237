//! A tool's result in the form caches keep: its text and artifacts as JSON
//! (artifact bytes in base64), so every entry point reads what another wrote.

use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// A successful tool result, as cached.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedResult {
    /// The text for the model.
    pub content: String,
    /// Structured data.
    pub artifacts: Vec<CachedArtifact>,
}

/// One artifact of a [`CachedResult`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedArtifact {
    /// What the data is (`"json"`, `"image"`, ...).
    pub kind: String,
    /// MIME type, when the tool gave one.
    pub mime_type: Option<String>,
    /// The bytes.
    #[serde(with = "base64_bytes")]
    pub data: Vec<u8>,
}

impl CachedResult {
    /// The bytes a cache keeps.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// The result in `bytes`, or `None` when they are not one (an entry of
    /// another format or version is a miss).
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }
}

mod base64_bytes {
    use super::*;

    pub fn serialize<S: serde::Serializer>(data: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(data))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_round_trip_and_garbage_is_a_miss() {
        let result = CachedResult {
            content: "42 ✓".into(),
            artifacts: vec![CachedArtifact {
                kind: "image".into(),
                mime_type: Some("image/png".into()),
                data: vec![0, 255, 7],
            }],
        };
        assert_eq!(CachedResult::decode(&result.encode()), Some(result));
        assert_eq!(CachedResult::decode(b"not json"), None);
        let bad = br#"{"content":"x","artifacts":[{"kind":"k","mime_type":null,"data":"!"}]}"#;
        assert_eq!(CachedResult::decode(bad), None);
    }
}
