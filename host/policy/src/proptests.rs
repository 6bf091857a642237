//! Property tests of the matchers and converters an attacker or operator
//! feeds: sizes and network grants.

use std::net::Ipv4Addr;

use proptest::prelude::*;

use crate::{ByteSize, NetworkGrant};

proptest! {
    #[test]
    fn sizes_round_trip_through_their_text(bytes in any::<u64>()) {
        let size = ByteSize(bytes);
        prop_assert_eq!(size.to_string().parse::<ByteSize>(), Ok(size));
    }

    #[test]
    fn size_parsing_never_panics(text in ".{0,40}") {
        let _ = text.parse::<ByteSize>();
    }

    #[test]
    fn grant_parsing_never_panics(text in ".{0,60}") {
        let _ = text.parse::<NetworkGrant>();
    }

    #[test]
    fn subdomain_grants_cover_exactly_the_subdomains(
        label in "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?",
        other in "[a-z]{1,12}\\.(com|net|org)",
    ) {
        let grant: NetworkGrant = "https://*.example.com".parse().unwrap();
        let subdomain = format!("{label}.example.com");
        prop_assert!(grant.allows("https", &subdomain, 443));
        prop_assert!(grant.allows("https", &subdomain.to_uppercase(), 443));
        prop_assert!(!grant.allows("http", &subdomain, 443));
        prop_assert!(!grant.allows("https", &subdomain, 8443));
        prop_assert!(!grant.allows("https", "example.com", 443));
        let glued = format!("{label}example.com");
        let suffixed = format!("{subdomain}.{other}");
        prop_assert!(!grant.allows("https", &glued, 443));
        prop_assert!(!grant.allows("https", &suffixed, 443));
        if other != "example.com" {
            prop_assert!(!grant.allows("https", &other, 443));
        }
    }

    #[test]
    fn port_ranges_cover_exactly_their_ports(from in 1u16..60_000, len in 0u16..1000, port in any::<u16>()) {
        let to = from.saturating_add(len);
        let grant: NetworkGrant = format!("tcp://db.internal:{from}..{to}").parse().unwrap();
        prop_assert_eq!(grant.allows("tcp", "db.internal", port), (from..=to).contains(&port));
    }

    #[test]
    fn cidr_grants_cover_exactly_their_network(a in any::<u32>(), b in any::<u32>(), prefix in 0u32..=32) {
        let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
        let network = Ipv4Addr::from(a & mask);
        let grant: NetworkGrant = format!("tcp://{network}/{prefix}:*").parse().unwrap();
        let inside = Ipv4Addr::from((a & mask) | (b & !mask));
        prop_assert!(grant.allows("tcp", &inside.to_string(), 5));
        if prefix > 0 {
            let outside = Ipv4Addr::from((a & mask) ^ (1u32 << (32 - prefix)));
            prop_assert!(!grant.allows("tcp", &outside.to_string(), 5));
        }
    }
}
