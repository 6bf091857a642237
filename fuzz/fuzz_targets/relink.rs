//! A component the host relinks before compiling it: whatever the bytes,
//! relinking never panics, and what it returns validates.
#![no_main]
libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    if let Err(wasm_agent_relink::RelinkError::Invalid(e)) = wasm_agent_relink::relink(bytes) {
        panic!("relinked into a component that does not validate: {e}");
    }
});
