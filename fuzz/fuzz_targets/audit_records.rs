//! Audit records as `audit verify` reads them (a table's rows, a log file).
#![no_main]
libfuzzer_sys::fuzz_target!(|bytes: &[u8]| wasm_agent::fuzz::audit_records(bytes));
