//! The same metrics over OTLP: every instrument of the Prometheus registry
//! mirrored into an OpenTelemetry meter, under OpenTelemetry-style names.
//!
//! | OTLP | Prometheus |
//! |---|---|
//! | `wasm_agent.tool.calls` (`tool`, `outcome`) | `wasm_agent_tool_calls_total` |
//! | `wasm_agent.tool.call.duration` (s, `tool`) | `wasm_agent_tool_call_duration_seconds` |
//! | `wasm_agent.tool.calls.in_flight` | `wasm_agent_tool_calls_in_flight` |
//! | `wasm_agent.capability.denials` (`kind`) | `wasm_agent_capability_denials_total` |
//! | `wasm_agent.pool.*` | `wasm_agent_pool_*` |
//! | `wasm_agent.store.operation.duration`, `wasm_agent.store.errors` (`operation`) | `wasm_agent_store_*` |
//! | `wasm_agent.cache.operation.duration`, `wasm_agent.cache.errors` (`operation`) | `wasm_agent_cache_*` |

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{
    Counter, Histogram, Meter, ObservableCounter, ObservableGauge, UpDownCounter,
};
use wasm_agent_sandbox::host::{HostGauges, PoolUse};

/// Boundaries of call durations, in seconds: 50 µs to ~100 s (as the
/// Prometheus histogram).
fn call_boundaries() -> Vec<f64> {
    (0..16).map(|i| 0.000_05 * 2.5f64.powi(i)).collect()
}

/// Boundaries of store and cache operations: 50 µs to ~6 s.
fn operation_boundaries() -> Vec<f64> {
    (0..16).map(|i| 0.000_05 * 2.2f64.powi(i)).collect()
}

/// A pool gauge: its name, description and how to read it.
type PoolGauge = (&'static str, &'static str, fn(&PoolUse) -> u64);

/// Store or cache operations: their timings and failures.
pub(crate) struct Operations {
    timings: Histogram<f64>,
    errors: Counter<u64>,
}

impl Operations {
    fn new(meter: &Meter, what: &'static str) -> Self {
        Self {
            timings: meter
                .f64_histogram(format!("wasm_agent.{what}.operation.duration"))
                .with_unit("s")
                .with_description(format!("Time of {what} operations"))
                .with_boundaries(operation_boundaries())
                .build(),
            errors: meter
                .u64_counter(format!("wasm_agent.{what}.errors"))
                .with_description(format!("{what} operations that failed"))
                .build(),
        }
    }

    pub fn note(&self, operation: &'static str, took: Duration, failed: bool) {
        let labels = [KeyValue::new("operation", operation)];
        self.timings.record(took.as_secs_f64(), &labels);
        if failed {
            self.errors.add(1, &labels);
        }
    }
}

/// The OpenTelemetry side of [`Metrics`](crate::Metrics).
pub(crate) struct Mirror {
    calls: Counter<u64>,
    durations: Histogram<f64>,
    in_flight: UpDownCounter<i64>,
    pub store: Operations,
    pub cache: Operations,
    /// Read at each export; kept so they live as long as the mirror.
    _denials: ObservableCounter<u64>,
    _pool: Vec<ObservableGauge<u64>>,
}

impl Mirror {
    /// Every instrument, registered with `meter`; the host's gauges are
    /// read from `gauges` once it is watched.
    pub fn new(meter: &Meter, gauges: &Arc<OnceLock<HostGauges>>) -> Self {
        let watched = gauges.clone();
        let denials = meter
            .u64_observable_counter("wasm_agent.capability.denials")
            .with_description("Attempts the sandbox refused, by what was tried")
            .with_callback(move |observer| {
                for (kind, count) in watched.get().map(HostGauges::denials).unwrap_or_default() {
                    observer.observe(count, &[KeyValue::new("kind", kind)]);
                }
            })
            .build();
        let pool_gauges: [PoolGauge; 5] = [
            (
                "wasm_agent.pool.instances_in_use",
                "Component instances allocated in the pooling allocator",
                |pool| pool.component_instances,
            ),
            (
                "wasm_agent.pool.memories_in_use",
                "Linear memories allocated in the pooling allocator",
                |pool| pool.memories,
            ),
            (
                "wasm_agent.pool.instance_slots",
                "Component instances the pool has room for",
                |pool| pool.instance_slots,
            ),
            (
                "wasm_agent.pool.unused_resident_bytes",
                "Memory kept resident in unused slots for faster reuse",
                |pool| pool.unused_resident_bytes,
            ),
            (
                "wasm_agent.pool.made_ahead",
                "Instances made ahead of calls, waiting for theirs",
                |pool| pool.made_ahead,
            ),
        ];
        let pool = pool_gauges
            .into_iter()
            .map(|(name, help, read)| {
                let watched = gauges.clone();
                meter
                    .u64_observable_gauge(name)
                    .with_description(help)
                    .with_callback(move |observer| {
                        if let Some(pool) = watched.get().and_then(HostGauges::pool) {
                            observer.observe(read(&pool), &[]);
                        }
                    })
                    .build()
            })
            .collect();
        Self {
            calls: meter
                .u64_counter("wasm_agent.tool.calls")
                .with_description("Tool calls by tool and outcome (ok or the error kind)")
                .build(),
            durations: meter
                .f64_histogram("wasm_agent.tool.call.duration")
                .with_unit("s")
                .with_description("Wall-clock time of tool calls")
                .with_boundaries(call_boundaries())
                .build(),
            in_flight: meter
                .i64_up_down_counter("wasm_agent.tool.calls.in_flight")
                .with_description("Tool calls running now")
                .build(),
            store: Operations::new(meter, "store"),
            cache: Operations::new(meter, "cache"),
            _denials: denials,
            _pool: pool,
        }
    }

    pub fn started(&self) {
        self.in_flight.add(1, &[]);
    }

    pub fn finished(&self, tool: &str, outcome: &'static str, took: Duration) {
        self.in_flight.add(-1, &[]);
        let tool = KeyValue::new("tool", tool.to_string());
        self.calls
            .add(1, &[tool.clone(), KeyValue::new("outcome", outcome)]);
        self.durations.record(took.as_secs_f64(), &[tool]);
    }
}
