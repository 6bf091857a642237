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
