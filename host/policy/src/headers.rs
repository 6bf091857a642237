//! Credential headers (`http_headers`): which requests get them, and their
//! values read from the host environment.
//!
//! A pattern is a host (`api.example.com`, `*.example.com`) and the header
//! goes only to `https` requests for it; a pattern written `http://HOST`
//! states that sending it in cleartext to that host is intended.

use std::collections::BTreeMap;

use super::{HostPattern, PolicyError};

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
    pub fn parse(pattern: &str) -> Result<Self, String> {
        let (plaintext, host) = match pattern.split_once("://") {
            None => (false, pattern),
            Some((scheme, host)) if scheme.eq_ignore_ascii_case("https") => (false, host),
            Some((scheme, host)) if scheme.eq_ignore_ascii_case("http") => (true, host),
            Some((scheme, _)) => {
                return Err(format!(
                    "{pattern}: headers go to https (or, stated, http) requests only, not {scheme}"
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

/// Checks every pattern, name and value, and reads `${VAR}`s from the host
/// environment.
pub(super) fn resolve(
    headers: &mut BTreeMap<String, BTreeMap<String, String>>,
) -> Result<(), PolicyError> {
    for (pattern, headers) in headers {
        HeaderTarget::parse(pattern).map_err(PolicyError::Header)?;
        for (name, value) in headers.iter_mut() {
            *value = expand_env(value)
                .map_err(|reason| PolicyError::Header(format!("{pattern} {name}: {reason}")))?;
            if http::HeaderName::from_bytes(name.as_bytes()).is_err()
                || http::HeaderValue::from_str(value).is_err()
            {
                return Err(PolicyError::Header(format!(
                    "{pattern}: {name:?} is not a valid header name and value"
                )));
            }
        }
    }
    Ok(())
}

/// Replaces `${VAR}` with the host's environment variable `VAR`.
fn expand_env(value: &str) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or("unclosed ${ in the value")?;
        let name = &after[..end];
        let found = std::env::var(name)
            .map_err(|_| format!("${{{name}}} is not set in the host environment"))?;
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
        assert!(err.contains("tcp"), "{err}");
    }
}
