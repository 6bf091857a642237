//! # wasm-agent
//!
//! Runs LLM-agent tools as WebAssembly components, each call in a fresh
//! sandbox under an enforced [`Policy`]: wall-clock and fuel limits, a memory
//! cap, only the directories, environment and network hosts it is granted,
//! and a bounded result.
//!
//! This crate gathers the parts; each lives in a crate of its own, and the
//! features pull in only what they name:
//!
//! | module | crate | feature |
//! |---|---|---|
//! | [`policy`] | `wasm-agent-policy` | always |
//! | [`sandbox`], [`ToolHost`] | `wasm-agent-sandbox` | always |
//! | [`pipeline`] | `wasm-agent-pipeline` | always |
//! | [`session`] | `wasm-agent-session` (+ `-sqlite`, `-postgres`) | always (`sqlite`, `postgres`) |
//! | [`cache`] | `wasm-agent-cache` (+ `-redis`) | always (`redis`) |
//! | [`metrics`] | `wasm-agent-metrics` | always |
//! | `agent`, `provider` | `wasm-agent-agent` | `agent` |
//! | `mcp` | `wasm-agent-mcp` | `mcp` |
//! | `mcp_client` | `wasm-agent-mcp-client` | `mcp-client` |
//! | `oci` | `wasm-agent-oci` | `oci` |
//!
//! ```no_run
//! use wasm_agent::{CallContext, Policy, ToolHost};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let host = ToolHost::builder().build()?;
//! host.load("calculator.wasm", Policy::default()).await?;
//! let result = host
//!     .call("calculate", r#"{"expression": "2 * (3 + 4)"}"#, &CallContext::new())
//!     .await;
//! println!("{}", result.model_text());
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

/// Access rules (which callers may see and call which tools) and quotas.
pub mod access {
    pub use wasm_agent_access::*;
    /// Quota counters in Redis, shared by replicas.
    #[cfg(feature = "redis")]
    pub use wasm_agent_access_redis::RedisQuotaStore;
}
pub use wasm_agent_policy as policy;
pub use wasm_agent_sandbox::runtime as sandbox;
pub use wasm_agent_sandbox::{
    approval, ask, budget, context, events, host, registry, report, result, specs, text,
};

pub mod cache;
/// The audit trail: hash-chained records of every call (in a file, or with
/// `postgres`, in a table).
pub mod audit {
    pub use wasm_agent_audit::*;
    /// Audit records in a PostgreSQL table, a chain per replica.
    #[cfg(feature = "postgres")]
    pub use wasm_agent_audit_postgres as postgres;
}
pub use wasm_agent_metrics as metrics;
/// The call pipeline every entry point's calls take: audit, argument check,
/// approval, result cache, the call.
pub use wasm_agent_pipeline as pipeline;
/// Secrets out of records, logs and messages: keys, credentials by shape, URLs.
pub use wasm_agent_redact as redact;
/// OpenTelemetry: trace context in and out, OTLP export of spans and metrics.
pub use wasm_agent_telemetry as telemetry;
pub mod session;

#[cfg(feature = "agent")]
pub use wasm_agent_agent as agent;
#[cfg(feature = "agent")]
pub use wasm_agent_agent::provider;
#[cfg(feature = "console")]
pub use wasm_agent_console as console;
#[cfg(feature = "mcp")]
pub use wasm_agent_mcp as mcp;
#[cfg(feature = "mcp-client")]
pub use wasm_agent_mcp_client as mcp_client;
#[cfg(feature = "oci")]
pub use wasm_agent_oci as oci;

#[cfg(feature = "fuzz")]
#[doc(hidden)]
pub mod fuzz;

pub use context::{CallContext, Delegator};
pub use events::{EventBus, ToolEvent};
pub use host::{ComponentSource, HostError, LoadOptions, LoadReport, ToolHost, ToolHostBuilder};
pub use policy::{ByteSize, DirGrant, DirMode, Policy};
pub use registry::{Annotations, ToolInfo};
pub use result::{Artifact, CallError, ErrorKind, ToolCallResult};
#[cfg(feature = "sqlite")]
pub use session::SqliteSessionStore;
pub use session::{InMemorySessionStore, SessionStore};
pub use tokio_util::sync::CancellationToken;

/// The book's Rust examples for embedders, compiled as doctests so they
/// stay true to this API.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/embedding.md")]
struct EmbeddingChapter;

/// The book's agent example (feature `agent`), compiled as a doctest.
#[cfg(all(doctest, feature = "agent"))]
#[doc = include_str!("../../../docs/agents.md")]
struct AgentsChapter;
