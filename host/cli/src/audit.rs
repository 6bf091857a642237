//! The audit trail at the command line: `--audit` and the config's `audit`
//! open one log for the process (every host it builds reports to it), and
//! `wasm-agent audit verify` checks one.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use clap::Args;
use wasm_agent::audit::postgres::PostgresSink;
use wasm_agent::audit::{AuditLog, AuditOptions, AuditSection, DigestKey, FailMode};
use wasm_agent::policy::{ByteSize, ConfigFile};

/// `wasm-agent audit ...`.
#[derive(Debug, clap::Subcommand)]
pub enum AuditCommand {
    /// Check an audit log's hash chain (with its rotated FILE.N files, or
    /// every replica's chain in a PostgreSQL table) and name the first
    /// record that does not hold.
    Verify {
        /// The log file, or the postgres:// URL of the database.
        file: PathBuf,
        /// Accept a chain whose oldest files were removed (it need not
        /// start at seq 0).
        #[arg(long)]
        partial: bool,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        /// A head noted earlier (printed by verify, and logged at rotation):
        /// the chain must still hold that record, or records were cut from
        /// its end. For a table, REPLICA=HASH (repeatable).
        #[arg(long = "head", value_name = "HASH|REPLICA=HASH")]
        heads: Vec<String>,
    },
}

/// Where and how calls are recorded.
#[derive(Debug, Args)]
#[command(next_help_heading = "Audit")]
pub struct AuditFlags {
    /// Append a hash-chained JSON record of every call to FILE, or to a
    /// PostgreSQL table with a postgres:// URL (config `audit`).
    #[arg(long, value_name = "FILE|URL", env = "WASM_AGENT_AUDIT")]
    pub audit: Option<PathBuf>,
    /// This process's chain in the PostgreSQL table (default: the host
    /// name); each replica needs its own.
    #[arg(long, value_name = "NAME", env = "WASM_AGENT_AUDIT_REPLICA")]
    pub audit_replica: Option<String>,
    /// Record the arguments too (secret-looking keys redacted), not only
    /// their digest.
    #[arg(long)]
    pub audit_arguments: bool,
    /// While the audit log cannot be written: refuse calls (closed, the
    /// default) or run them and warn (open).
    #[arg(long, value_name = "closed|open", value_parser = parse_fail)]
    pub audit_fail: Option<FailMode>,
    /// Rotate the audit log to FILE.N at this size (default 100MiB).
    #[arg(long, value_name = "SIZE")]
    pub audit_max_size: Option<ByteSize>,
    /// The key of the arguments digests (HMAC-SHA256), made there if
    /// missing (default: .NAME.key beside a file log; config `key_file`).
    #[arg(long, value_name = "FILE")]
    pub audit_key: Option<PathBuf>,
}

fn parse_fail(text: &str) -> Result<FailMode, String> {
    match text {
        "closed" => Ok(FailMode::Closed),
        "open" => Ok(FailMode::Open),
        _ => Err("expected closed or open".into()),
    }
}

/// The process's audit log, once opened.
static LOG: OnceLock<Option<Arc<AuditLog>>> = OnceLock::new();

/// The audit log the flags and config name (opened on first use, with
/// `entry` naming the command in its `open` record), or none.
pub fn shared(
    flags: &AuditFlags,
    config: Option<&ConfigFile>,
    entry: &str,
) -> anyhow::Result<Option<Arc<AuditLog>>> {
    if let Some(log) = LOG.get() {
        return Ok(log.clone());
    }
    let section = match config {
        Some(config) => config.section::<Option<AuditSection>>("audit")?,
        None => None,
    }
    .map(|s| s.0)
    .unwrap_or_default();
    let Some(path) = flags.audit.clone().or(section.file) else {
        return Ok(LOG.get_or_init(|| None).clone());
    };
    let options = AuditOptions {
        path,
        arguments: flags.audit_arguments || section.arguments.unwrap_or(false),
        fail: flags.audit_fail.or(section.fail).unwrap_or_default(),
        max_size: flags
            .audit_max_size
            .or(section.max_size)
            .map_or(wasm_agent::audit::DEFAULT_MAX_SIZE, |s| s.bytes()),
        entry: entry.to_string(),
        digest_key: match flags.audit_key.as_ref().or(section.key_file.as_ref()) {
            Some(file) => Some(DigestKey::load_or_create(file)?),
            None => None,
        },
    };
    let log = match postgres_url(&options.path).map(str::to_string) {
        Some(url) => {
            let replica = flags
                .audit_replica
                .clone()
                .or(section.replica)
                .unwrap_or_else(host_name);
            open_in_postgres(&url, &replica, options)?
        }
        None => AuditLog::open(options)?,
    };
    Ok(LOG.get_or_init(|| Some(Arc::new(log))).clone())
}

/// The URL, when the log is to go to PostgreSQL.
pub(crate) fn postgres_url(location: &std::path::Path) -> Option<&str> {
    let text = location.to_str()?;
    (text.starts_with("postgres://") || text.starts_with("postgresql://")).then_some(text)
}

/// A log whose records go to `replica`'s chain in the database at `url`.
/// The sink runs a runtime of its own, so it is opened (and writes its
/// `open` record) off this one.
fn open_in_postgres(
    url: &str,
    replica: &str,
    mut options: AuditOptions,
) -> anyhow::Result<AuditLog> {
    let open = move || {
        let (sink, end, location) = PostgresSink::connect(url, replica)?;
        options.path = location;
        AuditLog::open_sink(Box::new(sink), end, options)
    };
    let log = std::thread::scope(|scope| {
        scope
            .spawn(open)
            .join()
            .map_err(|_| anyhow::anyhow!("opening the audit log's database failed"))
    })??;
    Ok(log)
}

/// This machine's name (the default replica).
fn host_name() -> String {
    let mut name = [0u8; 256];
    // SAFETY: gethostname writes at most `len` bytes into the buffer.
    let ok = unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) } == 0;
    let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
    match std::str::from_utf8(&name[..end]) {
        Ok(text) if ok && !text.is_empty() => text.to_string(),
        _ => "default".into(),
    }
}

/// Waits until every record so far is written: an error when they could
/// not be and the log fails closed, a warning when it fails open.
pub fn flush() -> anyhow::Result<()> {
    if let Some(Some(log)) = LOG.get()
        && let Err(error) = log.flush()
    {
        if log.fails_closed() {
            return Err(error.into());
        }
        tracing::warn!("{error} (audit fail = \"open\": the calls ran)");
    }
    Ok(())
}
