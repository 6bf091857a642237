//! [`AuditSink`], where sealed records go, and [`FileSink`], the file: it
//! appends whole batches, rotates to `FILE.N` when full, notes the head
//! after each batch, and never leaves a torn record behind: after a short
//! or failed write (a full disk) it cuts the file back to its last
//! complete record before it writes again.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::AuditError;
use crate::files::{self, ChainEnd, Torn};
use crate::head::{Head, HeadFile};

/// Where sealed records go: a file rotated by size, or a table.
pub trait AuditSink: Send + 'static {
    /// Appends `records` (sealed lines, without newlines) in order, the
    /// last of them being `head`; on an error none of them counts as
    /// written, and they come again.
    fn append(&mut self, records: &[String], head: &Head) -> Result<(), String>;
}

/// The file sink.
pub(crate) struct FileSink {
    path: PathBuf,
    file: Option<File>,
    /// Where the last complete record ends: the file's length, but for the
    /// torn bytes of a write that failed.
    size: u64,
    /// Bytes past `size` may be there (a failed write, not yet cut off).
    torn: bool,
    max_size: u64,
    /// Where the head is noted (none for a device or pipe).
    head: Option<HeadFile>,
    /// The last record written, for the message at rotation.
    written: Option<Head>,
}

impl FileSink {
    /// Opens the log at `path` (created owner-only), cutting off `torn`
    /// bytes after its last complete record.
    pub fn open(
        path: &Path,
        end: &ChainEnd,
        torn: Option<&Torn>,
        max_size: u64,
        head: Option<HeadFile>,
    ) -> Result<Self, AuditError> {
        let file = open_file(path)?;
        let cut_to = torn.filter(|t| t.path == path).map(|t| t.complete);
        if let Some(length) = cut_to {
            file.set_len(length).map_err(|e| AuditError::Write {
                path: path.to_path_buf(),
                reason: format!("cannot cut off its torn last record: {e}"),
            })?;
        }
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(Self {
            path: path.to_path_buf(),
            file: Some(file),
            size,
            torn: false,
            max_size: max_size.max(1),
            head,
            written: Head::of(end),
        })
    }

    fn rotate(&mut self) -> Result<(), String> {
        let target = files::next_rotated(&self.path);
        std::fs::rename(&self.path, &target)
            .map_err(|e| format!("cannot rotate to {}: {e}", target.display()))?;
        if let Some(head) = &self.written {
            // Worth keeping elsewhere: `verify --head` finds a cut against it.
            tracing::info!(
                target: "wasm_agent::audit",
                "rotated the audit log to {}; head seq {} hash {}",
                target.display(),
                head.seq,
                head.hash
            );
        }
        self.file = Some(open_file(&self.path).map_err(|e| e.to_string())?);
        self.size = 0;
        self.torn = false;
        Ok(())
    }
}

impl AuditSink for FileSink {
    fn append(&mut self, records: &[String], head: &Head) -> Result<(), String> {
        let mut bytes = Vec::with_capacity(records.iter().map(|r| r.len() + 1).sum());
        for record in records {
            bytes.extend_from_slice(record.as_bytes());
            bytes.push(b'\n');
        }
        if self.size > 0 && self.size + bytes.len() as u64 > self.max_size {
            self.rotate()?;
        }
        let file = match &mut self.file {
            Some(file) => file,
            None => self
                .file
                .insert(open_file(&self.path).map_err(|e| e.to_string())?),
        };
        if self.torn {
            file.set_len(self.size)
                .map_err(|e| format!("cannot cut off a torn record: {e}"))?;
            self.torn = false;
        }
        if let Err(error) = file.write_all(&bytes) {
            // Back to the last complete record, now or before the next write
            // (a device or pipe has nothing to cut back).
            self.torn = self.head.is_some() && file.set_len(self.size).is_err();
            return Err(error.to_string());
        }
        self.size += bytes.len() as u64;
        if let Some(noted) = &mut self.head {
            noted.write(head);
        }
        self.written = Some(head.clone());
        Ok(())
    }
}

/// Opens the log file for appending, created private to its owner.
pub(crate) fn open_file(path: &Path) -> Result<File, AuditError> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path).map_err(|e| AuditError::Write {
        path: path.to_path_buf(),
        reason: format!("cannot open it for appending: {e}"),
    })
}
