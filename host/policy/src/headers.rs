//! Credential headers (`http_headers`): which requests get them, and their
//! values read from the host environment.
//!
//! A pattern is a host (`api.example.com`, `*.example.com`) and the header
//! goes only to `https` requests for it; a pattern written `http://HOST`
//! states that sending it in cleartext to that host is intended.

use std::collections::BTreeMap;

use super::{HostPattern, ParseError, PolicyError};

/// Where a policy's headers go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderTarget {
    /// The hosts whose requests get the headers.
    pub hosts: HostPattern,
    /// Whether plain `http` requests get them too (pattern `http://HOST`).
    pub plaintext: bool,
}

impl HeaderTarget {
    /// Parses `HOST`, `https://HOST` or `http://HOST`.
    pub fn parse(pattern: &str) -> Result<Self, ParseError> {
        let (plaintext, host) = match pattern.split_once("://") {
            None => (false, pattern),
            Some((scheme, host)) if scheme.eq_ignore_ascii_case("https") => (false, host),
            Some((scheme, host)) if scheme.eq_ignore_ascii_case("http") => (true, host),
            Some((scheme, _)) => {
                return Err(ParseError::new(
                    "header pattern",
                    pattern,
                    format!("headers go to https (or, stated, http) requests only, not {scheme}"),
                ));
            }
        };
        Ok(Self {
            hosts: host.parse()?,
            plaintext,
        })
    }

    /// Whether a request with this scheme to this host gets the headers.
    pub fn applies(&self, scheme: &str, host: &str) -> bool {
        (scheme == "https" || (self.plaintext && scheme == "http")) && self.hosts.matches(host)
    }
}

/// Credential headers for the requests one pattern matches, ready to send:
/// values read from the environment and marked sensitive (never printed).
#[derive(Clone, Debug)]
pub struct CredentialHeaders {
    /// The requests that get them.
    pub target: HeaderTarget,
    /// Names and values.
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,
}

/// Checks every pattern and name, and the `${VAR}` syntax of every value,
/// without reading the environment.
pub(super) fn check(
    headers: &BTreeMap<String, BTreeMap<String, String>>,
) -> Result<(), PolicyError> {
    for (pattern, headers) in headers {
        HeaderTarget::parse(pattern).map_err(|e| PolicyError::Header(e.to_string()))?;
        for (name, value) in headers {
            let literal = expand(value, |_| Some(String::new()))
                .map_err(|reason| PolicyError::Header(format!("{pattern} {name}: {reason}")))?;
            if http::HeaderName::from_bytes(name.as_bytes()).is_err()
                || http::HeaderValue::from_str(&literal).is_err()
            {
                return Err(PolicyError::Header(format!(
                    "{pattern}: {name:?} is not a valid header name and value"
                )));
            }
        }
    }
    Ok(())
}

/// Reads every value's `${VAR}`s from the host environment.
pub(super) fn resolve(
    headers: &BTreeMap<String, BTreeMap<String, String>>,
) -> Result<Vec<CredentialHeaders>, PolicyError> {
    let mut resolved = Vec::with_capacity(headers.len());
    for (pattern, headers) in headers {
        let target =
            HeaderTarget::parse(pattern).map_err(|e| PolicyError::Header(e.to_string()))?;
        let mut pairs = Vec::with_capacity(headers.len());
        for (name, value) in headers {
            let bad = |reason: String| PolicyError::Header(format!("{pattern} {name}: {reason}"));
            let value = expand(value, |name| std::env::var(name).ok()).map_err(bad)?;
            let name = http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| bad("is not a valid header name".into()))?;
            let mut value = http::HeaderValue::from_str(&value)
                .map_err(|_| bad("the value is not a valid header value".into()))?;
            value.set_sensitive(true);
            pairs.push((name, value));
        }
        resolved.push(CredentialHeaders {
            target,
            headers: pairs,
        });
    }
    Ok(resolved)
}

/// Replaces each `${VAR}` with `lookup(VAR)`, in one pass: a value read is
/// never expanded again.
fn expand(value: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or("unclosed ${ in the value")?;
        let name = &after[..end];
        let found = lookup(name)
            .ok_or_else(|| format!("${{{name}}} is not set in the host environment"))?;
        out.push_str(&found);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_go_over_https_unless_plaintext_is_stated() {
        let secure = HeaderTarget::parse("api.example.com").unwrap();
        assert!(secure.applies("https", "api.example.com"));
        assert!(!secure.applies("http", "api.example.com"));
        assert!(!secure.applies("https", "evil.com"));
        let stated = HeaderTarget::parse("http://10.0.0.5").unwrap();
        assert!(stated.applies("http", "10.0.0.5"));
        assert!(stated.applies("https", "10.0.0.5"));
        assert_eq!(
            HeaderTarget::parse("HTTPS://*.example.com").unwrap(),
            HeaderTarget::parse("*.example.com").unwrap()
        );
        let err = HeaderTarget::parse("tcp://db").unwrap_err();
        assert!(err.to_string().contains("tcp"), "{err}");
    }
}
