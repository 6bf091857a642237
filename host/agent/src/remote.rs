//! Tools that run elsewhere (another MCP server, a service): not sandboxed.
//! The call pipeline treats them as it does every tool (arguments checked
//! against their schema, approval, cache, audit, cancellation) and leaves
//! the running to a [`RemoteTool`].

pub use wasm_agent_pipeline::{Progress, ProgressSink, RemoteTool};
