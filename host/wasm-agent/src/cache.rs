//! Result caches: the trait, the in-memory cache, the Redis one (feature
//! `redis`), and [`open`] for a cache named by URL (`--cache`).

use std::sync::Arc;

pub use wasm_agent_cache::*;
#[cfg(feature = "redis")]
pub use wasm_agent_cache_redis::RedisCache;

/// Entries the default in-memory cache keeps.
const MEMORY_ENTRIES: usize = 1024;

/// The cache `url` names. A Redis cache connects on first use (so must be
/// opened inside a Tokio runtime); a bad URL is refused here.
pub fn open(url: &CacheUrl) -> Result<Arc<dyn ResultCache>, CacheError> {
    match url {
        CacheUrl::Memory => Ok(Arc::new(MemoryCache::new(MEMORY_ENTRIES))),
        #[cfg(feature = "redis")]
        CacheUrl::Redis(text) => {
            RedisCache::open(text).map(|cache| Arc::new(cache) as Arc<dyn ResultCache>)
        }
        #[allow(unreachable_patterns)]
        other => Err(CacheError::Refused {
            location: other.to_string(),
            reason: "this build of wasm-agent has no support for it".into(),
        }),
    }
}
