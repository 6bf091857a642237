//! JSON-RPC messages an MCP client sends after the handshake.
#![no_main]
libfuzzer_sys::fuzz_target!(|bytes: &[u8]| wasm_agent::fuzz::mcp_messages(bytes));
