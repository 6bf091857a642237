//! The files of one audit log: `FILE` and, once rotated, `FILE.1`,
//! `FILE.2`, ... (oldest first), and the chain's end read back from them.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::AuditError;
use crate::chain::{self, GENESIS};

/// The tail read back to find the last record (records are far smaller).
const TAIL: u64 = 1 << 20;

/// Where the chain stands: the next record's `seq` and `prev`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainEnd {
    /// The next record's number.
    pub seq: u64,
    /// The hash of the last record.
    pub prev: String,
}

impl ChainEnd {
    /// The end of an empty chain.
    pub fn start() -> Self {
        Self {
            seq: 0,
            prev: GENESIS.into(),
        }
    }
}

/// Every file of the log at `path`, oldest first: its rotated files, then
/// itself.
pub fn log_files(path: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = rotated(path).into_iter().map(|(_, p)| p).collect();
    files.push(path.to_path_buf());
    files
}

/// The rotated files of the log at `path`, oldest first, with their numbers.
pub fn rotated(path: &Path) -> Vec<(u64, PathBuf)> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Vec::new();
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let prefix = format!("{}.", name.to_string_lossy());
    let mut found: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let file = entry.file_name().to_string_lossy().into_owned();
            let number = file.strip_prefix(&prefix)?.parse().ok()?;
            Some((number, entry.path()))
        })
        .collect();
    found.sort();
    found
}

/// Bytes after the last complete record of a log's file: a write cut
/// short (a crash mid-write), which the writer trims before it goes on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Torn {
    /// The file.
    pub path: PathBuf,
    /// Where its last complete record ends.
    pub complete: u64,
    /// How many bytes follow it.
    pub bytes: u64,
}

/// Where the chain of the log at `path` ends: its last complete record, or
/// the last rotated file's when it has none; with the torn bytes after it.
pub fn chain_end(path: &Path) -> Result<(ChainEnd, Option<Torn>), AuditError> {
    let (last, torn) = last_record(path)?;
    if let Some(end) = last {
        return Ok((end, torn));
    }
    let end = match rotated(path).last() {
        Some((_, previous)) => last_record(previous)?.0.unwrap_or_else(ChainEnd::start),
        None => ChainEnd::start(),
    };
    Ok((end, torn))
}

/// The end of the chain in one file (`None` when it has no complete record,
/// is missing or is not a regular file), and what follows its last newline.
fn last_record(path: &Path) -> Result<(Option<ChainEnd>, Option<Torn>), AuditError> {
    let damaged = |reason: String| AuditError::Damaged {
        path: path.to_path_buf(),
        reason,
    };
    let Ok(mut file) = File::open(path) else {
        return Ok((None, None));
    };
    let meta = file
        .metadata()
        .map_err(|e| damaged(format!("cannot read it: {e}")))?;
    if !meta.is_file() || meta.len() == 0 {
        return Ok((None, None));
    }
    let start = meta.len().saturating_sub(TAIL);
    let mut tail = Vec::new();
    file.seek(SeekFrom::Start(start))
        .and_then(|_| file.take(TAIL).read_to_end(&mut tail))
        .map_err(|e| damaged(format!("cannot read it: {e}")))?;
    let complete = match tail.iter().rposition(|b| *b == b'\n') {
        Some(newline) => newline + 1,
        None if start == 0 => 0,
        None => return Err(damaged("its last 1 MiB holds no newline".into())),
    };
    let torn = (complete < tail.len()).then(|| Torn {
        path: path.to_path_buf(),
        complete: start + complete as u64,
        bytes: (tail.len() - complete) as u64,
    });
    let Some(text) = tail[..complete].strip_suffix(b"\n") else {
        return Ok((None, torn));
    };
    let line = text.rsplit(|b| *b == b'\n').next().unwrap_or(text);
    let line =
        std::str::from_utf8(line).map_err(|_| damaged("its last line is not UTF-8".into()))?;
    let end = ChainEnd::after(line).map_err(damaged)?;
    Ok((Some(end), torn))
}

/// The hash of record `seq` of the log at `path`, looked for in its file
/// and then its rotated files, newest first.
pub fn record_hash(path: &Path, seq: u64) -> Option<String> {
    let mut files = vec![path.to_path_buf()];
    files.extend(rotated(path).into_iter().rev().map(|(_, p)| p));
    for file in files {
        let Ok(file) = File::open(&file) else {
            continue;
        };
        for line in std::io::BufRead::lines(std::io::BufReader::new(file)).map_while(Result::ok) {
            let Some(unsealed) = chain::unseal(&line) else {
                continue;
            };
            let found = serde_json::from_str::<serde_json::Value>(&unsealed.body)
                .ok()
                .and_then(|v| v.get("seq")?.as_u64());
            if found == Some(seq) {
                return Some(unsealed.claimed.to_string());
            }
        }
    }
    None
}

impl ChainEnd {
    /// Where the chain stands after its last record, `line`, which must
    /// check against its hash.
    pub fn after(line: &str) -> Result<Self, String> {
        let unsealed = chain::unseal(line)
            .filter(|u| u.intact())
            .ok_or("its last record does not check against its hash")?;
        let seq = serde_json::from_str::<serde_json::Value>(&unsealed.body)
            .ok()
            .and_then(|v| v.get("seq")?.as_u64())
            .ok_or("its last record has no seq")?;
        Ok(ChainEnd {
            seq: seq + 1,
            prev: unsealed.claimed.to_string(),
        })
    }
}

/// The name the current file of the log at `path` is rotated to.
pub fn next_rotated(path: &Path) -> PathBuf {
    let number = rotated(path).last().map_or(1, |(n, _)| n + 1);
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{number}"));
    PathBuf::from(name)
}
