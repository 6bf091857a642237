//! Network grants: `scheme://host[:port]` patterns and how requests match them.
//!
//! - scheme: a name (`http`, `https`, `tcp`, `udp`, ...) or `*`;
//! - host: a name, `*.domain` (any subdomain, not the apex), `*` (any host),
//!   an IP literal (`10.0.0.5`, `[::1]`) or a CIDR (`10.0.0.0/8`, `[fd00::]/8`);
//! - port: a number, a range `a..b`, or `*`; when missing, the scheme's
//!   default (http 80, https 443); `tcp` and `udp` entries need one.
//!
//! Paths are not allowed. A bare `*` is refused: `*://*:*` says it explicitly.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;
use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

use crate::ParseError;

/// Which hosts a grant covers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum HostPattern {
    /// Any host.
    Any,
    /// Exactly this name (lower case, no trailing dot).
    Name(String),
    /// Any subdomain of this domain (not the domain itself).
    Subdomains(String),
    /// Addresses in a network (a single IP has the full prefix).
    Cidr(IpNet),
}

/// Which ports a grant covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PortPattern {
    /// Any port.
    Any,
    /// The inclusive range `from..=to` (a single port has `from == to`).
    Range {
        /// First port.
        from: u16,
        /// Last port.
        to: u16,
    },
}

/// One network grant.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NetworkGrant {
    /// Lower-case scheme, or `None` for `*`.
    pub scheme: Option<String>,
    /// Hosts covered.
    pub host: HostPattern,
    /// Ports covered.
    pub port: PortPattern,
    text: String,
}

impl NetworkGrant {
    /// True when this grant covers `scheme://host:port` (host as in the URL).
    pub fn allows(&self, scheme: &str, host: &str, port: u16) -> bool {
        self.scheme_matches(scheme) && self.port_matches(port) && self.host_matches(host)
    }

    /// True when this grant names `ip` itself (an IP literal or a CIDR
    /// containing it) for `scheme` and `port`: only such grants may reach
    /// loopback and private addresses.
    pub fn names_ip(&self, scheme: &str, ip: IpAddr, port: u16) -> bool {
        self.scheme_matches(scheme)
            && self.port_matches(port)
            && matches!(&self.host, HostPattern::Cidr(net) if net.contains(&ip))
    }

    /// True when the grant is `*://*:*` or equivalent.
    pub fn grants_everything(&self) -> bool {
        self.scheme.is_none() && self.host == HostPattern::Any && self.port == PortPattern::Any
    }

    fn scheme_matches(&self, scheme: &str) -> bool {
        self.scheme
            .as_deref()
            .is_none_or(|s| s.eq_ignore_ascii_case(scheme))
    }

    fn port_matches(&self, port: u16) -> bool {
        match self.port {
            PortPattern::Any => true,
            PortPattern::Range { from, to } => (from..=to).contains(&port),
        }
    }

    fn host_matches(&self, host: &str) -> bool {
        self.host.matches(host)
    }
}

impl HostPattern {
    /// True when `host` (a name or IP literal, as in a URL) is covered.
    pub fn matches(&self, host: &str) -> bool {
        let host = normalize_host(host);
        match self {
            HostPattern::Any => true,
            HostPattern::Name(name) => *name == host,
            HostPattern::Subdomains(domain) => host
                .strip_suffix(domain.as_str())
                .is_some_and(|rest| rest.len() > 1 && rest.ends_with('.')),
            HostPattern::Cidr(net) => parse_ip(&host).is_some_and(|ip| net.contains(&ip)),
        }
    }
}

/// The port a scheme uses when a URL or grant names none.
pub fn default_port(scheme: &str) -> Option<u16> {
    match scheme.to_ascii_lowercase().as_str() {
        "http" | "ws" => Some(80),
        "https" | "wss" => Some(443),
        _ => None,
    }
}

fn normalize_host(host: &str) -> String {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .map(str::to_string)
        .unwrap_or(host)
}

fn parse_ip(text: &str) -> Option<IpAddr> {
    let text = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text);
    text.parse().ok()
}

