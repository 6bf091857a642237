//! # wasm-agent
//!
//! Runs LLM-agent tools as WebAssembly components, each call in a fresh
//! sandbox under an enforced [`Policy`]: wall-clock and fuel limits, a memory
//! cap, only the directories and environment it is granted, a bounded result,
//! and no network.
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

pub mod agent;
mod bindings;
pub mod context;
pub mod events;
#[doc(hidden)]
pub mod fuzz;
pub mod host;
pub mod mcp;
pub mod policy;
pub mod provider;
pub mod registry;
pub mod result;
pub mod sandbox;
pub mod session;
pub mod text;

#[cfg(test)]
mod proptests;

pub use context::{CallContext, Delegator};
pub use events::{EventBus, ToolEvent};
pub use host::{ComponentSource, HostError, LoadOptions, LoadReport, ToolHost, ToolHostBuilder};
pub use policy::{ByteSize, DirGrant, DirMode, Policy};
pub use registry::{Annotations, ToolInfo};
pub use result::{Artifact, CallError, ErrorKind, ToolCallResult};
pub use session::{InMemorySessionStore, SessionStore, SqliteSessionStore};
pub use tokio_util::sync::CancellationToken;
