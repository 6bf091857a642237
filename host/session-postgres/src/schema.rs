//! The tables, their migrations and the statements that use them.

use tokio_postgres::Client;

use super::Failure;
use wasm_agent_session::SessionError;

/// The schema this code writes. Bump it with a step in [`STEPS`] whenever a
/// table changes; older binaries then refuse the database instead of
/// misreading it.
pub(crate) const SCHEMA_VERSION: i32 = 4;

/// Migrations by the version they bring the schema to.
const STEPS: &[(i32, &str)] = &[
    (
        1,
        "CREATE TABLE wasm_agent_state (
        tenant text NOT NULL,
        principal text NOT NULL,
        session_id text NOT NULL,
        scope text NOT NULL,
        key text NOT NULL,
        value text NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant, principal, session_id, scope, key)
    );
    CREATE TABLE wasm_agent_history (
        tenant text NOT NULL,
        principal text NOT NULL,
        session_id text NOT NULL,
        messages text NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant, principal, session_id)
    );",
    ),
    (
        2,
        "CREATE TABLE wasm_agent_protocol_sessions (
            tenant text NOT NULL,
            principal text NOT NULL,
            id text NOT NULL,
            record text NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant, principal, id)
        );",
    ),
    (
        3,
        "CREATE TABLE wasm_agent_state_totals (
            tenant text NOT NULL,
            principal text NOT NULL,
            bytes int8 NOT NULL,
            PRIMARY KEY (tenant, principal)
        );
        INSERT INTO wasm_agent_state_totals
            SELECT tenant, principal, sum(octet_length(key) + octet_length(value) + 64)
            FROM wasm_agent_state GROUP BY tenant, principal;",
    ),
    (
        4,
        "CREATE TABLE wasm_agent_used_tokens (
            token text PRIMARY KEY,
            expires timestamptz NOT NULL
        );
        CREATE TABLE wasm_agent_mailboxes (
            address text PRIMARY KEY,
            expires timestamptz NOT NULL,
            message text
        );
        CREATE INDEX wasm_agent_used_tokens_expires ON wasm_agent_used_tokens (expires);
        CREATE INDEX wasm_agent_mailboxes_expires ON wasm_agent_mailboxes (expires);",
    ),
];

/// An arbitrary constant naming the migration lock among advisory locks.
const MIGRATION_LOCK: i64 = 0x7761_736d_6167_6e74;

pub(crate) const LOCK_OWNER: &str = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))";

pub(crate) const GET: &str = "SELECT value FROM wasm_agent_state
    WHERE tenant = $1 AND principal = $2 AND session_id = $3 AND scope = $4 AND key = $5";

/// Keys in the scope, whether `$5` is one of them, and the bytes the others hold.
pub(crate) const USAGE: &str = "SELECT count(*),
        coalesce(bool_or(key = $5), false),
        coalesce(sum(octet_length(value)) FILTER (WHERE key <> $5), 0)::int8,
        coalesce(sum(octet_length(key) + octet_length(value) + 64) FILTER (WHERE key = $5), 0)::int8
    FROM wasm_agent_state
    WHERE tenant = $1 AND principal = $2 AND session_id = $3 AND scope = $4";

/// The owner's and the tenant's bytes of state.
pub(crate) const TOTALS: &str = "SELECT
        coalesce(sum(bytes) FILTER (WHERE principal = $2), 0)::int8,
        coalesce(sum(bytes), 0)::int8
    FROM wasm_agent_state_totals WHERE tenant = $1";

pub(crate) const ADD_TO_TOTAL: &str = "INSERT INTO wasm_agent_state_totals
        (tenant, principal, bytes) VALUES ($1, $2, $3)
    ON CONFLICT (tenant, principal)
    DO UPDATE SET bytes = wasm_agent_state_totals.bytes + excluded.bytes";

/// Owners with a session not written for `$1` seconds.
pub(crate) const IDLE_OWNERS: &str = "SELECT DISTINCT tenant, principal FROM (
        SELECT tenant, principal, session_id, max(updated_at) AS written FROM (
            SELECT tenant, principal, session_id, updated_at FROM wasm_agent_state
            UNION ALL
            SELECT tenant, principal, session_id, updated_at FROM wasm_agent_history
        ) AS writes GROUP BY tenant, principal, session_id
    ) AS sessions WHERE written < now() - make_interval(secs => $1)";

