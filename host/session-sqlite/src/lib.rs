//! Session state and conversation history in a SQLite file, so that a session
//! outlives the process: two `wasm-agent run --session s1` invocations share it.

#![warn(missing_docs)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior, params};

use wasm_agent_session::{SessionError, SessionStore, within_bytes};

/// The schema this code writes. Bump it with a migration step in `migrate`
/// whenever a table changes; older binaries then refuse the file instead of
/// misreading it.
const SCHEMA_VERSION: i64 = 2;

/// How long a write waits for another process holding the file's write lock.
/// Writes are tiny, so anything longer than this means a stuck peer.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

// Same defaults as the in-memory store, so switching stores changes no limit.
use wasm_agent_session::{DEFAULT_MAX_BYTES, DEFAULT_MAX_KEYS};

const SCHEMA_V1: &str = "
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

/// Session state kept in a SQLite file, shared safely between processes.
///
/// Several processes may open the same file: it runs in WAL mode, and writers
/// wait up to 5 s for each other instead of failing.
///
/// Every statement is blocking, so the [`SessionStore`] methods run them on
/// tokio's blocking pool; the `*_blocking` methods are for callers that are on
/// a blocking thread already.
#[derive(Debug)]
pub struct SqliteSessionStore {
    db: Arc<Db>,
    max_keys: usize,
    max_bytes: usize,
}

/// The connection, shared with the blocking tasks that use it.
#[derive(Debug)]
struct Db {
    /// The file path, or `:memory:`; every error message starts with it.
    location: String,
    conn: Mutex<Connection>,
}

impl SqliteSessionStore {
    /// Opens (creating if absent) the store at `path`.
    ///
    /// A missing parent directory is created with mode 0700 and a new file
    /// with mode 0600 on unix, because tool state may hold anything a tool saw.
    /// Refuses a file that is not SQLite, a SQLite file that is not a session
    /// store, and a store written by a newer wasm-agent.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, SessionError> {
        let path = path.as_ref();
        let location = path.display().to_string();
        create_private_file(path)?;
        // No SQLITE_OPEN_URI: a path starting with `file:` must stay a path.
        // No SQLITE_OPEN_CREATE: we open the very file created above, with its mode.
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags)
            .map_err(|err| open_error(&location, "cannot open the file", err))?;
        Db::init(conn, location, true)
    }

    /// A store in memory, lost when dropped; for tests.
    pub fn in_memory() -> Result<Self, SessionError> {
        let location = ":memory:".to_string();
        let conn = Connection::open_in_memory()
            .map_err(|err| open_error(&location, "cannot open", err))?;
        Db::init(conn, location, false)
    }

    /// Caps how many keys one tool may keep in one session (default 1024).
    /// Updating an existing key is always allowed.
    pub fn with_max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// Caps the bytes of values one tool may keep in one session (default
    /// 16 MiB).
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// Where the store lives unless told otherwise:
    /// `$WASM_AGENT_DATA_DIR/sessions.db`, else
    /// `$XDG_DATA_HOME/wasm-agent/sessions.db`, else
    /// `$HOME/.local/share/wasm-agent/sessions.db`; `None` if none is set.
    pub fn default_path() -> Option<PathBuf> {
        default_path_from(|name| std::env::var_os(name))
    }

    /// The conversation saved for `session_id`, as the JSON text given to
    /// [`save_history`](Self::save_history), or `None` for a new session.
    pub async fn load_history(&self, session_id: &str) -> Result<Option<String>, SessionError> {
        let session_id = session_id.to_string();
        self.on_blocking_pool(move |db| db.load_history(&session_id))
            .await
    }

    /// Replaces the conversation saved for `session_id`.
    pub async fn save_history(
        &self,
        session_id: &str,
        history_json: &str,
    ) -> Result<(), SessionError> {
        let (session_id, history_json) = (session_id.to_string(), history_json.to_string());
        self.on_blocking_pool(move |db| db.save_history(&session_id, &history_json))
            .await
    }

    /// [`load_history`](Self::load_history), on the calling thread.
    pub fn load_history_blocking(&self, session_id: &str) -> Result<Option<String>, SessionError> {
        self.db.load_history(session_id)
    }

    /// [`save_history`](Self::save_history), on the calling thread.
    pub fn save_history_blocking(
        &self,
        session_id: &str,
        history_json: &str,
    ) -> Result<(), SessionError> {
        self.db.save_history(session_id, history_json)
    }

    /// Reads one value, on the calling thread.
    pub fn get_blocking(&self, session_id: &str, scope: &str, key: &str) -> Option<String> {
        self.db.get(session_id, scope, key)
    }

    /// Writes one value, on the calling thread.
    pub fn set_blocking(
        &self,
        session_id: &str,
        scope: &str,
        key: &str,
        value: String,
    ) -> Result<(), SessionError> {
        self.db
            .set(session_id, scope, key, value, self.max_keys, self.max_bytes)
    }

    /// Runs `work` with the connection on tokio's blocking pool.
    async fn on_blocking_pool<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Db) -> Result<T, SessionError> + Send + 'static,
    ) -> Result<T, SessionError> {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || work(&db))
            .await
            .unwrap_or_else(|err| {
                Err(SessionError::backend(
                    &self.db.location,
                    "the store's task failed",
                    err,
                ))
            })
    }

    #[cfg(test)]
    fn lock(&self) -> MutexGuard<'_, Connection> {
        self.db.lock()
    }
}

