//! Serving the host's tools over the Model Context Protocol (with `rmcp`):
//! stdio for clients that spawn the server, streamable HTTP for the rest.
//!
//! Tool errors of every kind come back as `isError` results naming the limit
//! or capability involved; an unknown tool is a JSON-RPC invalid-params error.
//! Clients can cancel calls and ask for progress, and hear about tools added,
//! reloaded or removed (`notifications/tools/list_changed`). A client that
//! declared elicitation has its user asked about calls that need approval
//! and about the capabilities a tool's policy lists under `ask`.

#![warn(missing_docs)]

mod answers;
mod body;
mod cached;
mod call;
mod calls_runtime;
mod code_mode;
mod connection_threads;
mod content;
mod dispatch;
mod drain;
mod elicit;
mod gate;
mod handler;
mod handles;
mod health;
mod held;
mod http;
mod identity;
mod input_required;
mod oauth;
mod options;
mod pages;
mod paused_scripts;
mod records;
mod relay;
mod run_here;
mod server;
mod state_keys;
mod stdio;
mod streamable;
mod tools_changed;
mod traced;
mod wire;

pub use cached::CACHED_META;
pub use content::{call_result, tool};
pub use drain::{Drain, SHUTDOWN_GRACE};
pub use handler::SESSION_META;
pub use handles::SESSION_ARGUMENT;
pub use health::{HEALTH_PATH, METRICS_PATH, READY_PATH};
pub use http::{HttpOptions, MCP_PATH, serve_health, serve_http};
pub use identity::{Identity, TokenTable, TokensError};
pub use oauth::{METADATA_PATH, OAuthError, OAuthOptions, ResourceServer};
pub use pages::{PageBody, Pages};
pub use server::{LOAD_WAIT, McpServer, McpServerBuilder, ServeError};
pub use state_keys::{MIN_KEY_BYTES, StateKeyError, StateKeys};
pub use stdio::MAX_MESSAGE;
pub use tools_changed::{ToolsChanged, ToolsLoading};