/// Deletes the state and conversations of the owner's sessions not written
/// for `$3` seconds, and takes their bytes off its total.
pub(crate) const COLLECT_OWNER: &str = "WITH idle AS (
        SELECT session_id FROM (
            SELECT session_id, updated_at FROM wasm_agent_state
                WHERE tenant = $1 AND principal = $2
            UNION ALL
            SELECT session_id, updated_at FROM wasm_agent_history
                WHERE tenant = $1 AND principal = $2
        ) AS writes GROUP BY session_id
        HAVING max(updated_at) < now() - make_interval(secs => $3)
    ), gone AS (
        DELETE FROM wasm_agent_state s USING idle
        WHERE s.tenant = $1 AND s.principal = $2 AND s.session_id = idle.session_id
        RETURNING octet_length(s.key) + octet_length(s.value) + 64 AS size
    ), forgotten AS (
        DELETE FROM wasm_agent_history h USING idle
        WHERE h.tenant = $1 AND h.principal = $2 AND h.session_id = idle.session_id
            AND h.updated_at < now() - make_interval(secs => $3)
    )
    UPDATE wasm_agent_state_totals
    SET bytes = bytes - (SELECT coalesce(sum(size), 0) FROM gone)
    WHERE tenant = $1 AND principal = $2";

pub(crate) const COLLECT_PROTOCOL_SESSIONS: &str = "DELETE FROM wasm_agent_protocol_sessions
    WHERE updated_at < now() - make_interval(secs => $1)";

pub(crate) const SET: &str = "INSERT INTO wasm_agent_state
        (tenant, principal, session_id, scope, key, value)
    VALUES ($1, $2, $3, $4, $5, $6)
    ON CONFLICT (tenant, principal, session_id, scope, key)
    DO UPDATE SET value = excluded.value, updated_at = now()";

pub(crate) const SAVE_PROTOCOL_SESSION: &str = "INSERT INTO wasm_agent_protocol_sessions
        (tenant, principal, id, record)
    VALUES ($1, $2, $3, $4)
    ON CONFLICT (tenant, principal, id)
    DO UPDATE SET record = excluded.record, updated_at = now()";

pub(crate) const LOAD_PROTOCOL_SESSION: &str = "SELECT record FROM wasm_agent_protocol_sessions
    WHERE tenant = $1 AND principal = $2 AND id = $3";

pub(crate) const DELETE_PROTOCOL_SESSION: &str = "DELETE FROM wasm_agent_protocol_sessions
    WHERE tenant = $1 AND principal = $2 AND id = $3";

pub(crate) const LOAD_HISTORY: &str = "SELECT messages FROM wasm_agent_history
    WHERE tenant = $1 AND principal = $2 AND session_id = $3";

pub(crate) const SAVE_HISTORY: &str = "INSERT INTO wasm_agent_history
        (tenant, principal, session_id, messages)
    VALUES ($1, $2, $3, $4)
    ON CONFLICT (tenant, principal, session_id)
    DO UPDATE SET messages = excluded.messages, updated_at = now()";

/// Brings the schema up to [`SCHEMA_VERSION`] in one transaction, under a
/// lock, so replicas starting together migrate once; refuses a newer one.
pub(crate) async fn migrate(client: &mut Client, location: &str) -> Result<(), Failure> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS wasm_agent_schema (version integer NOT NULL)")
        .await?;
    let version: i32 = tx
        .query_opt("SELECT max(version) FROM wasm_agent_schema", &[])
        .await?
        .and_then(|row| row.get::<_, Option<i32>>(0))
        .unwrap_or(0);
    if version > SCHEMA_VERSION {
        return Err(Failure::Refused(SessionError::backend(
            location,
            "was written by a newer wasm-agent",
            format!(
                "session schema version {version}; this build knows up to {SCHEMA_VERSION}; \
                 upgrade wasm-agent or use another database"
            ),
        )));
    }
    for (step, sql) in STEPS {
        if version < *step {
            tx.batch_execute(sql).await?;
        }
    }
    if version < SCHEMA_VERSION {
        tx.execute("DELETE FROM wasm_agent_schema", &[]).await?;
        tx.execute(
            "INSERT INTO wasm_agent_schema (version) VALUES ($1)",
            &[&SCHEMA_VERSION],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}
