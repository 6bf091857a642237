//! # wasm-agent-sandbox
//!
//! Runs LLM-agent tools as WebAssembly components, each call in a fresh
//! wasmtime store under a validated policy: wall-clock and fuel limits, a
//! memory cap, only the directories, environment and network it is granted,
//! and a bounded result. Knows nothing of models, MCP or the command line.
//!
//! ```no_run
//! use wasm_agent_sandbox::{CallContext, ToolHost};
//! use wasm_agent_policy::Policy;
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

pub mod approval;
pub mod ask;
mod bindings;
pub mod budget;
pub mod context;
pub mod events;
pub mod host;
pub mod observe;
pub mod pause;
pub mod registry;
pub mod report;
pub mod result;
pub mod runtime;
mod spans;
pub mod specs;
pub mod text;
mod tool;

pub use context::{CallContext, Delegator, ToolCaller};
pub use events::{EventBus, ToolEvent};
pub use host::{ComponentSource, HostError, LoadOptions, LoadReport, ToolHost, ToolHostBuilder};
pub use registry::{Annotations, ToolInfo};
pub use report::{ApprovalNote, CallAuditor, CallReport, ComponentIdentity, RemoteOrigin};
pub use result::{Artifact, CallError, ErrorKind, ToolCallResult};
pub use tokio_util::sync::CancellationToken;
