//! Host-side bindings of `wit/world.wit`.

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "toolkit",
    imports: {
        // Delegation awaits another agent's run, a tool call another tool, and
        // session state a store
        // that may block or sit on the network; every other import is quick.
        "wasm-agent:tool/host.delegate": async | trappable,
        "wasm-agent:tool/host.call-tool": async | trappable,
        "wasm-agent:tool/host.get-state": async | trappable,
        "wasm-agent:tool/host.set-state": async | trappable,
        default: trappable,
    },
    exports: { default: async },
});

pub use self::wasm_agent::tool::host as imported;
pub use self::wasm_agent::tool::types;

/// The `interpreter` world (added in 0.1.3): a toolkit whose tools are
/// scripts run in segments through its `script` export.
pub mod interpreter {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "interpreter",
        with: {
            "wasm-agent:tool/types": super::types,
            "wasm-agent:tool/host": super::imported,
        },
        exports: { default: async },
    });

    pub use self::exports::wasm_agent::tool::script;
}
