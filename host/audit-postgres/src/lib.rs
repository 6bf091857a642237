//! The audit trail in PostgreSQL: records go to the table
//! `wasm_agent_audit` instead of a file, each replica (`--audit-replica`,
//! by default the host name) keeping its own chain, so replicas never
//! contend for one. Rows are `(replica, seq, record)`, `record` being the
//! sealed line exactly as hashed; `record::jsonb` reads it as JSON.
//!
//! The writer thread drives its own single-threaded runtime: records go in
//! one statement per batch, within a timeout, and a lost connection is
//! opened again on the next batch.

#![warn(missing_docs)]

use std::path::PathBuf;
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio_postgres::{Client, Config, NoTls};
use wasm_agent_audit::{AuditError, AuditSink, ChainEnd, Head};

/// The table of every replica's records.
pub const TABLE: &str = "wasm_agent_audit";
/// How long connecting and each statement may take.
const TIMEOUT: Duration = Duration::from_secs(5);
/// Longest replica name.
const MAX_REPLICA: usize = 128;

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS wasm_agent_audit (
    replica text NOT NULL,
    seq bigint NOT NULL,
    record text NOT NULL,
    PRIMARY KEY (replica, seq)
);
CREATE TABLE IF NOT EXISTS wasm_agent_audit_head (
    replica text PRIMARY KEY,
    seq bigint NOT NULL,
    hash text NOT NULL
)";

/// A batch and its replica's new head, in one statement (one transaction).
const APPEND: &str = "WITH written AS (
    INSERT INTO wasm_agent_audit (replica, seq, record)
    SELECT $1, (r::jsonb ->> 'seq')::bigint, r FROM unnest($2::text[]) AS r
    RETURNING seq
)
INSERT INTO wasm_agent_audit_head (replica, seq, hash)
SELECT $1, $3, $4 WHERE (SELECT count(*) FROM written) > 0
ON CONFLICT (replica) DO UPDATE SET seq = EXCLUDED.seq, hash = EXCLUDED.hash";

/// One replica's chain in the table.
pub struct PostgresSink {
    runtime: Runtime,
    config: Config,
    client: Option<Client>,
    replica: String,
    location: String,
}

impl PostgresSink {
    /// Connects to `url` (`postgres://USER:PASSWORD@HOST:PORT/DB`), creates
    /// the table if it is missing, and reads where `replica`'s chain ends.
    /// The returned name (the URL without its password, and the replica)
    /// is for messages.
    pub fn connect(url: &str, replica: &str) -> Result<(Self, ChainEnd, PathBuf), AuditError> {
        let mut sink = Self::unconnected(url, replica)?;
        let location = sink.location.clone();
        let failed = |reason: String| AuditError::Write {
            path: PathBuf::from(&location),
            reason,
        };
        if replica.is_empty()
            || replica.len() > MAX_REPLICA
            || replica.chars().any(|c| c.is_control())
        {
            return Err(failed(format!(
                "the replica name must be 1-{MAX_REPLICA} bytes without control characters"
            )));
        }
        let read = sink.reconnect().and_then(|()| {
            let client = sink.client.as_ref().expect("connected");
            sink.runtime.block_on(bounded(async {
                client.batch_execute(SCHEMA).await?;
                let last = client
                    .query_opt(
                        "SELECT record FROM wasm_agent_audit WHERE replica = $1 \
                         ORDER BY seq DESC LIMIT 1",
                        &[&sink.replica],
                    )
                    .await?;
                let head = client
                    .query_opt(
                        "SELECT seq, hash FROM wasm_agent_audit_head WHERE replica = $1",
                        &[&sink.replica],
                    )
                    .await?;
                Ok((
                    last.map(|row| row.get::<_, String>(0)),
                    head.map(|row| {
                        let seq = row.get::<_, i64>(0).max(0) as u64;
                        // A head row that is no head: as good as cut.
                        Head::checked(seq, row.get(1)).unwrap_or(Head {
                            seq: u64::MAX - 1,
                            hash: "0".repeat(64),
                        })
                    }),
                ))
            }))
        });
        let (last, head) = read.map_err(failed)?;
        let end = match last {
            None => ChainEnd::start(),
            Some(line) => ChainEnd::after(&line).map_err(|reason| AuditError::Damaged {
                path: PathBuf::from(&location),
                reason,
            })?,
        };
        if let Some(head) = head {
            let hash_at = |seq: u64| sink.record_hash(seq);
            head.reached_by(&end, hash_at)
                .map_err(|reason| AuditError::Cut {
                    path: PathBuf::from(&location),
                    reason,
                })?;
        }
        Ok((sink, end, PathBuf::from(location)))
    }

