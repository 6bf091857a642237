//! Session state and conversations in PostgreSQL, so that every replica of a
//! server sees what any of them wrote: the system of record when wasm-agent
//! runs past one machine.

#![warn(missing_docs)]

mod collect;
mod exchange;
mod schema;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;

use wasm_agent_session::{
    Owner, Quotas, SessionError, SessionStore, StateScope, StoreUrl, Usage, entry_size,
};

/// How long one operation (waiting for a connection, connecting, the
/// statements) may take before it fails as unavailable.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections one store keeps open at most.
pub const DEFAULT_MAX_CONNECTIONS: usize = 16;

/// Session state kept in PostgreSQL, shared by every process that names the
/// same database.
///
/// Writes are committed before they return `Ok` (so an acknowledged call is
/// never lost), quotas hold across processes (writers of one scope take turns
/// on an advisory lock), and every operation is bounded by a timeout. The
/// schema is created and migrated by [`connect`](Self::connect) under a lock,
/// so replicas starting together do not race; tables are prefixed
/// `wasm_agent_`, so the database may hold others.
#[derive(Clone)]
pub struct PostgresSessionStore {
    pool: Pool,
    location: String,
    quotas: Quotas,
    timeout: Duration,
    last_collected: collect::LastCollected,
}

impl std::fmt::Debug for PostgresSessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresSessionStore")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

/// What an operation ran into: a refusal to pass on, or a database error.
enum Failure {
    Refused(SessionError),
    Db(tokio_postgres::Error),
    Pool(deadpool_postgres::PoolError),
}

impl From<tokio_postgres::Error> for Failure {
    fn from(err: tokio_postgres::Error) -> Self {
        Failure::Db(err)
    }
}

impl PostgresSessionStore {
    /// Connects to the database at `url` (a libpq URL,
    /// `postgres://USER:PASSWORD@HOST:PORT/DB`), creating or migrating its
    /// schema. Fails if the database cannot be reached within the timeout,
    /// or holds a schema written by a newer wasm-agent.
    pub async fn connect(url: &str) -> Result<Self, SessionError> {
        let location = StoreUrl::Postgres(url.to_string()).to_string();
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|err| SessionError::backend(&location, "cannot read the URL", err))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(DEFAULT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("wasm-agent");
        }
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(DEFAULT_MAX_CONNECTIONS)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(DEFAULT_TIMEOUT))
            .create_timeout(Some(DEFAULT_TIMEOUT))
            .recycle_timeout(Some(DEFAULT_TIMEOUT))
            .build()
            .map_err(|err| {
                SessionError::backend(&location, "cannot make a connection pool", err)
            })?;
        let store = Self {
            pool,
            location,
            quotas: Quotas::default(),
            timeout: DEFAULT_TIMEOUT,
            last_collected: Arc::default(),
        };
        let location = &store.location;
        store
            .bounded("cannot create the schema", |mut client| async move {
                schema::migrate(&mut client, location).await
            })
            .await?;
        Ok(store)
    }

    /// Holds each scope to `quotas` (default 1024 keys, 16 MiB, as every store).
    pub fn with_quotas(mut self, quotas: Quotas) -> Self {
        self.quotas = quotas;
        self
    }

    /// Bounds every operation (default 5 s): past it, the operation fails as
    /// unavailable.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Runs `op` on a pooled connection within the timeout, once more on a
    /// fresh connection if the pooled one turns out closed (the server
    /// restarted since it was opened).
    async fn bounded<T, Op, Fut>(&self, what: &str, op: Op) -> Result<T, SessionError>
    where
        Op: Fn(deadpool_postgres::Client) -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let attempt = async {
            let mut retried = false;
            loop {
                let result = match self.pool.get().await {
                    Ok(client) => op(client).await,
                    Err(err) => Err(Failure::Pool(err)),
                };
                match result {
                    Err(Failure::Db(err)) if err.is_closed() && !retried => retried = true,
                    other => return other,
                }
            }
        };
        match tokio::time::timeout(self.timeout, attempt).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(Failure::Refused(refusal))) => Err(refusal),
            Ok(Err(Failure::Db(err))) => Err(SessionError::backend(&self.location, what, err)),
            Ok(Err(Failure::Pool(err))) => Err(SessionError::backend(&self.location, what, err)),
            Err(_) => Err(SessionError::backend(
                &self.location,
                what,
                format!("no answer within {} ms", self.timeout.as_millis()),
            )),
        }
    }

    /// Runs a write on a task of its own, so that it completes (or fails
    /// within the timeout) even when the caller stops waiting for it.
    async fn detached<T: Send + 'static>(
        &self,
        write: impl Future<Output = Result<T, SessionError>> + Send + 'static,
    ) -> Result<T, SessionError> {
        tokio::spawn(write).await.unwrap_or_else(|err| {
            Err(SessionError::backend(
                &self.location,
                "the write's task failed",
                err,
            ))
        })
    }

    /// Runs one writing statement with text parameters.
    async fn write<const N: usize>(
        &self,
        what: &str,
        sql: &'static str,
        params: [&String; N],
    ) -> Result<(), SessionError> {
        self.bounded(what, |client| async move {
            let statement = client.prepare_cached(sql).await?;
            let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
                params.iter().map(|p| *p as _).collect();
            client.execute(&statement, &params).await?;
            Ok(())
        })
        .await
    }

    /// Refuses names PostgreSQL text cannot hold (NUL characters); no write
    /// could have stored them.
    fn storable<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Result<(), SessionError> {
        match names.into_iter().find(|name| name.contains('\0')) {
            None => Ok(()),
            Some(_) => Err(SessionError::backend(
                &self.location,
                "cannot store the name",
                "session ids, owners and keys must not contain NUL characters",
            )),
        }
    }
}

