//! Quotas: how much a tenant (and, if set, a principal) may call, from a
//! config's `[quotas]` section, and the counters that hold them
//! ([`QuotaStore`]: this process's memory, or one every replica shares).
//!
//! ```toml
//! [quotas.tenant]            # every tenant
//! calls_per_minute = 600     # a token bucket refilled at this rate...
//! burst = 50                 # ...holding at most this many calls
//! in_flight = 16             # calls at once
//! fuel_per_hour = 2_000_000_000_000   # compute: fuel the calls burned, per clock hour
//!
//! [quotas.tenants.acme]      # one tenant's own limits, in place of the above
//! calls_per_minute = 60
//!
//! [quotas.principal]         # every principal, on top of its tenant's
//! calls_per_minute = 120
//! ```

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Deserialize;

/// The `[quotas]` section.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaConfig {
    /// Where the counters are: `redis://...` shares them among replicas;
    /// default: each replica's memory.
    #[serde(default)]
    pub store: Option<String>,
    /// The limits of every tenant.
    #[serde(default)]
    pub tenant: Option<Limits>,
    /// Limits of named tenants, in place of `tenant`'s.
    #[serde(default)]
    pub tenants: BTreeMap<String, Limits>,
    /// The limits of every principal (on top of its tenant's).
    #[serde(default)]
    pub principal: Option<Limits>,
    /// Limits of named principals, in place of `principal`'s.
    #[serde(default)]
    pub principals: BTreeMap<String, Limits>,
}

/// The limits of one tenant or principal; each left out is no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Calls per minute, as a token bucket refilled at this rate.
    #[serde(default)]
    pub calls_per_minute: Option<u32>,
    /// The most calls the bucket holds (default: `calls_per_minute`).
    #[serde(default)]
    pub burst: Option<u32>,
    /// Calls at once.
    #[serde(default)]
    pub in_flight: Option<u32>,
    /// Fuel the calls may burn per clock hour (the compute budget).
    #[serde(default)]
    pub fuel_per_hour: Option<u64>,
}

/// A `[quotas]` section that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("[quotas] {0}")]
pub struct QuotaConfigError(String);

/// Whose limits a count is kept for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// A tenant's.
    Tenant,
    /// A principal's.
    Principal,
}

impl Scope {
    /// `tenant` or `principal`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Tenant => "tenant",
            Scope::Principal => "principal",
        }
    }
}

/// The limits that apply to one caller, with whose they are.
#[derive(Clone, Debug)]
pub struct Applied {
    /// Tenant or principal.
    pub scope: Scope,
    /// The tenant's or principal's name.
    pub name: String,
    /// Its limits.
    pub limits: Limits,
    /// The key its counters are kept under: the scope and the names as
    /// JSON strings (a principal's with its tenant's: two tenants' `bot`s
    /// count apart), so no two callers' keys can meet.
    pub key: String,
}

/// The quotas of a config, checked.
#[derive(Clone, Debug, Default)]
pub struct Quotas {
    config: QuotaConfig,
}

impl Quotas {
    /// The quotas of a `[quotas]` section.
    pub fn new(config: QuotaConfig) -> Result<Self, QuotaConfigError> {
        let named = config
            .tenants
            .iter()
            .map(|(name, limits)| (format!("tenants.{name}"), limits))
            .chain(
                config
                    .principals
                    .iter()
                    .map(|(name, limits)| (format!("principals.{name}"), limits)),
            );
        let every = [("tenant", config.tenant), ("principal", config.principal)]
            .into_iter()
            .filter_map(|(key, limits)| Some((key.to_string(), limits?)));
        for (key, limits) in named.map(|(k, l)| (k, *l)).chain(every) {
            let zero = |what: &str| QuotaConfigError(format!("{key}.{what} must be at least 1"));
            if limits.calls_per_minute == Some(0) {
                return Err(zero("calls_per_minute"));
            }
            if limits.burst == Some(0) {
                return Err(zero("burst"));
            }
            if limits.in_flight == Some(0) {
                return Err(zero("in_flight"));
            }
            if limits.burst.is_some() && limits.calls_per_minute.is_none() {
                return Err(QuotaConfigError(format!(
                    "{key}.burst needs calls_per_minute (the rate the bucket refills at)"
                )));
            }
        }
        if let Some(store) = &config.store
            && !store.starts_with("redis://")
            && !store.starts_with("rediss://")
        {
            return Err(QuotaConfigError(format!(
                "store must be a redis:// or rediss:// URL (got {:?})",
                store.split('@').next_back().unwrap_or_default()
            )));
        }
        Ok(Self { config })
    }

