//! Prometheus metrics for a wasm-agent process, in the OpenMetrics text
//! format ([`Metrics::render`], what `GET /metrics` serves):
//!
//! | metric | labels |
//! |---|---|
//! | `wasm_agent_tool_calls_total` | `tool`, `outcome` (`ok` or the error kind) |
//! | `wasm_agent_tool_call_duration_seconds` (histogram) | `tool` |
//! | `wasm_agent_tool_calls_in_flight` | |
//! | `wasm_agent_capability_denials_total` | `kind` |
//! | `wasm_agent_pool_*` (instances, memories in use; slots) | |
//! | `wasm_agent_store_operation_duration_seconds` (histogram), `wasm_agent_store_errors_total` | `operation` |
//! | `wasm_agent_cache_operation_duration_seconds` (histogram), `wasm_agent_cache_errors_total` | `operation` |
//! | `wasm_agent_tenant_calls_total` | `tenant`, `outcome` |
//! | `wasm_agent_tenant_refusals_total` | `tenant`, `reason` (`access`, `calls_per_minute`, `in_flight`, `fuel_per_hour`) |
//! | `wasm_agent_tenant_fuel_total` | `tenant` |
//! | `wasm_agent_quota_fallbacks_total` | |
//!
//! Tenants are labelled by name up to [`MAX_TENANTS`] of them; calls of
//! any further tenant count as `tenant="(other)"`.
//!
//! The same metrics go over OTLP too when made with
//! [`Metrics::exporting`] (names in the `otlp` module's table).
//!
//! Tool names come only from the tools the host offers (a call of an
//! unknown name counts as `tool="(unknown)"`), so a client cannot grow the
//! label space.

#![warn(missing_docs)]

mod host;
mod metered;
mod otlp;
mod tenants;
#[cfg(test)]
mod tests;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use opentelemetry::metrics::Meter;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use wasm_agent_sandbox::host::HostGauges;
use wasm_agent_sandbox::observe::CallObserver;
use wasm_agent_sandbox::result::ErrorKind;

pub use metered::{MeteredCache, MeteredStore};

/// The most tenants labelled by name.
pub const MAX_TENANTS: usize = 1000;

/// The label of calls of tools the host does not offer.
const UNKNOWN_TOOL: &str = "(unknown)";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TenantCallLabels {
    tenant: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TenantRefusalLabels {
    tenant: String,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TenantLabel {
    tenant: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabel {
    operation: &'static str,
}

type Timings<L> = Family<L, Histogram, fn() -> Histogram>;

/// Tool calls: 50 µs to ~100 s.
fn call_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.5, 16))
}

/// Store and cache operations: 50 µs to ~6 s.
fn operation_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.2, 16))
}

/// One process's metrics. Give it to the [`ToolHost`] builder as its
/// observer, [`watch`](Self::watch) the host's gauges, and wrap the store
/// and cache with [`MeteredStore`] and [`MeteredCache`].
///
/// [`ToolHost`]: wasm_agent_sandbox::ToolHost
pub struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    durations: Timings<ToolLabel>,
    in_flight: Gauge,
    store_timings: Timings<OperationLabel>,
    store_errors: Family<OperationLabel, Counter>,
    cache_timings: Timings<OperationLabel>,
    cache_errors: Family<OperationLabel, Counter>,
    gauges: Arc<OnceLock<HostGauges>>,
    otlp: Option<otlp::Mirror>,
    tenants: tenants::TenantMetrics,
}

impl Metrics {
    /// Every metric, at zero.
    pub fn new() -> Arc<Self> {
        Self::build(None)
    }

    /// Every metric, at zero, recorded into `meter` too (for OTLP export).
    pub fn exporting(meter: &Meter) -> Arc<Self> {
        Self::build(Some(meter))
    }

