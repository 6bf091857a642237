//! The checks every HTTP request passes before MCP sees it: the path, the
//! `Host` and `Origin` headers (against DNS rebinding) and the bearer token.

use std::net::{IpAddr, SocketAddr};

use super::body::{Body, json, plain};
use super::identity::{Identity, TokenTable, digest};
use super::oauth::{METADATA_PATH, OAuthError, ResourceServer};
use super::options::{HttpOptions, MCP_PATH};
use http::{HeaderMap, Request, Response, StatusCode, Uri, header};

/// `Host` names always accepted (any port).
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];
/// Browser origins always accepted.
const LOOPBACK_ORIGINS: [&str; 3] = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

const UNAUTHORIZED: &str =
    "unauthorized: send a token of this server as `Authorization: Bearer <token>`";

/// Why a request's credentials establish no identity.
enum Refusal {
    NoToken,
    InvalidToken,
    /// A good token of the issuer's, short of a scope the server requires.
    InsufficientScope,
}

/// Refuses requests that are not for this server.
pub(crate) struct Gate {
    token_digest: Option<[u8; 32]>,
    tokens: Option<std::sync::Arc<TokenTable>>,
    oauth: Option<std::sync::Arc<ResourceServer>>,
    /// Lowercased names, with the one port accepted if any.
    hosts: Vec<(String, Option<u16>)>,
    origins: Vec<AllowedOrigin>,
}

impl Gate {
    pub fn new(options: &HttpOptions) -> Self {
        let mut hosts = Vec::new();
        let named = options.hosts.iter().map(String::as_str);
        for host in LOOPBACK_HOSTS.into_iter().chain(named) {
            match split_authority(&host.to_ascii_lowercase()) {
                Some((name, port)) => hosts.push((name.to_string(), port)),
                None => tracing::warn!(
                    host = %host,
                    "ignoring an allowed Host that is not name[:port] or [ipv6][:port]"
                ),
            }
        }
        let mut origins: Vec<AllowedOrigin> = LOOPBACK_ORIGINS
            .iter()
            .filter_map(|origin| AllowedOrigin::parse(origin))
            .collect();
        for origin in &options.origins {
            match AllowedOrigin::parse(origin) {
                Some(allowed) => origins.push(allowed),
                None => tracing::warn!(
                    origin = %origin,
                    "ignoring an allowed origin that is not scheme://host[:port|:*] or null"
                ),
            }
        }
        Self {
            token_digest: options.token.as_deref().map(digest),
            tokens: options.tokens.clone(),
            oauth: options.oauth.clone(),
            hosts,
            origins,
        }
    }

    /// Who sent `request`, or the response refusing it.
    pub async fn admit<B>(&self, request: &Request<B>) -> Result<Identity, Box<Response<Body>>> {
        if let Some(refusal) = self.refuse(request) {
            return Err(Box::new(refusal));
        }
        if self.token_digest.is_none() && self.tokens.is_none() && self.oauth.is_none() {
            return Ok(Identity::default());
        }
        match bearer_token(request.headers()) {
            Some(token) => self.identify(token).await,
            None => Err(Refusal::NoToken),
        }
        .map_err(|refusal| Box::new(self.refusal(refusal)))
    }

    /// The identity `token` establishes, or why it establishes none.
    async fn identify(&self, token: &str) -> Result<Identity, Refusal> {
        if let Some(identity) = self.tokens.as_ref().and_then(|t| t.identify(token)) {
            return Ok(identity.clone());
        }
        // Digests are compared, so the time taken says nothing about the token.
        if self.token_digest == Some(digest(token)) {
            return Ok(Identity::default());
        }
        let Some(oauth) = &self.oauth else {
            return Err(Refusal::InvalidToken);
        };
        oauth.identify(token).await.map_err(|error| {
            tracing::debug!(%error, "refusing a bearer token");
            match error {
                OAuthError::Scope(_) => Refusal::InsufficientScope,
                _ => Refusal::InvalidToken,
            }
        })
    }

