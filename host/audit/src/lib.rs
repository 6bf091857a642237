//! # wasm-agent-audit
//!
//! The audit trail of a tool host: one JSON object per line for every call
//! ([`AuditLog`], a [`CallAuditor`](wasm_agent_sandbox::CallAuditor) for
//! `ToolHostBuilder::auditor`), each carrying the hash of the one before it,
//! so that [`verify`] finds the first record edited, deleted or moved.
//! Records are written in batches by a thread of their own, or, by a log
//! that fails closed, by each call before it is answered; the file is
//! rotated by size without breaking the chain.
//!
//! ```no_run
//! use std::sync::Arc;
//! use wasm_agent_audit::{AuditLog, AuditOptions};
//!
//! # fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let audit = Arc::new(AuditLog::open(AuditOptions::new("audit.jsonl"))?);
//! let host = wasm_agent_sandbox::ToolHost::builder().auditor(audit.clone()).build()?;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod chain;
mod config;
mod files;
mod head;
mod key;
mod log;
pub mod record;
mod sink;
mod verify;
mod writer;

use std::path::PathBuf;

pub use chain::GENESIS;
pub use config::{AuditConfig, AuditSection};
pub use files::{ChainEnd, log_files};
pub use head::Head;
pub use key::DigestKey;
pub use log::AuditLog;
pub use sink::AuditSink;
pub use verify::{Expect, Verified, verify, verify_records};

/// Default size at which the log file is rotated.
pub const DEFAULT_MAX_SIZE: u64 = 100 << 20;

/// What happens to calls while the log cannot be written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailMode {
    /// They are refused (`audit_unavailable`) until it can be again.
    #[default]
    Closed,
    /// They run; the host warns, and the trail records the gap.
    Open,
}

/// How to open an [`AuditLog`].
#[derive(Clone, Debug)]
pub struct AuditOptions {
    /// The log file.
    pub path: PathBuf,
    /// Whether records carry the arguments (secret-looking keys redacted),
    /// not only their digest.
    pub arguments: bool,
    /// Refuse calls (closed, the default) or warn (open) when the log
    /// cannot be written.
    pub fail: FailMode,
    /// The size at which the file is rotated to `FILE.N`.
    pub max_size: u64,
    /// What opens the log (`serve`, `call`, ...), in its `open` record.
    pub entry: String,
    /// The key of the arguments digests. By default a file log keeps its
    /// own beside it ([`DigestKey::path_beside`], made on first use) and a
    /// log in a table makes one per process.
    pub digest_key: Option<DigestKey>,
}

impl AuditOptions {
    /// A log at `path`: digests only, failing closed, rotated at 100 MiB.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            arguments: false,
            fail: FailMode::Closed,
            max_size: DEFAULT_MAX_SIZE,
            entry: "library".into(),
            digest_key: None,
        }
    }
}

/// Why the audit log cannot be opened, written or checked.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The file cannot be opened or written.
    #[error("audit log {}: {reason}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The file cannot be read.
    #[error("audit log {}: cannot read it: {reason}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The end of the chain cannot be continued.
    #[error(
        "audit log {}: {reason}; move it away to start a new chain (and check it with \
         `wasm-agent audit verify`)", path.display()
    )]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The chain does not reach the head noted apart from it: records were
    /// cut from its end.
    #[error(
        "audit log {}: {reason}: records were cut from its end, or the log was replaced; \
         restore them, or move the log and its head ({}.head) away to start a new chain",
        path.display(), path.display()
    )]
    Cut {
        /// The log.
        path: PathBuf,
        /// How it falls short.
        reason: String,
    },
    /// A record does not hold.
    #[error("audit log {}, line {line}: {reason}", path.display())]
    Broken {
        /// The file.
        path: PathBuf,
        /// The first line that does not hold (from 1).
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
}
