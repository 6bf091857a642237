//! The distribution API as the host speaks it to one registry: every URL and
//! address under the registry's [`rules`], the token flow in [`token`], and
//! every answer read under a cap, so a registry can make the host neither
//! go where it should not nor hold more than the documented sizes.

mod push;
mod rules;
mod token;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use reqwest::{Method, Response, StatusCode};
use serde::Deserialize;
use url::Url;

use crate::RegistryError;
use crate::credentials::Credentials;
pub(crate) use rules::Refusal;
use rules::{Resolver, Rules, redirect_policy};
use token::{Challenge, TokenError};

/// The most of an error answer read.
const MAX_ERROR_ANSWER: u64 = 16 << 10;

/// What one request is for: the repository and whether it writes.
#[derive(Clone, Copy)]
pub(crate) enum Access {
    Pull,
    Push,
}

/// What a request carries: the media types it accepts, or a body.
pub(crate) enum Body<'a> {
    Accept(&'a str),
    Bytes(&'a str, Bytes),
}

/// One registry's HTTP client.
pub(crate) struct Wire {
    http: reqwest::Client,
    rules: Arc<Rules>,
    base: String,
    /// The registry's own origin (scheme, host, port): the one credentials
    /// go to.
    origin: url::Origin,
    credentials: Credentials,
    timeout: Duration,
    /// `Authorization` values by scope, as the registry last accepted.
    authorizations: Mutex<HashMap<String, HeaderValue>>,
}

impl Wire {
    /// A client for `registry` (`host[:port]`), over plain HTTP when
    /// `insecure` (only ever a loopback registry).
    pub(crate) async fn new(
        registry: &str,
        insecure: bool,
        timeout: Duration,
        credentials: Credentials,
    ) -> Result<Self, reqwest::Error> {
        let rules = Arc::new(Rules::of(registry).await);
        let http = reqwest::Client::builder()
            .redirect(redirect_policy(rules.clone()))
            .dns_resolver(Arc::new(Resolver(rules.clone())))
            // A proxy would resolve names where the rules cannot see.
            .no_proxy()
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .read_timeout(timeout)
            .user_agent(concat!("wasm-agent/", env!("CARGO_PKG_VERSION")))
            .build()?;
        let scheme = if insecure { "http" } else { "https" };
        Ok(Self {
            http,
            rules,
            origin: format!("{scheme}://{registry}")
                .parse::<Url>()
                .map(|u| u.origin())
                .unwrap_or_else(|_| url::Origin::new_opaque()),
            base: format!("{scheme}://{registry}"),
            credentials,
            timeout,
            authorizations: Mutex::default(),
        })
    }

    /// `GET /v2/{path}` in `repository`, authorizing as the registry asks; a
    /// successful answer, or the registry's refusal as an error.
    pub(crate) async fn get(
        &self,
        reference: &str,
        repository: &str,
        path: &str,
        accept: &str,
    ) -> Result<Response, RegistryError> {
        let url = format!("{}/v2/{repository}/{path}", self.base);
        let scope = scope(repository, Access::Pull);
        self.send(reference, Method::GET, &url, &scope, Body::Accept(accept))
            .await
    }

    /// One request to the registry (or to a URL it named, checked by the
    /// rules), authorizing as a 401 asks: credentials and tokens go to the
    /// registry's own origin only.
    pub(crate) async fn send(
        &self,
        reference: &str,
        method: Method,
        url: &str,
        scope: &str,
        body: Body<'_>,
    ) -> Result<Response, RegistryError> {
        let parsed: Url = url.parse().map_err(|e| RegistryError::Registry {
            reference: reference.to_string(),
            reason: format!("the registry named an unusable URL: {e}"),
        })?;
        self.rules
            .check_url(&parsed)
            .map_err(|refusal| RegistryError::Refused {
                reference: reference.to_string(),
                reason: refusal.0,
            })?;
        let own = parsed.origin() == self.origin;
        let mut authorization = own.then(|| self.authorization(scope)).flatten();
        let mut asked = false;
        loop {
            let mut request = self.http.request(method.clone(), parsed.clone());
            request = match &body {
                Body::Accept(accept) => request.header(ACCEPT, *accept),
                Body::Bytes(content_type, bytes) => request
                    .header(CONTENT_TYPE, *content_type)
                    .body(bytes.clone()),
            };
            if let Some(value) = &authorization {
                request = request.header(AUTHORIZATION, value.clone());
            }
            let response = request
                .send()
                .await
                .map_err(|e| self.request_error(reference, &e))?;
            if response.status() == StatusCode::UNAUTHORIZED && own && !asked {
                asked = true;
                if let Some(value) = self.authorize(reference, &response, scope).await? {
                    authorization = Some(value);
                    continue;
                }
            }
            return self.successful(reference, response).await;
        }
    }

    /// Whether the registry's name resolved when the rules were made (a
    /// client made without an answer is made again next time).
    pub(crate) fn resolved(&self) -> bool {
        self.rules.resolved
    }

    /// The registry's base, `https://HOST[:PORT]`.
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    fn authorization(&self, scope: &str) -> Option<HeaderValue> {
        if let Some(value) = self.authorizations.lock().expect("not poisoned").get(scope) {
            return Some(value.clone());
        }
        match &self.credentials {
            // An identity token from a Docker login is sent as a bearer token.
            Credentials::Token(token) => sensitive(&format!("Bearer {token}")),
            _ => None,
        }
    }

    /// The `Authorization` a 401 asks for, when the host has it.
    async fn authorize(
        &self,
        reference: &str,
        response: &Response,
        scope: &str,
    ) -> Result<Option<HeaderValue>, RegistryError> {
        let value = match token::challenge(response.headers()) {
            Challenge::Bearer { realm, service } => {
                let token = self
                    .token(reference, &realm, service.as_deref(), scope)
                    .await?;
                sensitive(&format!("Bearer {token}"))
            }
            Challenge::Basic => match &self.credentials {
                Credentials::Basic { username, password } => {
                    use base64::Engine;
                    let pair = format!("{username}:{password}");
                    let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
                    sensitive(&format!("Basic {encoded}"))
                }
                _ => None,
            },
            Challenge::None => None,
        };
        if let Some(value) = &value {
            self.authorizations
                .lock()
                .expect("not poisoned")
                .insert(scope.to_string(), value.clone());
        }
        Ok(value)
    }

    async fn token(
        &self,
        reference: &str,
        realm: &str,
        service: Option<&str>,
        scope: &str,
    ) -> Result<String, RegistryError> {
        token::fetch(
            &self.http,
            &self.rules,
            realm,
            service,
            scope,
            &self.credentials,
        )
        .await
        .map_err(|e| match e {
            TokenError::Refused(refusal) => RegistryError::Refused {
                reference: reference.to_string(),
                reason: refusal.0,
            },
            TokenError::Denied(reason) => RegistryError::Unauthorized {
                reference: reference.to_string(),
                reason,
            },
            TokenError::Failed(reason) => RegistryError::Unauthorized {
                reference: reference.to_string(),
                reason: format!("no token from the realm: {reason}"),
            },
        })
    }

    /// A 2xx answer, or the registry's error as the host's.
    async fn successful(
        &self,
        reference: &str,
        response: Response,
    ) -> Result<Response, RegistryError> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body = read_capped(response, MAX_ERROR_ANSWER)
            .await
            .unwrap_or_default();
        let codes = error_codes(&body);
        let has = |code: &str| codes.iter().any(|c| c == code);
        let reference = reference.to_string();
        Err(if has("NAME_UNKNOWN") {
            RegistryError::NotFound {
                reference,
                what: "repository",
            }
        } else if has("MANIFEST_UNKNOWN") || has("BLOB_UNKNOWN") || status == 404 {
            let what = if reference.contains("@sha256:") {
                "digest"
            } else {
                "tag"
            };
            RegistryError::NotFound { reference, what }
        } else if status == 401 || status == 403 || has("UNAUTHORIZED") || has("DENIED") {
            RegistryError::Unauthorized {
                reference,
                reason: excerpt(status, &body),
            }
        } else {
            RegistryError::Registry {
                reference,
                reason: excerpt(status, &body),
            }
        })
    }

    /// A failed request as the host's error: a refusal by the rules, the
    /// deadline, or the registry out of reach.
    pub(crate) fn request_error(&self, reference: &str, error: &reqwest::Error) -> RegistryError {
        let mut source: Option<&dyn std::error::Error> = Some(error);
        while let Some(cause) = source {
            if let Some(refusal) = cause.downcast_ref::<Refusal>() {
                return RegistryError::Refused {
                    reference: reference.to_string(),
                    reason: refusal.0.clone(),
                };
            }
            source = cause.source();
        }
        if error.is_timeout() {
            return RegistryError::Deadline {
                reference: reference.to_string(),
                after: self.timeout,
            };
        }
        RegistryError::Unreachable {
            reference: reference.to_string(),
            reason: describe(error),
        }
    }
}