impl Db {
    fn load_history(&self, session_id: &str) -> Result<Option<String>, SessionError> {
        self.lock()
            .prepare_cached("SELECT messages FROM history WHERE session_id = ?1")
            .and_then(|mut stmt| {
                stmt.query_row(params![session_id], |row| row.get(0))
                    .optional()
            })
            .map_err(|err| self.error("cannot read history", err))
    }

    fn save_history(&self, session_id: &str, history_json: &str) -> Result<(), SessionError> {
        let conn = self.lock();
        conn.prepare_cached(
            "INSERT INTO history (session_id, messages, updated_at)
             VALUES (?1, ?2, unixepoch())
             ON CONFLICT (session_id) DO UPDATE
             SET messages = excluded.messages, updated_at = excluded.updated_at",
        )
        .and_then(|mut stmt| stmt.execute(params![session_id, history_json]))
        .map(drop)
        .map_err(|err| self.error("cannot save history", err))
    }

    fn init(
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
        };
        db.migrate()?;
        Ok(SqliteSessionStore {
            db: Arc::new(db),
            max_keys: DEFAULT_MAX_KEYS,
            max_bytes: DEFAULT_MAX_BYTES,
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
        if version < 1 {
            tx.execute_batch(SCHEMA_V1).map_err(fail)?;
        } else if version < 2 {
            tx.execute_batch(MIGRATE_V2).map_err(fail)?;
        }
        if version < SCHEMA_VERSION {
            tx.pragma_update(None, "user_version", SCHEMA_VERSION)
                .map_err(fail)?;
        }
        tx.commit().map_err(fail)
    }

    fn try_get(
        &self,
        session_id: &str,
        scope: &str,
        key: &str,
    ) -> rusqlite::Result<Option<String>> {
        self.lock()
            .prepare_cached(
                "SELECT value FROM state WHERE session_id = ?1 AND scope = ?2 AND key = ?3",
            )?
            .query_row(params![session_id, scope, key], |row| row.get(0))
            .optional()
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic mid-statement leaves no half-written state behind: SQLite
        // rolls back an unfinished transaction when rusqlite drops it.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn error(&self, what: &str, err: rusqlite::Error) -> SessionError {
        SessionError::backend(&self.location, what, err)
    }
}

#[async_trait::async_trait]
impl SessionStore for SqliteSessionStore {
    async fn get(&self, session_id: &str, scope: &str, key: &str) -> Option<String> {
        let (session_id, scope, key) = (session_id.to_string(), scope.to_string(), key.to_string());
        self.on_blocking_pool(move |db| Ok(db.get(&session_id, &scope, &key)))
            .await
            .unwrap_or_else(|err| {
                tracing::warn!(error = %err, "cannot read session state; treating it as unset");
                None
            })
    }

