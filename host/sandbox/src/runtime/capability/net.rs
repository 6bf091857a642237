//! The network policy of one call: which destinations a tool may reach.
//!
//! A destination must match a grant by scheme, host and port. After name
//! resolution every address must also be public, unless a grant names that
//! IP (or a CIDR containing it): loopback, private, link-local (cloud
//! metadata at 169.254.169.254), CGNAT, unique-local and IPv4-mapped or
//! -compatible IPv6 addresses are refused otherwise, so a public-looking name
//! cannot lead a tool into the host's own network.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ip_network::{Ipv4Network, Ipv6Network};

use wasm_agent_policy::{HostPattern, NetworkGrant};

/// The grants of one call and the checks made with them.
#[derive(Clone, Debug, Default)]
pub struct NetworkPolicy {
    grants: Arc<Vec<NetworkGrant>>,
}

impl NetworkPolicy {
    /// The policy for `grants`.
    pub fn new(grants: Vec<NetworkGrant>) -> Self {
        Self {
            grants: Arc::new(grants),
        }
    }

    /// These grants and `grant` (a destination the person allowed).
    pub fn with(&self, grant: NetworkGrant) -> Self {
        let mut grants = (*self.grants).clone();
        grants.push(grant);
        Self::new(grants)
    }

    /// True when any grant is for `scheme`.
    pub fn has_scheme(&self, scheme: &str) -> bool {
        self.grants
            .iter()
            .any(|g| g.scheme.as_deref().is_none_or(|s| s == scheme))
    }

    /// Checks `scheme://host:port` against the grants.
    pub fn check_destination(&self, scheme: &str, host: &str, port: u16) -> Result<(), String> {
        if self.grants.iter().any(|g| g.allows(scheme, host, port)) {
            Ok(())
        } else {
            Err(format!(
                "not in the policy; grant it with --allow-host {scheme}://{host}:{port}"
            ))
        }
    }

    /// Checks a resolved address: public, or named by a grant.
    pub fn check_address(&self, scheme: &str, addr: SocketAddr) -> Result<(), String> {
        let ip = addr.ip();
        if is_public(ip)
            || self
                .grants
                .iter()
                .any(|g| g.names_ip(scheme, ip, addr.port()))
        {
            Ok(())
        } else {
            let grant = match ip {
                IpAddr::V4(_) => format!("{scheme}://{ip}:{}", addr.port()),
                IpAddr::V6(_) => format!("{scheme}://[{ip}]:{}", addr.port()),
            };
            Err(format!(
                "{ip} is a {} address, reachable only when the policy names it; grant it with \
                 --allow-host {grant}",
                describe(ip)
            ))
        }
    }

    /// Checks a socket destination (raw TCP/UDP), given as the address the
    /// guest resolved: it must be granted by IP, or be an address of a host
    /// name granted for that scheme and port (resolved here, by the host).
    pub async fn check_socket(&self, scheme: &str, addr: SocketAddr) -> Result<(), String> {
        let host = addr.ip().to_string();
        let mut named = self.grants.iter().any(|g| {
            g.allows(scheme, &host, addr.port()) || g.names_ip(scheme, addr.ip(), addr.port())
        });
        for grant in self.grants.iter() {
            if named {
                break;
            }
            if let HostPattern::Name(name) = &grant.host
                && grant.allows(scheme, name, addr.port())
                && let Ok(mut found) = tokio::net::lookup_host((name.as_str(), addr.port())).await
            {
                named = found.any(|a| a.ip() == addr.ip());
            }
        }
        if !named {
            return Err(format!(
                "not in the policy; grant it with --allow-host {scheme}://{}",
                match addr.ip() {
                    IpAddr::V4(ip) => format!("{ip}:{}", addr.port()),
                    IpAddr::V6(ip) => format!("[{ip}]:{}", addr.port()),
                }
            ));
        }
        self.check_address(scheme, addr)
    }
}

/// True for addresses on the public internet: globally routable unicast,
/// as the IANA special-purpose registries define it (`ip_network`'s
/// `is_global`: private, shared, loopback, link-local, documentation,
/// benchmarking, reserved and the like are not), never multicast, and never
/// an IPv6 address that carries an IPv4 one, which would reach whatever IPv4
/// address it embeds, private ones included.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => !ip.is_multicast() && Ipv4Network::from(ip).is_global(),
        IpAddr::V6(ip) => {
            !ip.is_multicast() && !carries_ipv4(ip) && Ipv6Network::from(ip).is_global()
        }
    }
}

