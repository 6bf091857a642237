//! What the host reports on each scrape: denials by kind and the instance
//! pool's use.

use std::sync::{Arc, OnceLock};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use wasm_agent_sandbox::host::HostGauges;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

/// Reads the watched host's gauges at scrape time.
#[derive(Debug)]
pub(crate) struct HostCollector(pub Arc<OnceLock<HostGauges>>);

impl Collector for HostCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(gauges) = self.0.get() else {
            return Ok(());
        };
        let denials = gauges.denials();
        let mut family = encoder.encode_descriptor(
            "wasm_agent_capability_denials",
            "Attempts the sandbox refused, by what was tried",
            None,
            ConstCounter::new(0u64).metric_type(),
        )?;
        for (kind, count) in denials {
            let labels = KindLabel { kind };
            ConstCounter::new(count).encode(family.encode_family(&labels)?)?;
        }
        if let Some(pool) = gauges.pool() {
            let gauges_of = [
                (
                    "wasm_agent_pool_instances_in_use",
                    "Component instances allocated in the pooling allocator",
                    pool.component_instances,
                ),
                (
                    "wasm_agent_pool_memories_in_use",
                    "Linear memories allocated in the pooling allocator",
                    pool.memories,
                ),
                (
                    "wasm_agent_pool_instance_slots",
                    "Component instances the pool has room for",
                    pool.instance_slots,
                ),
                (
                    "wasm_agent_pool_unused_resident_bytes",
                    "Memory kept resident in unused slots for faster reuse",
                    pool.unused_resident_bytes,
                ),
                (
                    "wasm_agent_pool_made_ahead",
                    "Instances made ahead of calls, waiting for theirs",
                    pool.made_ahead,
                ),
            ];
            for (name, help, value) in gauges_of {
                let gauge = ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
                gauge.encode(encoder.encode_descriptor(
                    name,
                    help,
                    None,
                    gauge.metric_type(),
                )?)?;
            }
        }
        Ok(())
    }
}
