//! The issuer's signing keys: found through its metadata, fetched only over
//! https (plain http to loopback alone), refreshed as they age, fetched
//! again with growing pauses while the issuer fails, and never used past
//! their maximum age.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;

use super::OAuthError;

/// Largest metadata or key-set document read.
const MAX_DOCUMENT: usize = 1 << 20;
/// After a good fetch, a token naming an unknown key fetches again at most this often.
const REFETCH_EVERY: Duration = Duration::from_secs(30);
/// Keys are refreshed at least this often (sooner when their maximum age is short).
const REFRESH_EVERY: Duration = Duration::from_secs(600);
/// The first pause after a failed fetch; each failure doubles it.
const FIRST_BACKOFF: Duration = Duration::from_secs(5);
/// The longest pause between fetches while the issuer fails.
const LAST_BACKOFF: Duration = Duration::from_secs(300);

/// The keys fetched last, and when the next fetch may be tried.
struct Fetched {
    set: JwkSet,
    at: Instant,
    next_try: Instant,
    failures: u32,
}

/// The issuer's key set, kept fresh.
pub(super) struct KeySet {
    http: reqwest::Client,
    url: String,
    max_age: Duration,
    fetched: Mutex<Fetched>,
    /// One fetch at a time.
    fetching: tokio::sync::Mutex<()>,
}

impl KeySet {
    /// Finds the key set's URL (unless `jwks_url` names it) and fetches it.
    pub async fn start(
        http: reqwest::Client,
        issuer: &str,
        jwks_url: Option<&str>,
        max_age: Duration,
    ) -> Result<Self, OAuthError> {
        let url = match jwks_url {
            Some(url) => url.to_string(),
            None => discover(&http, issuer).await?,
        };
        require_secure("the key set's URL", &url)?;
        let set = fetch_keys(&http, &url).await?;
        let now = Instant::now();
        Ok(Self {
            http,
            url,
            max_age,
            fetched: Mutex::new(Fetched {
                set,
                at: now,
                next_try: now,
                failures: 0,
            }),
            fetching: tokio::sync::Mutex::new(()),
        })
    }

    /// The key `kid` usable with `alg`, fetching the set first when it is
    /// due for a refresh or does not hold that key (and a fetch may be tried).
    pub async fn key(&self, kid: &str, alg: Algorithm) -> Result<DecodingKey, OAuthError> {
        match self.lookup(kid, alg) {
            Lookup::Found(key) => return Ok(key),
            Lookup::Due(_) | Lookup::Missing | Lookup::TooOld => self.refresh().await,
        }
        match self.lookup(kid, alg) {
            Lookup::Found(key) | Lookup::Due(key) => Ok(key),
            Lookup::Missing => Err(OAuthError::Invalid(format!(
                "no key {kid:?} for {alg:?} in the issuer's key set"
            ))),
            Lookup::TooOld => Err(OAuthError::Invalid(format!(
                "the issuer's keys are older than {} and cannot be fetched again now",
                humantime::format_duration(self.max_age)
            ))),
        }
    }

    fn lookup(&self, kid: &str, alg: Algorithm) -> Lookup {
        let fetched = self.fetched.lock().unwrap_or_else(|e| e.into_inner());
        let age = fetched.at.elapsed();
        if age > self.max_age {
            return Lookup::TooOld;
        }
        match find(&fetched.set, kid, alg) {
            None => Lookup::Missing,
            Some(key) if age > REFRESH_EVERY.min(self.max_age / 2) => Lookup::Due(key),
            Some(key) => Lookup::Found(key),
        }
    }

    /// Fetches the set again unless a fetch was tried too recently; a
    /// failed fetch keeps the keys there were and pauses fetching longer.
    async fn refresh(&self) {
        let _one = self.fetching.lock().await;
        if Instant::now() < self.lock().next_try {
            return;
        }
        let result = fetch_keys(&self.http, &self.url).await;
        let mut fetched = self.lock();
        let now = Instant::now();
        match result {
            Ok(set) => {
                *fetched = Fetched {
                    set,
                    at: now,
                    next_try: now + REFETCH_EVERY,
                    failures: 0,
                }
            }
            Err(error) => {
                fetched.failures = fetched.failures.saturating_add(1);
                let pause = FIRST_BACKOFF
                    .saturating_mul(1 << (fetched.failures - 1).min(16))
                    .min(LAST_BACKOFF);
                fetched.next_try = now + pause;
                tracing::warn!(
                    %error,
                    failures = fetched.failures,
                    next_try_in = %humantime::format_duration(pause),
                    "keeping the issuer's keys fetched before"
                );
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Fetched> {
        self.fetched.lock().unwrap_or_else(|e| e.into_inner())
    }
}

enum Lookup {
    Found(DecodingKey),
    /// Found, but the set is due for a refresh.
    Due(DecodingKey),
    Missing,
    TooOld,
}

/// The key `kid` of `set` usable with `alg` (never an `oct` key); with no
/// `kid`, the set's only key.
fn find(set: &JwkSet, kid: &str, alg: Algorithm) -> Option<DecodingKey> {
    let jwk = if kid.is_empty() {
        (set.keys.len() == 1).then(|| &set.keys[0])?
    } else {
        set.find(kid)?
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

/// Refuses a URL keys or metadata would come from unless it is https, or
/// plain http to this machine's loopback.
pub(super) fn require_secure(what: &'static str, text: &str) -> Result<(), OAuthError> {
    let refuse = |why: &str| {
        Err(OAuthError::Insecure {
            what,
            url: text.to_string(),
            why: why.to_string(),
        })
    };
    let Ok(url) = url::Url::parse(text) else {
        return refuse("it is not a URL");
    };
    let loopback = match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        "http" => refuse("plain http is accepted only to loopback; use https"),
        _ => refuse("only https is accepted"),
    }
}

/// The key set's URL from the issuer's metadata (RFC 8414, else OpenID
/// discovery), whose `issuer` must be the configured issuer exactly.
async fn discover(http: &reqwest::Client, issuer: &str) -> Result<String, OAuthError> {
    let base = issuer.trim_end_matches('/');
    let mut last = String::new();
    for path in [
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
    ] {
        let url = format!("{base}{path}");
        let metadata = match fetch_json(http, &url).await {
            Ok(metadata) => metadata,
            Err(why) => {
                last = format!("{url}: {why}");
                continue;
            }
        };
        if metadata["issuer"].as_str() != Some(issuer) {
            return Err(OAuthError::Fetch {
                what: "the issuer's metadata",
                url,
                why: format!(
                    "it names issuer {} where {issuer:?} is configured; \
                     they must be the same (RFC 8414 section 3.3)",
                    metadata["issuer"]
                ),
            });
        }
        match metadata["jwks_uri"].as_str() {
            Some(jwks) => return Ok(jwks.to_string()),
            None => last = format!("{url} names no jwks_uri"),
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

#[cfg(test)]
mod tests {
    use super::require_secure;

    #[test]
    fn keys_come_over_https_or_loopback_only() {
        for good in [
            "https://issuer.example.com",
            "http://127.0.0.1:8080/keys",
            "http://[::1]/keys",
            "http://localhost:9000",
        ] {
            assert!(require_secure("issuer", good).is_ok(), "{good}");
        }
        for bad in [
            "http://issuer.example.com",
            "http://10.0.0.5/keys",
            "http://evil.example\\@127.0.0.1/",
            "ftp://127.0.0.1/keys",
            "not a url",
        ] {
            assert!(require_secure("issuer", bad).is_err(), "{bad}");
        }
    }
}
