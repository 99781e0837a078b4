//! The wasmtime configuration of every plugin engine. Shared with the build script, which
//! compiles the built-in plugin with it ahead of time: code compiled under another
//! configuration would not load (wasmtime checks its compatibility hash), so both sides read
//! this one file. It depends on nothing but wasmtime.

use wasmtime::{Config, Enabled, InstanceAllocationStrategy, PoolingAllocationConfig};

/// The engine configuration with room for `instances` plugin instances at once.
pub fn config(instances: u32) -> Config {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool(instances)));
    config
}

/// Bytes at the start of a freed instance's linear memory that are reset in place (only the
/// pages it touched) instead of returned to the kernel; pages above are released with
/// `madvise`. A bound on the resident memory each warm pool slot keeps.
const KEEP_RESIDENT: usize = 2 << 20;

/// Bytes at the start of a freed table that are reset in place (only the pages it touched)
/// instead of returned to the kernel. A table returned with `madvise` is faulted back in by
/// the next instance's first indirect calls, each fault a TLB shootdown across the host's
/// threads, paid on every instance of every reconcile (docs/performance.md).
const TABLE_KEEP_RESIDENT: usize = 1 << 20;

/// Core instances, memories and tables one component instance may hold: components of
/// interpreted languages hold several of each (the Argo CD plugin, QuickJS: 15 core instances,
/// 3 memories; the Sveltos plugin, CPython by componentize-py: 38 core instances). Also its share
/// of the pool: a component that needs more is refused when it is compiled, so it can never take
/// the slots of the others.
const CORE_INSTANCES_PER_COMPONENT: u32 = 48;
const MEMORIES_PER_COMPONENT: u32 = 4;
const TABLES_PER_COMPONENT: u32 = 8;

/// The pooling allocator's slots for `instances` component instances, each its share of core
/// instances, memories and tables. Only address space is reserved up front. Interpreted
/// languages need big tables and instance contexts, hence the sizes above wasmtime's defaults
/// (20,000 table elements, 1 MiB per core instance).
fn pool(instances: u32) -> PoolingAllocationConfig {
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(instances)
        .total_core_instances(instances * CORE_INSTANCES_PER_COMPONENT)
        .total_memories(instances * MEMORIES_PER_COMPONENT)
        .total_tables(instances * TABLES_PER_COMPONENT)
        .max_core_instances_per_component(CORE_INSTANCES_PER_COMPONENT)
        .max_memories_per_component(MEMORIES_PER_COMPONENT)
        .max_tables_per_component(TABLES_PER_COMPONENT)
        .table_elements(1 << 18)
        .max_core_instance_size(8 << 20)
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(TABLE_KEEP_RESIDENT)
        .pagemap_scan(Enabled::Auto);
    pool
}