    /// The Protected Resource Metadata, for its path, when tokens come from an issuer.
    pub fn metadata<B>(&self, request: &Request<B>) -> Option<Response<Body>> {
        let oauth = self.oauth.as_ref()?;
        let path = request.uri().path();
        let suffixed = path.strip_prefix(METADATA_PATH) == Some(MCP_PATH);
        if path != METADATA_PATH && !suffixed {
            return None;
        }
        Some(json(&oauth.metadata()))
    }

    /// A 401 (or 403 for a token short of a scope) with the challenge that
    /// tells the client how to get a token that will do (RFC 6750).
    fn refusal(&self, refusal: Refusal) -> Response<Body> {
        let (status, text, error) = match refusal {
            Refusal::NoToken => (StatusCode::UNAUTHORIZED, UNAUTHORIZED, None),
            Refusal::InvalidToken => (
                StatusCode::UNAUTHORIZED,
                UNAUTHORIZED,
                Some("invalid_token"),
            ),
            Refusal::InsufficientScope => (
                StatusCode::FORBIDDEN,
                "forbidden: the token does not grant the scope this server requires",
                Some("insufficient_scope"),
            ),
        };
        let mut response = plain(status, text);
        let challenge = match &self.oauth {
            Some(oauth) => oauth.challenge(error),
            None => "Bearer".to_string(),
        };
        if let Ok(value) = header::HeaderValue::from_str(&challenge) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }

    /// The response refusing `request` before its credentials are looked at.
    fn refuse<B>(&self, request: &Request<B>) -> Option<Response<Body>> {
        if request.uri().path() != MCP_PATH {
            return Some(plain(
                StatusCode::NOT_FOUND,
                &format!("not found: the MCP endpoint is {MCP_PATH}"),
            ));
        }
        self.refuse_foreign(request)
    }

    /// The 403 for a request whose `Host` or `Origin` this server does not
    /// answer for (a DNS-rebinding or cross-site page); requests without an
    /// `Origin` (not from a browser) pass the second check.
    pub(crate) fn refuse_foreign<B>(&self, request: &Request<B>) -> Option<Response<Body>> {
        if let Some(refusal) = self.refuse_host(request) {
            return Some(refusal);
        }
        let headers = request.headers();
        if let Some(origin) = headers.get(header::ORIGIN) {
            let allowed = origin
                .to_str()
                .ok()
                .and_then(Origin::parse)
                .is_some_and(|origin| self.origins.iter().any(|a| a.matches(&origin)));
            if !allowed {
                return Some(plain(
                    StatusCode::FORBIDDEN,
                    "forbidden: requests from this Origin are not accepted \
                     (allow one with --allow-origin)",
                ));
            }
        }
        None
    }

    /// The 403 for a request whose `Host` names no host this server answers
    /// for (a DNS-rebinding page); `/mcp` and `/metrics` are checked alike.
    pub fn refuse_host<B>(&self, request: &Request<B>) -> Option<Response<Body>> {
        let local = request.extensions().get::<LocalAddr>().map(|l| l.0);
        if self.host_allowed(request.uri(), request.headers(), local) {
            return None;
        }
        Some(plain(
            StatusCode::FORBIDDEN,
            "forbidden: the Host header names no host this server answers for \
             (allow one with --allow-host-header)",
        ))
    }

    /// Whether the `Host` names a host this server answers for: a loopback
    /// name or one allowed, or the very address the connection came in on
    /// (a client that dialled the IP; a rebinding page sends its own name).
    fn host_allowed(&self, uri: &Uri, headers: &HeaderMap, local: Option<SocketAddr>) -> bool {
        let authority = match uri.authority() {
            Some(authority) => Some(authority.as_str()),
            None => headers.get(header::HOST).and_then(|h| h.to_str().ok()),
        };
        let Some(authority) = authority.map(str::to_ascii_lowercase) else {
            return false;
        };
        let Some((name, port)) = split_authority(&authority) else {
            return false;
        };
        let dialled = local.is_some_and(|local| {
            let ip = name.trim_start_matches('[').trim_end_matches(']');
            ip.parse::<IpAddr>() == Ok(local.ip()) && port.is_none_or(|port| port == local.port())
        });
        dialled
            || self.hosts.iter().any(|(allowed, only)| {
                allowed == name && only.is_none_or(|only| Some(only) == port)
            })
    }
}

