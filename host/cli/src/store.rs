//! Which session store a command uses (`--store URL`, else the config's
//! `store`, else the SQLite file under the data directory), and which
//! result cache (`--cache URL`, else the config's `cache`, else memory).

use std::sync::Arc;

use anyhow::Context;
use wasm_agent::cache::{self, CacheUrl, ResultCache};
use wasm_agent::policy::ConfigFile;
use wasm_agent::session::{self, SessionStore, SqliteSessionStore, StoreUrl};

use super::args::HostFlags;

/// The store the flags and the config name.
pub fn store_url(flags: &HostFlags, config: Option<&ConfigFile>) -> anyhow::Result<StoreUrl> {
    if let Some(text) = &flags.store {
        return text
            .parse()
            .map_err(|e| anyhow::anyhow!("--store (or WASM_AGENT_STORE): {e}"));
    }
    if let Some(config) = config
        && let Some(url) = config.section::<Option<StoreUrl>>("store")?
    {
        return Ok(url);
    }
    let path = match &flags.data_dir {
        Some(dir) => dir.join("sessions.db"),
        None => SqliteSessionStore::default_path().context(
            "cannot find a data directory: set --store, --data-dir or WASM_AGENT_DATA_DIR",
        )?,
    };
    Ok(StoreUrl::Sqlite(path))
}

/// Opens the store the flags and the config name.
pub async fn open_store(
    flags: &HostFlags,
    config: Option<&ConfigFile>,
) -> anyhow::Result<Arc<dyn SessionStore>> {
    let url = store_url(flags, config)?;
    Ok(session::open_with(&url, flags.quotas()).await?)
}

/// Opens the result cache `flag` or the config names (default: memory).
/// A cache that is down does not stop the run: it is connected on first use.
pub fn open_cache(
    flag: Option<&str>,
    config: Option<&ConfigFile>,
) -> anyhow::Result<Arc<dyn ResultCache>> {
    let url = match (flag, config) {
        (Some(text), _) => text
            .parse::<CacheUrl>()
            .map_err(|e| anyhow::anyhow!("--cache (or WASM_AGENT_CACHE): {e}"))?,
        (None, Some(config)) => config
            .section::<Option<CacheUrl>>("cache")?
            .unwrap_or(CacheUrl::Memory),
        (None, None) => CacheUrl::Memory,
    };
    Ok(cache::open(&url)?)
}