/// IPv4-compatible `::a.b.c.d`, IPv4-mapped `::ffff:a.b.c.d`, and NAT64
/// `64:ff9b::/32` (well-known and local-use prefixes).
fn carries_ipv4(ip: Ipv6Addr) -> bool {
    let segments = ip.segments();
    segments[..5] == [0; 5] || (segments[0] == 0x64 && segments[1] == 0xff9b)
}

fn describe(ip: IpAddr) -> &'static str {
    match ip {
        IpAddr::V4(v4) if v4.is_loopback() => "loopback",
        IpAddr::V4(v4) if v4.is_private() => "private",
        IpAddr::V4(v4) if v4.is_link_local() => "link-local",
        IpAddr::V4(v4) if v4.octets()[0] == 100 => "shared (CGNAT)",
        IpAddr::V4(v4) if v4.is_unspecified() => "unspecified",
        IpAddr::V6(v6) if v6.is_loopback() => "loopback",
        IpAddr::V6(v6) if v6.is_unspecified() => "unspecified",
        IpAddr::V6(v6) if v6.segments()[..5] == [0; 5] => "IPv4-mapped",
        IpAddr::V6(v6) if (v6.segments()[0] & 0xfe00) == 0xfc00 => "unique-local",
        IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80 => "link-local",
        _ => "non-public",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn private_and_special_addresses_are_not_public() {
        for text in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:8.8.8.8",
            "::127.0.0.1",
            "64:ff9b::a00:1",
            "192.0.0.1",
            "192.0.2.1",
            "198.18.0.1",
            "240.0.0.1",
            "2001:db8::1",
            "fec0::1",
            "ff0e::1",
        ] {
            assert!(!is_public(ip(text)), "{text} must not be public");
        }
        for text in ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "100.128.0.1"] {
            assert!(is_public(ip(text)), "{text} is public");
        }
    }

    #[test]
    fn an_ipv6_address_never_smuggles_an_ipv4_one() {
        // Every way of writing 10.0.0.1 or 169.254.169.254 inside IPv6.
        for text in [
            "::10.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:a9fe:a9fe",
            "64:ff9b::10.0.0.1",
            "64:ff9b:1::a00:1",
            "::ffff:8.8.8.8",
        ] {
            assert!(!is_public(ip(text)), "{text} carries an IPv4 address");
        }
    }

    #[test]
    fn a_name_grant_does_not_open_private_addresses() {
        let policy = NetworkPolicy::new(vec!["http://localhost:8080".parse().unwrap()]);
        assert!(policy.check_destination("http", "localhost", 8080).is_ok());
        let loopback = "127.0.0.1:8080".parse().unwrap();
        let err = policy.check_address("http", loopback).unwrap_err();
        assert!(
            err.contains("loopback") && err.contains("http://127.0.0.1:8080"),
            "{err}"
        );
        let with_ip = NetworkPolicy::new(vec![
            "http://localhost:8080".parse().unwrap(),
            "http://127.0.0.1:8080".parse().unwrap(),
        ]);
        assert!(with_ip.check_address("http", loopback).is_ok());
    }

    #[tokio::test]
    async fn sockets_need_a_grant_naming_the_address() {
        let policy = NetworkPolicy::new(vec!["tcp://127.0.0.1:5432".parse().unwrap()]);
        let check = |addr: &str| policy.check_socket("tcp", addr.parse().unwrap());
        assert!(check("127.0.0.1:5432").await.is_ok());
        assert!(check("127.0.0.1:5433").await.is_err());
        let udp = policy
            .check_socket("udp", "127.0.0.1:5432".parse().unwrap())
            .await;
        assert!(udp.is_err());
    }

    #[tokio::test]
    async fn a_socket_name_grant_needs_an_ip_grant_for_loopback() {
        let by_name = NetworkPolicy::new(vec!["tcp://localhost:5432".parse().unwrap()]);
        let err = by_name
            .check_socket("tcp", "127.0.0.1:5432".parse().unwrap())
            .await
            .unwrap_err();
        assert!(err.contains("loopback"), "{err}");
    }
}