/// The address a connection was accepted on, put on each of its requests.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LocalAddr(pub SocketAddr);

/// A `host[:port]` authority, split strictly: an IPv6 address in brackets
/// (kept), a port of digits; `None` for anything else.
fn split_authority(authority: &str) -> Option<(&str, Option<u16>)> {
    let (host, port) = if authority.starts_with('[') {
        let (host, rest) = authority.split_at(authority.find(']')? + 1);
        match rest {
            "" => (host, None),
            rest => (host, Some(rest.strip_prefix(':')?)),
        }
    } else {
        match authority.split_once(':') {
            None => (authority, None),
            Some((host, port)) => (host, Some(port)),
        }
    };
    if host.is_empty() || host == "[]" {
        return None;
    }
    let port = match port {
        None => None,
        Some(port) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            Some(port.parse().ok()?)
        }
        Some(_) => return None,
    };
    Some((host, port))
}

/// A browser origin: scheme, host and port (the scheme's default if none).
#[derive(Debug, PartialEq)]
enum Origin {
    Tuple {
        scheme: String,
        host: String,
        port: Option<u16>,
    },
    /// `Origin: null` (sandboxed frames, files).
    Null,
}

impl Origin {
    fn parse(text: &str) -> Option<Self> {
        let text = text.trim().to_ascii_lowercase();
        if text == "null" {
            return Some(Self::Null);
        }
        let (scheme, rest) = text.split_once("://")?;
        if rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
            return None;
        }
        let (host, port) = split_authority(rest)?;
        let port = port.or_else(|| default_port(scheme));
        Some(Self::Tuple {
            scheme: scheme.to_string(),
            host: host.to_string(),
            port,
        })
    }
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

/// An accepted origin; `scheme://host:*` accepts any port.
#[derive(Debug)]
struct AllowedOrigin {
    origin: Origin,
    any_port: bool,
}

impl AllowedOrigin {
    fn parse(text: &str) -> Option<Self> {
        match text.strip_suffix(":*") {
            Some(base) => Some(Self {
                origin: Origin::parse(base).filter(|o| *o != Origin::Null)?,
                any_port: true,
            }),
            None => Some(Self {
                origin: Origin::parse(text)?,
                any_port: false,
            }),
        }
    }

