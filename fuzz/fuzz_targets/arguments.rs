//! A tool's schema (chosen by the component) and the arguments checked
//! against it (chosen by the model).
#![no_main]
libfuzzer_sys::fuzz_target!(|input: (&str, &str)| {
    let (schema, arguments) = input;
    wasm_agent::fuzz::arguments(schema, arguments);
});
