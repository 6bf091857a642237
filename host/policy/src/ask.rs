//! "Ask" grants: capabilities a tool gets only when the person behind the
//! call allows them, for that call or that session (never the model).
//!
//! Text form (CLI and config), one per entry: a network pattern
//! (`https://*.github.com`, as in `network`) or a folder
//! (`/home/me/docs:ro`, as in `dirs`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

use super::{DirGrant, NetworkGrant, ParseError, PolicyError};

/// One capability to ask about.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AskGrant {
    /// Destinations matching a network pattern.
    Network(NetworkGrant),
    /// A folder, read-only or read-write.
    Dir(DirGrant),
}

impl AskGrant {
    /// The network pattern, if this is one.
    pub fn network(&self) -> Option<&NetworkGrant> {
        match self {
            AskGrant::Network(grant) => Some(grant),
            AskGrant::Dir(_) => None,
        }
    }

    /// The folder, if this is one.
    pub fn dir(&self) -> Option<&DirGrant> {
        match self {
            AskGrant::Dir(grant) => Some(grant),
            AskGrant::Network(_) => None,
        }
    }
}

impl FromStr for AskGrant {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.contains("://") {
            text.parse().map(AskGrant::Network)
        } else if text.starts_with('/') || text.starts_with('.') {
            text.parse().map(AskGrant::Dir)
        } else {
            Err(ParseError::new(
                "ask grant",
                text,
                "expected a network pattern (scheme://host[:port]) or a folder \
                 (/HOST[:GUEST][:ro|:rw])",
            ))
        }
    }
}

impl fmt::Display for AskGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AskGrant::Network(grant) => grant.fmt(f),
            AskGrant::Dir(grant) => grant.fmt(f),
        }
    }
}

impl Serialize for AskGrant {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for AskGrant {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(de::Error::custom)
    }
}

/// Resolves the folders among `grants` (canonical host paths, checked guest
/// paths); none may share a guest path with a folder `granted` already.
pub(super) fn resolve(
    grants: Vec<AskGrant>,
    granted: &[DirGrant],
) -> Result<Vec<AskGrant>, PolicyError> {
    let (folders, mut resolved): (Vec<AskGrant>, Vec<AskGrant>) =
        grants.into_iter().partition(|g| g.dir().is_some());
    let folders: Vec<DirGrant> = folders
        .into_iter()
        .filter_map(|g| g.dir().cloned())
        .collect();
    for folder in super::dirs::resolve(folders)? {
        let guest = folder.guest_path();
        if granted.iter().any(|g| g.guest_path() == guest) {
            return Err(PolicyError::GuestPath {
                guest,
                reason: "is both granted (dirs) and asked for (ask)".into(),
            });
        }
        resolved.push(AskGrant::Dir(folder));
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_patterns_and_folders_are_told_apart() {
        let host: AskGrant = "https://*.github.com".parse().unwrap();
        assert!(
            host.network()
                .unwrap()
                .allows("https", "api.github.com", 443)
        );
        let folder: AskGrant = "/home/me/docs:ro".parse().unwrap();
        assert_eq!(
            folder.dir().unwrap().host,
            std::path::Path::new("/home/me/docs")
        );
        let error = "docs".parse::<AskGrant>().unwrap_err().to_string();
        assert!(
            error.contains("network pattern") && error.contains("folder"),
            "{error}"
        );
        let round: Vec<AskGrant> =
            serde_json::from_str(r#"["http://127.0.0.1:8080", "./data:/data:rw"]"#).unwrap();
        assert_eq!(
            serde_json::to_string(&round).unwrap(),
            r#"["http://127.0.0.1:8080","./data:/data:rw"]"#
        );
    }
}