    fn matches(&self, origin: &Origin) -> bool {
        match (&self.origin, origin) {
            (Origin::Null, Origin::Null) => true,
            (
                Origin::Tuple { scheme, host, port },
                Origin::Tuple {
                    scheme: s,
                    host: h,
                    port: p,
                },
            ) => scheme == s && host == h && (self.any_port || port == p),
            _ => false,
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header (scheme in any case).
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(hosts: &[&str], origins: &[&str]) -> Gate {
        Gate::new(&HttpOptions {
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            origins: origins.iter().map(|o| o.to_string()).collect(),
            ..HttpOptions::default()
        })
    }

    fn request(host: &str, origin: Option<&str>) -> Request<()> {
        let mut request = Request::post(MCP_PATH).header(header::HOST, host);
        if let Some(origin) = origin {
            request = request.header(header::ORIGIN, origin);
        }
        request.body(()).unwrap()
    }

    fn block<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(future)
    }

    fn status(gate: &Gate, host: &str, origin: Option<&str>) -> Option<StatusCode> {
        block(gate.admit(&request(host, origin)))
            .err()
            .map(|r| r.status())
    }

    #[test]
    fn loopback_and_allowed_hosts_pass_with_any_port() {
        let gate = gate(&["Tools.Example", "pinned.example:8443"], &[]);
        for host in [
            "localhost",
            "localhost:1234",
            "127.0.0.1:80",
            "[::1]:9",
            "tools.example:1",
            "TOOLS.example",
            "pinned.example:8443",
        ] {
            assert_eq!(status(&gate, host, None), None, "{host}");
        }
        for host in [
            "evil.example",
            "127.0.0.1.evil.example",
            "10.0.0.1:80",
            "pinned.example:8444",
            "pinned.example",
            "localhost.:80",
            "[::2]:80",
            "[::1]x",
            "::1:80",
            "localhost:",
            "localhost:+80",
            "pinned.example:8443:1",
            "",
        ] {
            assert_eq!(
                status(&gate, host, None),
                Some(StatusCode::FORBIDDEN),
                "{host}"
            );
        }
    }

    #[test]
    fn origins_match_scheme_host_and_port() {
        let gate = gate(&[], &["https://app.example.com:443", "http://good.example"]);
        for origin in [
            "http://localhost:5173",
            "http://127.0.0.1",
            "http://[::1]:3000",
            "https://app.example.com",
            "HTTPS://APP.example.com:443",
            "http://good.example:80",
        ] {
            assert_eq!(status(&gate, "localhost", Some(origin)), None, "{origin}");
        }
        for origin in [
            "https://localhost:5173",
            "http://evil.example",
            "https://app.example.com:8443",
            "http://good.example:8080",
            "null",
            "http://good.example/path",
            "garbage",
        ] {
            assert_eq!(
                status(&gate, "localhost", Some(origin)),
                Some(StatusCode::FORBIDDEN),
                "{origin}"
            );
        }
        assert_eq!(
            status(&self::gate(&[], &["null"]), "localhost", Some("null")),
            None
        );
    }

    #[test]
    fn other_paths_and_missing_tokens_are_refused() {
        let gate = Gate::new(&HttpOptions {
            token: Some("t0ken".into()),
            ..HttpOptions::default()
        });
        let other = Request::get("/other")
            .header(header::HOST, "localhost")
            .body(())
            .unwrap();
        assert_eq!(
            block(gate.admit(&other)).err().map(|r| r.status()),
            Some(StatusCode::NOT_FOUND)
        );
        assert_eq!(
            status(&gate, "localhost", None),
            Some(StatusCode::UNAUTHORIZED)
        );
        let mut right = request("localhost", None);
        right.headers_mut().insert(
            header::AUTHORIZATION,
            header::HeaderValue::from_static("bearer t0ken"),
        );
        assert_eq!(block(gate.admit(&right)).unwrap(), Identity::default());
    }

    #[test]
    fn a_tokens_file_gives_each_token_its_identity() {
        let text = format!(
            "[[tokens]]\nsha256 = \"{}\"\nprincipal = \"alice\"\ntenant = \"acme\"\n",
            hex_digest("alice-token")
        );
        let tokens = TokenTable::parse(&text, std::path::Path::new("t.toml")).unwrap();
        let gate = Gate::new(&HttpOptions {
            token: Some("shared".into()),
            tokens: Some(std::sync::Arc::new(tokens)),
            ..HttpOptions::default()
        });
        let with = |token: &str| {
            let mut request = request("localhost", None);
            let value = format!("Bearer {token}");
            request.headers_mut().insert(
                header::AUTHORIZATION,
                header::HeaderValue::from_str(&value).unwrap(),
            );
            block(gate.admit(&request))
        };
        let alice = with("alice-token").unwrap();
        assert_eq!(alice.principal.as_deref(), Some("alice"));
        assert_eq!(alice.tenant.as_deref(), Some("acme"));
        assert_eq!(with("shared").unwrap(), Identity::default());
        assert_eq!(
            with("guess").unwrap_err().status(),
            StatusCode::UNAUTHORIZED
        );
    }

    fn hex_digest(token: &str) -> String {
        digest(token).iter().map(|b| format!("{b:02x}")).collect()
    }
}
