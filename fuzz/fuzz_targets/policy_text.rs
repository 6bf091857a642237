//! Grants, sizes, durations, header patterns and policy layers (flags and
//! config values an operator writes).
#![no_main]
libfuzzer_sys::fuzz_target!(|text: &str| wasm_agent::fuzz::policy_text(text));
