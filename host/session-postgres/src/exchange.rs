//! One-time marks and mailboxes in the database, for every replica. Times
//! are the database's (`now()`), so replicas' clocks need not agree;
//! expired rows are swept as new ones come.

use std::time::Duration;

use wasm_agent_session::SessionError;

use super::PostgresSessionStore;

const USE_ONCE: &str = "WITH swept AS (
        DELETE FROM wasm_agent_used_tokens WHERE expires <= now() AND token <> $1
    )
    INSERT INTO wasm_agent_used_tokens (token, expires)
    VALUES ($1, now() + make_interval(secs => $2))
    ON CONFLICT (token) DO UPDATE SET expires = excluded.expires
        WHERE wasm_agent_used_tokens.expires <= now()";

const OPEN: &str = "WITH swept AS (
        DELETE FROM wasm_agent_mailboxes WHERE expires <= now() AND address <> $1
    )
    INSERT INTO wasm_agent_mailboxes (address, expires, message)
    VALUES ($1, now() + make_interval(secs => $2), NULL)
    ON CONFLICT (address) DO UPDATE SET expires = excluded.expires, message = NULL";

const DELIVER: &str = "UPDATE wasm_agent_mailboxes SET message = $2
    WHERE address = $1 AND message IS NULL AND expires > now()";

const COLLECT: &str = "DELETE FROM wasm_agent_mailboxes
    WHERE address = $1 AND message IS NOT NULL RETURNING message";

const CLOSE: &str = "DELETE FROM wasm_agent_mailboxes WHERE address = $1";

const READ: &str = "SELECT message FROM wasm_agent_mailboxes
    WHERE address = $1 AND expires > now()";

const LIST: &str = "SELECT address, message FROM wasm_agent_mailboxes
    WHERE left(address, length($1)) = $1 AND expires > now()
    ORDER BY address LIMIT $2";

fn seconds(ttl: Duration) -> f64 {
    ttl.as_secs_f64()
}

impl PostgresSessionStore {
    pub(crate) async fn use_token(&self, token: &str, ttl: Duration) -> Result<bool, SessionError> {
        self.storable([token])?;
        let added = self
            .bounded("cannot mark a token used", |client| async move {
                let statement = client.prepare_cached(USE_ONCE).await?;
                Ok(client.execute(&statement, &[&token, &seconds(ttl)]).await?)
            })
            .await?;
        Ok(added == 1)
    }

    pub(crate) async fn open(&self, address: &str, ttl: Duration) -> Result<(), SessionError> {
        self.storable([address])?;
        self.bounded("cannot open a mailbox", |client| async move {
            let statement = client.prepare_cached(OPEN).await?;
            client
                .execute(&statement, &[&address, &seconds(ttl)])
                .await?;
            Ok(())
        })
        .await
    }

    pub(crate) async fn put(&self, address: &str, message: &str) -> Result<bool, SessionError> {
        self.storable([address, message])?;
        let changed = self
            .bounded("cannot deliver to a mailbox", |client| async move {
                let statement = client.prepare_cached(DELIVER).await?;
                Ok(client.execute(&statement, &[&address, &message]).await?)
            })
            .await?;
        Ok(changed == 1)
    }

    pub(crate) async fn take_mail(&self, address: &str) -> Result<Option<String>, SessionError> {
        self.storable([address])?;
        self.bounded("cannot read a mailbox", |client| async move {
            let statement = client.prepare_cached(COLLECT).await?;
            let row = client.query_opt(&statement, &[&address]).await?;
            Ok(row.map(|row| row.get(0)))
        })
        .await
    }

    pub(crate) async fn list(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, Option<String>)>, SessionError> {
        self.storable([prefix])?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.bounded("cannot list mailboxes", |client| async move {
            let statement = client.prepare_cached(LIST).await?;
            let rows = client.query(&statement, &[&prefix, &limit]).await?;
            Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
        })
        .await
    }

    pub(crate) async fn read(&self, address: &str) -> Result<Option<Option<String>>, SessionError> {
        self.storable([address])?;
        self.bounded("cannot read a mailbox", |client| async move {
            let statement = client.prepare_cached(READ).await?;
            let row = client.query_opt(&statement, &[&address]).await?;
            Ok(row.map(|row| row.get(0)))
        })
        .await
    }

    pub(crate) async fn close(&self, address: &str) -> Result<(), SessionError> {
        self.storable([address])?;
        self.bounded("cannot close a mailbox", |client| async move {
            let statement = client.prepare_cached(CLOSE).await?;
            client.execute(&statement, &[&address]).await?;
            Ok(())
        })
        .await
    }
}
