//! MCP authorization for HTTP servers: the server is an OAuth 2.1 resource
//! server. It validates bearer JWTs against its issuer's keys (JWKS,
//! discovered from the issuer's metadata, cached, refetched when a token
//! names a key it does not know), publishes Protected Resource Metadata
//! (RFC 9728) and answers 401 with the `WWW-Authenticate` challenge that
//! points clients at it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use serde_json::{Value, json};

use super::identity::Identity;

/// Where Protected Resource Metadata is served.
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// Longest the issuer's metadata or keys take to arrive.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest metadata or key-set document read.
const MAX_DOCUMENT: usize = 1 << 20;
/// Keys are refetched at most this often for tokens naming unknown keys.
const REFETCH_EVERY: Duration = Duration::from_secs(30);
/// Keys older than this are refetched before use (rotation).
const KEYS_MAX_AGE: Duration = Duration::from_secs(600);
/// Clock skew allowed on `exp` and `nbf`.
const LEEWAY_SECS: u64 = 30;

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
    /// Scopes advertised in the metadata and the challenge.
    pub scopes: Vec<String>,
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
    /// The token is not one this server accepts.
    #[error("invalid token: {0}")]
    Invalid(String),
}

/// The keys of the issuer, when they were fetched, and when a fetch was last tried.
struct Keys {
    set: JwkSet,
    fetched: Instant,
    tried: Instant,
}

/// Validates bearer JWTs for one issuer and audience.
pub struct ResourceServer {
    options: OAuthOptions,
    jwks_url: String,
    http: reqwest::Client,
    keys: Mutex<Keys>,
    /// One fetch at a time.
    fetching: tokio::sync::Mutex<()>,
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
    /// fetches it; fails if either cannot be had.
    pub async fn start(options: OAuthOptions) -> Result<Self, OAuthError> {
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| OAuthError::Fetch {
                what: "anything",
                url: options.issuer.clone(),
                why: e.to_string(),
            })?;
        let jwks_url = match &options.jwks_url {
            Some(url) => url.clone(),
            None => discover(&http, &options.issuer).await?,
        };
        let set = fetch_keys(&http, &jwks_url).await?;
        let now = Instant::now();
        Ok(Self {
            options,
            jwks_url,
            http,
            keys: Mutex::new(Keys {
                set,
                fetched: now,
                // The first token naming a new key may fetch at once.
                tried: now.checked_sub(REFETCH_EVERY).unwrap_or(now),
            }),
            fetching: tokio::sync::Mutex::new(()),
        })
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
        let key = match self.key(&kid, header.alg) {
            Some(key) if !self.keys_are_old() => key,
            _ => {
                self.refetch().await;
                self.key(&kid, header.alg).ok_or_else(|| {
                    OAuthError::Invalid(format!(
                        "no key {kid:?} for {:?} in the issuer's key set",
                        header.alg
                    ))
                })?
            }
        };
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
        if let Some(issued) = claims["iat"].as_u64() {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            if issued > now.saturating_add(LEEWAY_SECS) {
                return Err(OAuthError::Invalid(
                    "the token was issued in the future (iat)".into(),
                ));
            }
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
        Ok(Identity {
            principal: Some(principal.to_string()),
            tenant,
        })
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

    /// The `WWW-Authenticate` value of a 401: where the metadata is, the
    /// scopes, and `error="invalid_token"` when a token was sent.
    pub fn challenge(&self, token_sent: bool) -> String {
        let metadata = format!("{}{METADATA_PATH}", origin_of(&self.options.audience));
        let mut challenge = format!("Bearer resource_metadata=\"{metadata}\"");
        if !self.options.scopes.is_empty() {
            challenge.push_str(&format!(", scope=\"{}\"", self.options.scopes.join(" ")));
        }
        if token_sent {
            challenge.push_str(", error=\"invalid_token\"");
        }
        challenge
    }

    /// The key `kid` of the cached set usable with `alg` (never an `oct` key).
    fn key(&self, kid: &str, alg: Algorithm) -> Option<DecodingKey> {
        let keys = self
            .keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let jwk = if kid.is_empty() {
            (keys.set.keys.len() == 1).then(|| &keys.set.keys[0])?
        } else {
            keys.set.find(kid)?
        };
        if matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_)) {
            return None;
        }
        if let Some(declared) = jwk.common.key_algorithm
            && Algorithm::try_from(declared).ok() != Some(alg)
        {
            return None;
        }
        DecodingKey::from_jwk(jwk).ok()
    }

    fn keys_are_old(&self) -> bool {
        let keys = self
            .keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        keys.fetched.elapsed() > KEYS_MAX_AGE
    }

    /// Fetches the key set again, at most every [`REFETCH_EVERY`]; a failed
    /// fetch keeps the keys there were.
    async fn refetch(&self) {
        let _one = self.fetching.lock().await;
        {
            let mut keys = self
                .keys
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if keys.tried.elapsed() < REFETCH_EVERY && keys.fetched.elapsed() <= KEYS_MAX_AGE {
                return;
            }
            keys.tried = Instant::now();
        }
        match fetch_keys(&self.http, &self.jwks_url).await {
            Ok(set) => {
                let mut keys = self
                    .keys
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                keys.set = set;
                keys.fetched = Instant::now();
            }
            Err(error) => tracing::warn!(%error, "keeping the issuer's keys fetched before"),
        }
    }
}

/// `scheme://host[:port]` of a URL.
fn origin_of(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |at| at + 3);
    match url[after_scheme..].find('/') {
        Some(at) => &url[..after_scheme + at],
        None => url,
    }
}

/// The key set's URL from the issuer's metadata: OAuth (RFC 8414), else OpenID.
async fn discover(http: &reqwest::Client, issuer: &str) -> Result<String, OAuthError> {
    let base = issuer.trim_end_matches('/');
    let mut last = String::new();
    for path in [
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
    ] {
        let url = format!("{base}{path}");
        match fetch_json(http, &url).await {
            Ok(metadata) => {
                if let Some(jwks) = metadata["jwks_uri"].as_str() {
                    return Ok(jwks.to_string());
                }
                last = format!("{url} names no jwks_uri");
            }
            Err(why) => last = format!("{url}: {why}"),
        }
    }
    Err(OAuthError::Fetch {
        what: "the issuer's metadata",
        url: issuer.to_string(),
        why: last,
    })
}

async fn fetch_keys(http: &reqwest::Client, url: &str) -> Result<JwkSet, OAuthError> {
    let fail = |why: String| OAuthError::Fetch {
        what: "the issuer's keys",
        url: url.to_string(),
        why,
    };
    let document = fetch_json(http, url).await.map_err(fail)?;
    serde_json::from_value(document).map_err(|e| fail(format!("not a JWK set: {e}")))
}

/// A JSON document of at most [`MAX_DOCUMENT`] bytes.
async fn fetch_json(http: &reqwest::Client, url: &str) -> Result<Value, String> {
    let mut response = http.get(url).send().await.map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("HTTP {}", response.status()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_DOCUMENT {
            return Err(format!("larger than {MAX_DOCUMENT} bytes"));
        }
    }
    serde_json::from_slice(&body).map_err(|e| format!("not JSON: {e}"))
}
