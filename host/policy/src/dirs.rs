//! Directory grants: which host directories a tool sees, where, and how.

use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

use super::{ParseError, PolicyError};

/// Whether a granted directory may be written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DirMode {
    /// Read-only (the default).
    #[default]
    Ro,
    /// Read and write.
    Rw,
}

/// A host directory made visible to the tool at a guest path.
///
/// Text form (CLI and config): `HOST[:GUEST][:ro|:rw]`; the guest path defaults
/// to the absolute host path and the mode to read-only.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DirGrant {
    /// The directory on the host.
    pub host: PathBuf,
    /// Where the tool sees it (absolute); `None` means the absolute host path.
    pub guest: Option<String>,
    /// Read-only or read-write.
    pub mode: DirMode,
    /// The folder's identity when the policy was resolved: a call refuses a
    /// grant whose path leads to another folder by then (moved, replaced or
    /// linked elsewhere), so a grant cannot be redirected.
    pub identity: Option<FolderId>,
}

/// A folder's identity on its file system (device and inode), whatever the
/// path that leads to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FolderId {
    device: u64,
    inode: u64,
}

impl FolderId {
    /// The identity of the file `metadata` describes (none where the
    /// platform has no inodes).
    pub fn of(metadata: &std::fs::Metadata) -> Option<Self> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Some(Self {
                device: metadata.dev(),
                inode: metadata.ino(),
            })
        }
        #[cfg(not(unix))]
        {
            let _ = metadata;
            None
        }
    }
}

impl DirGrant {
    /// The guest path this grant appears at.
    pub fn guest_path(&self) -> String {
        self.guest
            .clone()
            .unwrap_or_else(|| self.host.to_string_lossy().into_owned())
    }

    /// Resolves a relative host path against `base`.
    pub fn relative_to(mut self, base: &Path) -> Self {
        if self.host.is_relative() {
            self.host = base.join(&self.host);
        }
        self
    }
}

impl FromStr for DirGrant {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (rest, mode) = match text.rsplit_once(':') {
            Some((rest, "ro")) => (rest, DirMode::Ro),
            Some((rest, "rw")) => (rest, DirMode::Rw),
            _ => (text, DirMode::Ro),
        };
        let (host, guest) = match rest.split_once(':') {
            Some((host, guest)) => (host, Some(guest.to_string())),
            None => (rest, None),
        };
        if host.is_empty() {
            return Err(ParseError::new(
                "directory grant",
                text,
                "expected HOST[:GUEST][:ro|:rw]",
            ));
        }
        if guest.as_deref() == Some("") {
            return Err(ParseError::new(
                "directory grant",
                text,
                "the guest path after ':' is empty",
            ));
        }
        Ok(DirGrant {
            host: PathBuf::from(host),
            guest,
            mode,
            identity: None,
        })
    }
}

impl fmt::Display for DirGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = match self.mode {
            DirMode::Ro => "ro",
            DirMode::Rw => "rw",
        };
        write!(f, "{}:{}:{mode}", self.host.display(), self.guest_path())
    }
}

impl Serialize for DirGrant {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Accepts `"HOST[:GUEST][:ro|:rw]"` or `{ host = "...", guest = "...", mode = "rw" }`.
impl<'de> Deserialize<'de> for DirGrant {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Table {
            host: PathBuf,
            guest: Option<String>,
            #[serde(default)]
            mode: DirMode,
        }
        #[derive(Deserialize)]
        #[serde(
            untagged,
            expecting = "\"HOST[:GUEST][:ro|:rw]\" or { host, guest, mode }"
        )]
        enum Form {
            Text(String),
            Table(Table),
        }
        match Form::deserialize(deserializer)? {
            Form::Text(text) => text.parse().map_err(de::Error::custom),
            Form::Table(t) => Ok(DirGrant {
                host: t.host,
                guest: t.guest,
                mode: t.mode,
                identity: None,
            }),
        }
    }
}

/// Checks the guest paths given, without touching the file system.
pub(super) fn check(grants: &[DirGrant]) -> Result<(), PolicyError> {
    grants
        .iter()
        .filter_map(|grant| grant.guest.as_deref())
        .try_for_each(check_guest_path)
}

