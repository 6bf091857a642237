//! Collecting idle sessions: every replica, at most every
//! `Quotas::collect_every`, deletes the state and conversations of sessions
//! not written for `max_idle` (one owner at a time, under the owner's lock,
//! taking their bytes off its total) and protocol records as old. It runs
//! beside the write that found it due, never holding that write up.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use super::{PostgresSessionStore, schema};

/// When this store last looked for idle sessions (never: at the first write).
pub(crate) type LastCollected = Arc<Mutex<Option<Instant>>>;

impl PostgresSessionStore {
    /// Starts a collection when one is due.
    pub(crate) fn collect_if_due(&self) {
        {
            let mut last = self
                .last_collected
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if last.is_some_and(|at| at.elapsed() < self.quotas.collect_every()) {
                return;
            }
            *last = Some(Instant::now());
        }
        let store = self.clone();
        tokio::spawn(async move {
            if let Err(error) = store.collect().await {
                tracing::warn!(%error, "cannot collect idle sessions");
            }
        });
    }

    async fn collect(&self) -> Result<(), wasm_agent_session::SessionError> {
        let idle = self.quotas.max_idle.as_secs_f64();
        let owners = self
            .bounded("cannot look for idle sessions", |client| async move {
                let found = client.query(schema::IDLE_OWNERS, &[&idle]).await?;
                Ok(found
                    .iter()
                    .map(|row| (row.get::<_, String>(0), row.get::<_, String>(1)))
                    .collect::<Vec<_>>())
            })
            .await?;
        for (tenant, principal) in &owners {
            self.bounded("cannot collect idle sessions", |mut client| async move {
                let tx = client.transaction().await?;
                let lock = [tenant.as_str(), principal].join("\u{1f}");
                tx.execute(schema::LOCK_OWNER, &[&lock]).await?;
                tx.execute(schema::COLLECT_OWNER, &[tenant, principal, &idle])
                    .await?;
                tx.commit().await?;
                Ok(())
            })
            .await?;
        }
        self.bounded(
            "cannot collect idle protocol sessions",
            |client| async move {
                client
                    .execute(schema::COLLECT_PROTOCOL_SESSIONS, &[&idle])
                    .await?;
                Ok(())
            },
        )
        .await
    }
}
