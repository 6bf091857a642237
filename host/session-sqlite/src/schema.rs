//! Opening a store file: creating it privately, checking it is a session
//! store (and not a newer one), WAL mode, and the schema's migrations.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, TransactionBehavior};
use wasm_agent_session::{Quotas, SessionError};

use super::{Db, SqliteSessionStore};

/// The schema this code writes. Bump it with a migration step in `migrate`
/// whenever a table changes; older binaries then refuse the file instead of
/// misreading it.
pub(super) const SCHEMA_VERSION: i64 = 6;

/// How long a write waits for another process holding the file's write lock.
/// Writes are tiny, so anything longer than this means a stuck peer.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

pub(super) const SCHEMA_V1: &str = "
    CREATE TABLE IF NOT EXISTS state (
        session_id TEXT,
        scope TEXT,
        key TEXT,
        value TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (session_id, scope, key)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS history (
        session_id TEXT PRIMARY KEY,
        messages TEXT NOT NULL,
        updated_at INTEGER NOT NULL
    );
";

/// Version 2 keys tool state by an identity the operator controls
/// (`alias:NAME` or `sha256:DIGEST`) instead of the component's file stem.
/// State written before was keyed by the config alias or the file stem; it
/// stays reachable under `alias:` that name, so configured tools keep their
/// state, while a component loaded by path alone (whose stem anyone could
/// copy) no longer sees it unless the operator names it with that alias.
const MIGRATE_V2: &str = "UPDATE state SET scope = 'alias:' || scope;";

/// Version 3 puts the owner (tenant and principal) first in every key, so a
/// session id alone never reaches anything. Rows written before belong to
/// the owner with no tenant and no principal, which is who wrote them
/// unless a caller named a tenant or user (state was not kept apart by
/// those before).
const MIGRATE_V3: &str = "
    CREATE TABLE state_v3 (
        tenant TEXT NOT NULL,
        principal TEXT NOT NULL,
        session_id TEXT NOT NULL,
        scope TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (tenant, principal, session_id, scope, key)
    ) WITHOUT ROWID;
    INSERT INTO state_v3
        SELECT '', '', session_id, scope, key, value, updated_at FROM state;
    DROP TABLE state;
    ALTER TABLE state_v3 RENAME TO state;
    CREATE TABLE history_v3 (
        tenant TEXT NOT NULL,
        principal TEXT NOT NULL,
        session_id TEXT NOT NULL,
        messages TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (tenant, principal, session_id)
    ) WITHOUT ROWID;
    INSERT INTO history_v3
        SELECT '', '', session_id, messages, updated_at FROM history;
    DROP TABLE history;
    ALTER TABLE history_v3 RENAME TO history;
";

/// Version 4 keeps protocol sessions (MCP sessions' records).
const MIGRATE_V4: &str = "
    CREATE TABLE protocol_sessions (
        tenant TEXT NOT NULL,
        principal TEXT NOT NULL,
        id TEXT NOT NULL,
        record TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (tenant, principal, id)
    ) WITHOUT ROWID;
";

/// Version 5 keeps each owner's bytes of state (keys and values, and
/// `ENTRY_OVERHEAD`, 64, for each entry), so a write
/// checks the owner's and tenant's totals without reading their state.
const MIGRATE_V5: &str = "
    CREATE TABLE state_totals (
        tenant TEXT NOT NULL,
        principal TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        PRIMARY KEY (tenant, principal)
    ) WITHOUT ROWID;
    INSERT INTO state_totals
        SELECT tenant, principal,
               SUM(length(CAST(key AS BLOB)) + length(CAST(value AS BLOB)) + 64)
        FROM state GROUP BY tenant, principal;
";

/// Version 6 keeps one-time marks and mailboxes (times in unix
/// milliseconds), for processes sharing the file.
const MIGRATE_V6: &str = "
    CREATE TABLE used_tokens (
        token TEXT PRIMARY KEY,
        expires INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE mailboxes (
        address TEXT PRIMARY KEY,
        expires INTEGER NOT NULL,
        message TEXT
    ) WITHOUT ROWID;
";

impl Db {
    pub(super) fn init(
        conn: Connection,
        location: String,
        on_disk: bool,
    ) -> Result<SqliteSessionStore, SessionError> {
        // Before anything else, so every later step waits for another process
        // instead of failing with SQLITE_BUSY.
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|err| open_error(&location, "cannot set the busy timeout", err))?;
        // Checked before anything, even the journal mode, is written, so a
        // file that is not ours is refused untouched.
        check_is_ours(&conn, &location)?;
        if on_disk {
            enable_wal(&conn, &location)?;
        }
        let mut db = Db {
            location,
            conn: Mutex::new(conn),
            last_collected: Mutex::new(None),
        };
        db.migrate()?;
        Ok(SqliteSessionStore {
            db: Arc::new(db),
            quotas: Quotas::default(),
        })
    }

    /// Brings the schema up to [`SCHEMA_VERSION`]. Runs under the write lock
    /// so two processes creating the same new file do not race.
    fn migrate(&mut self) -> Result<(), SessionError> {
        let location = self.location.clone();
        let conn = self.conn.get_mut().unwrap_or_else(PoisonError::into_inner);
        let fail = |err: rusqlite::Error| open_error(&location, "cannot create the schema", err);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(fail)?;
        // Again under the lock: another process may have migrated, or put
        // something else in the file, since `init` looked.
        let version = check_is_ours(&tx, &location)?;
        for (step, sql) in [
            (1, SCHEMA_V1),
            (2, MIGRATE_V2),
            (3, MIGRATE_V3),
            (4, MIGRATE_V4),
            (5, MIGRATE_V5),
            (6, MIGRATE_V6),
        ] {
            if version < step {
                tx.execute_batch(sql).map_err(fail)?;
            }
        }
        if version < SCHEMA_VERSION {
            tx.pragma_update(None, "user_version", SCHEMA_VERSION)
                .map_err(fail)?;
        }
        tx.commit().map_err(fail)
    }
}

/// Creates the parent directories and the file itself with private modes
/// before SQLite sees the path; SQLite would otherwise create it 0644, and it
/// gives its `-wal` and `-shm` side files the main file's mode.
pub(super) fn create_private_file(path: &Path) -> Result<(), SessionError> {
    let io_error = |what: &str, target: &Path, err: std::io::Error| {
        SessionError::backend(target.display().to_string(), what, err)
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        let mut dirs = std::fs::DirBuilder::new();
        dirs.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut dirs, 0o700);
        dirs.create(parent)
            .map_err(|err| io_error("cannot create the directory", parent, err))?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
        .open(path)
        .map(drop)
        .map_err(|err| io_error("cannot create or open the file", path, err))
}

/// Puts the file in WAL mode, which lets one process read while another writes.
fn enable_wal(conn: &Connection, location: &str) -> Result<(), SessionError> {
    let started = Instant::now();
    loop {
        let result: rusqlite::Result<String> =
            conn.pragma_update_and_check(None, "journal_mode", "wal", |row| row.get(0));
        match result {
            Ok(mode) => {
                if !mode.eq_ignore_ascii_case("wal") {
                    // Some file systems (network mounts) cannot do WAL; the
                    // rollback journal is slower under contention but correct.
                    tracing::warn!(path = %location, mode, "session store is not in WAL mode");
                }
                return Ok(());
            }
            // Switching needs an exclusive lock. When fresh connections race
            // for it, SQLite returns BUSY at once instead of calling the busy
            // handler (waiting could deadlock), so the waiting is done here.
            Err(err)
                if err.sqlite_error_code() == Some(ErrorCode::DatabaseBusy)
                    && started.elapsed() < BUSY_TIMEOUT =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(err) => return Err(open_error(location, "cannot enable WAL journaling", err)),
        }
    }
}

/// Returns the file's schema version, refusing a newer one and a SQLite file
/// that some other program made (tables, but no version of ours).
fn check_is_ours(conn: &Connection, location: &str) -> Result<i64, SessionError> {
    // One statement, so both come from one snapshot even while another
    // process is creating the schema.
    let (version, tables): (i64, i64) = conn
        .query_row(
            "SELECT (SELECT user_version FROM pragma_user_version),
                    (SELECT COUNT(*) FROM sqlite_schema)",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .map_err(|err| open_error(location, "cannot read the schema version", err))?;
    if version > SCHEMA_VERSION {
        return Err(SessionError::backend(
            location,
            "was written by a newer wasm-agent",
            format!(
                "session schema version {version}; this build knows up to \
                 {SCHEMA_VERSION}; upgrade wasm-agent or choose another path"
            ),
        ));
    }
    if version == 0 && tables > 0 {
        return Err(SessionError::backend(
            location,
            "is a SQLite database of some other program",
            "it has tables but no session schema version; move it aside or choose another path",
        ));
    }
    Ok(version)
}

/// An error while opening, with a hint for the one failure a user can fix
/// without reading SQLite's documentation.
pub(super) fn open_error(location: &str, what: &str, err: rusqlite::Error) -> SessionError {
    if err.sqlite_error_code() == Some(ErrorCode::NotADatabase) {
        return SessionError::backend(
            location,
            what,
            "the file is not a SQLite database; move it aside or choose another path",
        );
    }
    SessionError::backend(location, what, err)
}
