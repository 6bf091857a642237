//! Where a registry may send the host. Every URL fetched (the registry's own,
//! each redirect, a token realm) is https, or plain http to loopback; and
//! every address it resolves to is public, or of a kind the registry itself
//! is at (a registry on loopback may send the host to loopback, one on a
//! private network to private addresses; none to link-local, such as cloud
//! metadata, unless it is itself there). Names are checked after resolution,
//! so a public-looking name cannot lead the host into its own network.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::{Host, Url};
use wasm_agent_policy::{address_kind, is_public};

/// The most redirects one request follows.
const MAX_REDIRECTS: usize = 5;

/// A URL or address the host refused to go to for a registry.
#[derive(Debug)]
pub(crate) struct Refusal(pub(crate) String);

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refusal {}

/// The address rules for one registry.
#[derive(Debug)]
pub(crate) struct Rules {
    registry: String,
    /// The kinds of non-public address the registry itself is at.
    kinds: Vec<&'static str>,
    /// Whether the registry's name resolved (rules made without an answer
    /// are not kept).
    pub(crate) resolved: bool,
}

/// Kinds a registry's own address never opens: they carry or stand for
/// addresses of any other kind.
const NEVER_OPENED: &[&str] = &["IPv4-mapped", "non-public"];

impl Rules {
    /// The rules for `registry` (`host[:port]`), from the addresses it
    /// resolves to now. A registry is "at" a kind of non-public address
    /// only when every address it has is non-public: a name that answers
    /// with a public address and a loopback one opens nothing.
    pub(crate) async fn of(registry: &str) -> Self {
        let host = crate::reference::host_of(registry);
        let addresses: Option<Vec<IpAddr>> = match host.trim_matches(['[', ']']).parse::<IpAddr>() {
            Ok(ip) => Some(vec![ip]),
            Err(_) => tokio::net::lookup_host((host, 0))
                .await
                .ok()
                .map(|found| found.map(|a| a.ip()).collect()),
        };
        let resolved = addresses.as_ref().is_some_and(|a| !a.is_empty());
        Self {
            registry: registry.to_string(),
            kinds: kinds_at(&addresses.unwrap_or_default()),
            resolved,
        }
    }

    /// Checks one resolved address.
    pub(crate) fn check_ip(&self, ip: IpAddr) -> Result<(), Refusal> {
        let kind = address_kind(ip);
        if is_public(ip) || self.kinds.contains(&kind) {
            Ok(())
        } else {
            Err(Refusal(format!(
                "{ip} is not public ({kind}), and the registry {} is not at such an address",
                self.registry
            )))
        }
    }

    /// Checks a URL before it is fetched: its scheme, and its host when that
    /// is an address (names are checked when they resolve).
    pub(crate) fn check_url(&self, url: &Url) -> Result<(), Refusal> {
        let shown = wasm_agent_redact::url(url.as_str());
        match url.host() {
            Some(Host::Ipv4(ip)) => self.check_ip(IpAddr::V4(ip))?,
            Some(Host::Ipv6(ip)) => self.check_ip(IpAddr::V6(ip))?,
            Some(Host::Domain(_)) => {}
            None => return Err(Refusal(format!("{shown} has no host"))),
        }
        match url.scheme() {
            "https" => Ok(()),
            "http" if is_loopback(url) => Ok(()),
            _ => Err(Refusal(format!(
                "{shown} is not https (plain http is only for loopback)"
            ))),
        }
    }
}

/// The kinds of non-public address a registry with `addresses` is at: none
/// when any of them is public.
fn kinds_at(addresses: &[IpAddr]) -> Vec<&'static str> {
    let mut kinds = Vec::new();
    if addresses.iter().any(|ip| is_public(*ip)) {
        return kinds;
    }
    for ip in addresses {
        let kind = address_kind(*ip);
        if !kinds.contains(&kind) && !NEVER_OPENED.contains(&kind) {
            kinds.push(kind);
        }
    }
    kinds
}

/// True for `localhost` and loopback addresses.
fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Redirects: at most [`MAX_REDIRECTS`], each URL under the rules.
pub(crate) fn redirect_policy(rules: Arc<Rules>) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() >= MAX_REDIRECTS {
            return attempt.error(Refusal(format!("more than {MAX_REDIRECTS} redirects")));
        }
        match rules.check_url(attempt.url()) {
            Ok(()) => attempt.follow(),
            Err(refusal) => {
                let refusal = Refusal(format!("a redirect: {refusal}"));
                attempt.error(refusal)
            }
        }
    })
}

/// Name resolution that keeps only the addresses the rules allow.
pub(crate) struct Resolver(pub(crate) Arc<Rules>);

