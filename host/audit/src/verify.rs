//! `wasm-agent audit verify`: checks a log's chain record by record, across
//! its rotated files, and names the first record that does not hold.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use crate::AuditError;
use crate::chain::{self, GENESIS};
use crate::files::{self, ChainEnd};
use crate::head::Head;

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
    /// Bytes of a torn last record after the chain (a write cut short by a
    /// crash): not part of the chain, and cut off when the log is opened next.
    pub torn_bytes: u64,
    /// The head the log's writer noted (`FILE.head`, or the table's), which
    /// the chain reaches.
    pub noted_head: Option<Head>,
}

/// What a check asks of a chain beyond holding together.
#[derive(Clone, Debug, Default)]
pub struct Expect {
    /// Accept a chain that does not start at `seq` 0 (older files removed).
    pub partial: bool,
    /// The hash of a record noted elsewhere (`verify --head`): the chain
    /// must hold it, or records were cut from its end.
    pub head: Option<String>,
}

/// Checks the log at `path` and its rotated files (`FILE.1`, `FILE.2`, ...
/// first), and that the chain reaches its head file (`FILE.head`) and the
/// head `expect` names. Unless `expect.partial`, the chain must start at the
/// first record ever written (`seq` 0).
pub fn verify(path: &Path, expect: &Expect) -> Result<Verified, AuditError> {
    let paths = files::log_files(path);
    let noted = Head::read(&Head::path_beside(path))?;
    let mut chain = Chain::new(expect, noted);
    let count = paths.len();
    for (at, file) in paths.into_iter().enumerate() {
        chain.file(&file, at + 1 == count)?;
        chain.verified.files.push(file);
    }
    chain.finish(path)
}

/// Checks records kept elsewhere than in files (a table's rows, in order of
/// `seq`), named `location` in errors (`line` counts records from 1), and
/// that they reach the head noted beside them and the one `expect` names.
pub fn verify_records(
    location: &str,
    records: impl IntoIterator<Item = String>,
    noted: Option<Head>,
    expect: &Expect,
) -> Result<Verified, AuditError> {
    let mut chain = Chain::new(expect, noted);
    for (number, record) in (1..).zip(records) {
        chain.sealed(&record).map_err(|reason| AuditError::Broken {
            path: PathBuf::from(location),
            line: number,
            reason,
        })?;
    }
    chain.finish(Path::new(location))
}

struct Chain {
    partial: bool,
    /// The last record's `seq`.
    last: Option<u64>,
    /// The hash a record must have to meet `expect.head`, and whether one had.
    wanted: Option<String>,
    wanted_seen: bool,
    /// The hash of the record at the noted head's `seq`.
    at_noted: Option<String>,
    verified: Verified,
}

impl Chain {
    fn new(expect: &Expect, noted: Option<Head>) -> Self {
        Self {
            partial: expect.partial,
            last: None,
            wanted: expect.head.clone(),
            wanted_seen: false,
            at_noted: None,
            verified: Verified {
                files: Vec::new(),
                records: 0,
                seqs: None,
                head: GENESIS.into(),
                gaps: 0,
                torn_bytes: 0,
                noted_head: noted,
            },
        }
    }

    /// The chain checked so far, if it reaches the heads it must.
    fn finish(self, path: &Path) -> Result<Verified, AuditError> {
        let cut = |reason: String| AuditError::Cut {
            path: path.to_path_buf(),
            reason,
        };
        let end = ChainEnd {
            seq: self.last.map_or(0, |last| last + 1),
            prev: self.verified.head.clone(),
        };
        if let Some(noted) = &self.verified.noted_head {
            let at_noted = self.at_noted.clone();
            noted.reached_by(&end, |_| at_noted).map_err(cut)?;
        }
        if let Some(wanted) = &self.wanted
            && !self.wanted_seen
        {
            return Err(cut(format!(
                "no record has the head {wanted} given (the chain ends at seq {}, hash {})",
                self.last.map_or("-".into(), |l| l.to_string()),
                self.verified.head
            )));
        }
        Ok(self.verified)
    }

    fn file(&mut self, path: &Path, last_file: bool) -> Result<(), AuditError> {
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
            let broken = |reason: String| AuditError::Broken {
                path: path.to_path_buf(),
                line: number,
                reason,
            };
            let Some(complete) = line.strip_suffix(b"\n") else {
                // The end of the log: a write cut short, not a changed record.
                if last_file {
                    self.verified.torn_bytes = line.len() as u64;
                    return Ok(());
                }
                return Err(broken(
                    "the record is incomplete (no newline at its end), and later files follow"
                        .into(),
                ));
            };
            let text = std::str::from_utf8(complete)
                .map_err(|_| broken("the record is not UTF-8".into()))?;
            self.sealed(text).map_err(broken)?;
        }
        Ok(())
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
        if self.wanted.as_deref() == Some(unsealed.claimed) {
            self.wanted_seen = true;
        }
        if self
            .verified
            .noted_head
            .as_ref()
            .is_some_and(|noted| noted.seq == seq)
        {
            self.at_noted = Some(unsealed.claimed.to_string());
        }
        Ok(())
    }
}
