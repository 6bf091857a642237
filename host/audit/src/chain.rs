//! The hash chain: each record ends with `"prev"`, the hash of the record
//! before it, and `"hash"`, the SHA-256 of its own text up to that field.
//! Editing a record breaks its own hash; deleting, inserting or reordering
//! records breaks the next record's `prev` (and `seq`).

use sha2::{Digest as _, Sha256};

/// The `prev` of the first record of a chain.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What comes between a record's body and its hash.
const HASH_FIELD: &str = ",\"hash\":\"";

/// Appends `"hash"` to `body`, a JSON object's text (ending in `}`), and
/// returns the line and its hash.
pub fn seal(body: &str) -> (String, String) {
    let hash = hex::encode(Sha256::digest(body.as_bytes()));
    let open = body.strip_suffix('}').unwrap_or(body);
    let line = format!("{open}{HASH_FIELD}{hash}\"}}");
    (line, hash)
}

/// A sealed line split back into its body and the hash it claims.
pub struct Unsealed<'a> {
    /// The record as hashed (without `"hash"`).
    pub body: String,
    /// The hash it claims.
    pub claimed: &'a str,
}

impl Unsealed<'_> {
    /// Whether the claimed hash is the body's.
    pub fn intact(&self) -> bool {
        hex::encode(Sha256::digest(self.body.as_bytes())) == self.claimed
    }
}

/// Splits a sealed line, or `None` when it does not end in a hash field.
pub fn unseal(line: &str) -> Option<Unsealed<'_>> {
    let rest = line.strip_suffix("\"}")?;
    let at = rest.len().checked_sub(64 + HASH_FIELD.len())?;
    let (open, tail) = rest.split_at_checked(at)?;
    let claimed = tail.strip_prefix(HASH_FIELD)?;
    if !claimed
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        return None;
    }
    Some(Unsealed {
        body: format!("{open}}}"),
        claimed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_line_unseals_to_its_body_and_checks() {
        let (line, hash) = seal(r#"{"seq":0,"prev":"00"}"#);
        assert!(line.ends_with(&format!(r#","hash":"{hash}"}}"#)));
        let unsealed = unseal(&line).unwrap();
        assert_eq!(unsealed.body, r#"{"seq":0,"prev":"00"}"#);
        assert!(unsealed.intact());
        let edited = line.replace("\"seq\":0", "\"seq\":1");
        assert!(!unseal(&edited).unwrap().intact());
        assert!(unseal("{\"seq\":0}").is_none());
        assert!(unseal("").is_none());
        assert!(unseal("é\"}").is_none());
    }
}
