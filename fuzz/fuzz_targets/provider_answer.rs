//! A model provider's answer, whole and streamed (server-sent events).
#![no_main]
libfuzzer_sys::fuzz_target!(|input: (u8, u16, &[u8])| {
    let (kind, split, bytes) = input;
    wasm_agent::fuzz::provider_answer(kind, split as usize, bytes);
});
