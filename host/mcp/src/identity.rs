//! Who a request comes from: the principal and tenant its credentials
//! establish, never a header or argument the client sets. Static tokens
//! (`--tokens FILE`) map token digests to identities.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use wasm_agent_access::{Credentials, Source, Who};

use super::oauth::ISSUER_PRINCIPAL_PREFIX;
use sha2::{Digest, Sha256};

/// The principal and tenant of a request; both `None` when the server has no
/// per-caller credentials (no token, or the single `--token`). Two
/// identities are the same caller when principal and tenant are; the
/// credentials say how this request proved it (a refreshed token's claims
/// differ, its caller does not).
#[derive(Clone, Debug)]
pub struct Identity {
    /// The user or client: `principal` of a tokens-file entry, or `oauth:`
    /// and the `sub` of a JWT, so the two never name the same identity.
    pub principal: Option<String>,
    /// The tenant its data belongs to.
    pub tenant: Option<String>,
    /// How it proved who it is, with an OAuth token's scopes and claims
    /// (what access rules match).
    pub credentials: Arc<Credentials>,
}

impl Identity {
    /// The caller as access rules see it.
    pub fn who(&self) -> Who<'_> {
        Who {
            principal: self.principal.as_deref(),
            tenant: self.tenant.as_deref(),
            credentials: Some(&self.credentials),
        }
    }

    /// Whether `other` proves the same grants: the same source, scopes (in
    /// any order) and claims, but for those a refreshed token changes
    /// (`exp`, `iat`, `nbf`, `jti`, `auth_time`).
    pub fn same_grants(&self, other: &Identity) -> bool {
        const VOLATILE: [&str; 7] = ["exp", "iat", "nbf", "jti", "auth_time", "scope", "scp"];
        let (a, b) = (&*self.credentials, &*other.credentials);
        let lasting = |claims: &serde_json::Map<String, serde_json::Value>| {
            claims
                .iter()
                .filter(|(name, _)| !VOLATILE.contains(&name.as_str()))
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        let scopes = |c: &Credentials| {
            c.scopes
                .iter()
                .cloned()
                .collect::<std::collections::BTreeSet<_>>()
        };
        a.source == b.source && scopes(a) == scopes(b) && lasting(&a.claims) == lasting(&b.claims)
    }

    /// The identity of a tokens-file entry.
    pub fn from_tokens(principal: String, tenant: Option<String>) -> Self {
        Self {
            principal: Some(principal),
            tenant,
            credentials: Arc::new(Credentials::new(Source::Tokens)),
        }
    }
}

impl Default for Identity {
    /// A caller of a server without per-caller credentials.
    fn default() -> Self {
        Self {
            principal: None,
            tenant: None,
            credentials: Arc::new(Credentials::new(Source::Shared)),
        }
    }
}

impl PartialEq for Identity {
    fn eq(&self, other: &Self) -> bool {
        self.principal == other.principal && self.tenant == other.tenant
    }
}

impl Eq for Identity {}

impl std::hash::Hash for Identity {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.principal.hash(state);
        self.tenant.hash(state);
    }
}

/// Bearer tokens by their SHA-256 digest, each with its identity. The file
/// holds digests only, so reading it reveals no token:
///
/// ```toml
/// [[tokens]]
/// sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
/// principal = "alice"
/// tenant = "acme"        # optional
/// ```
#[derive(Clone, Debug, Default)]
pub struct TokenTable {
    by_digest: HashMap<[u8; 32], Identity>,
}

/// A tokens file that cannot be used, with where and what.
#[derive(Debug, thiserror::Error)]
#[error("{path}{line}: {message}", line = line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct TokensError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    tokens: Vec<toml::Spanned<RawEntry>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    sha256: String,
    principal: String,
    #[serde(default)]
    tenant: Option<String>,
}

impl TokenTable {
    /// Reads a tokens file.
    pub fn load(path: &Path) -> Result<Self, TokensError> {
        let text = std::fs::read_to_string(path).map_err(|e| TokensError {
            path: path.to_path_buf(),
            line: None,
            message: format!("cannot read the tokens file: {e}"),
        })?;
        Self::parse(&text, path)
    }

