//! A size-bounded, time-limited map: the in-memory cache's engine.
//!
//! Entries expire after the time-to-live given at insertion, and the least
//! recently used make room when the map holds too many entries or bytes.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::CacheKey;

/// Entries by key, with their recency, behind one lock.
pub(crate) struct Lru<V: Clone> {
    inner: Mutex<Entries<V>>,
}

struct Entries<V> {
    max_entries: usize,
    max_bytes: usize,
    bytes: usize,
    map: HashMap<CacheKey, Entry<V>>,
    /// Keys by last use; the first is the least recently used.
    recency: BTreeMap<u64, CacheKey>,
    next_use: u64,
}

struct Entry<V> {
    value: V,
    weight: usize,
    /// `None`: the time-to-live is too long to represent, so it never expires.
    expires_at: Option<Instant>,
    last_use: u64,
}

impl<V> Entry<V> {
    fn expired(&self, now: Instant) -> bool {
        self.expires_at.is_some_and(|at| now >= at)
    }
}

impl<V: Clone> Lru<V> {
    /// A map of at most `max_entries` entries (0 is taken as 1) weighing at
    /// most `max_bytes` together.
    pub fn new(max_entries: usize, max_bytes: usize) -> Self {
        Self {
            inner: Mutex::new(Entries {
                max_entries: max_entries.max(1),
                max_bytes,
                bytes: 0,
                map: HashMap::new(),
                recency: BTreeMap::new(),
                next_use: 0,
            }),
        }
    }

    /// The lock, recovered if a thread panicked while holding it: every
    /// update below leaves the maps usable, at worst holding a stale entry.
    fn lock(&self) -> MutexGuard<'_, Entries<V>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The value for `key` if present and not expired at `now`; a hit makes
    /// the entry the most recently used, and an expired entry is dropped.
    pub fn get(&self, key: &CacheKey, now: Instant) -> Option<V> {
        let mut lru = self.lock();
        let lru = &mut *lru;
        let entry = lru.map.get(key)?;
        if entry.expired(now) {
            lru.remove(key);
            return None;
        }
        let last_use = entry.last_use;
        // Clone first: if `V::clone` panics, nothing has been changed yet.
        let value = entry.value.clone();
        lru.recency.remove(&last_use);
        let next = lru.next_use;
        lru.next_use += 1;
        lru.recency.insert(next, key.clone());
        if let Some(entry) = lru.map.get_mut(key) {
            entry.last_use = next;
        }
        Some(value)
    }

    /// Keeps `value` (weighing `weight` bytes) under `key` for `ttl`,
    /// replacing any entry for `key`, then evicting expired entries and the
    /// least recently used until the limits hold. A zero `ttl`, or a value
    /// heavier than the whole map may be, stores nothing and drops any
    /// entry for `key`.
    pub fn insert(&self, key: CacheKey, value: V, weight: usize, ttl: Duration, now: Instant) {
        let mut lru = self.lock();
        lru.remove(&key);
        if ttl.is_zero() || weight > lru.max_bytes {
            return;
        }
        if lru.full(weight) {
            lru.remove_expired(now);
        }
        while lru.full(weight) {
            let Some((_, oldest)) = lru.recency.first_key_value() else {
                break;
            };
            let oldest = oldest.clone();
            lru.remove(&oldest);
        }
        let last_use = lru.next_use;
        lru.next_use += 1;
        lru.recency.insert(last_use, key.clone());
        lru.bytes += weight;
        let expires_at = now.checked_add(ttl);
        lru.map.insert(
            key,
            Entry {
                value,
                weight,
                expires_at,
                last_use,
            },
        );
    }

    /// The number of entries that have not expired at `now`.
    pub fn len(&self, now: Instant) -> usize {
        let mut lru = self.lock();
        lru.remove_expired(now);
        lru.map.len()
    }

    /// Drops every entry.
    pub fn clear(&self) {
        let mut lru = self.lock();
        lru.map.clear();
        lru.recency.clear();
        lru.bytes = 0;
    }
}