impl Resolve for Resolver {
    fn resolve(&self, name: Name) -> Resolving {
        let rules = self.0.clone();
        let name = name.as_str().to_string();
        Box::pin(async move {
            let found: Vec<_> = tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            let mut refused = None;
            let allowed: Vec<_> = found
                .into_iter()
                .filter(|a| match rules.check_ip(a.ip()) {
                    Ok(()) => true,
                    Err(refusal) => {
                        refused.get_or_insert(refusal);
                        false
                    }
                })
                .collect();
            match (allowed.is_empty(), refused) {
                (true, Some(refusal)) => Err(Box::new(Refusal(format!("{name}: {refusal}"))) as _),
                _ => Ok(Box::new(allowed.into_iter()) as Addrs),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(kinds: &[&'static str]) -> Rules {
        Rules {
            registry: "r.example:5000".into(),
            kinds: kinds.to_vec(),
            resolved: true,
        }
    }

    fn url(text: &str) -> Url {
        text.parse().unwrap()
    }

    #[test]
    fn a_public_registry_may_send_the_host_only_to_public_https() {
        let public = rules(&[]);
        assert!(public.check_url(&url("https://cdn.example/blob")).is_ok());
        assert!(public.check_url(&url("https://8.8.8.8/x")).is_ok());
        for refused in [
            "http://cdn.example/blob",
            "https://169.254.169.254/latest",
            "https://10.0.0.1/x",
            "https://[::ffff:10.0.0.1]/x",
            "https://127.0.0.1/x",
            "ftp://cdn.example/x",
        ] {
            assert!(public.check_url(&url(refused)).is_err(), "{refused}");
        }
    }

    #[test]
    fn a_registry_may_send_the_host_where_it_is_itself() {
        let loopback = rules(&["loopback"]);
        assert!(loopback.check_url(&url("http://127.0.0.1:9/x")).is_ok());
        assert!(loopback.check_url(&url("http://localhost:9/x")).is_ok());
        let error = loopback
            .check_url(&url("https://169.254.169.254/x"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("link-local"), "{error}");
        assert!(loopback.check_url(&url("https://10.1.2.3/x")).is_err());
        let private = rules(&["private"]);
        assert!(private.check_url(&url("https://10.1.2.3/x")).is_ok());
        assert!(private.check_url(&url("http://10.1.2.3/x")).is_err());
    }

    #[test]
    fn a_refused_url_never_shows_its_query_or_password() {
        let error = rules(&[])
            .check_url(&url("http://u:hunter2@cdn.example/b?X-Amz-Signature=abc"))
            .unwrap_err()
            .to_string();
        assert!(
            !error.contains("hunter2") && !error.contains("abc"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn names_are_checked_after_they_resolve() {
        let name = |text: &str| text.parse::<Name>().unwrap();
        let public = Resolver(Arc::new(rules(&[])));
        let error = match public.resolve(name("localhost")).await {
            Err(e) => e.to_string(),
            Ok(_) => panic!("localhost resolved for a public registry"),
        };
        assert!(
            error.starts_with("localhost: 127.0.0.1 is not public (loopback)"),
            "{error}"
        );
        let loopback = Resolver(Arc::new(rules(&["loopback"])));
        let found: Vec<_> = loopback.resolve(name("localhost")).await.unwrap().collect();
        assert!(found.iter().all(|a| a.ip().is_loopback()) && !found.is_empty());
    }

    #[tokio::test]
    async fn a_registry_opens_only_the_kind_it_is_wholly_at() {
        let loopback = Rules::of("127.0.0.1:5000").await;
        assert_eq!(loopback.kinds, ["loopback"]);
        let mapped = Rules::of("[::ffff:10.0.0.1]:5000").await;
        assert!(mapped.kinds.is_empty(), "{mapped:?}");
        let public = Rules::of("8.8.8.8:443").await;
        assert!(public.kinds.is_empty() && public.resolved);
        let nowhere = Rules::of("no-such-registry.invalid:5000").await;
        assert!(!nowhere.resolved);
    }

    #[test]
    fn a_name_answering_public_and_loopback_opens_nothing() {
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        assert!(kinds_at(&[ip("8.8.8.8"), ip("127.0.0.1")]).is_empty());
        assert_eq!(kinds_at(&[ip("127.0.0.1"), ip("::1")]), ["loopback"]);
        assert_eq!(kinds_at(&[ip("10.0.0.5")]), ["private"]);
        assert!(kinds_at(&[ip("198.18.0.1")]).is_empty(), "unclassified");
    }
}
