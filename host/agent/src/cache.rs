//! A cache of tool results, so an agent that repeats a call does not pay for
//! (or wait on) the tool twice.
//!
//! Entries are keyed by tool, canonical arguments and tenant, expire after the
//! time-to-live given at insertion, and the least recently used entry makes
//! room when the cache is full. Only cache tools whose result depends on their
//! arguments alone: the key knows nothing of files or network state.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Identifies a tool call for caching: the tool, its arguments in canonical
/// form, and the tenant it ran for.
///
/// The tenant is part of the key so that one tenant can never be served a
/// result computed for another; `None` (no tenant) is a separate space too.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey {
    tool: String,
    arguments: String,
    tenant: Option<String>,
}

impl CacheKey {
    /// The key for calling `tool` with `arguments` on behalf of `tenant`.
    ///
    /// Arguments are written as compact JSON with object keys sorted at every
    /// depth, so key order and whitespace do not matter. Numbers keep the form
    /// serde_json gives them: `1` and `1.0` are different keys, since a tool
    /// may treat them differently.
    pub fn new(tool: &str, arguments: &Value, tenant: Option<&str>) -> Self {
        Self {
            tool: tool.to_owned(),
            arguments: sorted(arguments).to_string(),
            tenant: tenant.map(str::to_owned),
        }
    }
}

/// A copy of `value` with object keys inserted in sorted order. Without
/// serde_json's `preserve_order` feature maps are sorted anyway; with it they
/// keep insertion order, which this makes sorted as well.
fn sorted(value: &Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.clone(), sorted(v)))
                    .collect(),
            )
        }
        scalar => scalar.clone(),
    }
}

/// A size-bounded, time-limited cache of tool results, safe to share
/// between tasks (`&self` methods behind a mutex).
pub struct ResultCache<V: Clone> {
    inner: Mutex<Lru<V>>,
}

struct Lru<V> {
    capacity: usize,
    entries: HashMap<CacheKey, Entry<V>>,
    /// Keys by last use; the first is the least recently used.
    recency: BTreeMap<u64, CacheKey>,
    next_use: u64,
}

struct Entry<V> {
    value: V,
    /// `None`: the time-to-live is too long to represent, so it never expires.
    expires_at: Option<Instant>,
    last_use: u64,
}

impl<V> Entry<V> {
    fn expired(&self, now: Instant) -> bool {
        self.expires_at.is_some_and(|at| now >= at)
    }
}

impl<V: Clone> ResultCache<V> {
    /// A cache holding at most `capacity` entries (a capacity of 0 is taken as 1).
    pub fn new(capacity: usize) -> Self {
        Self {
            inner: Mutex::new(Lru {
                capacity: capacity.max(1),
                entries: HashMap::new(),
                recency: BTreeMap::new(),
                next_use: 0,
            }),
        }
    }

    /// The cached value for `key`, if present and not expired; a hit makes the
    /// entry the most recently used, and an expired entry is dropped.
    pub fn get(&self, key: &CacheKey) -> Option<V> {
        self.get_at(key, Instant::now())
    }

    /// Caches `value` under `key` for `ttl`, replacing any entry for `key` and
    /// evicting expired entries, then the least recently used, to make room.
    /// A zero `ttl` stores nothing and drops any entry for `key`.
    pub fn insert(&self, key: CacheKey, value: V, ttl: Duration) {
        self.insert_at(key, value, ttl, Instant::now());
    }

    /// The number of entries that have not expired.
    pub fn len(&self) -> usize {
        self.len_at(Instant::now())
    }

    /// Whether no unexpired entry is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every entry.
    pub fn clear(&self) {
        let mut lru = self.lock();
        lru.entries.clear();
        lru.recency.clear();
    }

