//! The wasmtime engine: epoch interruption, fuel, async, and the pooling
//! allocator where the system allows it.

use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How the engine allocates instances.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Allocator {
    /// Pre-reserved slots: the fastest instantiation.
    Pooling,
    /// Memory mapped per instance (used when pooling is unavailable).
    OnDemand,
}

/// Largest call stack of wasm code (a deeper guest traps with `stack_overflow`).
const MAX_WASM_STACK: usize = 1024 * 1024;
/// Bytes of each memory slot kept resident between calls.
const KEEP_RESIDENT: usize = 2 * 1024 * 1024;
/// A freed slot is decommitted and free again at once (wasmtime's default):
/// batched, every reset's remainder, empty ones too, held its slot until a
/// flush, and the next call took a cold slot (`docs/performance.md`).
const DECOMMIT_BATCH: usize = 1;
/// Native stack of each call's fiber; must exceed `MAX_WASM_STACK`.
const ASYNC_STACK: usize = 2 * 1024 * 1024;

fn base_config() -> Config {
    let mut config = Config::new();
    config
        .epoch_interruption(true)
        .consume_fuel(true)
        .max_wasm_stack(MAX_WASM_STACK)
        .async_stack_size(ASYNC_STACK)
        .wasm_component_model(true);
    config
}

/// Component instances the pool holds for `concurrency` call slots,
/// `kept` kept instances and those made ahead of calls.
pub(in crate::runtime) fn instance_slots(concurrency: u32, kept: u32) -> u32 {
    // Each call slot may hold a second instance: a tool it called
    // (`host.call-tool`, one level deep), which runs in its caller's slot.
    // Kept instances (`keep_instance`) hold theirs between calls, and
    // instances made ahead of calls wait in theirs (`call::ahead`).
    concurrency
        .saturating_mul(1 + crate::runtime::MAX_TOOL_CALL_DEPTH)
        .saturating_add(kept)
        .saturating_add(crate::runtime::call::ahead::AHEAD_SLOTS)
}

fn pooling(concurrency: u32, kept: u32) -> PoolingAllocationConfig {
    let instances = instance_slots(concurrency, kept);
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(instances)
        .total_core_instances(instances.saturating_mul(32))
        .total_memories(instances.saturating_mul(4))
        .total_tables(instances.saturating_mul(16))
        .total_stacks(instances)
        .max_core_instances_per_component(64)
        .max_memories_per_component(8)
        .max_tables_per_component(32)
        // A relinked component's main module defines the shim's table
        // beside its own (see `wasm_agent_relink`).
        .max_tables_per_module(2)
        .max_memory_size(wasm_agent_policy::MAX_MEMORY.bytes() as usize)
        // Reset the pages a call touched with memset (found with PAGEMAP_SCAN
        // where the kernel has it) instead of madvise: no TLB-shootdown IPIs
        // and no page faults on the next call in the same slot.
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(KEEP_RESIDENT / 16)
        .pagemap_scan(Enabled::Auto)
        .decommit_batch_size(DECOMMIT_BATCH);
    pool
}

/// Builds the engine, with a pool of instance slots for `concurrency` calls
/// and `kept` kept instances when `want_pooling` and the system can reserve
/// it, on-demand otherwise.
pub fn build(
    concurrency: u32,
    kept: u32,
    want_pooling: bool,
) -> wasmtime::Result<(Engine, Allocator)> {
    if want_pooling {
        let mut config = base_config();
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling(
            concurrency,
            kept,
        )));
        match Engine::new(&config) {
            Ok(engine) => return Ok((engine, Allocator::Pooling)),
            Err(e) => tracing::warn!(
                "the pooling allocator is unavailable ({e}); falling back to on-demand allocation"
            ),
        }
    }
    Ok((Engine::new(&base_config())?, Allocator::OnDemand))
}
