//! Session stores: the trait, the in-memory store, the SQLite one (feature
//! `sqlite`) and the PostgreSQL one (feature `postgres`), and [`open`] for a
//! store named by URL (`--store`).

use std::sync::Arc;

pub use wasm_agent_session::*;
#[cfg(feature = "postgres")]
pub use wasm_agent_session_postgres::PostgresSessionStore;
#[cfg(feature = "sqlite")]
pub use wasm_agent_session_sqlite::SqliteSessionStore;

/// Opens (creating its file or schema if need be) the store `url` names,
/// with the default [`Quotas`].
pub async fn open(url: &StoreUrl) -> Result<Arc<dyn SessionStore>, SessionError> {
    open_with(url, Quotas::default()).await
}

/// Opens the store `url` names, holding state to `quotas`.
pub async fn open_with(
    url: &StoreUrl,
    quotas: Quotas,
) -> Result<Arc<dyn SessionStore>, SessionError> {
    match url {
        StoreUrl::Memory => Ok(Arc::new(
            InMemorySessionStore::default().with_quotas(quotas),
        )),
        #[cfg(feature = "sqlite")]
        StoreUrl::Sqlite(path) => {
            let path = path.clone();
            // It creates folders and reads the file: the blocking pool's work.
            let opened = tokio::task::spawn_blocking(move || {
                SqliteSessionStore::open(path).map(|store| store.with_quotas(quotas))
            })
            .await
            .map_err(|err| SessionError::backend(url.to_string(), "cannot open", err))?;
            Ok(Arc::new(opened?))
        }
        #[cfg(feature = "postgres")]
        StoreUrl::Postgres(text) => Ok(Arc::new(
            PostgresSessionStore::connect(text)
                .await?
                .with_quotas(quotas),
        )),
        #[allow(unreachable_patterns)]
        other => Err(SessionError::backend(
            other.to_string(),
            "cannot open",
            "this build of wasm-agent has no support for it",
        )),
    }
}