    /// Whether any limit is set.
    pub fn is_configured(&self) -> bool {
        let c = &self.config;
        c.tenant.is_some()
            || c.principal.is_some()
            || !c.tenants.is_empty()
            || !c.principals.is_empty()
    }

    /// Where the counters are to be kept (`None`: each replica's memory).
    pub fn store(&self) -> Option<&str> {
        self.config.store.as_deref()
    }

    /// The limits a caller of `tenant` and `principal` is held to: its
    /// principal's, then its tenant's (so a principal over its own limit is
    /// refused before it draws on its tenant's).
    pub fn applied(&self, tenant: Option<&str>, principal: Option<&str>) -> Vec<Applied> {
        let c = &self.config;
        let quoted = |name: &str| serde_json::Value::from(name).to_string();
        let mut applied = Vec::new();
        if let Some(name) = principal
            && let Some(limits) = c.principals.get(name).copied().or(c.principal)
        {
            let key = format!(
                "principal:{}/{}",
                quoted(tenant.unwrap_or("")),
                quoted(name)
            );
            applied.push(Applied {
                scope: Scope::Principal,
                name: name.to_string(),
                limits,
                key,
            });
        }
        if let Some(name) = tenant
            && let Some(limits) = c.tenants.get(name).copied().or(c.tenant)
        {
            applied.push(Applied {
                scope: Scope::Tenant,
                name: name.to_string(),
                limits,
                key: format!("tenant:{}", quoted(name)),
            });
        }
        applied
    }
}

/// Counters a store could not reach.
#[derive(Debug, thiserror::Error)]
#[error("the quota store {location} is unavailable: {reason}")]
pub struct QuotaStoreError {
    /// The store.
    pub location: String,
    /// Why.
    pub reason: String,
}

/// Where quota counters are kept. Keys name the scope and its name.
#[async_trait::async_trait]
pub trait QuotaStore: Send + Sync + 'static {
    /// Takes one call from the bucket `key` (refilled at `per_minute`,
    /// holding at most `burst`): `None` when taken, else how long until one
    /// is there.
    async fn take(
        &self,
        key: &str,
        per_minute: u32,
        burst: u32,
    ) -> Result<Option<Duration>, QuotaStoreError>;

    /// Holds one of `limit` places of `key` for call `id`, for at most
    /// `lease` (a replica that dies gives its places back then); whether
    /// one was free.
    async fn hold(
        &self,
        key: &str,
        id: &str,
        limit: u32,
        lease: Duration,
    ) -> Result<bool, QuotaStoreError>;

    /// Gives back the place `id` holds.
    async fn release(&self, key: &str, id: &str) -> Result<(), QuotaStoreError>;

    /// The fuel `key` burned this clock hour.
    async fn fuel_spent(&self, key: &str) -> Result<u64, QuotaStoreError>;

    /// Adds `fuel` to what `key` burned this clock hour.
    async fn charge_fuel(&self, key: &str, fuel: u64) -> Result<(), QuotaStoreError>;

    /// Where it is, for messages.
    fn location(&self) -> String;
}

