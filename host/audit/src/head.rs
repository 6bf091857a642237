//! [`Head`]: the last record known to be written (its `seq` and hash), kept
//! apart from the records (`FILE.head` beside a file log, a row of its own
//! in a table), so that a log cut at its end is found: by the writer when
//! it opens the log, and by `verify`. An operator who keeps a head
//! somewhere else still (`verify --head HASH`) finds a cut that took the
//! head file with it.

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::AuditError;
use crate::files::ChainEnd;

/// The last record known to be written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    /// Its `seq`.
    pub seq: u64,
    /// Its hash.
    pub hash: String,
}

impl Head {
    /// What an empty head file says: no record was written yet.
    const NONE_WRITTEN: Head = Head {
        seq: u64::MAX,
        hash: String::new(),
    };

    /// The head of a chain that ends at `end` (`None` for an empty chain).
    pub fn of(end: &ChainEnd) -> Option<Self> {
        Some(Self {
            seq: end.seq.checked_sub(1)?,
            hash: end.prev.clone(),
        })
    }

    /// The head file of the log at `log`: `FILE.head`.
    pub fn path_beside(log: &Path) -> PathBuf {
        let mut name = log.as_os_str().to_owned();
        name.push(".head");
        PathBuf::from(name)
    }

    /// The head in `path`, if there is that file.
    pub fn read(path: &Path) -> Result<Option<Self>, AuditError> {
        match std::fs::read_to_string(path) {
            // Made, but never written: the log's first write failed (a log
            // with records and an empty head was cut: see `reached_by`).
            Ok(text) if text.is_empty() => Ok(Some(Self::NONE_WRITTEN)),
            Ok(text) => Self::parse(&text)
                .map(Some)
                .ok_or_else(|| AuditError::Damaged {
                    path: path.to_path_buf(),
                    reason: "the head file does not hold `SEQ HASH`".into(),
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(AuditError::Read {
                path: path.to_path_buf(),
                reason: e.to_string(),
            }),
        }
    }

    /// A head read from elsewhere (a table's row), if it is one: a hash is
    /// 64 hex digits.
    pub fn checked(seq: u64, hash: String) -> Option<Self> {
        let hex = hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit());
        hex.then_some(Self { seq, hash })
    }

    fn parse(text: &str) -> Option<Self> {
        let (seq, hash) = text.trim().split_once(' ')?;
        Self::checked(seq.parse().ok()?, hash.trim().to_string())
    }

    /// Its line in a head file: always the same length, so that it is
    /// written over in place.
    fn line(&self) -> String {
        format!("{:020} {}\n", self.seq, self.hash)
    }

    /// Whether a chain that ends at `end` reaches this head: it holds the
    /// head's record (`hash_at` finds an earlier record's hash by `seq`).
    /// The error says how the chain falls short.
    pub fn reached_by(
        &self,
        end: &ChainEnd,
        hash_at: impl FnOnce(u64) -> Option<String>,
    ) -> Result<(), String> {
        if *self == Self::NONE_WRITTEN {
            return match end.seq {
                0 => Ok(()),
                _ => Err("the log holds records, but its head file is empty".into()),
            };
        }
        let Some(last) = end.seq.checked_sub(1) else {
            return Err(format!(
                "the log has no records, but its head says seq {} was written",
                self.seq
            ));
        };
        let found = match last.cmp(&self.seq) {
            std::cmp::Ordering::Less => {
                return Err(format!(
                    "the log ends at seq {last}, but its head says seq {} was written",
                    self.seq
                ));
            }
            std::cmp::Ordering::Equal => Some(end.prev.clone()),
            std::cmp::Ordering::Greater => hash_at(self.seq),
        };
        match found {
            Some(hash) if hash == self.hash => Ok(()),
            _ => Err(format!(
                "its record seq {} is not the one its head names (hash {}…)",
                self.seq,
                self.hash.get(..12).unwrap_or(&self.hash)
            )),
        }
    }
}

/// A log's head file, written over in place after every batch.
pub(crate) struct HeadFile {
    path: PathBuf,
    file: File,
}

impl HeadFile {
    /// Opens (or creates, owner-only) the head file at `path`, and holds
    /// it locked: one process writes a log (two would fork its chain and
    /// cut each other's records).
    pub fn open(path: PathBuf) -> Result<Self, AuditError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|e| AuditError::Write {
                path: path.clone(),
                reason: format!("cannot open the head file: {e}"),
            })?;
        // SAFETY: flock takes a descriptor this function owns, open until drop.
        let locked = unsafe {
            libc::flock(
                std::os::fd::AsRawFd::as_raw_fd(&file),
                libc::LOCK_EX | libc::LOCK_NB,
            )
        } == 0;
        if !locked {
            return Err(AuditError::Write {
                path,
                reason: "another process writes this audit log (its head file is locked); \
                         give each process a log of its own"
                    .into(),
            });
        }
        Ok(Self { path, file })
    }

    /// Notes `head` as the last record written.
    pub fn write(&mut self, head: &Head) {
        if let Err(error) = self.file.write_all_at(head.line().as_bytes(), 0) {
            tracing::warn!(
                target: "wasm_agent::audit",
                path = %self.path.display(),
                "cannot note the log's head: {error}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(seq: u64, prev: &str) -> ChainEnd {
        ChainEnd {
            seq,
            prev: prev.into(),
        }
    }

    #[test]
    fn a_chain_reaches_its_head_or_says_how_it_falls_short() {
        let (a, b) = ("a".repeat(64), "b".repeat(64));
        let head = Head {
            seq: 4,
            hash: a.clone(),
        };
        assert_eq!(Head::parse(&head.line()), Some(head.clone()));
        assert_eq!(head.line().len(), 86);
        assert!(head.reached_by(&end(5, &a), |_| None).is_ok());
        assert!(
            head.reached_by(&end(9, &b), |seq| (seq == 4).then(|| a.clone()))
                .is_ok()
        );
        let cut = head.reached_by(&end(3, &b), |_| None).unwrap_err();
        assert!(
            cut.contains("ends at seq 2, but its head says seq 4"),
            "{cut}"
        );
        let replaced = head.reached_by(&end(5, &b), |_| None).unwrap_err();
        assert!(
            replaced.contains("is not the one its head names"),
            "{replaced}"
        );
        let emptied = head.reached_by(&ChainEnd::start(), |_| None).unwrap_err();
        assert!(emptied.contains("has no records"), "{emptied}");
        assert_eq!(Head::parse("12 xyz"), None);
    }
}
