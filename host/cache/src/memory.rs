//! The in-memory cache: one process's, lost when it ends.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::lru::Lru;
use crate::{CacheError, CacheKey, ResultCache};

/// Results in this process's memory, bounded in entries and in bytes, the
/// least recently used making room.
pub struct MemoryCache {
    entries: Lru<Arc<[u8]>>,
    max_value: usize,
}

impl MemoryCache {
    /// Bytes all entries may take together by default.
    pub const DEFAULT_BYTES: usize = 64 << 20;

    /// A cache of at most `max_entries` entries and [`Self::DEFAULT_BYTES`].
    pub fn new(max_entries: usize) -> Self {
        Self::with_limits(max_entries, Self::DEFAULT_BYTES)
    }

    /// A cache of at most `max_entries` entries taking at most `max_bytes`;
    /// a value may take a quarter of that.
    pub fn with_limits(max_entries: usize, max_bytes: usize) -> Self {
        Self {
            entries: Lru::new(max_entries, max_bytes),
            max_value: max_bytes / 4,
        }
    }

    /// The number of entries that have not expired.
    pub fn len(&self) -> usize {
        self.entries.len(Instant::now())
    }

    /// Whether no unexpired entry is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Debug for MemoryCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryCache")
            .field("entries", &self.len())
            .finish()
    }
}

#[async_trait::async_trait]
impl ResultCache for MemoryCache {
    async fn get(&self, key: &CacheKey) -> Result<Option<Vec<u8>>, CacheError> {
        Ok(self.entries.get(key, Instant::now()).map(|v| v.to_vec()))
    }

    async fn put(&self, key: &CacheKey, value: &[u8], ttl: Duration) -> Result<(), CacheError> {
        if value.len() > self.max_value {
            return Err(CacheError::TooLarge {
                size: value.len(),
                max: self.max_value,
            });
        }
        let weight = value.len() + key.encoded().len();
        self.entries
            .insert(key.clone(), value.into(), weight, ttl, Instant::now());
        Ok(())
    }

    async fn clear(&self) -> Result<(), CacheError> {
        self.entries.clear();
        Ok(())
    }

    fn location(&self) -> String {
        "memory:".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance;

    #[tokio::test]
    async fn the_memory_cache_conforms() {
        conformance::all(&MemoryCache::new(100)).await;
    }

    #[tokio::test]
    async fn values_over_a_quarter_of_the_budget_are_refused() {
        let cache = MemoryCache::with_limits(10, 400);
        let key = CacheKey::new("t", "v", &serde_json::json!({}), None, None);
        let refused = cache.put(&key, &[0; 101], Duration::from_secs(9)).await;
        assert!(matches!(
            refused,
            Err(CacheError::TooLarge {
                size: 101,
                max: 100
            })
        ));
        cache
            .put(&key, &[0; 100], Duration::from_secs(9))
            .await
            .unwrap();
        assert_eq!(cache.len(), 1);
        assert_eq!(format!("{cache:?}"), "MemoryCache { entries: 1 }");
    }
}
