//! `--store URL`: which store holds sessions, as the operator names it.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// A store named by URL: `sqlite:PATH`, `postgres://...` or `memory:`.
///
/// Its `Display` never shows a password: a PostgreSQL URL prints as
/// `postgres://USER@HOST:PORT/DB`, without its query.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// In this process's memory, lost when it ends.
    Memory,
    /// A SQLite file (shared by the processes of one machine).
    Sqlite(PathBuf),
    /// A PostgreSQL database (shared by replicas), the URL as given.
    Postgres(String),
}

/// A `--store` value that names no store.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StoreUrlError(String);

const FORMS: &str = "sqlite:PATH, postgres://USER@HOST:PORT/DB or memory:";

impl FromStr for StoreUrl {
    type Err = StoreUrlError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text == "memory:" {
            return Ok(StoreUrl::Memory);
        }
        if let Some(path) = text.strip_prefix("sqlite:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            if path.is_empty() {
                return Err(StoreUrlError(
                    "sqlite: needs a file path, as in sqlite:/var/lib/wasm-agent/sessions.db"
                        .into(),
                ));
            }
            return Ok(StoreUrl::Sqlite(PathBuf::from(path)));
        }
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            return Ok(StoreUrl::Postgres(text.to_string()));
        }
        let what = match text.split_once(':') {
            Some((scheme, _)) if !scheme.contains('/') => format!("a {scheme}: URL names no store"),
            _ => "not a store URL".to_string(),
        };
        Err(StoreUrlError(format!("{what}; use {FORMS}")))
    }
}

impl<'de> serde::Deserialize<'de> for StoreUrl {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::Memory => f.write_str("memory:"),
            StoreUrl::Sqlite(path) => write!(f, "sqlite:{}", path.display()),
            StoreUrl::Postgres(url) => f.write_str(&without_secrets(url)),
        }
    }
}

impl fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreUrl({self})")
    }
}

/// `scheme://user:password@host/db?options` as `scheme://user@host/db`.
pub(crate) fn without_secrets(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "(a URL that cannot be shown)".to_string();
    };
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let host = match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{user}@{host}")
        }
        None => authority.to_string(),
    };
    format!("{scheme}://{host}{path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_form() {
        assert_eq!("memory:".parse::<StoreUrl>().unwrap(), StoreUrl::Memory);
        assert_eq!(
            "sqlite:data/s.db".parse::<StoreUrl>().unwrap(),
            StoreUrl::Sqlite("data/s.db".into())
        );
        assert_eq!(
            "sqlite:///var/s.db".parse::<StoreUrl>().unwrap(),
            StoreUrl::Sqlite("/var/s.db".into())
        );
        assert!(matches!(
            "postgresql://u@h/db".parse::<StoreUrl>().unwrap(),
            StoreUrl::Postgres(_)
        ));
    }

    #[test]
    fn refuses_what_names_no_store() {
        for (text, says) in [
            ("redis://h", "a redis: URL names no store; use sqlite:PATH"),
            ("sessions.db", "not a store URL"),
            ("sqlite:", "sqlite: needs a file path"),
        ] {
            let error = text.parse::<StoreUrl>().unwrap_err().to_string();
            assert!(error.contains(says), "{text}: {error}");
        }
    }

    #[test]
    fn never_shows_a_password() {
        let url: StoreUrl =
            "postgres://app:s3cret@db.internal:5432/tools?password=x&sslmode=require"
                .parse()
                .unwrap();
        assert_eq!(url.to_string(), "postgres://app@db.internal:5432/tools");
        assert!(!format!("{url:?}").contains("s3cret"));
        assert_eq!(
            without_secrets("postgres://h/db"),
            "postgres://h/db".to_string()
        );
    }
}
