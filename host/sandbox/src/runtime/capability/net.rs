//! The network policy of one call: which destinations a tool may reach.
//!
//! A destination must match a grant by scheme, host and port. After name
//! resolution every address must also be public, unless a grant names that
//! IP (or a CIDR containing it): loopback, private, link-local (cloud
//! metadata at 169.254.169.254), CGNAT, unique-local and IPv4-mapped or
//! -compatible IPv6 addresses are refused otherwise, so a public-looking name
//! cannot lead a tool into the host's own network.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use wasm_agent_policy::{HostPattern, NetworkGrant, address_kind, is_public};

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
                address_kind(ip)
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

#[cfg(test)]
mod tests {
    use super::*;

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
