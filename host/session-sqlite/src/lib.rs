//! Session state and conversation history in a SQLite file, so that a session
//! outlives the process: two `wasm-agent run --session s1` invocations share it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
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
#[derive(Debug)]
pub struct SqliteSessionStore {
    /// The file path, or `:memory:`; every error message starts with it.
    location: String,
    max_keys: usize,
    max_bytes: usize,
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
            .map_err(|err| open_error(&location, "cannot open the file", &err))?;
        Self::init(conn, location, true)
    }

    /// A store in memory, lost when dropped; for tests.
    pub fn in_memory() -> Result<Self, SessionError> {
        let location = ":memory:".to_string();
        let conn = Connection::open_in_memory()
            .map_err(|err| open_error(&location, "cannot open", &err))?;
        Self::init(conn, location, false)
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
    pub fn load_history(&self, session_id: &str) -> Result<Option<String>, SessionError> {
        self.lock()
            .prepare_cached("SELECT messages FROM history WHERE session_id = ?1")
            .and_then(|mut stmt| {
                stmt.query_row(params![session_id], |row| row.get(0))
                    .optional()
            })
            .map_err(|err| self.error("cannot read history", &err))
    }

    /// Replaces the conversation saved for `session_id`.
    pub fn save_history(&self, session_id: &str, history_json: &str) -> Result<(), SessionError> {
        let conn = self.lock();
        conn.prepare_cached(
            "INSERT INTO history (session_id, messages, updated_at)
             VALUES (?1, ?2, unixepoch())
             ON CONFLICT (session_id) DO UPDATE
             SET messages = excluded.messages, updated_at = excluded.updated_at",
        )
        .and_then(|mut stmt| stmt.execute(params![session_id, history_json]))
        .map(drop)
        .map_err(|err| self.error("cannot save history", &err))
    }

    fn init(conn: Connection, location: String, on_disk: bool) -> Result<Self, SessionError> {
        // Before anything else, so every later step waits for another process
        // instead of failing with SQLITE_BUSY.
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|err| open_error(&location, "cannot set the busy timeout", &err))?;
        // Checked before anything, even the journal mode, is written, so a
        // file that is not ours is refused untouched.
        check_is_ours(&conn, &location)?;
        if on_disk {
            enable_wal(&conn, &location)?;
        }
        let mut store = Self {
            location,
            max_keys: DEFAULT_MAX_KEYS,
            max_bytes: DEFAULT_MAX_BYTES,
            conn: Mutex::new(conn),
        };
        store.migrate()?;
        Ok(store)
    }

    /// Brings the schema up to [`SCHEMA_VERSION`]. Runs under the write lock
    /// so two processes creating the same new file do not race.
    fn migrate(&mut self) -> Result<(), SessionError> {
        let location = self.location.clone();
        let conn = self.conn.get_mut().unwrap_or_else(PoisonError::into_inner);
        let fail = |err: rusqlite::Error| open_error(&location, "cannot create the schema", &err);
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

    fn error(&self, what: &str, err: &rusqlite::Error) -> SessionError {
        SessionError::Backend(format!("{}: {what}: {err}", self.location))
    }
}