    fn build(meter: Option<&Meter>) -> Arc<Self> {
        let mut registry = Registry::default();
        let calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "wasm_agent_tool_calls",
            "Tool calls by tool and outcome (ok or the error kind)",
            calls.clone(),
        );
        let durations = Timings::<ToolLabel>::new_with_constructor(call_buckets);
        registry.register(
            "wasm_agent_tool_call_duration_seconds",
            "Wall-clock time of tool calls",
            durations.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "wasm_agent_tool_calls_in_flight",
            "Tool calls running now",
            in_flight.clone(),
        );
        let store_timings = Timings::<OperationLabel>::new_with_constructor(operation_buckets);
        registry.register(
            "wasm_agent_store_operation_duration_seconds",
            "Time of session-store operations",
            store_timings.clone(),
        );
        let store_errors = Family::<OperationLabel, Counter>::default();
        registry.register(
            "wasm_agent_store_errors",
            "Session-store operations that failed (not quota refusals)",
            store_errors.clone(),
        );
        let cache_timings = Timings::<OperationLabel>::new_with_constructor(operation_buckets);
        registry.register(
            "wasm_agent_cache_operation_duration_seconds",
            "Time of result-cache operations",
            cache_timings.clone(),
        );
        let cache_errors = Family::<OperationLabel, Counter>::default();
        registry.register(
            "wasm_agent_cache_errors",
            "Result-cache operations that failed",
            cache_errors.clone(),
        );
        let gauges = Arc::new(OnceLock::new());
        registry.register_collector(Box::new(host::HostCollector(gauges.clone())));
        let otlp = meter.map(|meter| otlp::Mirror::new(meter, &gauges));
        let tenants = tenants::TenantMetrics::register(&mut registry);
        Arc::new(Self {
            registry,
            calls,
            durations,
            in_flight,
            store_timings,
            store_errors,
            cache_timings,
            cache_errors,
            gauges,
            otlp,
            tenants,
        })
    }

    /// Reports the host's denial counts and instance-pool use on every
    /// scrape (the first host watched is the one reported).
    pub fn watch(&self, gauges: HostGauges) {
        let _ = self.gauges.set(gauges);
    }

    /// Every metric in the OpenMetrics text format.
    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }

    /// Notes a session-store operation: how long it took, whether it failed.
    pub(crate) fn store_operation(&self, operation: &'static str, took: Duration, failed: bool) {
        note(
            &self.store_timings,
            &self.store_errors,
            operation,
            took,
            failed,
        );
        if let Some(otlp) = &self.otlp {
            otlp.store.note(operation, took, failed);
        }
    }

    /// Notes a result-cache operation: how long it took, whether it failed.
    /// Result-cache operations that failed since start (their calls went
    /// on uncached).
    pub fn cache_failures(&self) -> u64 {
        ["get", "put", "clear"]
            .into_iter()
            .map(|operation| {
                self.cache_errors
                    .get_or_create(&OperationLabel { operation })
                    .get()
            })
            .sum()
    }

    pub(crate) fn cache_operation(&self, operation: &'static str, took: Duration, failed: bool) {
        note(
            &self.cache_timings,
            &self.cache_errors,
            operation,
            took,
            failed,
        );
        if let Some(otlp) = &self.otlp {
            otlp.cache.note(operation, took, failed);
        }
    }
}

fn note(
    timings: &Timings<OperationLabel>,
    errors: &Family<OperationLabel, Counter>,
    operation: &'static str,
    took: Duration,
    failed: bool,
) {
    let label = OperationLabel { operation };
    timings.get_or_create(&label).observe(took.as_secs_f64());
    if failed {
        errors.get_or_create(&label).inc();
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl CallObserver for Metrics {
    fn call_started(&self, _tool: Option<&str>) {
        self.in_flight.inc();
        if let Some(otlp) = &self.otlp {
            otlp.started();
        }
    }

    fn call_finished(&self, tool: Option<&str>, error: Option<ErrorKind>, took: Duration) {
        self.in_flight.dec();
        let tool = tool.unwrap_or(UNKNOWN_TOOL).to_string();
        let outcome = error.map_or("ok", |kind| kind.as_str());
        if let Some(otlp) = &self.otlp {
            otlp.finished(&tool, outcome, took);
        }
        self.calls
            .get_or_create(&CallLabels {
                tool: tool.clone(),
                outcome,
            })
            .inc();
        self.durations
            .get_or_create(&ToolLabel { tool })
            .observe(took.as_secs_f64());
    }
}
