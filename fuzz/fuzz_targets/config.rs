//! A whole `wasm-agent.toml`.
#![no_main]
libfuzzer_sys::fuzz_target!(|text: &str| wasm_agent::fuzz::config(text));
