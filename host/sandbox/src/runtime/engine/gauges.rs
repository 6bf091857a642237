//! Live counters of a sandbox, read by metrics on each scrape: refusals by
//! kind and the instance pool's use.

use std::sync::Arc;

use wasmtime::PoolingAllocatorMetrics;

use crate::runtime::ahead::AheadBudget;
use crate::runtime::denials::DenialTotals;

/// How much of the pooling allocator is in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolUse {
    /// Component instances allocated now.
    pub component_instances: u64,
    /// Linear memories allocated now.
    pub memories: u64,
    /// Component instances the pool has room for.
    pub instance_slots: u64,
    /// Bytes kept resident in unused memory slots for faster reuse.
    pub unused_resident_bytes: u64,
    /// Instances made ahead of calls, waiting for theirs.
    pub made_ahead: u64,
}

/// A cheap handle on a sandbox's counters; it keeps nothing else alive.
#[derive(Clone)]
pub struct HostGauges {
    pub(in crate::runtime) denials: Arc<DenialTotals>,
    pub(in crate::runtime) pool: Option<(PoolingAllocatorMetrics, u32)>,
    pub(in crate::runtime) ahead: AheadBudget,
}

impl HostGauges {
    /// Every kind of refusal (`network`, `max_requests`, ...) with its
    /// count since the host started.
    pub fn denials(&self) -> Vec<(&'static str, u64)> {
        self.denials.counts()
    }

    /// Instances made ahead of calls, waiting for theirs.
    pub fn made_ahead(&self) -> u64 {
        self.ahead.waiting()
    }

    /// The pool's use, when instances are pooled.
    pub fn pool(&self) -> Option<PoolUse> {
        let (metrics, slots) = self.pool.as_ref()?;
        Some(PoolUse {
            component_instances: metrics.component_instances(),
            memories: metrics.memories() as u64,
            instance_slots: u64::from(*slots),
            unused_resident_bytes: metrics.unused_memory_bytes_resident() as u64,
            made_ahead: self.made_ahead(),
        })
    }
}

impl std::fmt::Debug for HostGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostGauges")
            .field("denials", &self.denials())
            .field("pool", &self.pool())
            .field("made_ahead", &self.made_ahead())
            .finish()
    }
}