impl SessionStore for SqliteSessionStore {
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
    ) -> Result<(), SessionError> {
        let mut conn = self.lock();
        let fail = |err: rusqlite::Error| self.error("cannot write session state", &err);
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
            if usize::try_from(count).unwrap_or(usize::MAX) >= self.max_keys {
                return Err(SessionError::TooManyKeys { max: self.max_keys });
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
            self.max_bytes,
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
        SessionError::Backend(format!("{}: {what}: {err}", target.display()))
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
            Err(err) => return Err(open_error(location, "cannot enable WAL journaling", &err)),
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
        .map_err(|err| open_error(location, "cannot read the schema version", &err))?;
    if version > SCHEMA_VERSION {
        return Err(SessionError::Backend(format!(
            "{location}: was written by a newer wasm-agent (session schema version \
             {version}; this build knows up to {SCHEMA_VERSION}); upgrade wasm-agent \
             or choose another path"
        )));
    }
    if version == 0 && tables > 0 {
        return Err(SessionError::Backend(format!(
            "{location}: is a SQLite database of some other program (it has tables \
             but no session schema version); move it aside or choose another path"
        )));
    }
    Ok(version)
}

/// An error while opening, with a hint for the one failure a user can fix
/// without reading SQLite's documentation.
fn open_error(location: &str, what: &str, err: &rusqlite::Error) -> SessionError {
    if err.sqlite_error_code() == Some(ErrorCode::NotADatabase) {
        return SessionError::Backend(format!(
            "{location}: {what}: the file is not a SQLite database; \
             move it aside or choose another path"
        ));
    }
    SessionError::Backend(format!("{location}: {what}: {err}"))
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
mod tests {
    use std::sync::Arc;

    use super::*;

    fn temp_store_path() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data").join("sessions.db");
        (dir, path)
    }

    fn backend_message(result: Result<SqliteSessionStore, SessionError>) -> String {
        match result {
            Err(SessionError::Backend(message)) => message,
            other => panic!("expected a backend error, got {other:?}"),
        }
    }

    fn count_keys(store: &SqliteSessionStore, session_id: &str, scope: &str) -> i64 {
        store
            .lock()
            .query_row(
                "SELECT COUNT(*) FROM state WHERE session_id = ?1 AND scope = ?2",
                params![session_id, scope],
                |row| row.get(0),
            )
            .unwrap()
    }

    #[test]
    fn is_usable_as_a_shared_session_store() {
        let store: Arc<dyn SessionStore> = Arc::new(SqliteSessionStore::in_memory().unwrap());
        store.set("s", "c", "k", "1".into()).unwrap();
        assert_eq!(store.get("s", "c", "k").as_deref(), Some("1"));
    }

    #[test]
    fn round_trips_and_overwrites() {
        let store = SqliteSessionStore::in_memory().unwrap();
        assert_eq!(store.get("s1", "calc", "ans"), None);
        store.set("s1", "calc", "ans", r#"{"n":1}"#.into()).unwrap();
        assert_eq!(
            store.get("s1", "calc", "ans").as_deref(),
            Some(r#"{"n":1}"#)
        );
        store.set("s1", "calc", "ans", "2".into()).unwrap();
        assert_eq!(store.get("s1", "calc", "ans").as_deref(), Some("2"));
        assert_eq!(count_keys(&store, "s1", "calc"), 1);
    }

    #[test]
    fn scopes_and_sessions_do_not_leak() {
        let store = SqliteSessionStore::in_memory().unwrap();
        store.set("s1", "calc", "ans", "1".into()).unwrap();
        store.set("s2", "calc", "ans", "2".into()).unwrap();
        store.set("s1", "files", "ans", "3".into()).unwrap();
        assert_eq!(store.get("s1", "calc", "ans").as_deref(), Some("1"));
        assert_eq!(store.get("s2", "calc", "ans").as_deref(), Some("2"));
        assert_eq!(store.get("s1", "files", "ans").as_deref(), Some("3"));
        assert_eq!(store.get("s3", "calc", "ans"), None);
        assert_eq!(store.get("s1", "json", "ans"), None);
    }

    #[test]
    fn state_survives_reopening_the_file() {
        let (_dir, path) = temp_store_path();
        {
            let store = SqliteSessionStore::open(&path).unwrap();
            store.set("s1", "calc", "ans", "42".into()).unwrap();
        }
        let store = SqliteSessionStore::open(&path).unwrap();
        assert_eq!(store.get("s1", "calc", "ans").as_deref(), Some("42"));
        let version: i64 = store
            .lock()
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let mode: String = store
            .lock()
            .pragma_query_value(None, "journal_mode", |row| row.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
    }

    #[test]
    fn two_stores_on_one_file_see_each_others_writes() {
        let (_dir, path) = temp_store_path();
        let first = SqliteSessionStore::open(&path).unwrap();
        let second = SqliteSessionStore::open(&path).unwrap();
        first.set("s", "c", "a", "1".into()).unwrap();
        assert_eq!(second.get("s", "c", "a").as_deref(), Some("1"));
        second.set("s", "c", "a", "2".into()).unwrap();
        assert_eq!(first.get("s", "c", "a").as_deref(), Some("2"));
        second.save_history("s", "[]").unwrap();
        assert_eq!(first.load_history("s").unwrap().as_deref(), Some("[]"));
    }

    #[test]
    fn refuses_new_keys_past_the_limit() {
        let store = SqliteSessionStore::in_memory().unwrap().with_max_keys(2);
        store.set("s", "c", "a", "1".into()).unwrap();
        store.set("s", "c", "b", "1".into()).unwrap();
        assert_eq!(
            store.set("s", "c", "x", "1".into()),
            Err(SessionError::TooManyKeys { max: 2 })
        );
        // Updating at the limit is fine, and the refused key was not written.
        store.set("s", "c", "a", "2".into()).unwrap();
        assert_eq!(store.get("s", "c", "a").as_deref(), Some("2"));
        assert_eq!(store.get("s", "c", "x"), None);
        // The limit is per (session, scope).
        store.set("s", "other", "x", "1".into()).unwrap();
        store.set("t", "c", "x", "1".into()).unwrap();
    }

    #[test]
    fn default_limit_matches_the_in_memory_store() {
        let store = SqliteSessionStore::in_memory().unwrap();
        for i in 0..DEFAULT_MAX_KEYS {
            store.set("s", "c", &i.to_string(), "1".into()).unwrap();
        }
        assert_eq!(
            store.set("s", "c", "one-more", "1".into()),
            Err(SessionError::TooManyKeys { max: 1024 })
        );
    }

    #[test]
    fn history_round_trips_per_session_and_survives_reopening() {
        let (_dir, path) = temp_store_path();
        {
            let store = SqliteSessionStore::open(&path).unwrap();
            assert_eq!(store.load_history("s1").unwrap(), None);
            store.save_history("s1", r#"[{"role":"user"}]"#).unwrap();
            store
                .save_history("s1", r#"[{"role":"user"},{"role":"assistant"}]"#)
                .unwrap();
            store.save_history("s2", "[]").unwrap();
        }
        let store = SqliteSessionStore::open(&path).unwrap();
        assert_eq!(
            store.load_history("s1").unwrap().as_deref(),
            Some(r#"[{"role":"user"},{"role":"assistant"}]"#)
        );
        assert_eq!(store.load_history("s2").unwrap().as_deref(), Some("[]"));
        assert_eq!(store.load_history("s3").unwrap(), None);
    }

    #[cfg(unix)]
    #[test]
    fn new_directory_and_files_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, path) = temp_store_path();
        let store = SqliteSessionStore::open(&path).unwrap();
        store.set("s", "c", "k", "secret".into()).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.path().join("data")), 0o700);
        assert_eq!(mode(&path), 0o600);
        // SQLite copies the main file's mode to its side files.
        assert_eq!(mode(&path.with_extension("db-wal")), 0o600);
    }

    #[test]
    fn refuses_a_file_that_is_not_sqlite() {
        let (_dir, path) = temp_store_path();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let text = "these are my notes, not a database\n".repeat(200);
        std::fs::write(&path, &text).unwrap();
        let message = backend_message(SqliteSessionStore::open(&path));
        assert!(
            message.starts_with(&path.display().to_string()),
            "{message}"
        );
        assert!(message.contains("not a SQLite database"), "{message}");
        // Refusing must not damage the file.
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    }

    #[test]
    fn refuses_another_programs_database() {
        let (_dir, path) = temp_store_path();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        Connection::open(&path)
            .unwrap()
            .execute_batch("CREATE TABLE contacts (name TEXT)")
            .unwrap();
        let message = backend_message(SqliteSessionStore::open(&path));
        assert!(
            message.starts_with(&path.display().to_string()),
            "{message}"
        );
        assert!(message.contains("some other program"), "{message}");
        // Refused untouched: not even switched to WAL.
        let mode: String = Connection::open(&path)
            .unwrap()
            .pragma_query_value(None, "journal_mode", |row| row.get(0))
            .unwrap();
        assert_eq!(mode, "delete");
    }

    #[test]
    fn refuses_a_newer_schema_version() {
        let (_dir, path) = temp_store_path();
        drop(SqliteSessionStore::open(&path).unwrap());
        Connection::open(&path)
            .unwrap()
            .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        let message = backend_message(SqliteSessionStore::open(&path));
        assert!(
            message.starts_with(&path.display().to_string()),
            "{message}"
        );
        assert!(message.contains("newer wasm-agent"), "{message}");
        let newer = format!("version {}", SCHEMA_VERSION + 1);
        assert!(message.contains(&newer), "{message}");
    }

    #[test]
    fn refuses_values_past_the_byte_quota() {
        let store = SqliteSessionStore::in_memory().unwrap().with_max_bytes(10);
        store.set("s", "c", "a", "123456".into()).unwrap();
        assert_eq!(
            store.set("s", "c", "b", "12345".into()),
            Err(SessionError::TooManyBytes { max: 10 })
        );
        store.set("s", "c", "a", "1234567890".into()).unwrap();
        store.set("s", "d", "b", "12345".into()).unwrap();
    }

    #[test]
    fn version_1_state_moves_under_its_alias() {
        let (_dir, path) = temp_store_path();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(SCHEMA_V1).unwrap();
        conn.execute("INSERT INTO state VALUES ('s', 'calc', 'ans', '42', 0)", [])
            .unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        drop(conn);
        let store = SqliteSessionStore::open(&path).unwrap();
        assert_eq!(store.get("s", "alias:calc", "ans").as_deref(), Some("42"));
        assert_eq!(store.get("s", "calc", "ans"), None);
        drop(store);
        // Opening again does not migrate twice.
        let store = SqliteSessionStore::open(&path).unwrap();
        assert_eq!(store.get("s", "alias:calc", "ans").as_deref(), Some("42"));
    }

    #[test]
    fn a_broken_store_reads_as_unset_and_refuses_writes() {
        let (_dir, path) = temp_store_path();
        let store = SqliteSessionStore::open(&path).unwrap();
        store.set("s", "c", "k", "1".into()).unwrap();
        store.lock().execute_batch("DROP TABLE state").unwrap();
        assert_eq!(store.get("s", "c", "k"), None);
        match store.set("s", "c", "k", "2".into()) {
            Err(SessionError::Backend(message)) => {
                assert!(
                    message.starts_with(&path.display().to_string()),
                    "{message}"
                );
                assert!(message.contains("cannot write session state"), "{message}");
            }
            other => panic!("expected a backend error, got {other:?}"),
        }
    }

    #[test]
    fn concurrent_writers_lose_nothing() {
        let (_dir, path) = temp_store_path();
        let shared = Arc::new(SqliteSessionStore::open(&path).unwrap());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let shared = Arc::clone(&shared);
                let path = path.clone();
                std::thread::spawn(move || {
                    // One connection shared through the mutex, and one of the
                    // thread's own, as a second process would have.
                    let own = SqliteSessionStore::open(&path).unwrap();
                    for i in 0..25 {
                        shared
                            .set("s", "c", &format!("shared-{t}-{i}"), i.to_string())
                            .unwrap();
                        own.set("s", "c", &format!("own-{t}-{i}"), i.to_string())
                            .unwrap();
                        own.set("s", "c", "contended", t.to_string()).unwrap();
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(count_keys(&shared, "s", "c"), 4 * 25 * 2 + 1);
        assert_eq!(shared.get("s", "c", "own-3-24").as_deref(), Some("24"));
    }

    #[test]
    fn processes_racing_to_create_the_file_all_succeed() {
        let (_dir, path) = temp_store_path();
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let store = SqliteSessionStore::open(&path).unwrap();
                    store.set("s", "c", &t.to_string(), "1".into()).unwrap();
                    store.save_history(&t.to_string(), "[]").unwrap();
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let store = SqliteSessionStore::open(&path).unwrap();
        assert_eq!(count_keys(&store, "s", "c"), 8);
        assert_eq!(store.load_history("7").unwrap().as_deref(), Some("[]"));
    }

    #[test]
    fn the_key_limit_holds_across_concurrent_stores() {
        let (_dir, path) = temp_store_path();
        drop(SqliteSessionStore::open(&path).unwrap());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let store = SqliteSessionStore::open(&path).unwrap().with_max_keys(10);
                    (0..10)
                        .filter(|i| {
                            store
                                .set("s", "c", &format!("{t}-{i}"), "1".into())
                                .is_err()
                        })
                        .count()
                })
            })
            .collect();
        let refused: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(refused, 30);
        let store = SqliteSessionStore::open(&path).unwrap();
        assert_eq!(count_keys(&store, "s", "c"), 10);
    }

    #[test]
    fn default_path_prefers_the_explicit_data_dir_then_xdg_then_home() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(key, _)| *key == name)
                    .map(|(_, value)| OsString::from(value))
            }
        };
        assert_eq!(
            default_path_from(env(&[
                ("WASM_AGENT_DATA_DIR", "/data"),
                ("XDG_DATA_HOME", "/xdg"),
                ("HOME", "/home/u"),
            ])),
            Some(PathBuf::from("/data/sessions.db"))
        );
        assert_eq!(
            default_path_from(env(&[("XDG_DATA_HOME", "/xdg"), ("HOME", "/home/u")])),
            Some(PathBuf::from("/xdg/wasm-agent/sessions.db"))
        );
        let home = Some(PathBuf::from("/home/u/.local/share/wasm-agent/sessions.db"));
        assert_eq!(default_path_from(env(&[("HOME", "/home/u")])), home);
        // Empty and relative values are ignored, as the XDG spec says.
        assert_eq!(
            default_path_from(env(&[
                ("WASM_AGENT_DATA_DIR", ""),
                ("XDG_DATA_HOME", "relative"),
                ("HOME", "/home/u"),
            ])),
            home
        );
        assert_eq!(default_path_from(env(&[])), None);
    }
}
