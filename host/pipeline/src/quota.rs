//! Quotas: a tenant's (and a principal's) calls per minute, calls in flight
//! and fuel per hour, counted where every replica sees them (a
//! [`QuotaStore`] in Redis) or, while that store cannot be reached, in this
//! replica's memory: never no limit. Counted for the calls a caller makes
//! (an agent's, a client's); calls made for them (by tools, scripts) draw on
//! the request's budget instead, and their fuel is charged to the caller.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wasm_agent_access::quota::{
    Applied, MemoryQuotaStore, QuotaStore, QuotaStoreError, Quotas, TenantObserver, clock_hour,
};
use wasm_agent_sandbox::result::{CallError, ErrorKind};

use crate::call::{Called, ToolCall};
use crate::layer::{Layer, Next};

/// How long a place in flight is held at most (a replica that dies gives
/// its places back then).
const LEASE: Duration = Duration::from_secs(600);
/// How long the shared store is left alone after it failed.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Applies the quotas, and tells the observer of each tenant's calls.
pub(crate) struct Quota {
    pub(crate) quotas: Arc<Quotas>,
    pub(crate) counters: Arc<Counters>,
    pub(crate) observer: Option<Arc<dyn TenantObserver>>,
}

#[async_trait::async_trait]
impl Layer for Quota {
    fn applies(&self, call: &ToolCall) -> bool {
        call.context.tool_call_depth() == 0
            && (self.quotas.is_configured()
                || (self.observer.is_some() && call.context.tenant_id.is_some()))
    }

    async fn call(&self, call: &mut ToolCall, next: Next<'_>) -> Called {
        let context = &call.context;
        let applied = self
            .quotas
            .applied(context.tenant_id.as_deref(), context.user_id.as_deref());
        let observed = self.observer.clone().zip(context.tenant_id.clone());
        if applied.is_empty() && observed.is_none() {
            return next.run(call).await;
        }
        let id = self.counters.next_id();
        // Given back when the call ends, however it ends (dropped too).
        let mut held = Places {
            counters: self.counters.clone(),
            id: id.clone(),
            places: Vec::new(),
        };
        for limits in &applied {
            match self.admit(limits, &id).await {
                Ok(place) => held.places.extend(place),
                Err((error, reason, decided)) => {
                    held.release().await;
                    if let Some((observer, tenant)) = &observed {
                        observer.refused(tenant, reason);
                    }
                    call.context.decided_by = Some(decided.into());
                    return Called::refused(call, error);
                }
            }
        }
        let meter = call.context.metered();
        let called = next.run(call).await;
        held.release().await;
        let fuel = meter.load(Ordering::Relaxed);
        if fuel > 0 {
            for limits in applied.iter().filter(|a| a.limits.fuel_per_hour.is_some()) {
                self.counters.charge_fuel(&limits.key, fuel).await;
            }
        }
        if let Some((observer, tenant)) = &observed {
            let outcome = called.error_kind().map_or("ok", ErrorKind::as_str);
            observer.call_ended(tenant, outcome, fuel);
        }
        called
    }
}

impl Quota {
    /// Checks one scope's limits, holding a place in flight if it has that
    /// limit (its key returned); `Err` is the refusal and what decided it.
    async fn admit(
        &self,
        applied: &Applied,
        id: &str,
    ) -> Result<Option<Place>, (CallError, &'static str, String)> {
        let key = applied.key.clone();
        let who = format!("{} {:?}", applied.scope.as_str(), applied.name);
        let limits = applied.limits;
        let refused = |message: String, limit: &'static str| {
            let error = CallError::new(ErrorKind::RateLimited, message);
            (error, limit, format!("quota: {who} {limit}"))
        };
        if let Some(limit) = limits.fuel_per_hour {
            let spent = self.counters.fuel_spent(&key).await;
            if spent >= limit {
                let (_, left) = clock_hour();
                return Err(refused(
                    format!(
                        "{who} has burned its compute budget of {limit} fuel this hour \
                         ([quotas] fuel_per_hour); retry after {} s, when the next hour begins",
                        left.as_secs().max(1)
                    ),
                    "fuel_per_hour",
                ));
            }
        }
        if let Some(per_minute) = limits.calls_per_minute {
            let burst = limits.burst.unwrap_or(per_minute);
            if let Some(wait) = self.counters.take(&key, per_minute, burst).await {
                return Err(refused(
                    format!(
                        "{who} is over its quota of {per_minute} calls per minute (burst \
                         {burst}, [quotas] calls_per_minute); retry after {:.1} s",
                        wait.as_secs_f64().max(0.1)
                    ),
                    "calls_per_minute",
                ));
            }
        }
        if let Some(limit) = limits.in_flight {
            let Some(place) = self.counters.hold(&key, id, limit).await else {
                return Err(refused(
                    format!(
                        "{who} has {limit} calls in flight, as many as its quota allows \
                         ([quotas] in_flight); retry when one ends"
                    ),
                    "in_flight",
                ));
            };
            return Ok(Some(place));
        }
        Ok(None)
    }
}

/// A place in flight, and where it is held.
pub(crate) struct Place {
    key: String,
    shared: bool,
}

/// The places one call holds, given back by [`Places::release`] or, if the
/// call's future is dropped first, by a task of their own.
struct Places {
    counters: Arc<Counters>,
    id: String,
    places: Vec<Place>,
}