    /// The lock, recovered if a thread panicked while holding it: every
    /// update below leaves the maps usable, at worst holding a stale entry.
    fn lock(&self) -> std::sync::MutexGuard<'_, Lru<V>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn get_at(&self, key: &CacheKey, now: Instant) -> Option<V> {
        let mut lru = self.lock();
        let lru = &mut *lru;
        let entry = lru.entries.get_mut(key)?;
        if entry.expired(now) {
            let last_use = entry.last_use;
            lru.recency.remove(&last_use);
            lru.entries.remove(key);
            return None;
        }
        // Clone first: if `V::clone` panics, nothing has been changed yet.
        let value = entry.value.clone();
        lru.recency.remove(&entry.last_use);
        entry.last_use = lru.next_use;
        lru.recency.insert(lru.next_use, key.clone());
        lru.next_use += 1;
        Some(value)
    }

    fn insert_at(&self, key: CacheKey, value: V, ttl: Duration, now: Instant) {
        let mut lru = self.lock();
        let lru = &mut *lru;
        if let Some(old) = lru.entries.remove(&key) {
            lru.recency.remove(&old.last_use);
        }
        if ttl.is_zero() {
            return;
        }
        if lru.entries.len() >= lru.capacity {
            lru.remove_expired(now);
        }
        while lru.entries.len() >= lru.capacity {
            let Some((_, oldest)) = lru.recency.pop_first() else {
                break;
            };
            lru.entries.remove(&oldest);
        }
        let last_use = lru.next_use;
        lru.next_use += 1;
        lru.recency.insert(last_use, key.clone());
        let expires_at = now.checked_add(ttl);
        lru.entries.insert(
            key,
            Entry {
                value,
                expires_at,
                last_use,
            },
        );
    }

    fn len_at(&self, now: Instant) -> usize {
        let mut lru = self.lock();
        lru.remove_expired(now);
        lru.entries.len()
    }
}

impl<V> Lru<V> {
    fn remove_expired(&mut self, now: Instant) {
        let recency = &mut self.recency;
        self.entries.retain(|_, entry| {
            let keep = !entry.expired(now);
            if !keep {
                recency.remove(&entry.last_use);
            }
            keep
        });
    }
}

