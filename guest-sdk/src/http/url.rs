//! URL parsing and encoding, just enough for outgoing requests: absolute
//! `http`/`https` URLs, split into what a wasi:http request needs.
//!
//! Nothing here calls into the host, so all of it is unit-tested natively.

use std::fmt;

use super::HttpError;

/// `http` or `https`; no other scheme can be requested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    Http,
    Https,
}

impl Scheme {
    fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Https => "https",
        }
    }
}

/// An absolute URL, split and normalised: lower-case host, no fragment, a
/// path that starts with `/`, and every byte a request line cannot carry
/// percent-encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Url {
    pub(crate) scheme: Scheme,
    /// `host` or `host:port`; an IPv6 host keeps its brackets.
    pub(crate) authority: String,
    /// The path and the query, e.g. `/v1/search?name=Paris`.
    pub(crate) path_and_query: String,
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}://{}{}",
            self.scheme.as_str(),
            self.authority,
            self.path_and_query
        )
    }
}

fn invalid(url: &str, reason: &str) -> HttpError {
    HttpError::InvalidUrl(format!("{url:?}: {reason}"))
}

impl Url {
    /// Parses an absolute `http://` or `https://` URL.
    pub(crate) fn parse(text: &str) -> Result<Self, HttpError> {
        let text = text.trim();
        if text.chars().any(char::is_control) {
            return Err(invalid(text, "it contains control characters"));
        }
        let Some((scheme, rest)) = text.split_once("://") else {
            return Err(invalid(
                text,
                "it is not absolute; use an http:// or https:// URL",
            ));
        };
        let scheme = if scheme.eq_ignore_ascii_case("http") {
            Scheme::Http
        } else if scheme.eq_ignore_ascii_case("https") {
            Scheme::Https
        } else {
            return Err(invalid(text, "only http and https URLs are supported"));
        };
        let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path_and_query) = rest.split_at(authority_end);
        let authority = parse_authority(text, authority)?;
        let path_and_query = match path_and_query.chars().next() {
            None => "/".to_owned(),
            Some('?') => format!("/{}", encode_request_target(path_and_query)),
            Some(_) => encode_request_target(path_and_query),
        };
        Ok(Self {
            scheme,
            authority,
            path_and_query,
        })
    }

    /// Where a redirect's `Location` value points, relative to this URL
    /// (RFC 3986 reference resolution, without the fragment).
    pub(crate) fn resolve(&self, reference: &str) -> Option<String> {
        let reference = reference.trim();
        let reference = reference
            .split_once('#')
            .map_or(reference, |(before, _)| before);
        if reference.is_empty() {
            return None;
        }
        if has_scheme(reference) {
            return Some(reference.to_owned());
        }
        let origin = format!("{}://{}", self.scheme.as_str(), self.authority);
        if reference.starts_with("//") {
            return Some(format!("{}:{reference}", self.scheme.as_str()));
        }
        let base_path = self
            .path_and_query
            .split_once('?')
            .map_or(self.path_and_query.as_str(), |(path, _)| path);
        if reference.starts_with('?') {
            return Some(format!("{origin}{base_path}{reference}"));
        }
        let (path, query) = match reference.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (reference, None),
        };
        let merged = if path.starts_with('/') {
            path.to_owned()
        } else {
            let directory = base_path.rfind('/').map_or("/", |end| &base_path[..=end]);
            format!("{directory}{path}")
        };
        let mut resolved = format!("{origin}{}", remove_dot_segments(&merged));
        if let Some(query) = query {
            resolved.push('?');
            resolved.push_str(query);
        }
        Some(resolved)
    }
}

/// True if `reference` starts with `scheme:` (RFC 3986: a letter, then
/// letters, digits, `+`, `-` or `.`).
fn has_scheme(reference: &str) -> bool {
    let Some((scheme, _)) = reference.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

fn remove_dot_segments(path: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    for (index, segment) in segments.iter().enumerate() {
        let last = index + 1 == segments.len();
        match *segment {
            "." => {
                if last {
                    kept.push("");
                }
            }
            ".." => {
                kept.pop();
                if last {
                    kept.push("");
                }
            }
            other => kept.push(other),
        }
    }
    format!("/{}", kept.join("/"))
}

fn parse_authority(url: &str, authority: &str) -> Result<String, HttpError> {
    if authority.contains('@') {
        // Not echoed: the URL holds a password.
        return Err(HttpError::InvalidUrl(
            "with credentials (user:password@): credentials in URLs are not supported; \
             send an Authorization header instead"
                .into(),
        ));
    }
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let Some((address, after)) = bracketed.split_once(']') else {
            return Err(invalid(url, "its IPv6 address has no closing ]"));
        };
        if address.is_empty()
            || !address
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
        {
            return Err(invalid(url, "its IPv6 address is malformed"));
        }
        let port = match after {
            "" => None,
            _ => match after.strip_prefix(':') {
                Some(port) => Some(port),
                None => return Err(invalid(url, "unexpected text after its IPv6 address")),
            },
        };
        (format!("[{}]", address.to_ascii_lowercase()), port)
    } else {
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        };
        if host.is_empty() {
            return Err(invalid(url, "it has no host"));
        }
        if !host.is_ascii() {
            return Err(invalid(
                url,
                "internationalised host names are not supported; use the xn-- (punycode) form",
            ));
        }
        if !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        {
            return Err(invalid(
                url,
                "its host contains characters a host name cannot",
            ));
        }
        (host.to_ascii_lowercase(), port)
    };
    match port {
        // `host:` means the default port, as in a browser.
        None | Some("") => Ok(host),
        Some(port) => {
            let valid = port.len() <= 5
                && port.bytes().all(|b| b.is_ascii_digit())
                && port.parse::<u16>().is_ok_and(|number| number != 0);
            if !valid {
                return Err(invalid(url, "its port is not a number from 1 to 65535"));
            }
            Ok(format!("{host}:{port}"))
        }
    }
}