impl Places {
    async fn release(&mut self) {
        for place in std::mem::take(&mut self.places) {
            self.counters.release(&place, &self.id).await;
        }
    }
}

impl Drop for Places {
    fn drop(&mut self) {
        let places = std::mem::take(&mut self.places);
        if places.is_empty() {
            return;
        }
        // Without a runtime, the leases end them.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (counters, id) = (self.counters.clone(), std::mem::take(&mut self.id));
            runtime.spawn(async move {
                for place in places {
                    counters.release(&place, &id).await;
                }
            });
        }
    }
}

/// The quota counters: the shared store, or this replica's memory while it
/// fails (with a warning, and counted in `fallbacks`).
pub(crate) struct Counters {
    shared: Option<Arc<dyn QuotaStore>>,
    memory: MemoryQuotaStore,
    /// This replica's prefix of place holders' ids.
    replica: String,
    made: AtomicU64,
    /// Until when the shared store is left alone, after a failure.
    down_until: Mutex<Option<Instant>>,
    /// Checks answered from memory because the shared store failed.
    pub(crate) fallbacks: AtomicU64,
    /// Told of each of those.
    observer: Option<Arc<dyn TenantObserver>>,
}

impl Counters {
    /// Counters in `shared` (`None`: memory only).
    pub(crate) fn new(
        shared: Option<Arc<dyn QuotaStore>>,
        observer: Option<Arc<dyn TenantObserver>>,
    ) -> Self {
        Self {
            observer,
            shared,
            memory: MemoryQuotaStore::default(),
            replica: uuid::Uuid::new_v4().simple().to_string(),
            made: AtomicU64::new(0),
            down_until: Mutex::new(None),
            fallbacks: AtomicU64::new(0),
        }
    }

    fn next_id(&self) -> String {
        let n = self.made.fetch_add(1, Ordering::Relaxed);
        format!("{}/{n}", self.replica)
    }

    /// The shared store, unless it failed a moment ago (then memory
    /// answers, and `fallbacks` counts it).
    fn shared(&self) -> Option<&dyn QuotaStore> {
        let shared = self.shared.as_deref()?;
        let down = self.down_until.lock().unwrap_or_else(|e| e.into_inner());
        match *down {
            Some(until) if Instant::now() < until => {
                self.fell_back();
                None
            }
            _ => Some(shared),
        }
    }

    /// Notes that the shared store failed: memory answers for a while.
    fn fell_back(&self) {
        self.fallbacks.fetch_add(1, Ordering::Relaxed);
        if let Some(observer) = &self.observer {
            observer.fell_back();
        }
    }

    fn failed(&self, error: &QuotaStoreError) {
        self.fell_back();
        let mut down = self.down_until.lock().unwrap_or_else(|e| e.into_inner());
        if down.is_none() {
            tracing::warn!(
                %error,
                "quotas are counted per replica until the quota store answers again"
            );
        }
        *down = Some(Instant::now() + RETRY_AFTER);
    }

    fn answered(&self) {
        let mut down = self.down_until.lock().unwrap_or_else(|e| e.into_inner());
        if down.take().is_some() {
            tracing::warn!("the quota store answers again: quotas are shared by the replicas");
        }
    }

    async fn take(&self, key: &str, per_minute: u32, burst: u32) -> Option<Duration> {
        if let Some(shared) = self.shared() {
            match shared.take(key, per_minute, burst).await {
                Ok(wait) => {
                    self.answered();
                    return wait;
                }
                Err(error) => self.failed(&error),
            }
        }
        self.memory
            .take(key, per_minute, burst)
            .await
            .ok()
            .flatten()
    }

    /// A place of `limit` under `key` for call `id`, if one is free: in
    /// the shared store, or in memory while it is down.
    async fn hold(&self, key: &str, id: &str, limit: u32) -> Option<Place> {
        if let Some(shared) = self.shared() {
            match shared.hold(key, id, limit, LEASE).await {
                Ok(held) => {
                    return held.then(|| Place {
                        key: key.to_string(),
                        shared: true,
                    });
                }
                Err(error) => self.failed(&error),
            }
        }
        let held = self.memory.hold(key, id, limit, LEASE).await;
        held.unwrap_or(false).then(|| Place {
            key: key.to_string(),
            shared: false,
        })
    }

    /// Gives back `place` where it was held: the shared store is asked even
    /// while it is taken as down (else the place would stay taken until its
    /// lease ends).
    async fn release(&self, place: &Place, id: &str) {
        if !place.shared {
            let _ = self.memory.release(&place.key, id).await;
        } else if let Some(shared) = &self.shared
            && let Err(error) = shared.release(&place.key, id).await
        {
            self.failed(&error);
        }
    }

    async fn fuel_spent(&self, key: &str) -> u64 {
        if let Some(shared) = self.shared() {
            match shared.fuel_spent(key).await {
                Ok(spent) => return spent,
                Err(error) => self.failed(&error),
            }
        }
        self.memory.fuel_spent(key).await.unwrap_or(0)
    }

    async fn charge_fuel(&self, key: &str, fuel: u64) {
        if let Some(shared) = self.shared() {
            match shared.charge_fuel(key, fuel).await {
                Ok(()) => return,
                Err(error) => self.failed(&error),
            }
        }
        let _ = self.memory.charge_fuel(key, fuel).await;
    }
}
