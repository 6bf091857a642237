//! `wasm-agent.lock`: the content digest of every component of a config,
//! written by `wasm-agent lock` beside the config and enforced by `--locked`.
//!
//! ```toml
//! version = 1
//!
//! [tools.calc]
//! component = "oci://ghcr.io/acme/calc:1.2"
//! manifest = "sha256:…"
//! digest = "sha256:…"
//! ```

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::digest::Digest;

/// The lock file's name, beside the config.
pub const LOCK_FILE: &str = "wasm-agent.lock";
/// The format this crate writes and reads.
const VERSION: u32 = 1;

/// What a lock file pins.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockFile {
    /// The format's version.
    pub version: u32,
    /// Each configured tool's component, by alias.
    #[serde(default)]
    pub tools: BTreeMap<String, Locked>,
}

/// One pinned component.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Locked {
    /// The component as the config names it (a path relative to the lock
    /// file, or an `oci://` reference).
    pub component: String,
    /// The manifest it resolved to (OCI references only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<Digest>,
    /// The component's content digest.
    pub digest: Digest,
}

/// A lock file that cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// It cannot be read.
    #[error("{path}: cannot read the lock file: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: std::io::Error,
    },
    /// It is not a lock file this version reads.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the line where known.
        message: String,
    },
    /// It cannot be written.
    #[error("{path}: cannot write the lock file: {reason}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: std::io::Error,
    },
}

impl LockFile {
    /// An empty lock file of the current version.
    pub fn new() -> Self {
        Self {
            version: VERSION,
            tools: BTreeMap::new(),
        }
    }

    /// The lock file beside `config`.
    pub fn beside(config: &Path) -> PathBuf {
        config
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .join(LOCK_FILE)
    }

    /// Reads a lock file; `None` when there is none.
    pub fn load(path: &Path) -> Result<Option<Self>, LockError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(reason) => {
                return Err(LockError::Read {
                    path: path.to_path_buf(),
                    reason,
                });
            }
        };
        let parse_error = |message: String| LockError::Parse {
            path: path.to_path_buf(),
            message,
        };
        let lock: LockFile = toml::from_str(&text).map_err(|e| {
            let line = e
                .span()
                .map(|s| format!("line {}: ", text[..s.start].matches('\n').count() + 1))
                .unwrap_or_default();
            parse_error(format!("{line}{}", e.message()))
        })?;
        if lock.version != VERSION {
            return Err(parse_error(format!(
                "lock file version {}; this wasm-agent reads version {VERSION}: run `wasm-agent lock` again",
                lock.version
            )));
        }
        Ok(Some(lock))
    }

    /// Writes the lock file (whole or not at all).
    pub fn save(&self, path: &Path) -> Result<(), LockError> {
        let write_error = |reason| LockError::Write {
            path: path.to_path_buf(),
            reason,
        };
        let body = toml::to_string(self).map_err(|e| write_error(std::io::Error::other(e)))?;
        let text = format!(
            "# Written by `wasm-agent lock`: the content digest of each component of the\n\
             # config beside it. `--locked` (or `locked = true`) refuses any other content.\n\n{body}"
        );
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mut file = tempfile::NamedTempFile::new_in(dir).map_err(write_error)?;
        file.write_all(text.as_bytes()).map_err(write_error)?;
        file.persist(path).map_err(|e| write_error(e.error))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_names_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = LockFile::beside(&dir.path().join("wasm-agent.toml"));
        assert_eq!(LockFile::load(&path).unwrap(), None);
        let mut lock = LockFile::new();
        lock.tools.insert(
            "calc".into(),
            Locked {
                component: "oci://127.0.0.1:5000/calc:1".into(),
                manifest: Some(Digest::of(b"m")),
                digest: Digest::of(b"c"),
            },
        );
        lock.tools.insert(
            "files".into(),
            Locked {
                component: "tools/files.wasm".into(),
                manifest: None,
                digest: Digest::of(b"f"),
            },
        );
        lock.save(&path).unwrap();
        assert_eq!(LockFile::load(&path).unwrap(), Some(lock));

        std::fs::write(
            &path,
            "version = 1\n\n[tools.x]\ncomponent = \"a\"\ndigest = \"md5:0\"\n",
        )
        .unwrap();
        let error = LockFile::load(&path).unwrap_err().to_string();
        assert!(error.contains("line 5"), "{error}");
        assert!(error.contains("only sha256"), "{error}");
        std::fs::write(&path, "version = 9\n").unwrap();
        let error = LockFile::load(&path).unwrap_err().to_string();
        assert!(error.contains("version 9"), "{error}");
    }
}