/// Canonicalizes host paths and checks guest paths; two grants may not share
/// a guest path.
pub(super) fn resolve(grants: Vec<DirGrant>) -> Result<Vec<DirGrant>, PolicyError> {
    let mut resolved: Vec<DirGrant> = Vec::with_capacity(grants.len());
    for grant in grants {
        let host = grant
            .host
            .canonicalize()
            .map_err(|e| PolicyError::MissingDir {
                path: grant.host.clone(),
                reason: e.to_string(),
            })?;
        let metadata = std::fs::metadata(&host).map_err(|e| PolicyError::MissingDir {
            path: grant.host.clone(),
            reason: e.to_string(),
        })?;
        if !metadata.is_dir() {
            return Err(PolicyError::MissingDir {
                path: grant.host,
                reason: "not a directory".into(),
            });
        }
        let guest = grant
            .guest
            .clone()
            .unwrap_or_else(|| host.to_string_lossy().into_owned());
        check_guest_path(&guest)?;
        if resolved.iter().any(|g| g.guest_path() == guest) {
            return Err(PolicyError::GuestPath {
                guest,
                reason: "is granted twice".into(),
            });
        }
        resolved.push(DirGrant {
            host,
            guest: Some(guest),
            mode: grant.mode,
            identity: FolderId::of(&metadata),
        });
    }
    Ok(resolved)
}

fn check_guest_path(guest: &str) -> Result<(), PolicyError> {
    let err = |reason: &str| PolicyError::GuestPath {
        guest: guest.to_string(),
        reason: reason.into(),
    };
    if !guest.starts_with('/') {
        return Err(err("must be absolute (start with '/')"));
    }
    if Path::new(guest)
        .components()
        .any(|c| matches!(c, Component::ParentDir))
    {
        return Err(err("must not contain '..'"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(text: &str) -> DirGrant {
        text.parse().unwrap()
    }

    #[test]
    fn parses_every_text_form() {
        assert_eq!(
            grant("data"),
            DirGrant {
                host: "data".into(),
                guest: None,
                mode: DirMode::Ro,
                identity: None,
            }
        );
        assert_eq!(grant("data:rw").mode, DirMode::Rw);
        assert_eq!(grant("data:/d").guest.as_deref(), Some("/d"));
        let full = grant("/srv/data:/data:rw");
        assert_eq!(full.host, PathBuf::from("/srv/data"));
        assert_eq!(full.guest.as_deref(), Some("/data"));
        assert_eq!(full.mode, DirMode::Rw);
    }

    #[test]
    fn rejects_empty_parts() {
        assert!(":/x".parse::<DirGrant>().is_err());
        assert!("data::rw".parse::<DirGrant>().is_err());
    }

    #[test]
    fn resolve_defaults_guest_to_canonical_host_path() {
        let dir = std::env::temp_dir();
        let resolved = resolve(vec![DirGrant {
            host: dir.clone(),
            guest: None,
            mode: DirMode::Ro,
            identity: None,
        }])
        .unwrap();
        assert_eq!(
            resolved[0].guest_path(),
            dir.canonicalize().unwrap().to_string_lossy()
        );
    }

    #[test]
    fn resolve_refuses_missing_dirs_relative_guests_and_duplicates() {
        let missing = resolve(vec![grant("/definitely/not/here")]).unwrap_err();
        assert!(matches!(missing, PolicyError::MissingDir { .. }));
        let tmp = std::env::temp_dir().to_string_lossy().into_owned();
        let relative = resolve(vec![grant(&format!("{tmp}:data"))]).unwrap_err();
        assert!(relative.to_string().contains("absolute"), "{relative}");
        let dotdot = resolve(vec![grant(&format!("{tmp}:/a/../b"))]).unwrap_err();
        assert!(dotdot.to_string().contains(".."), "{dotdot}");
        let twice = resolve(vec![
            grant(&format!("{tmp}:/d")),
            grant(&format!("{tmp}:/d:rw")),
        ])
        .unwrap_err();
        assert!(twice.to_string().contains("twice"), "{twice}");
    }
}