/// The parts of a scope and key, in the order the statements bind them.
fn names<'a>(scope: &'a StateScope, key: &'a str) -> [&'a str; 5] {
    [
        &scope.owner.tenant,
        &scope.owner.principal,
        &scope.session,
        &scope.component,
        key,
    ]
}

#[async_trait::async_trait]
impl SessionStore for PostgresSessionStore {
    async fn get(&self, scope: &StateScope, key: &str) -> Result<Option<String>, SessionError> {
        let names = names(scope, key);
        if self.storable(names).is_err() {
            return Ok(None);
        }
        self.bounded("cannot read session state", |client| async move {
            let statement = client.prepare_cached(schema::GET).await?;
            let [tenant, principal, session, component, key] = names;
            let row = client
                .query_opt(
                    &statement,
                    &[&tenant, &principal, &session, &component, &key],
                )
                .await?;
            Ok(row.map(|row| row.get(0)))
        })
        .await
    }

    async fn set(&self, scope: &StateScope, key: &str, value: String) -> Result<(), SessionError> {
        self.storable(names(scope, key))?;
        self.collect_if_due();
        let (store, scope, key) = (self.clone(), scope.clone(), key.to_string());
        self.detached(async move {
            let [tenant, principal, session, component, key] = names(&scope, &key);
            let value = &value;
            store
                .bounded("cannot write session state", |mut client| async move {
                    let tx = client.transaction().await?;
                    // Writers of one owner take turns, so the counts below
                    // cannot be overtaken by another replica's insert.
                    let lock = [tenant, principal].join("\u{1f}");
                    tx.execute(schema::LOCK_OWNER, &[&lock]).await?;
                    let usage = tx.prepare_cached(schema::USAGE).await?;
                    let row = tx
                        .query_one(&usage, &[&tenant, &principal, &session, &component, &key])
                        .await?;
                    let (keys, exists, others, old): (i64, bool, i64, i64) =
                        (row.get(0), row.get(1), row.get(2), row.get(3));
                    let totals = tx.prepare_cached(schema::TOTALS).await?;
                    let row = tx.query_one(&totals, &[&tenant, &principal]).await?;
                    let (owner, tenant_bytes): (i64, i64) = (row.get(0), row.get(1));
                    // A total below the entry it holds (one kept by an older build) counts
                    // as empty, never as full.
                    let count = |n: i64| usize::try_from(n.max(0)).unwrap_or(usize::MAX);
                    let usage = Usage {
                        keys: count(keys),
                        exists,
                        others: count(others),
                        owner: count(owner - old),
                        tenant: count(tenant_bytes - old),
                    };
                    store
                        .quotas
                        .admit(usage, key, value)
                        .map_err(Failure::Refused)?;
                    let delta = entry_size(key, value) as i64 - old;
                    let add = tx.prepare_cached(schema::ADD_TO_TOTAL).await?;
                    tx.execute(&add, &[&tenant, &principal, &delta]).await?;
                    let upsert = tx.prepare_cached(schema::SET).await?;
                    let row = [&tenant, &principal, &session, &component, &key];
                    tx.execute(&upsert, &[row[0], row[1], row[2], row[3], row[4], value])
                        .await?;
                    tx.commit().await?;
                    Ok(())
                })
                .await
        })
        .await
    }