/// Percent-encodes what may not appear in a request line (spaces, quotes,
/// angle brackets, non-ASCII, a `%` that does not start an escape) and keeps
/// everything else, so an already-encoded path and query pass unchanged.
fn encode_request_target(target: &str) -> String {
    let bytes = target.as_bytes();
    let mut encoded = String::with_capacity(target.len());
    for (index, &byte) in bytes.iter().enumerate() {
        let escape_start = byte == b'%'
            && bytes.get(index + 1).is_some_and(u8::is_ascii_hexdigit)
            && bytes.get(index + 2).is_some_and(u8::is_ascii_hexdigit);
        let keep = byte.is_ascii_graphic()
            && !matches!(
                byte,
                b'"' | b'<' | b'>' | b'`' | b'{' | b'}' | b'|' | b'\\' | b'^'
            )
            && (byte != b'%' || escape_start);
        if keep {
            encoded.push(char::from(byte));
        } else {
            push_escape(&mut encoded, byte);
        }
    }
    encoded
}

fn push_escape(out: &mut String, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push('%');
    out.push(char::from(HEX[usize::from(byte >> 4)]));
    out.push(char::from(HEX[usize::from(byte & 0x0f)]));
}

/// Percent-encodes `text` for use as one query value or path segment: every
/// byte except ASCII letters, digits and `-._~` becomes `%XX`.
///
/// ```
/// use wasm_agent_guest::http::encode_component;
/// assert_eq!(encode_component("São Paulo & co"), "S%C3%A3o%20Paulo%20%26%20co");
/// ```
pub fn encode_component(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for &byte in text.as_bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(char::from(byte));
        } else {
            push_escape(&mut encoded, byte);
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    fn reason(text: &str) -> String {
        match Url::parse(text).unwrap_err() {
            HttpError::InvalidUrl(message) => message,
            other => panic!("expected InvalidUrl, got {other:?}"),
        }
    }

    #[test]
    fn splits_scheme_authority_and_target() {
        let url = parse("https://API.Example.com:8443/v1/search?name=Paris#top");
        assert_eq!(url.scheme, Scheme::Https);
        assert_eq!(url.authority, "api.example.com:8443");
        assert_eq!(url.path_and_query, "/v1/search?name=Paris");
        assert_eq!(
            url.to_string(),
            "https://api.example.com:8443/v1/search?name=Paris"
        );
    }

    #[test]
    fn fills_in_the_root_path() {
        assert_eq!(parse("http://example.com").path_and_query, "/");
        assert_eq!(parse("HTTP://example.com?q=1").path_and_query, "/?q=1");
        assert_eq!(parse("http://example.com:").authority, "example.com");
        assert_eq!(
            parse("  http://example.com/  ").to_string(),
            "http://example.com/"
        );
    }

    #[test]
    fn keeps_ipv6_brackets() {
        let url = parse("http://[::1]:8080/x");
        assert_eq!(url.authority, "[::1]:8080");
        assert_eq!(parse("http://[FE80::1]").authority, "[fe80::1]");
    }

    #[test]
    fn encodes_what_a_request_line_cannot_carry() {
        assert_eq!(
            parse("http://h/a b/é?q=\"x\"&r=%20&s=100%").path_and_query,
            "/a%20b/%C3%A9?q=%22x%22&r=%20&s=100%25"
        );
    }

    #[test]
    fn rejects_what_is_not_an_absolute_http_url() {
        assert!(reason("example.com/x").contains("not absolute"));
        assert!(reason("ftp://example.com/").contains("only http and https"));
        assert!(reason("file:///etc/passwd").contains("only http and https"));
        assert!(reason("mailto:a@b.c").contains("not absolute"));
        assert!(reason("http:///path").contains("no host"));
        assert!(reason("http://user:pw@example.com/").contains("credentials"));
        assert!(reason("http://example.com:99999/").contains("port"));
        assert!(reason("http://example.com:0/").contains("port"));
        assert!(reason("http://example.com:8o/").contains("port"));
        assert!(reason("http://exa mple.com/").contains("host contains"));
        assert!(reason("http://bücher.de/").contains("punycode"));
        assert!(reason("http://[::1/").contains("closing ]"));
        assert!(reason("http://[::1]x/").contains("after its IPv6"));
        assert!(reason("http://[]/").contains("malformed"));
        assert!(reason("http://example.com/\r\nX-Injected: 1").contains("control"));
    }

    #[test]
    fn resolves_redirect_locations() {
        let base = parse("https://example.com/docs/guide/intro?x=1");
        let cases = [
            ("http://other.org/a", "http://other.org/a"),
            ("//cdn.example.com/a", "https://cdn.example.com/a"),
            ("/login?next=%2F", "https://example.com/login?next=%2F"),
            ("next", "https://example.com/docs/guide/next"),
            ("../api/", "https://example.com/docs/api/"),
            ("./", "https://example.com/docs/guide/"),
            ("?page=2", "https://example.com/docs/guide/intro?page=2"),
            ("/a/b/../c#frag", "https://example.com/a/c"),
            ("../../../../x", "https://example.com/x"),
        ];
        for (location, expected) in cases {
            assert_eq!(
                base.resolve(location).as_deref(),
                Some(expected),
                "{location}"
            );
        }
        assert_eq!(base.resolve("  "), None);
    }

    #[test]
    fn encodes_components() {
        assert_eq!(encode_component("a-b_c.d~e"), "a-b_c.d~e");
        assert_eq!(encode_component("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
        assert_eq!(encode_component(""), "");
    }
}