impl FromStr for NetworkGrant {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| ParseError::new("network grant", text, why);
        let text = text.trim();
        if text == "*" {
            return Err(bad(
                "a bare `*` is ambiguous; write `*://*:*` to grant every scheme, host and port",
            ));
        }
        let (scheme, rest) = text
            .split_once("://")
            .ok_or_else(|| bad("expected scheme://host[:port], e.g. https://api.example.com"))?;
        let scheme = match scheme {
            "*" => None,
            s if !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
            {
                Some(s.to_ascii_lowercase())
            }
            _ => return Err(bad("the scheme must be a name such as https, or `*`")),
        };
        if rest.contains(['/', '?', '#']) && !is_cidr_text(rest) {
            return Err(bad(
                "paths are not allowed; grant a scheme, host and port only",
            ));
        }
        if rest.contains('@') {
            return Err(bad("user info (`user@`) is not allowed"));
        }
        let (host_text, port_text) = split_host_port(rest).map_err(|why| bad(&why))?;
        let host = parse_host(host_text).map_err(|why| bad(&why))?;
        let port = match port_text {
            None => match scheme.as_deref().and_then(default_port) {
                Some(port) => PortPattern::Range {
                    from: port,
                    to: port,
                },
                None if scheme.is_none() => {
                    return Err(bad("with scheme `*`, give a port (a number, a..b, or *)"));
                }
                None => return Err(bad("this scheme has no default port; add :PORT")),
            },
            Some(text) => parse_port(text).map_err(|why| bad(&why))?,
        };
        Ok(NetworkGrant {
            scheme,
            host,
            port,
            text: text.to_string(),
        })
    }
}

fn is_cidr_text(rest: &str) -> bool {
    // `10.0.0.0/8`, `10.0.0.0/8:443`, `[fd00::]/8:*`
    let host = split_host_port(rest).map(|(h, _)| h).unwrap_or(rest);
    host.split_once('/')
        .is_some_and(|(ip, prefix)| parse_ip(ip).is_some() && prefix.parse::<u8>().is_ok())
}

/// Splits `host[:port]`, where host may be `[v6]`, `[v6]/len` or `v4/len`.
fn split_host_port(rest: &str) -> Result<(&str, Option<&str>), String> {
    if rest.starts_with('[') {
        let close = rest.find(']').ok_or("unclosed `[` in an IPv6 address")?;
        let after = &rest[close + 1..];
        let (cidr_len, after) = match after.strip_prefix('/') {
            Some(tail) => {
                let end = tail.find(':').unwrap_or(tail.len());
                (end + 1, &tail[end..])
            }
            None => (0, after),
        };
        let host = &rest[..close + 1 + cidr_len];
        return match after {
            "" => Ok((host, None)),
            port if port.starts_with(':') => Ok((host, Some(&port[1..]))),
            _ => Err("unexpected text after the IPv6 address".into()),
        };
    }
    match rest.rsplit_once(':') {
        Some((host, port)) => Ok((host, Some(port))),
        None => Ok((rest, None)),
    }
}

fn parse_host(text: &str) -> Result<HostPattern, String> {
    if text.is_empty() {
        return Err("the host is empty".into());
    }
    if text == "*" {
        return Ok(HostPattern::Any);
    }
    if let Some((ip, prefix)) = text.split_once('/') {
        let network = parse_ip(ip).ok_or("a CIDR must start with an IP address")?;
        let max = if network.is_ipv4() { 32 } else { 128 };
        let prefix: u8 = prefix
            .parse()
            .ok()
            .filter(|p| *p <= max)
            .ok_or_else(|| format!("the CIDR prefix must be 0..={max}"))?;
        let net = IpNet::new(network, prefix)
            .map_err(|_| format!("the CIDR prefix must be 0..={max}"))?;
        return Ok(HostPattern::Cidr(net));
    }
    if let Some(ip) = parse_ip(text) {
        return Ok(HostPattern::Cidr(IpNet::from(ip)));
    }
    if text.starts_with('[') {
        return Err("not a valid IPv6 address".into());
    }
    let (wildcard, name) = match text.strip_prefix("*.") {
        Some(domain) => (true, domain),
        None => (false, text),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    let valid_label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    };
    if name.is_empty() || name.len() > 253 || !name.split('.').all(valid_label) {
        return Err(format!(
            "{text:?} is not a host name (letters, digits, '-', dots; `*.` only as a prefix)"
        ));
    }
    Ok(if wildcard {
        HostPattern::Subdomains(name)
    } else {
        HostPattern::Name(name)
    })
}

