//! A cosign simple-signing payload, as a registry serves it under a key.
#![no_main]
libfuzzer_sys::fuzz_target!(|bytes: &[u8]| wasm_agent::fuzz::signed_payload(bytes));
