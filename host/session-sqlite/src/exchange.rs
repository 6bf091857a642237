//! One-time marks and mailboxes in the file, for processes sharing it.
//! Times are unix milliseconds of this machine's clock, which every process
//! sharing the file reads; expired rows are swept as new ones come.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{OptionalExtension, TransactionBehavior, params};
use wasm_agent_session::SessionError;

use super::Db;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as i64)
}

fn until(ttl: Duration) -> i64 {
    now_ms().saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))
}

impl Db {
    pub(super) fn use_once(&self, token: &str, ttl: Duration) -> Result<bool, SessionError> {
        let fail = |err| self.error("cannot mark a token used", err);
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(fail)?;
        let now = now_ms();
        tx.execute("DELETE FROM used_tokens WHERE expires <= ?1", params![now])
            .map_err(fail)?;
        let added = tx
            .execute(
                "INSERT OR IGNORE INTO used_tokens (token, expires) VALUES (?1, ?2)",
                params![token, until(ttl)],
            )
            .map_err(fail)?;
        tx.commit().map_err(fail)?;
        Ok(added == 1)
    }

    pub(super) fn open_mailbox(&self, address: &str, ttl: Duration) -> Result<(), SessionError> {
        let fail = |err| self.error("cannot open a mailbox", err);
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(fail)?;
        tx.execute(
            "DELETE FROM mailboxes WHERE expires <= ?1",
            params![now_ms()],
        )
        .map_err(fail)?;
        tx.execute(
            "INSERT OR REPLACE INTO mailboxes (address, expires, message) VALUES (?1, ?2, NULL)",
            params![address, until(ttl)],
        )
        .map_err(fail)?;
        tx.commit().map_err(fail)
    }

    pub(super) fn deliver(&self, address: &str, message: &str) -> Result<bool, SessionError> {
        let changed = self
            .lock()
            .execute(
                "UPDATE mailboxes SET message = ?2
                 WHERE address = ?1 AND message IS NULL AND expires > ?3",
                params![address, message, now_ms()],
            )
            .map_err(|err| self.error("cannot deliver to a mailbox", err))?;
        Ok(changed == 1)
    }

    pub(super) fn collect_mail(&self, address: &str) -> Result<Option<String>, SessionError> {
        self.lock()
            .query_row(
                "DELETE FROM mailboxes WHERE address = ?1 AND message IS NOT NULL
                 RETURNING message",
                params![address],
                |row| row.get(0),
            )
            .optional()
            .map_err(|err| self.error("cannot read a mailbox", err))
    }

    pub(super) fn mailboxes(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, Option<String>)>, SessionError> {
        let fail = |err| self.error("cannot list mailboxes", err);
        let conn = self.lock();
        let mut statement = conn
            .prepare_cached(
                "SELECT address, message FROM mailboxes
                 WHERE substr(address, 1, length(?1)) = ?1 AND expires > ?2
                 ORDER BY address LIMIT ?3",
            )
            .map_err(fail)?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = statement
            .query_map(params![prefix, now_ms(), limit], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .map_err(fail)?;
        rows.collect::<Result<_, _>>().map_err(fail)
    }

    pub(super) fn mailbox(&self, address: &str) -> Result<Option<Option<String>>, SessionError> {
        let fail = |err| self.error("cannot read a mailbox", err);
        let conn = self.lock();
        let mut statement = conn
            .prepare_cached("SELECT message FROM mailboxes WHERE address = ?1 AND expires > ?2")
            .map_err(fail)?;
        statement
            .query_row(params![address, now_ms()], |row| row.get(0))
            .optional()
            .map_err(fail)
    }

    pub(super) fn close_mailbox(&self, address: &str) -> Result<(), SessionError> {
        self.lock()
            .execute("DELETE FROM mailboxes WHERE address = ?1", params![address])
            .map(drop)
            .map_err(|err| self.error("cannot close a mailbox", err))
    }
}