impl<V> Entries<V> {
    fn full(&self, incoming: usize) -> bool {
        self.map.len() >= self.max_entries || self.bytes + incoming > self.max_bytes
    }

    fn remove(&mut self, key: &CacheKey) {
        if let Some(old) = self.map.remove(key) {
            self.recency.remove(&old.last_use);
            self.bytes -= old.weight;
        }
    }

    fn remove_expired(&mut self, now: Instant) {
        let (recency, bytes) = (&mut self.recency, &mut self.bytes);
        self.map.retain(|_, entry| {
            let keep = !entry.expired(now);
            if !keep {
                recency.remove(&entry.last_use);
                *bytes -= entry.weight;
            }
            keep
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MINUTE: Duration = Duration::from_secs(60);
    const ROOMY: usize = 1 << 20;

    fn key(tool: &str) -> CacheKey {
        CacheKey::new(tool, "sha256:00", &json!({}), None, None)
    }

    fn put<V: Clone>(lru: &Lru<V>, name: &str, value: V) {
        lru.insert(key(name), value, 1, MINUTE, Instant::now());
    }

    fn get<V: Clone>(lru: &Lru<V>, name: &str) -> Option<V> {
        lru.get(&key(name), Instant::now())
    }

    #[test]
    fn entries_expire_after_their_ttl() {
        let lru = Lru::new(10, ROOMY);
        let now = Instant::now();
        lru.insert(key("t"), 1, 1, Duration::from_secs(10), now);
        assert_eq!(lru.get(&key("t"), now), Some(1));
        let nine = now + Duration::from_secs(9);
        assert_eq!(lru.get(&key("t"), nine), Some(1));
        assert_eq!(lru.len(nine), 1);
        // Expiry is exact: at the deadline the entry is gone, and stays gone.
        assert_eq!(lru.get(&key("t"), now + Duration::from_secs(10)), None);
        assert_eq!(lru.get(&key("t"), now), None);
        assert_eq!(lru.len(now), 0);
    }

    #[test]
    fn len_counts_only_live_entries() {
        let lru = Lru::new(10, ROOMY);
        let now = Instant::now();
        lru.insert(key("short"), 1, 1, Duration::from_secs(1), now);
        lru.insert(key("long"), 2, 1, MINUTE, now);
        assert_eq!(lru.len(now), 2);
        assert_eq!(lru.len(now + Duration::from_secs(2)), 1);
        lru.clear();
        assert_eq!(lru.len(now), 0);
        assert_eq!(get(&lru, "long"), None);
    }

    #[test]
    fn zero_ttl_never_hits_and_drops_the_old_entry() {
        let lru = Lru::new(10, ROOMY);
        lru.insert(key("t"), 1, 1, Duration::ZERO, Instant::now());
        assert_eq!(get(&lru, "t"), None);
        put(&lru, "t", 1);
        lru.insert(key("t"), 2, 1, Duration::ZERO, Instant::now());
        assert_eq!(get(&lru, "t"), None);
    }

    #[test]
    fn a_huge_ttl_never_expires() {
        let lru = Lru::new(1, ROOMY);
        let now = Instant::now();
        lru.insert(key("t"), 1, 1, Duration::MAX, now);
        assert_eq!(
            lru.get(&key("t"), now + Duration::from_secs(1 << 40)),
            Some(1)
        );
    }

    #[test]
    fn the_least_recently_used_entry_is_evicted() {
        let lru = Lru::new(3, ROOMY);
        for name in ["a", "b", "c"] {
            put(&lru, name, name);
        }
        // Reading "a" makes "b" the least recently used.
        assert_eq!(get(&lru, "a"), Some("a"));
        put(&lru, "d", "d");
        assert_eq!(get(&lru, "b"), None);
        // Replacing "c" refreshes it too, so "a" goes next.
        put(&lru, "c", "c2");
        put(&lru, "e", "e");
        assert_eq!(get(&lru, "a"), None);
        assert_eq!(get(&lru, "c"), Some("c2"));
        assert_eq!(get(&lru, "d"), Some("d"));
        assert_eq!(get(&lru, "e"), Some("e"));
    }

    #[test]
    fn a_miss_does_not_refresh_recency() {
        let lru = Lru::new(2, ROOMY);
        put(&lru, "a", 1);
        put(&lru, "b", 2);
        assert_eq!(get(&lru, "zzz"), None);
        put(&lru, "c", 3);
        assert_eq!(get(&lru, "a"), None);
        assert_eq!(get(&lru, "b"), Some(2));
    }

    #[test]
    fn expired_entries_are_evicted_before_live_ones() {
        let lru = Lru::new(2, ROOMY);
        let now = Instant::now();
        lru.insert(key("live"), 1, 1, MINUTE, now);
        lru.insert(key("brief"), 2, 1, Duration::from_secs(1), now);
        let later = now + Duration::from_secs(5);
        lru.get(&key("live"), now);
        lru.insert(key("new"), 3, 1, MINUTE, later);
        assert_eq!(lru.get(&key("live"), later), Some(1));
        assert_eq!(lru.get(&key("new"), later), Some(3));
    }

    #[test]
    fn bytes_are_bounded_as_well_as_entries() {
        let lru = Lru::new(100, 10);
        let now = Instant::now();
        lru.insert(key("a"), 'a', 4, MINUTE, now);
        lru.insert(key("b"), 'b', 4, MINUTE, now);
        // 4 + 4 + 4 > 10: the oldest goes.
        lru.insert(key("c"), 'c', 4, MINUTE, now);
        assert_eq!(lru.get(&key("a"), now), None);
        assert_eq!(lru.len(now), 2);
        // Heavier than the whole cache: not kept, and the old entry goes.
        lru.insert(key("b"), 'B', 11, MINUTE, now);
        assert_eq!(lru.get(&key("b"), now), None);
        assert_eq!(lru.get(&key("c"), now), Some('c'));
        assert_eq!(lru.lock().bytes, 4);
        lru.clear();
        assert_eq!(lru.lock().bytes, 0);
    }

    #[test]
    fn many_inserts_stay_within_capacity() {
        let lru = Lru::new(16, ROOMY);
        let now = Instant::now();
        let key = |i| CacheKey::new("t", "v", &json!({ "i": i }), None, None);
        for i in 0..1000 {
            lru.insert(key(i), i, 7, MINUTE, now);
            assert!(lru.len(now) <= 16);
        }
        for i in 984..1000 {
            assert_eq!(lru.get(&key(i), now), Some(i));
        }
        let entries = lru.lock();
        assert_eq!(entries.map.len(), entries.recency.len());
        assert_eq!(entries.bytes, 16 * 7);
    }

    #[test]
    fn the_map_is_shared_across_threads() {
        let lru = std::sync::Arc::new(Lru::new(64, ROOMY));
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let lru = lru.clone();
                std::thread::spawn(move || {
                    for i in 0..100 {
                        let key = CacheKey::new("t", "v", &json!([t, i]), None, None);
                        lru.insert(key.clone(), i, 1, MINUTE, Instant::now());
                        lru.get(&key, Instant::now());
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        assert_eq!(lru.len(Instant::now()), 64);
    }

    #[test]
    fn a_poisoned_lock_is_recovered() {
        let lru = std::sync::Arc::new(Lru::new(4, ROOMY));
        put(&lru, "a", 1);
        let poisoner = lru.clone();
        let _ = std::thread::spawn(move || {
            let _guard = poisoner.lock();
            panic!("poison the lock");
        })
        .join();
        assert!(lru.inner.is_poisoned());
        assert_eq!(get(&lru, "a"), Some(1));
        put(&lru, "b", 2);
        assert_eq!(lru.len(Instant::now()), 2);
    }
}