/// Told of every call a tenant makes and of every refusal (metrics).
pub trait TenantObserver: Send + Sync + 'static {
    /// A call of `tenant` ended with `outcome` (`ok` or the error kind),
    /// having burned `fuel`.
    fn call_ended(&self, tenant: &str, outcome: &'static str, fuel: u64);

    /// A call of `tenant` was refused by `reason` (`access`, or the quota:
    /// `calls_per_minute`, `in_flight`, `fuel_per_hour`).
    fn refused(&self, tenant: &str, reason: &'static str);

    /// A quota check was answered from this replica's memory because the
    /// shared quota store could not be reached.
    fn fell_back(&self);
}

/// The clock hour now (hours since the epoch) and the time left in it.
pub fn clock_hour() -> (u64, Duration) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let hour = now.as_secs() / 3600;
    let left = Duration::from_secs((hour + 1) * 3600).saturating_sub(now);
    (hour, left)
}

/// How many buckets memory keeps before full ones are forgotten.
const MAX_BUCKETS: usize = 100_000;

/// One token bucket: what it held when last taken from, its rate (tokens
/// a second) and its size.
struct Bucket {
    tokens: f64,
    at: Instant,
    rate: f64,
    burst: f64,
}

impl Bucket {
    fn refilled(&self, now: Instant) -> f64 {
        (self.tokens + now.duration_since(self.at).as_secs_f64() * self.rate).min(self.burst)
    }
}

/// Quota counters in this process's memory (each replica its own).
#[derive(Default)]
pub struct MemoryQuotaStore {
    buckets: Mutex<HashMap<String, Bucket>>,
    held: Mutex<HashMap<String, HashMap<String, Instant>>>,
    fuel: Mutex<HashMap<String, (u64, u64)>>,
}

#[async_trait::async_trait]
impl QuotaStore for MemoryQuotaStore {
    async fn take(
        &self,
        key: &str,
        per_minute: u32,
        burst: u32,
    ) -> Result<Option<Duration>, QuotaStoreError> {
        let rate = f64::from(per_minute) / 60.0;
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= MAX_BUCKETS && !buckets.contains_key(key) {
            // Full buckets carry nothing: forget them, each by its own rate.
            buckets.retain(|_, bucket| bucket.refilled(now) < bucket.burst);
        }
        let bucket = buckets.entry(key.to_string()).or_insert(Bucket {
            tokens: f64::from(burst),
            at: now,
            rate,
            burst: f64::from(burst),
        });
        (bucket.rate, bucket.burst) = (rate, f64::from(burst));
        let refilled = bucket.refilled(now);
        bucket.at = now;
        if refilled >= 1.0 {
            bucket.tokens = refilled - 1.0;
            return Ok(None);
        }
        bucket.tokens = refilled;
        Ok(Some(Duration::from_secs_f64((1.0 - refilled) / rate)))
    }

    async fn hold(
        &self,
        key: &str,
        id: &str,
        limit: u32,
        lease: Duration,
    ) -> Result<bool, QuotaStoreError> {
        let now = Instant::now();
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let places = held.entry(key.to_string()).or_default();
        places.retain(|_, until| *until > now);
        if places.len() >= limit as usize {
            return Ok(false);
        }
        places.insert(id.to_string(), now + lease);
        Ok(true)
    }

    async fn release(&self, key: &str, id: &str) -> Result<(), QuotaStoreError> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(places) = held.get_mut(key) {
            places.remove(id);
            if places.is_empty() {
                held.remove(key);
            }
        }
        Ok(())
    }

    async fn fuel_spent(&self, key: &str) -> Result<u64, QuotaStoreError> {
        let (hour, _) = clock_hour();
        let fuel = self.fuel.lock().unwrap_or_else(|e| e.into_inner());
        Ok(match fuel.get(key) {
            Some((at, spent)) if *at == hour => *spent,
            _ => 0,
        })
    }

    async fn charge_fuel(&self, key: &str, fuel: u64) -> Result<(), QuotaStoreError> {
        let (hour, _) = clock_hour();
        let mut spent = self.fuel.lock().unwrap_or_else(|e| e.into_inner());
        spent.retain(|_, (at, _)| *at == hour);
        let entry = spent.entry(key.to_string()).or_insert((hour, 0));
        entry.1 = entry.1.saturating_add(fuel);
        Ok(())
    }

    fn location(&self) -> String {
        "memory".into()
    }
}

#[cfg(test)]
#[path = "quota_tests.rs"]
mod tests;