    async fn set(
        &self,
        session_id: &str,
        scope: &str,
        key: &str,
        value: String,
    ) -> Result<(), SessionError> {
        let (session_id, scope, key) = (session_id.to_string(), scope.to_string(), key.to_string());
        let (max_keys, max_bytes) = (self.max_keys, self.max_bytes);
        self.on_blocking_pool(move |db| {
            db.set(&session_id, &scope, &key, value, max_keys, max_bytes)
        })
        .await
    }
}

impl Db {
    fn get(&self, session_id: &str, scope: &str, key: &str) -> Option<String> {
        // The trait has no error channel for reads: a broken store reads as
        // empty, and the log says why.
        self.try_get(session_id, scope, key).unwrap_or_else(|err| {
            tracing::warn!(
                path = %self.location, session_id, scope, key, error = %err,
                "cannot read session state; treating it as unset"
            );
            None
        })
    }

    fn set(
        &self,
        session_id: &str,
        scope: &str,
        key: &str,
        value: String,
        max_keys: usize,
        max_bytes: usize,
    ) -> Result<(), SessionError> {
        let mut conn = self.lock();
        let fail = |err: rusqlite::Error| self.error("cannot write session state", err);
        // IMMEDIATE takes the write lock up front, so the count below cannot be
        // overtaken by another process inserting between the check and the write.
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(fail)?;
        let exists: bool = tx
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM state
                 WHERE session_id = ?1 AND scope = ?2 AND key = ?3)",
            )
            .and_then(|mut stmt| stmt.query_row(params![session_id, scope, key], |r| r.get(0)))
            .map_err(fail)?;
        if !exists {
            let count: i64 = tx
                .prepare_cached("SELECT COUNT(*) FROM state WHERE session_id = ?1 AND scope = ?2")
                .and_then(|mut stmt| stmt.query_row(params![session_id, scope], |r| r.get(0)))
                .map_err(fail)?;
            if usize::try_from(count).unwrap_or(usize::MAX) >= max_keys {
                return Err(SessionError::TooManyKeys { max: max_keys });
            }
        }
        let others: i64 = tx
            .prepare_cached(
                "SELECT COALESCE(SUM(length(CAST(value AS BLOB))), 0) FROM state
                 WHERE session_id = ?1 AND scope = ?2 AND key != ?3",
            )
            .and_then(|mut stmt| stmt.query_row(params![session_id, scope, key], |r| r.get(0)))
            .map_err(fail)?;
        within_bytes(
            max_bytes,
            usize::try_from(others).unwrap_or(usize::MAX),
            value.len(),
        )?;
        tx.prepare_cached(
            "INSERT INTO state (session_id, scope, key, value, updated_at)
             VALUES (?1, ?2, ?3, ?4, unixepoch())
             ON CONFLICT (session_id, scope, key) DO UPDATE
             SET value = excluded.value, updated_at = excluded.updated_at",
        )
        .and_then(|mut stmt| stmt.execute(params![session_id, scope, key, value]))
        .map_err(fail)?;
        tx.commit().map_err(fail)
    }
}

/// Creates the parent directories and the file itself with private modes
/// before SQLite sees the path; SQLite would otherwise create it 0644, and it
/// gives its `-wal` and `-shm` side files the main file's mode.
fn create_private_file(path: &Path) -> Result<(), SessionError> {
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
fn open_error(location: &str, what: &str, err: rusqlite::Error) -> SessionError {
    if err.sqlite_error_code() == Some(ErrorCode::NotADatabase) {
        return SessionError::backend(
            location,
            what,
            "the file is not a SQLite database; move it aside or choose another path",
        );
    }
    SessionError::backend(location, what, err)
}

/// [`SqliteSessionStore::default_path`] with the environment passed in, so
/// tests need not mutate the process environment.
fn default_path_from(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    // Empty variables count as unset, as the XDG spec says; so does a
    // relative XDG_DATA_HOME, which the spec says to ignore.
    let set = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = set("WASM_AGENT_DATA_DIR") {
        return Some(dir.join("sessions.db"));
    }
    let data_home = set("XDG_DATA_HOME")
        .filter(|dir| dir.is_absolute())
        .or_else(|| set("HOME").map(|home| home.join(".local").join("share")))?;
    Some(data_home.join("wasm-agent").join("sessions.db"))
}

#[cfg(test)]
mod tests;
