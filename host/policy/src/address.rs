//! Which addresses are on the public internet, and what kind the others are:
//! the one classification behind tools' network grants and the hosts a
//! registry may send the host to.

use std::net::{IpAddr, Ipv6Addr};

use ip_network::{Ipv4Network, Ipv6Network};

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

/// What kind of non-public address `ip` is, in words (`loopback`,
/// `private`, `link-local`, ...).
pub fn address_kind(ip: IpAddr) -> &'static str {
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
}
