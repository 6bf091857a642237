//! Tool results in Redis, so every replica of an agent service shares one
//! cache: expiry is Redis's own (`SET ... PX`), keys are a hash of the full
//! [`CacheKey`] under a prefix, and the full key is stored beside each value
//! and compared on reading, so no two keys can ever meet.
//!
//! The cache never holds a call up: every command is bounded (250 ms by
//! default), and after a failure the cache is skipped for a second before it
//! is tried again. The operator is warned once when it goes away and told
//! when it answers again; callers meanwhile go on uncached.

#![warn(missing_docs)]

use std::sync::Mutex;
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use wasm_agent_cache::{CacheError, CacheKey, CacheUrl, ResultCache};

/// How long one command may take before the cache is taken as unavailable.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(250);
/// The largest value kept (larger results are not cached).
pub const DEFAULT_MAX_VALUE: usize = 4 << 20;
/// How long the cache is skipped after it failed.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// What every key starts with (the version changes with the value format).
const PREFIX: &str = "wasm-agent:result:v1:";

/// A [`ResultCache`] in Redis.
pub struct RedisCache {
    connection: ConnectionManager,
    location: String,
    prefix: String,
    timeout: Duration,
    max_value: usize,
    /// Since when the cache is unavailable, and until when it is skipped.
    outage: Mutex<Option<Outage>>,
}

#[derive(Clone, Copy)]
struct Outage {
    retry_at: Instant,
}

impl RedisCache {
    /// A cache at `url` (`redis://[:PASSWORD@]HOST:PORT[/DB]`, `rediss://`
    /// for TLS, `redis+unix:///PATH`). Connects on first use, so a Redis
    /// that is down now does not stop the caller from starting.
    pub fn open(url: &str) -> Result<Self, CacheError> {
        let location = CacheUrl::Redis(url.to_string()).to_string();
        let refused = |reason: String| CacheError::Refused {
            location: location.clone(),
            reason,
        };
        let client = redis::Client::open(url).map_err(|e| refused(e.to_string()))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(DEFAULT_TIMEOUT))
            .set_response_timeout(Some(DEFAULT_TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_secs(1));
        let connection = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|e| refused(e.to_string()))?;
        Ok(Self {
            connection,
            location,
            prefix: PREFIX.to_string(),
            timeout: DEFAULT_TIMEOUT,
            max_value: DEFAULT_MAX_VALUE,
            outage: Mutex::new(None),
        })
    }

    /// Bounds every command by `timeout` instead of [`DEFAULT_TIMEOUT`].
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Files keys under `namespace` too, so services sharing one Redis keep
    /// apart (and `clear` drops only this namespace).
    pub fn with_namespace(mut self, namespace: &str) -> Self {
        self.prefix = format!("{PREFIX}{namespace}:");
        self
    }

    /// Keeps values of at most `bytes` instead of [`DEFAULT_MAX_VALUE`].
    pub fn with_max_value(mut self, bytes: usize) -> Self {
        self.max_value = bytes;
        self
    }

    fn redis_key(&self, key: &CacheKey) -> String {
        format!("{}{}", self.prefix, key.digest())
    }

    /// Runs `command`, bounded, unless the cache is in an outage; notes
    /// outages and recoveries.
    async fn run<T: redis::FromRedisValue>(&self, command: &redis::Cmd) -> Result<T, CacheError> {
        if let Some(outage) = *self.outage.lock().unwrap_or_else(|e| e.into_inner())
            && Instant::now() < outage.retry_at
        {
            return Err(self.unavailable("skipped after an earlier failure".into()));
        }
        let mut connection = self.connection.clone();
        let answer = tokio::time::timeout(self.timeout, command.query_async(&mut connection)).await;
        let reason = match answer {
            Ok(Ok(value)) => {
                let was_out = self
                    .outage
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take()
                    .is_some();
                if was_out {
                    tracing::warn!("result cache at {} answers again", self.location);
                }
                return Ok(value);
            }
            Ok(Err(error)) => error.to_string(),
            Err(_) => format!("no answer within {} ms", self.timeout.as_millis()),
        };
        let first = self
            .outage
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(Outage {
                retry_at: Instant::now() + RETRY_AFTER,
            })
            .is_none();
        if first {
            tracing::warn!(
                "result cache at {} is unavailable ({reason}); tool calls go on uncached until it answers",
                self.location
            );
        }
        Err(self.unavailable(reason))
    }

    fn unavailable(&self, reason: String) -> CacheError {
        CacheError::Unavailable {
            location: self.location.clone(),
            reason,
        }
    }
}

/// The stored form: the encoded key's length (u32, little-endian), the
/// encoded key, the value.
fn stored(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + key.len() + value.len());
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    out
}

/// The value of a stored entry, if it was stored under `key`.
fn value_of(key: &[u8], stored: &[u8]) -> Option<Vec<u8>> {
    let length = u32::from_le_bytes(stored.get(..4)?.try_into().ok()?) as usize;
    let rest = &stored[4..];
    (rest.get(..length)? == key).then(|| rest[length..].to_vec())
}

#[async_trait::async_trait]
impl ResultCache for RedisCache {
    async fn get(&self, key: &CacheKey) -> Result<Option<Vec<u8>>, CacheError> {
        let found: Option<Vec<u8>> = self.run(redis::cmd("GET").arg(self.redis_key(key))).await?;
        Ok(found.and_then(|stored| value_of(&key.encoded(), &stored)))
    }

    async fn put(&self, key: &CacheKey, value: &[u8], ttl: Duration) -> Result<(), CacheError> {
        if value.len() > self.max_value {
            return Err(CacheError::TooLarge {
                size: value.len(),
                max: self.max_value,
            });
        }
        let name = self.redis_key(key);
        // Redis counts in whole milliseconds; anything under one keeps nothing.
        let millis = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        if millis == 0 {
            return self.run(redis::cmd("DEL").arg(name)).await;
        }
        // Redis refuses expiry times past what it can represent.
        let millis = millis.min(i64::MAX as u64 / 2);
        let entry = stored(&key.encoded(), value);
        self.run(redis::cmd("SET").arg(name).arg(entry).arg("PX").arg(millis))
            .await
    }

    async fn clear(&self) -> Result<(), CacheError> {
        let pattern = format!("{}*", self.prefix);
        let mut cursor = 0u64;
        loop {
            let (next, names): (u64, Vec<String>) = self
                .run(
                    redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(&pattern)
                        .arg("COUNT")
                        .arg(1000),
                )
                .await?;
            if !names.is_empty() {
                self.run::<()>(redis::cmd("UNLINK").arg(names)).await?;
            }
            if next == 0 {
                return Ok(());
            }
            cursor = next;
        }
    }

    fn location(&self) -> String {
        self.location.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_entry_answers_only_its_own_key() {
        let entry = stored(b"key", b"value");
        assert_eq!(value_of(b"key", &entry), Some(b"value".to_vec()));
        assert_eq!(value_of(b"kez", &entry), None);
        assert_eq!(value_of(b"ke", &entry), None);
        assert_eq!(value_of(b"key", &entry[..5]), None);
        assert_eq!(value_of(b"key", b""), None);
        assert_eq!(value_of(b"", &stored(b"", b"")), Some(Vec::new()));
    }

    #[test]
    fn bad_urls_are_refused_without_their_password() {
        let err = RedisCache::open("redis://:hunter2@[::1")
            .err()
            .unwrap()
            .to_string();
        assert!(err.starts_with("cannot use redis://"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
    }
}
