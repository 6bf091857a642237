//! MCP authorization for HTTP servers: the server is an OAuth 2.1 resource
//! server. It validates bearer JWTs against its issuer's keys (JWKS,
//! discovered from the issuer's metadata, cached, refetched when a token
//! names a key it does not know), publishes Protected Resource Metadata
//! (RFC 9728) and answers 401 with the `WWW-Authenticate` challenge that
//! points clients at it.

mod keys;

use std::time::Duration;

use jsonwebtoken::{Algorithm, Validation, decode, decode_header};
use serde_json::{Value, json};

use super::identity::Identity;
use keys::{KeySet, require_secure};

/// Where Protected Resource Metadata is served.
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// Longest the issuer's metadata or keys take to arrive.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Clock skew allowed on `exp`, `nbf` and `iat`.
const LEEWAY_SECS: u64 = 30;
/// What an issuer's principals start with, so that none is taken for a
/// tokens-file principal of the same name.
pub const ISSUER_PRINCIPAL_PREFIX: &str = "oauth:";

/// How the server checks tokens (`--auth-issuer` and the flags beside it).
#[derive(Clone, Debug)]
pub struct OAuthOptions {
    /// The authorization server's issuer identifier (`iss`).
    pub issuer: String,
    /// The audience tokens must name (`aud`): this server's resource URL.
    pub audience: String,
    /// The claim that names the tenant, if tenants come from tokens.
    pub tenant_claim: Option<String>,
    /// The key set's URL; by default discovered from the issuer's metadata.
    pub jwks_url: Option<String>,
    /// Scopes every token must grant (`scope` or `scp` claim), advertised
    /// in the metadata and the challenge.
    pub scopes: Vec<String>,
    /// Keys fetched longer ago than this are not used (refreshed before,
    /// at half this age or every 10 minutes, whichever is sooner).
    pub keys_max_age: Duration,
}

/// Why a token was refused (the message goes to the log, never to the client).
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    /// The issuer's metadata or keys could not be fetched.
    #[error("cannot fetch {what} from {url}: {why}")]
    Fetch {
        /// What was being fetched.
        what: &'static str,
        /// From where.
        url: String,
        /// Why it failed.
        why: String,
    },
    /// The issuer or its keys would come over an insecure channel.
    #[error("{what} {url} is refused: {why}")]
    Insecure {
        /// What the URL is for.
        what: &'static str,
        /// The URL.
        url: String,
        /// Why it is refused.
        why: String,
    },
    /// The options cannot describe a resource server.
    #[error("{0}")]
    Options(String),
    /// The token is not one this server accepts.
    #[error("invalid token: {0}")]
    Invalid(String),
    /// The token is valid but does not grant every scope the server requires.
    #[error("the token does not grant scope {0:?}")]
    Scope(String),
}

/// Validates bearer JWTs for one issuer and audience.
pub struct ResourceServer {
    options: OAuthOptions,
    keys: KeySet,
}

impl std::fmt::Debug for ResourceServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceServer")
            .field("issuer", &self.options.issuer)
            .field("audience", &self.options.audience)
            .finish_non_exhaustive()
    }
}