    /// Parses tokens-file text; `path` is for messages.
    pub fn parse(text: &str, path: &Path) -> Result<Self, TokensError> {
        let error = |span: Option<std::ops::Range<usize>>, message: String| TokensError {
            path: path.to_path_buf(),
            line: span.map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1),
            message,
        };
        let raw: RawFile =
            toml::from_str(text).map_err(|e| error(e.span(), e.message().to_string()))?;
        let mut by_digest = HashMap::new();
        for entry in raw.tokens {
            let span = entry.span();
            let entry = entry.into_inner();
            let digest = parse_digest(&entry.sha256).ok_or_else(|| {
                error(
                    Some(span.clone()),
                    "sha256 must be 64 hex digits: the SHA-256 of the token \
                     (printf %s \"$TOKEN\" | sha256sum)"
                        .into(),
                )
            })?;
            if entry.principal.trim().is_empty() {
                return Err(error(Some(span), "principal must not be empty".into()));
            }
            if entry.principal.starts_with(ISSUER_PRINCIPAL_PREFIX) {
                return Err(error(
                    Some(span),
                    format!(
                        "principal must not start with {ISSUER_PRINCIPAL_PREFIX:?}: \
                         that names principals of the OAuth issuer"
                    ),
                ));
            }
            let identity =
                Identity::from_tokens(entry.principal, entry.tenant.filter(|t| !t.is_empty()));
            if by_digest.insert(digest, identity).is_some() {
                return Err(error(
                    Some(span),
                    "this token digest is listed twice".into(),
                ));
            }
        }
        if by_digest.is_empty() {
            return Err(error(
                None,
                "no [[tokens]] entry: the file would admit nobody".into(),
            ));
        }
        Ok(Self { by_digest })
    }

    /// The identity of `token`, if it is one of the table's.
    pub fn identify(&self, token: &str) -> Option<&Identity> {
        self.by_digest.get(&digest(token))
    }

    /// Whether a token is in both tables.
    pub fn overlaps(&self, other: &TokenTable) -> bool {
        self.by_digest
            .keys()
            .any(|digest| other.by_digest.contains_key(digest))
    }

    /// A short fingerprint of `token` (the start of its SHA-256), for a
    /// login that should end when the token leaves the table.
    pub fn fingerprint(token: &str) -> String {
        hex::encode(&digest(token)[..8])
    }

    /// Whether the table still holds a token of `principal` with this
    /// [`fingerprint`](Self::fingerprint).
    pub fn holds(&self, principal: &str, fingerprint: &str) -> bool {
        self.by_digest.iter().any(|(digest, identity)| {
            identity.principal.as_deref() == Some(principal)
                && hex::encode(&digest[..8]) == fingerprint
        })
    }
}

/// The SHA-256 of a token.
pub(crate) fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn parse_digest(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    if text.len() != 64 {
        return None;
    }
    let mut digest = [0u8; 32];
    for (i, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALICE: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    fn oauth(claims: serde_json::Value) -> Identity {
        Identity {
            principal: Some("oauth:u1".into()),
            tenant: None,
            credentials: Arc::new(Credentials::oauth(claims.as_object().unwrap().clone())),
        }
    }

    #[test]
    fn a_refreshed_token_grants_the_same_and_a_changed_one_does_not() {
        let first = oauth(
            serde_json::json!({"sub": "u1", "scope": "a b", "groups": ["x"], "exp": 1, "jti": "1"}),
        );
        let refreshed = oauth(
            serde_json::json!({"sub": "u1", "scope": "b a", "groups": ["x"], "exp": 2, "jti": "2"}),
        );
        let revoked =
            oauth(serde_json::json!({"sub": "u1", "scope": "a b", "groups": [], "exp": 2}));
        let narrower =
            oauth(serde_json::json!({"sub": "u1", "scope": "a", "groups": ["x"], "exp": 2}));
        assert!(first == refreshed && first.same_grants(&refreshed));
        assert!(first == revoked && !first.same_grants(&revoked));
        assert!(!first.same_grants(&narrower));
        let tokens = Identity::from_tokens("oauth:u1".into(), None);
        assert!(!first.same_grants(&tokens));
    }

    #[test]
    fn maps_tokens_to_identities_by_digest() {
        let text = format!(
            "[[tokens]]\nsha256 = \"{ALICE}\"\nprincipal = \"alice\"\ntenant = \"acme\"\n\n\
             [[tokens]]\nsha256 = \"{}\"\nprincipal = \"bot\"\n",
            "ab".repeat(32)
        );
        let table = TokenTable::parse(&text, Path::new("tokens.toml")).unwrap();
        // ALICE is the SHA-256 of "test".
        let alice = table.identify("test").unwrap();
        assert_eq!(alice.principal.as_deref(), Some("alice"));
        assert_eq!(alice.tenant.as_deref(), Some("acme"));
        assert!(table.identify("guess").is_none());
        assert!(
            table.identify(ALICE).is_none(),
            "the digest is not the token"
        );
    }

    #[test]
    fn bad_files_name_the_line_and_what_is_wrong() {
        for (text, says) in [
            (
                "[[tokens]]\nsha256 = \"xyz\"\nprincipal = \"a\"\n",
                "tokens.toml:1: sha256 must be 64 hex digits",
            ),
            (
                &*format!(
                    "[[tokens]]\nsha256 = \"{ALICE}\"\nprincipal = \"a\"\nrole = \"admin\"\n"
                ),
                "unknown field `role`",
            ),
            ("", "no [[tokens]] entry"),
            (
                &*format!("[[tokens]]\nsha256 = \"{ALICE}\"\nprincipal = \"oauth:alice\"\n"),
                "principal must not start with \"oauth:\"",
            ),
            (
                &*format!("[[tokens]]\nsha256 = \"{ALICE}\"\nprincipal = \" \"\n"),
                "principal must not be empty",
            ),
        ] {
            let error = TokenTable::parse(text, Path::new("tokens.toml")).unwrap_err();
            assert!(error.to_string().contains(says), "{text:?}: {error}");
        }
    }
}
