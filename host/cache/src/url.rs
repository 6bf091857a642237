//! `--cache URL`: which cache keeps tool results, as the operator names it.

use std::fmt;
use std::str::FromStr;

/// A cache named by URL: `memory:` or `redis://...` (also `rediss://` and
/// `redis+unix://`).
///
/// Its `Display` never shows a password: `redis://:secret@host:6379/0`
/// prints as `redis://host:6379/0`.
#[derive(Clone, PartialEq, Eq)]
pub enum CacheUrl {
    /// In this process's memory (the default).
    Memory,
    /// A Redis server (shared by replicas), the URL as given.
    Redis(String),
}

/// A `--cache` value that names no cache.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CacheUrlError(String);

impl FromStr for CacheUrl {
    type Err = CacheUrlError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text == "memory:" {
            return Ok(CacheUrl::Memory);
        }
        let redis = ["redis://", "rediss://", "redis+unix://", "unix://"];
        if redis.iter().any(|scheme| text.starts_with(scheme)) {
            return Ok(CacheUrl::Redis(text.to_string()));
        }
        Err(CacheUrlError(format!(
            "{} is not a cache URL; use redis://HOST:PORT[/DB] or memory:",
            CacheUrl::Redis(text.to_string())
        )))
    }
}

impl<'de> serde::Deserialize<'de> for CacheUrl {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for CacheUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheUrl::Memory => f.write_str("memory:"),
            CacheUrl::Redis(url) => {
                // Everything between `//` and the last `@` is credentials.
                let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
                let (authority, path) = match rest.find('/') {
                    Some(at) => rest.split_at(at),
                    None => (rest, ""),
                };
                let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
                let path = path.split('?').next().unwrap_or_default();
                if scheme.is_empty() {
                    write!(f, "{host}{path}")
                } else {
                    write!(f, "{scheme}://{host}{path}")
                }
            }
        }
    }
}

impl fmt::Debug for CacheUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CacheUrl({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_parse_and_print_without_secrets() {
        assert_eq!("memory:".parse::<CacheUrl>().unwrap(), CacheUrl::Memory);
        let url: CacheUrl = "redis://user:s3cret@cache.internal:6379/2?protocol=resp3"
            .parse()
            .unwrap();
        assert_eq!(url.to_string(), "redis://cache.internal:6379/2");
        assert!(!format!("{url:?}").contains("s3cret"));
        let url: CacheUrl = "rediss://:p@ss@h:6380".parse().unwrap();
        assert_eq!(url.to_string(), "rediss://h:6380");
        assert_eq!(
            "redis+unix:///run/redis.sock"
                .parse::<CacheUrl>()
                .unwrap()
                .to_string(),
            "redis+unix:///run/redis.sock"
        );
    }

    #[test]
    fn other_forms_are_refused_without_their_secrets() {
        for bad in [
            "",
            "redis:",
            "http://u:pw@h/",
            "memcached://h:11211",
            "sqlite:x",
        ] {
            let err = bad.parse::<CacheUrl>().unwrap_err().to_string();
            assert!(err.contains("redis://HOST:PORT"), "{bad}: {err}");
            assert!(!err.contains("pw"), "{err}");
        }
    }
}