impl<V: Clone> fmt::Debug for ResultCache<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lru = self.lock();
        f.debug_struct("ResultCache")
            .field("capacity", &lru.capacity)
            .field("entries", &lru.entries.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MINUTE: Duration = Duration::from_secs(60);

    fn key(tool: &str) -> CacheKey {
        CacheKey::new(tool, &json!({}), None)
    }

    #[test]
    fn arguments_are_canonical_at_every_depth() {
        let a = CacheKey::new("t", &json!({"b": 1, "a": 2}), None);
        let b = CacheKey::new("t", &json!({"a": 2, "b": 1}), None);
        assert_eq!(a, b);
        assert_eq!(a.arguments, r#"{"a":2,"b":1}"#);

        let parsed: Value = serde_json::from_str(
            "{ \"z\": [ {\"y\": 1, \"x\": {\"d\": null, \"c\": true}} ],\n \"a\": \"s p\" }",
        )
        .unwrap();
        let key = CacheKey::new("t", &parsed, None);
        assert_eq!(
            key.arguments,
            r#"{"a":"s p","z":[{"x":{"c":true,"d":null},"y":1}]}"#
        );
    }

    #[test]
    fn different_arguments_or_tools_differ() {
        let base = CacheKey::new("t", &json!({"a": 1}), None);
        assert_ne!(base, CacheKey::new("t", &json!({"a": 2}), None));
        assert_ne!(base, CacheKey::new("u", &json!({"a": 1}), None));
        assert_ne!(base, CacheKey::new("t", &json!({"a": 1.0}), None));
        assert_ne!(base, CacheKey::new("t", &json!({"a": "1"}), None));
        // Array order is meaningful and kept.
        assert_ne!(
            CacheKey::new("t", &json!([1, 2]), None),
            CacheKey::new("t", &json!([2, 1]), None)
        );
        assert_eq!(CacheKey::new("t", &json!(1.5e3), None).arguments, "1500.0");
    }

    #[test]
    fn tenants_never_share_entries() {
        let cache = ResultCache::new(10);
        let args = json!({"q": "x"});
        let tenants = [Some("a"), Some("b"), None];
        for tenant in tenants {
            assert_eq!(cache.get(&CacheKey::new("t", &args, tenant)), None);
        }
        cache.insert(CacheKey::new("t", &args, Some("a")), "for a", MINUTE);
        assert_eq!(
            cache.get(&CacheKey::new("t", &args, Some("a"))),
            Some("for a")
        );
        assert_eq!(cache.get(&CacheKey::new("t", &args, Some("b"))), None);
        assert_eq!(cache.get(&CacheKey::new("t", &args, None)), None);
        // An empty tenant name is a tenant, not the absence of one.
        assert_eq!(cache.get(&CacheKey::new("t", &args, Some(""))), None);

        cache.insert(CacheKey::new("t", &args, None), "shared", MINUTE);
        assert_eq!(
            cache.get(&CacheKey::new("t", &args, Some("a"))),
            Some("for a")
        );
        assert_eq!(cache.get(&CacheKey::new("t", &args, None)), Some("shared"));
        assert_eq!(
            CacheKey::new("t", &args, Some("a")).tenant.as_deref(),
            Some("a")
        );
    }

    #[test]
    fn entries_expire_after_their_ttl() {
        let cache = ResultCache::new(10);
        let now = Instant::now();
        cache.insert_at(key("t"), 1, Duration::from_secs(10), now);
        assert_eq!(cache.get_at(&key("t"), now), Some(1));
        assert_eq!(
            cache.get_at(&key("t"), now + Duration::from_secs(9)),
            Some(1)
        );
        assert_eq!(cache.len_at(now + Duration::from_secs(9)), 1);
        // Expiry is exact: at the deadline the entry is gone, and stays gone.
        assert_eq!(cache.get_at(&key("t"), now + Duration::from_secs(10)), None);
        assert_eq!(cache.get_at(&key("t"), now), None);
        assert_eq!(cache.len_at(now), 0);
    }

    #[test]
    fn len_counts_only_live_entries() {
        let cache = ResultCache::new(10);
        let now = Instant::now();
        cache.insert_at(key("short"), 1, Duration::from_secs(1), now);
        cache.insert_at(key("long"), 2, MINUTE, now);
        assert_eq!(cache.len_at(now), 2);
        assert_eq!(cache.len_at(now + Duration::from_secs(2)), 1);
        assert!(!cache.is_empty());
        cache.clear();
        assert!(cache.is_empty());
        assert_eq!(cache.get(&key("long")), None);
    }

    #[test]
    fn zero_ttl_never_hits_and_drops_the_old_entry() {
        let cache = ResultCache::new(10);
        cache.insert(key("t"), 1, Duration::ZERO);
        assert_eq!(cache.get(&key("t")), None);
        assert!(cache.is_empty());
        cache.insert(key("t"), 1, MINUTE);
        cache.insert(key("t"), 2, Duration::ZERO);
        assert_eq!(cache.get(&key("t")), None);
    }

    #[test]
    fn a_huge_ttl_never_expires() {
        let cache = ResultCache::new(1);
        let now = Instant::now();
        cache.insert_at(key("t"), 1, Duration::MAX, now);
        assert_eq!(
            cache.get_at(&key("t"), now + Duration::from_secs(1 << 40)),
            Some(1)
        );
    }

    #[test]
    fn the_least_recently_used_entry_is_evicted() {
        let cache = ResultCache::new(3);
        for name in ["a", "b", "c"] {
            cache.insert(key(name), name, MINUTE);
        }
        // Reading "a" makes "b" the least recently used.
        assert_eq!(cache.get(&key("a")), Some("a"));
        cache.insert(key("d"), "d", MINUTE);
        assert_eq!(cache.get(&key("b")), None);
        assert_eq!(cache.len(), 3);
        // Replacing "c" refreshes it too, so "a" goes next.
        cache.insert(key("c"), "c2", MINUTE);
        cache.insert(key("e"), "e", MINUTE);
        assert_eq!(cache.get(&key("a")), None);
        assert_eq!(cache.get(&key("c")), Some("c2"));
        assert_eq!(cache.get(&key("d")), Some("d"));
        assert_eq!(cache.get(&key("e")), Some("e"));
    }

    #[test]
    fn a_miss_does_not_refresh_recency() {
        let cache = ResultCache::new(2);
        cache.insert(key("a"), 1, MINUTE);
        cache.insert(key("b"), 2, MINUTE);
        assert_eq!(cache.get(&key("zzz")), None);
        cache.insert(key("c"), 3, MINUTE);
        assert_eq!(cache.get(&key("a")), None);
        assert_eq!(cache.get(&key("b")), Some(2));
    }

    #[test]
    fn expired_entries_are_evicted_before_live_ones() {
        let cache = ResultCache::new(2);
        let now = Instant::now();
        cache.insert_at(key("live"), 1, MINUTE, now);
        cache.insert_at(key("brief"), 2, Duration::from_secs(1), now);
        let later = now + Duration::from_secs(5);
        cache.get_at(&key("live"), now);
        cache.insert_at(key("new"), 3, MINUTE, later);
        assert_eq!(cache.get_at(&key("live"), later), Some(1));
        assert_eq!(cache.get_at(&key("new"), later), Some(3));
    }

    #[test]
    fn capacity_one_keeps_only_the_latest() {
        let cache = ResultCache::new(1);
        cache.insert(key("a"), 1, MINUTE);
        cache.insert(key("b"), 2, MINUTE);
        assert_eq!(cache.get(&key("a")), None);
        assert_eq!(cache.get(&key("b")), Some(2));
        assert_eq!(cache.len(), 1);

        let zero = ResultCache::new(0);
        zero.insert(key("a"), 1, MINUTE);
        assert_eq!(zero.get(&key("a")), Some(1));
        assert_eq!(
            format!("{zero:?}"),
            "ResultCache { capacity: 1, entries: 1 }"
        );
    }

    #[test]
    fn many_inserts_stay_within_capacity() {
        let cache = ResultCache::new(16);
        for i in 0..1000 {
            cache.insert(CacheKey::new("t", &json!({ "i": i }), None), i, MINUTE);
            assert!(cache.len() <= 16);
        }
        for i in 984..1000 {
            assert_eq!(
                cache.get(&CacheKey::new("t", &json!({ "i": i }), None)),
                Some(i)
            );
        }
        let lru = cache.lock();
        assert_eq!(lru.entries.len(), lru.recency.len());
    }

    #[test]
    fn the_cache_is_shared_across_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<ResultCache<String>>();

        let cache = std::sync::Arc::new(ResultCache::new(64));
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let cache = cache.clone();
                std::thread::spawn(move || {
                    for i in 0..100 {
                        let key = CacheKey::new("t", &json!([t, i]), None);
                        cache.insert(key.clone(), i, MINUTE);
                        cache.get(&key);
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        assert_eq!(cache.len(), 64);
    }

    #[test]
    fn a_poisoned_lock_is_recovered() {
        let cache = std::sync::Arc::new(ResultCache::new(4));
        cache.insert(key("a"), 1, MINUTE);
        let poisoner = cache.clone();
        let _ = std::thread::spawn(move || {
            let _guard = poisoner.lock();
            panic!("poison the lock");
        })
        .join();
        assert!(cache.inner.is_poisoned());
        assert_eq!(cache.get(&key("a")), Some(1));
        cache.insert(key("b"), 2, MINUTE);
        assert_eq!(cache.len(), 2);
    }
}