fn parse_port(text: &str) -> Result<PortPattern, String> {
    if text == "*" {
        return Ok(PortPattern::Any);
    }
    let number = |t: &str| {
        t.parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("{t:?} is not a port (1-65535)"))
    };
    match text.split_once("..") {
        Some((from, to)) => {
            let (from, to) = (number(from)?, number(to)?);
            if from > to {
                return Err(format!("the port range {text} is empty"));
            }
            Ok(PortPattern::Range { from, to })
        }
        None => number(text).map(|p| PortPattern::Range { from: p, to: p }),
    }
}

impl FromStr for HostPattern {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        parse_host(text.trim()).map_err(|why| ParseError::new("host pattern", text, why))
    }
}

impl fmt::Display for NetworkGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for NetworkGrant {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for NetworkGrant {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer)?
            .parse()
            .map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(text: &str) -> NetworkGrant {
        text.parse().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn default_ports_come_from_the_scheme() {
        let g = grant("https://api.example.com");
        assert!(g.allows("https", "api.example.com", 443));
        assert!(!g.allows("https", "api.example.com", 8443));
        assert!(!g.allows("http", "api.example.com", 443));
        assert!(grant("http://example.com").allows("http", "example.com", 80));
    }

    #[test]
    fn names_match_case_insensitively_and_exactly() {
        let g = grant("https://API.Example.com");
        assert!(g.allows("HTTPS", "api.example.COM.", 443));
        assert!(!g.allows("https", "evil-api.example.com", 443));
        assert!(!g.allows("https", "api.example.com.evil.net", 443));
    }

    #[test]
    fn wildcard_covers_subdomains_not_the_apex() {
        let g = grant("https://*.example.com");
        assert!(g.allows("https", "a.example.com", 443));
        assert!(g.allows("https", "a.b.example.com", 443));
        assert!(!g.allows("https", "example.com", 443));
        assert!(!g.allows("https", "badexample.com", 443));
    }

    #[test]
    fn ports_ranges_and_any() {
        let g = grant("http://localhost:8000..8010");
        assert!(g.allows("http", "localhost", 8000));
        assert!(g.allows("http", "localhost", 8010));
        assert!(!g.allows("http", "localhost", 8011));
        assert!(grant("http://localhost:*").allows("http", "localhost", 1));
        assert!(grant("*://*:*").grants_everything());
    }

    #[test]
    fn ips_and_cidrs() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let g = grant("http://127.0.0.1:8080");
        assert!(g.allows("http", "127.0.0.1", 8080));
        assert!(g.names_ip("http", ip, 8080));
        assert!(!g.names_ip("http", "127.0.0.2".parse().unwrap(), 8080));
        let net = grant("tcp://10.0.0.0/8:5432");
        assert!(net.names_ip("tcp", "10.9.8.7".parse().unwrap(), 5432));
        assert!(!net.names_ip("tcp", "11.0.0.1".parse().unwrap(), 5432));
        let v6 = grant("https://[::1]:8443");
        assert!(v6.allows("https", "[::1]", 8443));
        assert!(v6.names_ip("https", "::1".parse().unwrap(), 8443));
        let v6net = grant("udp://[fd00::]/8:53");
        assert!(v6net.names_ip("udp", "fd12::1".parse().unwrap(), 53));
        assert!(!grant("https://example.com").names_ip("https", ip, 443));
    }

    #[test]
    fn refuses_malformed_entries_with_reasons() {
        for (text, needle) in [
            ("*", "*://*:*"),
            ("example.com", "scheme://host"),
            ("https://example.com/path", "paths are not allowed"),
            ("https://user@example.com", "user info"),
            ("tcp://db.internal", "no default port"),
            ("https://exa mple.com", "not a host name"),
            ("https://example.com:0", "not a port"),
            ("https://example.com:99999", "not a port"),
            ("https://example.com:10..5", "empty"),
            ("https://10.0.0.0/33", "prefix"),
            ("https://*.", "not a host name"),
            ("ht tp://x", "scheme"),
            ("https://", "empty"),
            ("*://example.com", "give a port"),
        ] {
            let err = text.parse::<NetworkGrant>().unwrap_err();
            assert!(err.to_string().contains(needle), "{text}: {err}");
        }
    }
}