/// `repository:NAME:pull` (or `pull,push`).
fn scope(repository: &str, access: Access) -> String {
    match access {
        Access::Pull => format!("repository:{repository}:pull"),
        Access::Push => format!("repository:{repository}:pull,push"),
    }
}

fn sensitive(text: &str) -> Option<HeaderValue> {
    let mut value = HeaderValue::from_str(text).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// Why a capped read stopped.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// Over the cap: the size declared or received so far.
    TooLarge(u64),
    /// The answer broke off.
    Broken(reqwest::Error),
}

/// An answer's body, at most `limit` bytes: refused by its declared length
/// before any of it is read, or as soon as it passes the limit.
pub(crate) async fn read_capped(mut response: Response, limit: u64) -> Result<Vec<u8>, ReadError> {
    if let Some(length) = response.content_length()
        && length > limit
    {
        return Err(ReadError::TooLarge(length));
    }
    let mut body = Vec::new();
    while let Some(piece) = response.chunk().await.map_err(ReadError::Broken)? {
        if (body.len() + piece.len()) as u64 > limit {
            return Err(ReadError::TooLarge((body.len() + piece.len()) as u64));
        }
        body.extend_from_slice(&piece);
    }
    Ok(body)
}

/// The codes of a distribution-API error body.
fn error_codes(body: &[u8]) -> Vec<String> {
    #[derive(Deserialize)]
    struct Envelope {
        errors: Vec<Entry>,
    }
    #[derive(Deserialize)]
    struct Entry {
        code: String,
    }
    serde_json::from_slice::<Envelope>(body)
        .map(|e| e.errors.into_iter().map(|e| e.code).collect())
        .unwrap_or_default()
}

/// `HTTP 500: first line of the body`, shortened and redacted.
pub(crate) fn excerpt(status: StatusCode, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let line = text.lines().next().unwrap_or("").trim();
    let line = wasm_agent_redact::text(line);
    if line.is_empty() {
        format!("HTTP {}", status.as_u16())
    } else {
        format!("HTTP {}: {}", status.as_u16(), crate::shorten(&line))
    }
}

/// A reqwest error and its causes on one line, without its URL (which may
/// carry a signed query).
pub(crate) fn describe(error: &reqwest::Error) -> String {
    let mut text = String::new();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.contains(&part) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&part);
        }
        source = cause.source();
    }
    if text.is_empty() {
        text = "the request failed".into();
    }
    wasm_agent_redact::text(&text).into_owned()
}
