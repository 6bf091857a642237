//! Host-side bindings of `wit/world.wit`.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "toolkit",
    imports: { default: trappable },
    exports: { default: async },
});

pub use self::wasm_agent::tool::host as imported;
pub use self::wasm_agent::tool::types;
