//! Session state and conversation history in a SQLite file, so that a session
//! outlives the process: two `wasm-agent run --session s1` invocations share it.

#![warn(missing_docs)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};

use wasm_agent_session::{
    ENTRY_OVERHEAD, Owner, Quotas, SessionError, SessionStore, StateScope, Usage,
};

mod collect;
mod exchange;
mod schema;

use schema::{create_private_file, open_error};

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
    quotas: Quotas,
}

/// The connection, shared with the blocking tasks that use it.
#[derive(Debug)]
struct Db {
    /// The file path, or `:memory:`; every error message starts with it.
    location: String,
    conn: Mutex<Connection>,
    /// When idle sessions were last looked for (never: at the first write).
    last_collected: Mutex<Option<std::time::Instant>>,
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

    /// Holds state to `quotas` (the defaults of every store, so switching
    /// stores changes no limit).
    pub fn with_quotas(mut self, quotas: Quotas) -> Self {
        self.quotas = quotas;
        self
    }

    /// Where the store lives unless told otherwise:
    /// `$WASM_AGENT_DATA_DIR/sessions.db`, else
    /// `$XDG_DATA_HOME/wasm-agent/sessions.db`, else
    /// `$HOME/.local/share/wasm-agent/sessions.db`; `None` if none is set.
    pub fn default_path() -> Option<PathBuf> {
        default_path_from(|name| std::env::var_os(name))
    }

    /// [`SessionStore::load_history`], on the calling thread.
    pub fn load_history_blocking(
        &self,
        owner: &Owner,
        session: &str,
    ) -> Result<Option<String>, SessionError> {
        self.db.load_history(owner, session)
    }

    /// [`SessionStore::save_history`], on the calling thread.
    pub fn save_history_blocking(
        &self,
        owner: &Owner,
        session: &str,
        history_json: &str,
    ) -> Result<(), SessionError> {
        self.db.save_history(owner, session, history_json)
    }

    /// [`SessionStore::get`], on the calling thread.
    pub fn get_blocking(
        &self,
        scope: &StateScope,
        key: &str,
    ) -> Result<Option<String>, SessionError> {
        self.db.get(scope, key)
    }