    /// The sink of `replica` at `url`, not yet connected.
    fn unconnected(url: &str, replica: &str) -> Result<Self, AuditError> {
        let config: Config = url.parse().map_err(|e| AuditError::Write {
            path: PathBuf::from("--audit postgres://..."),
            reason: format!("cannot read the URL: {e}"),
        })?;
        let location = format!("{}#{replica}", described(&config));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| AuditError::Write {
                path: PathBuf::from(&location),
                reason: format!("cannot start its runtime: {e}"),
            })?;
        Ok(Self {
            runtime,
            config,
            client: None,
            replica: replica.to_string(),
            location,
        })
    }

    /// The connection, opened again if it was lost.
    fn reconnect(&mut self) -> Result<(), String> {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            let config = self.config.clone();
            let client = self.runtime.block_on(async move {
                let (client, connection) = tokio::time::timeout(TIMEOUT, config.connect(NoTls))
                    .await
                    .map_err(|_| format!("no connection within {TIMEOUT:?}"))?
                    .map_err(|e| format!("cannot connect: {e}"))?;
                // Driven while the writer waits on the runtime.
                tokio::spawn(connection);
                Ok::<_, String>(client)
            })?;
            self.client = Some(client);
        }
        Ok(())
    }

    /// The hash of this replica's record `seq`, if the table holds it.
    fn record_hash(&self, seq: u64) -> Option<String> {
        let client = self.client.as_ref()?;
        let row = self
            .runtime
            .block_on(bounded(async {
                client
                    .query_opt(
                        "SELECT record FROM wasm_agent_audit WHERE replica = $1 AND seq = $2",
                        &[&self.replica, &(seq as i64)],
                    )
                    .await
            }))
            .ok()??;
        let line: String = row.get(0);
        Some(ChainEnd::after(&line).ok()?.prev)
    }

    /// The name the sink goes by in messages.
    pub fn location(&self) -> &str {
        &self.location
    }
}

impl AuditSink for PostgresSink {
    fn append(&mut self, records: &[String], head: &Head) -> Result<(), String> {
        let (seq, hash) = (head.seq as i64, &head.hash);
        let written = self.reconnect().and_then(|()| {
            let client = self.client.as_ref().expect("connected");
            self.runtime.block_on(bounded(async {
                client
                    .execute(APPEND, &[&self.replica, &records, &seq, hash])
                    .await
            }))
        });
        match written {
            Ok(_) => Ok(()),
            Err(reason) => {
                self.client = None;
                Err(reason)
            }
        }
    }
}

/// `work` within the timeout, its error as text (a unique violation says
/// what it means here).
async fn bounded<T>(
    work: impl Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, String> {
    match tokio::time::timeout(TIMEOUT, work).await {
        Err(_) => Err(format!("no answer within {TIMEOUT:?}")),
        Ok(Err(e)) if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) => Err(
            "another process writes this replica's chain: give each replica its own \
                 --audit-replica"
                .into(),
        ),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok(value)) => Ok(value),
    }
}

/// `postgres://USER@HOST:PORT/DB`, without the password.
fn described(config: &Config) -> String {
    use tokio_postgres::config::Host;
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        #[cfg(unix)]
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("");
    let db = config.get_dbname().unwrap_or("");
    format!("postgres://{user}@{host}:{port}/{db}")
}

/// One replica's chain as the table holds it.
pub struct StoredChain {
    /// The replica.
    pub replica: String,
    /// Its records, in order of `seq`.
    pub records: Vec<String>,
    /// The head its writer noted last.
    pub head: Option<Head>,
}

/// Every replica's records, each chain in order of `seq`, with its noted
/// head, for [`verify_records`](wasm_agent_audit::verify_records).
pub fn read_chains(url: &str) -> Result<Vec<StoredChain>, AuditError> {
    let mut sink = PostgresSink::unconnected(url, "")?;
    let location = PathBuf::from(sink.location.trim_end_matches('#'));
    let rows = sink.reconnect().and_then(|()| {
        let client = sink.client.as_ref().expect("connected");
        sink.runtime.block_on(bounded(async {
            client.batch_execute(SCHEMA).await?;
            let records = client
                .query(
                    "SELECT replica, record FROM wasm_agent_audit ORDER BY replica, seq",
                    &[],
                )
                .await?;
            let heads = client
                .query("SELECT replica, seq, hash FROM wasm_agent_audit_head", &[])
                .await?;
            Ok((records, heads))
        }))
    });
    let (rows, heads) = rows.map_err(|reason| AuditError::Read {
        path: location,
        reason,
    })?;
    let mut heads: std::collections::HashMap<String, Head> = heads
        .iter()
        .map(|row| {
            let seq = row.get::<_, i64>(1).max(0) as u64;
            let head = Head::checked(seq, row.get(2)).unwrap_or(Head {
                seq: u64::MAX - 1,
                hash: "0".repeat(64),
            });
            (row.get::<_, String>(0), head)
        })
        .collect();
    let mut chains: Vec<StoredChain> = Vec::new();
    for row in rows {
        let (replica, record): (String, String) = (row.get(0), row.get(1));
        match chains.last_mut() {
            Some(chain) if chain.replica == replica => chain.records.push(record),
            _ => chains.push(StoredChain {
                head: heads.remove(&replica),
                replica,
                records: vec![record],
            }),
        }
    }
    // A replica whose every record was deleted still has its head.
    for (replica, head) in heads {
        chains.push(StoredChain {
            replica,
            records: Vec::new(),
            head: Some(head),
        });
    }
    Ok(chains)
}
