//! Who is asking: what the entry point established of a caller, and what
//! rules are matched against.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// How a caller proved who it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The person at the terminal (`wasm-agent call`, `run`): whoever runs
    /// the binary, with `--user` and `--tenant` as they say.
    #[default]
    Local,
    /// A server with no per-caller credentials (no token, or the one
    /// `--token` every client shares).
    Shared,
    /// An entry of the server's tokens file (`--tokens`).
    Tokens,
    /// An OAuth access token the server validated (`--auth-issuer`).
    Oauth,
}

impl Source {
    /// The name rules use.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Local => "local",
            Source::Shared => "shared",
            Source::Tokens => "tokens",
            Source::Oauth => "oauth",
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a caller's credentials say beyond its principal and tenant: how it
/// proved itself, and an OAuth token's scopes and claims.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Credentials {
    /// How the caller proved who it is.
    pub source: Source,
    /// The scopes its token grants (`scope` or `scp`).
    pub scopes: Vec<String>,
    /// Its token's claims (an OAuth access token's payload).
    pub claims: Map<String, Value>,
}

impl Credentials {
    /// Credentials of `source` with no scopes or claims.
    pub fn new(source: Source) -> Self {
        Self {
            source,
            ..Self::default()
        }
    }

    /// OAuth credentials from a token's claims: its scopes are those of
    /// `scope` (space-separated) and `scp` (a list, or space-separated).
    pub fn oauth(claims: Map<String, Value>) -> Self {
        let mut scopes = Vec::new();
        for claim in ["scope", "scp"] {
            match claims.get(claim) {
                Some(Value::String(text)) => {
                    scopes.extend(text.split(' ').filter(|s| !s.is_empty()).map(String::from))
                }
                Some(Value::Array(items)) => {
                    scopes.extend(items.iter().filter_map(Value::as_str).map(String::from))
                }
                _ => {}
            }
        }
        Self {
            source: Source::Oauth,
            scopes,
            claims,
        }
    }
}

/// A caller as rules see it.
#[derive(Clone, Copy, Debug)]
pub struct Who<'a> {
    /// The principal, when the caller has one.
    pub principal: Option<&'a str>,
    /// Its tenant.
    pub tenant: Option<&'a str>,
    /// Its credentials; `None` is a local caller with no scopes or claims.
    pub credentials: Option<&'a Credentials>,
}

impl Who<'_> {
    /// How the caller proved who it is.
    pub fn source(&self) -> Source {
        self.credentials.map(|c| c.source).unwrap_or_default()
    }

    /// Whether its token grants `scope`.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.credentials
            .is_some_and(|c| c.scopes.iter().any(|s| s == scope))
    }

    /// Whether its claim `name` is `value`, or a list holding `value`.
    pub fn has_claim(&self, name: &str, value: &str) -> bool {
        match self.credentials.and_then(|c| c.claims.get(name)) {
            Some(Value::String(text)) => text == value,
            Some(Value::Array(items)) => items.iter().any(|item| item.as_str() == Some(value)),
            Some(Value::Bool(b)) => value == if *b { "true" } else { "false" },
            Some(Value::Number(n)) => n.to_string() == value,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scopes_come_from_scope_and_scp() {
        let claims = json!({"scope": "tools:read  admin", "scp": ["billing"]});
        let credentials = Credentials::oauth(claims.as_object().unwrap().clone());
        assert_eq!(credentials.scopes, ["tools:read", "admin", "billing"]);
        assert_eq!(credentials.source, Source::Oauth);
    }

    #[test]
    fn claims_match_a_value_or_a_member_never_a_part() {
        let credentials = Credentials {
            claims: json!({"groups": ["support", "ops"], "dept": "sales", "admin": true})
                .as_object()
                .unwrap()
                .clone(),
            ..Credentials::new(Source::Oauth)
        };
        let who = Who {
            principal: Some("oauth:u1"),
            tenant: None,
            credentials: Some(&credentials),
        };
        assert!(who.has_claim("groups", "ops") && who.has_claim("dept", "sales"));
        assert!(who.has_claim("admin", "true"));
        assert!(!who.has_claim("groups", "supp") && !who.has_claim("dept", "sale"));
        assert!(!who.has_claim("missing", "x"));
        let local = Who {
            principal: None,
            tenant: None,
            credentials: None,
        };
        assert_eq!(local.source(), Source::Local);
        assert!(!local.has_scope("tools:read"));
    }
}
