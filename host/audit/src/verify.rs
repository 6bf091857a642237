//! `wasm-agent audit verify`: checks a log's chain record by record, across
//! its rotated files, and names the first record that does not hold.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use crate::AuditError;
use crate::chain::{self, GENESIS};
use crate::files;

/// A chain that holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The files checked, in order.
    pub files: Vec<PathBuf>,
    /// How many records.
    pub records: u64,
    /// The first record's and the last record's `seq`.
    pub seqs: Option<(u64, u64)>,
    /// The last record's hash: note it somewhere else, and a later check can
    /// tell that no record up to it was removed from the end.
    pub head: String,
    /// Gap records (records dropped while the log was written).
    pub gaps: u64,
}

/// Checks the log at `path` and its rotated files (`FILE.1`, `FILE.2`, ...
/// first). Unless `partial`, the chain must start at the first record ever
/// written (`seq` 0); with it, a chain whose older files were removed
/// checks from its first record on.
pub fn verify(path: &Path, partial: bool) -> Result<Verified, AuditError> {
    let mut paths: Vec<PathBuf> = files::rotated(path).into_iter().map(|(_, p)| p).collect();
    paths.push(path.to_path_buf());
    let mut chain = Chain::new(partial);
    for file in paths {
        chain.file(&file)?;
        chain.verified.files.push(file);
    }
    Ok(chain.verified)
}

/// Checks records kept elsewhere than in files (a table's rows, in order of
/// `seq`), named `location` in errors; `line` in an error counts records
/// from 1.
pub fn verify_records(
    location: &str,
    records: impl IntoIterator<Item = String>,
    partial: bool,
) -> Result<Verified, AuditError> {
    let mut chain = Chain::new(partial);
    for (number, record) in (1..).zip(records) {
        chain.sealed(&record).map_err(|reason| AuditError::Broken {
            path: PathBuf::from(location),
            line: number,
            reason,
        })?;
    }
    Ok(chain.verified)
}

struct Chain {
    partial: bool,
    /// The last record's `seq`.
    last: Option<u64>,
    verified: Verified,
}

impl Chain {
    fn new(partial: bool) -> Self {
        Self {
            partial,
            last: None,
            verified: Verified {
                files: Vec::new(),
                records: 0,
                seqs: None,
                head: GENESIS.into(),
                gaps: 0,
            },
        }
    }

    fn file(&mut self, path: &Path) -> Result<(), AuditError> {
        let file = std::fs::File::open(path).map_err(|e| AuditError::Read {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let mut reader = std::io::BufReader::new(file);
        let mut line = Vec::new();
        for number in 1.. {
            line.clear();
            let read = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| AuditError::Read {
                    path: path.to_path_buf(),
                    reason: e.to_string(),
                })?;
            if read == 0 {
                return Ok(());
            }
            self.record(&line).map_err(|reason| AuditError::Broken {
                path: path.to_path_buf(),
                line: number,
                reason,
            })?;
        }
        Ok(())
    }

    fn record(&mut self, line: &[u8]) -> Result<(), String> {
        let line = line
            .strip_suffix(b"\n")
            .ok_or("the record is incomplete (no newline at its end)")?;
        let line = std::str::from_utf8(line).map_err(|_| "the record is not UTF-8")?;
        self.sealed(line)
    }

    fn sealed(&mut self, line: &str) -> Result<(), String> {
        let unsealed = chain::unseal(line).ok_or("not a sealed record (no hash at its end)")?;
        if !unsealed.intact() {
            return Err("the record was changed: its hash does not match its content".into());
        }
        let body: serde_json::Value =
            serde_json::from_str(&unsealed.body).map_err(|e| format!("not JSON: {e}"))?;
        let seq = body["seq"].as_u64().ok_or("the record has no seq")?;
        let prev = body["prev"].as_str().ok_or("the record has no prev")?;
        match self.last {
            None if !self.partial && (seq != 0 || prev != GENESIS) => {
                return Err(format!(
                    "the chain starts at seq {seq}, not 0: earlier records are missing \
                     (--partial checks a chain whose older files were removed)"
                ));
            }
            None => {}
            Some(last) if seq != last + 1 => {
                return Err(format!(
                    "seq {seq} follows seq {last}: records were deleted, inserted or reordered"
                ));
            }
            Some(_) if prev != self.verified.head => {
                return Err(
                    "its prev is not the hash of the record before it: a record was replaced"
                        .into(),
                );
            }
            Some(_) => {}
        }
        if body["event"] == "gap" {
            self.verified.gaps += 1;
        }
        let first = self.verified.seqs.map_or(seq, |(first, _)| first);
        self.verified.seqs = Some((first, seq));
        self.verified.records += 1;
        self.verified.head = unsealed.claimed.to_string();
        self.last = Some(seq);
        Ok(())
    }
}
