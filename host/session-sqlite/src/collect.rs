//! Collecting idle sessions: a session whose state and conversation were
//! last written longer ago than the quotas' `max_idle` loses both (and a
//! protocol record idle as long goes too), and the owners' totals are
//! counted again from what is left.

use std::time::Instant;

use rusqlite::{TransactionBehavior, params};
use wasm_agent_session::{Quotas, SessionError};

use super::Db;

/// Sessions written since `?1` (seconds since the epoch).
const ACTIVE: &str = "SELECT tenant, principal, session_id FROM state WHERE updated_at >= ?1
    UNION SELECT tenant, principal, session_id FROM history WHERE updated_at >= ?1";

impl Db {
    /// Collects idle sessions when `quotas.collect_every()` has passed since
    /// the last time.
    pub(super) fn collect_if_due(&self, quotas: Quotas) -> Result<(), SessionError> {
        {
            let mut last = self
                .last_collected
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if last.is_some_and(|at| at.elapsed() < quotas.collect_every()) {
                return Ok(());
            }
            *last = Some(Instant::now());
        }
        self.collect(quotas)
    }

    fn collect(&self, quotas: Quotas) -> Result<(), SessionError> {
        let fail = |err| self.error("cannot collect idle sessions", err);
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(fail)?;
        let idle = i64::try_from(quotas.max_idle.as_secs()).unwrap_or(i64::MAX);
        let cutoff: i64 = tx
            .query_row("SELECT unixepoch() - ?1", params![idle], |r| r.get(0))
            .map_err(fail)?;
        let removed = tx
            .execute(
                &format!(
                    "DELETE FROM state WHERE (tenant, principal, session_id) NOT IN ({ACTIVE})"
                ),
                params![cutoff],
            )
            .map_err(fail)?;
        tx.execute(
            &format!("DELETE FROM history WHERE (tenant, principal, session_id) NOT IN ({ACTIVE})"),
            params![cutoff],
        )
        .map_err(fail)?;
        tx.execute(
            "DELETE FROM protocol_sessions WHERE updated_at < ?1",
            params![cutoff],
        )
        .map_err(fail)?;
        if removed > 0 {
            tx.execute_batch(
                "DELETE FROM state_totals;
                 INSERT INTO state_totals
                     SELECT tenant, principal,
                            SUM(length(CAST(key AS BLOB)) + length(CAST(value AS BLOB)) + 64)
                     FROM state GROUP BY tenant, principal;",
            )
            .map_err(fail)?;
        }
        tx.commit().map_err(fail)
    }
}