impl ResourceServer {
    /// Discovers the issuer's key set (unless `jwks_url` names it) and
    /// fetches it; fails if either cannot be had, or would come other than
    /// over https (or plain http to loopback).
    pub async fn start(options: OAuthOptions) -> Result<Self, OAuthError> {
        require_secure("the issuer", &options.issuer)?;
        if options
            .scopes
            .iter()
            .any(|s| s.is_empty() || s.contains(' '))
        {
            return Err(OAuthError::Options(
                "--auth-scope takes one scope, not empty and without spaces".into(),
            ));
        }
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| OAuthError::Fetch {
                what: "anything",
                url: options.issuer.clone(),
                why: e.to_string(),
            })?;
        let keys = KeySet::start(
            http,
            &options.issuer,
            options.jwks_url.as_deref(),
            options.keys_max_age,
        )
        .await?;
        Ok(Self { options, keys })
    }

    /// The identity a valid token names: `sub` as principal, the tenant
    /// claim as tenant.
    pub async fn identify(&self, token: &str) -> Result<Identity, OAuthError> {
        let header = decode_header(token).map_err(|e| OAuthError::Invalid(e.to_string()))?;
        if matches!(
            header.alg,
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
        ) {
            return Err(OAuthError::Invalid(
                "shared-secret (HS*) tokens are not accepted".into(),
            ));
        }
        let kid = header.kid.clone().unwrap_or_default();
        let key = self.keys.key(&kid, header.alg).await?;
        let mut validation = Validation::new(header.alg);
        validation.leeway = LEEWAY_SECS;
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.options.issuer]);
        validation.set_audience(&[&self.options.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let claims = decode::<Value>(token, &key, &validation)
            .map_err(|e| OAuthError::Invalid(e.to_string()))?
            .claims;
        // Not refused by the library: a token issued in the future (a clock
        // far off, or one minted to outlive its key's rotation).
        if let Some(issued) = claims["iat"].as_f64() {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            if issued > now + LEEWAY_SECS as f64 {
                return Err(OAuthError::Invalid(
                    "the token was issued in the future (iat)".into(),
                ));
            }
        }
        if let Some(missing) = self
            .options
            .scopes
            .iter()
            .find(|scope| !grants(&claims, scope))
        {
            return Err(OAuthError::Scope(missing.clone()));
        }
        let principal = claims["sub"].as_str().filter(|s| !s.is_empty());
        let principal =
            principal.ok_or_else(|| OAuthError::Invalid("`sub` is not a string".into()))?;
        let tenant = match &self.options.tenant_claim {
            None => None,
            Some(claim) => Some(
                claims[claim.as_str()]
                    .as_str()
                    .filter(|s| !s.is_empty())
                    .ok_or_else(|| OAuthError::Invalid(format!("no tenant claim {claim:?}")))?
                    .to_string(),
            ),
        };
        let principal = format!("{ISSUER_PRINCIPAL_PREFIX}{principal}");
        let claims = match claims {
            Value::Object(claims) => claims,
            _ => Default::default(),
        };
        Ok(Identity {
            principal: Some(principal),
            tenant,
            credentials: std::sync::Arc::new(wasm_agent_access::Credentials::oauth(claims)),
        })
    }

    /// The issuer and audience tokens must name (`iss`, `aud`).
    pub fn issuer_and_audience(&self) -> (&str, &str) {
        (&self.options.issuer, &self.options.audience)
    }

    /// The Protected Resource Metadata document (RFC 9728).
    pub fn metadata(&self) -> Value {
        let mut metadata = json!({
            "resource": self.options.audience,
            "authorization_servers": [self.options.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "wasm-agent",
        });
        if !self.options.scopes.is_empty() {
            metadata["scopes_supported"] = json!(self.options.scopes);
        }
        metadata
    }

    /// The `WWW-Authenticate` value of a 401 or 403 (RFC 6750): where the
    /// metadata is, the scopes, and the error when a token was sent.
    pub fn challenge(&self, error: Option<&str>) -> String {
        let metadata = format!("{}{METADATA_PATH}", origin_of(&self.options.audience));
        let mut challenge = format!("Bearer resource_metadata=\"{metadata}\"");
        if !self.options.scopes.is_empty() {
            challenge.push_str(&format!(", scope=\"{}\"", self.options.scopes.join(" ")));
        }
        if let Some(error) = error {
            challenge.push_str(&format!(", error=\"{error}\""));
        }
        challenge
    }
}

/// Whether the token's `scope` (space-separated) or `scp` (a list, or
/// space-separated) claim grants `scope`.
fn grants(claims: &Value, scope: &str) -> bool {
    let listed = |value: &Value| match value {
        Value::String(text) => text.split(' ').any(|s| s == scope),
        Value::Array(items) => items.iter().any(|item| item.as_str() == Some(scope)),
        _ => false,
    };
    listed(&claims["scope"]) || listed(&claims["scp"])
}

/// `scheme://host[:port]` of a URL.
fn origin_of(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |at| at + 3);
    match url[after_scheme..].find('/') {
        Some(at) => &url[..after_scheme + at],
        None => url,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(scopes: &[&str]) -> OAuthOptions {
        OAuthOptions {
            issuer: "https://issuer.example.com".into(),
            audience: "https://tools.example.com/mcp".into(),
            tenant_claim: None,
            jwks_url: None,
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            keys_max_age: Duration::from_secs(3600),
        }
    }

    #[tokio::test]
    async fn an_empty_or_spaced_scope_is_refused_before_anything_is_fetched() {
        for scopes in [&[""][..], &["tools read"]] {
            let error = ResourceServer::start(options(scopes)).await.unwrap_err();
            assert!(
                error.to_string().contains("--auth-scope takes one scope"),
                "{error}"
            );
        }
    }

    #[test]
    fn scopes_are_granted_by_scope_or_scp_and_only_whole() {
        let claims = json!({"scope": "openid  tools", "scp": ["admin"]});
        assert!(grants(&claims, "tools") && grants(&claims, "admin"));
        assert!(!grants(&claims, "tool") && !grants(&claims, "open"));
        assert!(!grants(&json!({"scope": 7}), "tools"));
    }
}