    /// [`SessionStore::set`], on the calling thread.
    pub fn set_blocking(
        &self,
        scope: &StateScope,
        key: &str,
        value: String,
    ) -> Result<(), SessionError> {
        self.db.set(scope, key, value, self.quotas)
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
    fn load_history(&self, owner: &Owner, session: &str) -> Result<Option<String>, SessionError> {
        self.lock()
            .prepare_cached(
                "SELECT messages FROM history
                 WHERE tenant = ?1 AND principal = ?2 AND session_id = ?3",
            )
            .and_then(|mut stmt| {
                stmt.query_row(params![owner.tenant, owner.principal, session], |row| {
                    row.get(0)
                })
                .optional()
            })
            .map_err(|err| self.error("cannot read history", err))
    }

    fn save_history(
        &self,
        owner: &Owner,
        session: &str,
        history_json: &str,
    ) -> Result<(), SessionError> {
        let conn = self.lock();
        conn.prepare_cached(
            "INSERT INTO history (tenant, principal, session_id, messages, updated_at)
             VALUES (?1, ?2, ?3, ?4, unixepoch())
             ON CONFLICT (tenant, principal, session_id) DO UPDATE
             SET messages = excluded.messages, updated_at = excluded.updated_at",
        )
        .and_then(|mut stmt| {
            stmt.execute(params![
                owner.tenant,
                owner.principal,
                session,
                history_json
            ])
        })
        .map(drop)
        .map_err(|err| self.error("cannot save history", err))
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic mid-statement leaves no half-written state behind: SQLite
        // rolls back an unfinished transaction when rusqlite drops it.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs one writing statement.
    fn execute(&self, sql: &str, params: impl rusqlite::Params) -> Result<(), SessionError> {
        self.lock()
            .prepare_cached(sql)
            .and_then(|mut stmt| stmt.execute(params))
            .map(drop)
            .map_err(|err| self.error("cannot write a protocol session", err))
    }

    fn error(&self, what: &str, err: rusqlite::Error) -> SessionError {
        SessionError::backend(&self.location, what, err)
    }
}

#[async_trait::async_trait]
impl SessionStore for SqliteSessionStore {
    async fn get(&self, scope: &StateScope, key: &str) -> Result<Option<String>, SessionError> {
        let (scope, key) = (scope.clone(), key.to_string());
        self.on_blocking_pool(move |db| db.get(&scope, &key)).await
    }

    async fn set(&self, scope: &StateScope, key: &str, value: String) -> Result<(), SessionError> {
        let (scope, key) = (scope.clone(), key.to_string());
        let quotas = self.quotas;
        self.on_blocking_pool(move |db| {
            db.collect_if_due(quotas)?;
            db.set(&scope, &key, value, quotas)
        })
        .await
    }

    async fn load_history(
        &self,
        owner: &Owner,
        session: &str,
    ) -> Result<Option<String>, SessionError> {
        let (owner, session) = (owner.clone(), session.to_string());
        self.on_blocking_pool(move |db| db.load_history(&owner, &session))
            .await
    }

    async fn save_history(
        &self,
        owner: &Owner,
        session: &str,
        history_json: &str,
    ) -> Result<(), SessionError> {
        let (owner, session, history_json) =
            (owner.clone(), session.to_string(), history_json.to_string());
        let quotas = self.quotas;
        self.on_blocking_pool(move |db| {
            db.collect_if_due(quotas)?;
            db.save_history(&owner, &session, &history_json)
        })
        .await
    }

    async fn save_protocol_session(
        &self,
        owner: &Owner,
        id: &str,
        record: &str,
    ) -> Result<(), SessionError> {
        let (owner, id, record) = (owner.clone(), id.to_string(), record.to_string());
        let quotas = self.quotas;
        self.on_blocking_pool(move |db| {
            db.collect_if_due(quotas)?;
            let sql = "INSERT INTO protocol_sessions (tenant, principal, id, record, updated_at)
                VALUES (?1, ?2, ?3, ?4, unixepoch())
                ON CONFLICT (tenant, principal, id) DO UPDATE
                SET record = excluded.record, updated_at = excluded.updated_at";
            db.execute(sql, params![owner.tenant, owner.principal, id, record])
        })
        .await
    }

    async fn load_protocol_session(
        &self,
        owner: &Owner,
        id: &str,
    ) -> Result<Option<String>, SessionError> {
        let (owner, id) = (owner.clone(), id.to_string());
        self.on_blocking_pool(move |db| {
            db.lock()
                .prepare_cached(
                    "SELECT record FROM protocol_sessions
                     WHERE tenant = ?1 AND principal = ?2 AND id = ?3",
                )
                .and_then(|mut stmt| {
                    stmt.query_row(params![owner.tenant, owner.principal, id], |row| row.get(0))
                        .optional()
                })
                .map_err(|err| db.error("cannot read a protocol session", err))
        })
        .await
    }

    async fn delete_protocol_session(&self, owner: &Owner, id: &str) -> Result<(), SessionError> {
        let (owner, id) = (owner.clone(), id.to_string());
        self.on_blocking_pool(move |db| {
            let sql =
                "DELETE FROM protocol_sessions WHERE tenant = ?1 AND principal = ?2 AND id = ?3";
            db.execute(sql, params![owner.tenant, owner.principal, id])
        })
        .await
    }

    async fn use_once(&self, token: &str, ttl: Duration) -> Result<bool, SessionError> {
        let token = token.to_string();
        self.on_blocking_pool(move |db| db.use_once(&token, ttl))
            .await
    }

    async fn open_mailbox(&self, address: &str, ttl: Duration) -> Result<(), SessionError> {
        let address = address.to_string();
        self.on_blocking_pool(move |db| db.open_mailbox(&address, ttl))
            .await
    }

    async fn deliver(&self, address: &str, message: &str) -> Result<bool, SessionError> {
        let (address, message) = (address.to_string(), message.to_string());
        self.on_blocking_pool(move |db| db.deliver(&address, &message))
            .await
    }

    async fn collect_mail(&self, address: &str) -> Result<Option<String>, SessionError> {
        let address = address.to_string();
        self.on_blocking_pool(move |db| db.collect_mail(&address))
            .await
    }

    async fn mailboxes(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, Option<String>)>, SessionError> {
        let prefix = prefix.to_string();
        self.on_blocking_pool(move |db| db.mailboxes(&prefix, limit))
            .await
    }

    async fn mailbox(&self, address: &str) -> Result<Option<Option<String>>, SessionError> {
        let address = address.to_string();
        self.on_blocking_pool(move |db| db.mailbox(&address)).await
    }

    async fn close_mailbox(&self, address: &str) -> Result<(), SessionError> {
        let address = address.to_string();
        self.on_blocking_pool(move |db| db.close_mailbox(&address))
            .await
    }

    async fn check(&self) -> Result<(), SessionError> {
        self.on_blocking_pool(|db| {
            db.lock()
                .query_row("SELECT 1", [], |_| Ok(()))
                .map_err(|err| db.error("cannot read the file", err))
        })
        .await
    }

    fn location(&self) -> String {
        self.db.location.clone()
    }
}

impl Db {
    fn get(&self, scope: &StateScope, key: &str) -> Result<Option<String>, SessionError> {
        let StateScope {
            owner,
            session,
            component,
        } = scope;
        self.lock()
            .prepare_cached(
                "SELECT value FROM state WHERE tenant = ?1 AND principal = ?2
                 AND session_id = ?3 AND scope = ?4 AND key = ?5",
            )
            .and_then(|mut stmt| {
                stmt.query_row(
                    params![owner.tenant, owner.principal, session, component, key],
                    |row| row.get(0),
                )
                .optional()
            })
            .map_err(|err| self.error("cannot read session state", err))
    }

    fn set(
        &self,
        scope: &StateScope,
        key: &str,
        value: String,
        quotas: Quotas,
    ) -> Result<(), SessionError> {
        let StateScope {
            owner,
            session,
            component,
        } = scope;
        let (tenant, principal, component) = (&owner.tenant, &owner.principal, &**component);
        let mut conn = self.lock();
        let fail = |err: rusqlite::Error| self.error("cannot write session state", err);
        // IMMEDIATE takes the write lock up front, so the counts below cannot be
        // overtaken by another process inserting between the check and the write.
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(fail)?;
        let (keys, exists, others, old): (i64, bool, i64, i64) = tx
            .prepare_cached(
                "SELECT COUNT(*), COALESCE(MAX(key = ?5), 0),
                        COALESCE(SUM(CASE WHEN key != ?5 THEN length(CAST(value AS BLOB)) END), 0),
                        COALESCE(SUM(CASE WHEN key = ?5 THEN length(CAST(key AS BLOB))
                                     + length(CAST(value AS BLOB)) + ?6 END), 0)
                 FROM state WHERE tenant = ?1 AND principal = ?2
                 AND session_id = ?3 AND scope = ?4",
            )
            .and_then(|mut stmt| {
                let overhead = ENTRY_OVERHEAD as i64;
                let found = params![tenant, principal, session, component, key, overhead];
                stmt.query_row(found, |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            })
            .map_err(fail)?;
        let (owner_bytes, tenant_bytes): (i64, i64) = tx
            .prepare_cached(
                "SELECT COALESCE(SUM(CASE WHEN principal = ?2 THEN bytes END), 0),
                        COALESCE(SUM(bytes), 0)
                 FROM state_totals WHERE tenant = ?1",
            )
            .and_then(|mut stmt| {
                stmt.query_row(params![tenant, principal], |r| Ok((r.get(0)?, r.get(1)?)))
            })
            .map_err(fail)?;
        // A total below the entry it holds (one kept by an older build) counts
        // as empty, never as full.
        let count = |n: i64| usize::try_from(n.max(0)).unwrap_or(usize::MAX);
        quotas.admit(
            Usage {
                keys: count(keys),
                exists,
                others: count(others),
                owner: count(owner_bytes - old),
                tenant: count(tenant_bytes - old),
            },
            key,
            &value,
        )?;
        let delta = wasm_agent_session::entry_size(key, &value) as i64 - old;
        tx.prepare_cached(
            "INSERT INTO state_totals (tenant, principal, bytes) VALUES (?1, ?2, ?3)
             ON CONFLICT (tenant, principal) DO UPDATE SET bytes = bytes + excluded.bytes",
        )
        .and_then(|mut stmt| stmt.execute(params![tenant, principal, delta]))
        .map_err(fail)?;
        tx.prepare_cached(
            "INSERT INTO state (tenant, principal, session_id, scope, key, value, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, unixepoch())
             ON CONFLICT (tenant, principal, session_id, scope, key) DO UPDATE
             SET value = excluded.value, updated_at = excluded.updated_at",
        )
        .and_then(|mut stmt| {
            stmt.execute(params![tenant, principal, session, component, key, value])
        })
        .map_err(fail)?;
        tx.commit().map_err(fail)
    }
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