    async fn load_history(
        &self,
        owner: &Owner,
        session: &str,
    ) -> Result<Option<String>, SessionError> {
        if self
            .storable([owner.tenant.as_str(), &owner.principal, session])
            .is_err()
        {
            return Ok(None);
        }
        self.bounded("cannot read history", |client| async move {
            let statement = client.prepare_cached(schema::LOAD_HISTORY).await?;
            let row = client
                .query_opt(&statement, &[&owner.tenant, &owner.principal, &session])
                .await?;
            Ok(row.map(|row| row.get(0)))
        })
        .await
    }

    async fn save_history(
        &self,
        owner: &Owner,
        session: &str,
        history_json: &str,
    ) -> Result<(), SessionError> {
        self.storable([owner.tenant.as_str(), &owner.principal, session])?;
        self.collect_if_due();
        let store = self.clone();
        let (owner, session, history) =
            (owner.clone(), session.to_string(), history_json.to_string());
        self.detached(async move {
            let (owner, session, history) = (&owner, &session, &history);
            store
                .bounded("cannot save history", |client| async move {
                    let statement = client.prepare_cached(schema::SAVE_HISTORY).await?;
                    client
                        .execute(
                            &statement,
                            &[&owner.tenant, &owner.principal, session, history],
                        )
                        .await?;
                    Ok(())
                })
                .await
        })
        .await
    }

    async fn save_protocol_session(
        &self,
        owner: &Owner,
        id: &str,
        record: &str,
    ) -> Result<(), SessionError> {
        self.storable([owner.tenant.as_str(), &owner.principal, id])?;
        let store = self.clone();
        let (owner, id, record) = (owner.clone(), id.to_string(), record.to_string());
        self.detached(async move {
            let params = [&owner.tenant, &owner.principal, &id, &record];
            store
                .write(
                    "cannot save a protocol session",
                    schema::SAVE_PROTOCOL_SESSION,
                    params,
                )
                .await
        })
        .await
    }

    async fn load_protocol_session(
        &self,
        owner: &Owner,
        id: &str,
    ) -> Result<Option<String>, SessionError> {
        if self
            .storable([owner.tenant.as_str(), &owner.principal, id])
            .is_err()
        {
            return Ok(None);
        }
        self.bounded("cannot read a protocol session", |client| async move {
            let statement = client.prepare_cached(schema::LOAD_PROTOCOL_SESSION).await?;
            let row = client
                .query_opt(&statement, &[&owner.tenant, &owner.principal, &id])
                .await?;
            Ok(row.map(|row| row.get(0)))
        })
        .await
    }

    async fn delete_protocol_session(&self, owner: &Owner, id: &str) -> Result<(), SessionError> {
        if self
            .storable([owner.tenant.as_str(), &owner.principal, id])
            .is_err()
        {
            return Ok(());
        }
        let store = self.clone();
        let (owner, id) = (owner.clone(), id.to_string());
        self.detached(async move {
            let params = [&owner.tenant, &owner.principal, &id];
            store
                .write(
                    "cannot delete a protocol session",
                    schema::DELETE_PROTOCOL_SESSION,
                    params,
                )
                .await
        })
        .await
    }

    async fn use_once(&self, token: &str, ttl: Duration) -> Result<bool, SessionError> {
        self.use_token(token, ttl).await
    }

    async fn open_mailbox(&self, address: &str, ttl: Duration) -> Result<(), SessionError> {
        self.open(address, ttl).await
    }

    async fn deliver(&self, address: &str, message: &str) -> Result<bool, SessionError> {
        self.put(address, message).await
    }

    async fn collect_mail(&self, address: &str) -> Result<Option<String>, SessionError> {
        self.take_mail(address).await
    }

    async fn mailboxes(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, Option<String>)>, SessionError> {
        self.list(prefix, limit).await
    }

    async fn mailbox(&self, address: &str) -> Result<Option<Option<String>>, SessionError> {
        self.read(address).await
    }

    async fn close_mailbox(&self, address: &str) -> Result<(), SessionError> {
        self.close(address).await
    }

    async fn check(&self) -> Result<(), SessionError> {
        self.bounded("cannot reach the database", |client| async move {
            client.simple_query("SELECT 1").await?;
            Ok(())
        })
        .await
    }

    fn location(&self) -> String {
        self.location.clone()
    }
}

#[cfg(test)]
mod tests;
