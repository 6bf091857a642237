//! Quota counters in Redis, so every replica holds one limit: each check is
//! one Lua script, atomic on the server and timed by the server's clock
//! (`TIME`), so replicas with skewed clocks still share one bucket. Every
//! command is bounded (250 ms by default); a failure is the caller's to
//! handle (the pipeline falls back to per-replica counters).

#![warn(missing_docs)]

use std::time::Duration;

use redis::Script;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use wasm_agent_access::quota::{QuotaStore, QuotaStoreError};

/// How long one command may take.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(250);
/// What every key starts with; then the kind of counter (a bucket, a set
/// of places, fuel counts by hour), then the caller's key.
const PREFIX: &str = "wasm-agent:quota:v1:";
const RATE: &str = "rate";
const IN_FLIGHT: &str = "in-flight";
const FUEL: &str = "fuel";

/// Takes a token from a bucket: KEYS[1] the bucket, ARGV[1] tokens per
/// millisecond, ARGV[2] the burst. Returns -1 when taken, else the
/// milliseconds until a token is there.
const TAKE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local at = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local wait = -1
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = math.ceil((1 - tokens) / rate)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate) + 1000)
return wait
";

/// Holds a place: KEYS[1] a sorted set of holders by lease end, ARGV[1] the
/// holder, ARGV[2] the limit, ARGV[3] the lease in ms. 1 when held.
const HOLD: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1
";

/// Adds fuel to this clock hour's count (by the server's clock): KEYS[1]
/// the key's prefix, ARGV[1] the fuel. Returns the new total.
const CHARGE: &str = r"
local hour = math.floor(tonumber(redis.call('TIME')[1]) / 3600)
local key = KEYS[1] .. ':' .. hour
local total = redis.call('INCRBY', key, ARGV[1])
redis.call('EXPIRE', key, 7200)
return total
";

/// This clock hour's fuel count: KEYS[1] the key's prefix.
const SPENT: &str = r"
local hour = math.floor(tonumber(redis.call('TIME')[1]) / 3600)
return tonumber(redis.call('GET', KEYS[1] .. ':' .. hour)) or 0
";

/// A [`QuotaStore`] in Redis.
pub struct RedisQuotaStore {
    connection: ConnectionManager,
    location: String,
    timeout: Duration,
    scripts: [Script; 4],
}

impl RedisQuotaStore {
    /// Counters at `url` (`redis://[:PASSWORD@]HOST:PORT[/DB]`, `rediss://`
    /// for TLS). Connects on first use, so a Redis that is down now does not
    /// stop the caller from starting.
    pub fn open(url: &str) -> Result<Self, QuotaStoreError> {
        let location = shown(url);
        let refused = |reason: String| QuotaStoreError {
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
            timeout: DEFAULT_TIMEOUT,
            scripts: [TAKE, HOLD, CHARGE, SPENT].map(Script::new),
        })
    }

    /// Runs script `index` on `key` of `kind` (each kind of counter has
    /// keys of its own) with `args`, bounded.
    async fn run<T: redis::FromRedisValue>(
        &self,
        index: usize,
        kind: &str,
        key: &str,
        args: &[String],
    ) -> Result<T, QuotaStoreError> {
        let mut connection = self.connection.clone();
        let mut invocation = self.scripts[index].key(format!("{PREFIX}{kind}:{key}"));
        for arg in args {
            invocation.arg(arg);
        }
        let answer =
            tokio::time::timeout(self.timeout, invocation.invoke_async::<T>(&mut connection)).await;
        match answer {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(self.unavailable(error.to_string())),
            Err(_) => Err(self.unavailable(format!("no answer within {:?}", self.timeout))),
        }
    }

    fn unavailable(&self, reason: String) -> QuotaStoreError {
        QuotaStoreError {
            location: self.location.clone(),
            reason,
        }
    }
}

#[async_trait::async_trait]
impl QuotaStore for RedisQuotaStore {
    async fn take(
        &self,
        key: &str,
        per_minute: u32,
        burst: u32,
    ) -> Result<Option<Duration>, QuotaStoreError> {
        let per_ms = f64::from(per_minute) / 60_000.0;
        let wait: i64 = self
            .run(0, RATE, key, &[per_ms.to_string(), burst.to_string()])
            .await?;
        Ok((wait >= 0).then(|| Duration::from_millis(wait as u64)))
    }

    async fn hold(
        &self,
        key: &str,
        id: &str,
        limit: u32,
        lease: Duration,
    ) -> Result<bool, QuotaStoreError> {
        let lease_ms = lease.as_millis().clamp(1, u128::from(u32::MAX));
        let held: i64 = self
            .run(
                1,
                IN_FLIGHT,
                key,
                &[id.to_string(), limit.to_string(), lease_ms.to_string()],
            )
            .await?;
        Ok(held == 1)
    }

    async fn release(&self, key: &str, id: &str) -> Result<(), QuotaStoreError> {
        let mut connection = self.connection.clone();
        let command = redis::cmd("ZREM")
            .arg(format!("{PREFIX}{IN_FLIGHT}:{key}"))
            .arg(id)
            .clone();
        let answer =
            tokio::time::timeout(self.timeout, command.query_async::<i64>(&mut connection)).await;
        match answer {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => Err(self.unavailable(error.to_string())),
            Err(_) => Err(self.unavailable(format!("no answer within {:?}", self.timeout))),
        }
    }

    async fn fuel_spent(&self, key: &str) -> Result<u64, QuotaStoreError> {
        let spent: i64 = self.run(3, FUEL, key, &[]).await?;
        Ok(spent.max(0) as u64)
    }

    async fn charge_fuel(&self, key: &str, fuel: u64) -> Result<(), QuotaStoreError> {
        let fuel = fuel.min(i64::MAX as u64 / 2);
        let _: i64 = self.run(2, FUEL, key, &[fuel.to_string()]).await?;
        Ok(())
    }

    fn location(&self) -> String {
        self.location.clone()
    }
}

/// `url` without its password, for messages.
fn shown(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.rsplit_once('@') {
            Some((_, host)) => format!("{scheme}://...@{host}"),
            None => url.to_string(),
        },
        None => "redis".into(),
    }
}
