//! Tools from other MCP servers for wasm-agent's agent loop.
//!
//! A [`RemoteServer`] starts a server (a command spoken to over stdio) or
//! connects to one (streamable HTTP), lists its tools and runs calls of
//! them with a deadline, progress and cancellation; a server that stops is
//! started again for the next call, a bounded number of times. Its tools
//! become [`AgentTool`](wasm_agent_agent::AgentTool)s with
//! [`RemoteServer::agent_tools`], and [`RemoteServer::keep_in_step`] keeps
//! an agent's set in step when the server says its list changed.
//!
//! These tools are **not sandboxed**: they run wherever the server runs,
//! with whatever access it has. The agent checks their arguments against
//! their schemas, asks for approval (by default for tools whose annotations
//! do not rule out destroying data or reaching the outside world), caches
//! and shortens their results like any other tool's.
//!
//! ```no_run
//! # async fn demo(agent: wasm_agent_agent::Agent) -> Result<(), Box<dyn std::error::Error>> {
//! use wasm_agent_mcp_client::{RemoteServer, ServerSpec};
//! let spec = ServerSpec::from_command_line("python3 weather_server.py", None)?;
//! let server = RemoteServer::connect(spec).await?;
//! for tool in server.agent_tools() {
//!     agent.add_tool(tool)?;
//! }
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod agent_tools;
mod asking;
mod connection;
mod listing;
mod output;
mod server;
pub mod spec;

pub use agent_tools::{InStep, ToolAdjuster};
pub use listing::RemoteToolInfo;
pub use server::RemoteServer;
pub use spec::{ServerSpec, Transport};

use std::time::Duration;

/// Why a server could not be used.
#[derive(Debug, thiserror::Error)]
pub enum McpClientError {
    /// `--mcp` or `[agent.mcp.NAME]` that names no usable server.
    #[error("--mcp {spec:?}: {reason}")]
    BadSpec {
        /// What was given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A config section that names no usable server.
    #[error("{section}: {reason}")]
    BadConfig {
        /// `[agent.mcp.NAME]`.
        section: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The command could not be started.
    #[error("{server}: cannot start `{command}`: {reason}")]
    Start {
        /// `MCP server "NAME"`.
        server: String,
        /// The command line.
        command: String,
        /// Why (from the operating system).
        reason: String,
    },
    /// Starting, `initialize` or listing tools failed.
    #[error("{server} ({target}): {reason}")]
    Connect {
        /// `MCP server "NAME"`.
        server: String,
        /// The command line or URL.
        target: String,
        /// What went wrong.
        reason: String,
    },
    /// It did not get through `initialize` and `tools/list` in time.
    #[error(
        "{server} ({target}): no answer to initialize and tools/list within {} (connect_timeout)",
        humanize(*after)
    )]
    ConnectTimeout {
        /// `MCP server "NAME"`.
        server: String,
        /// The command line or URL.
        target: String,
        /// The bound.
        after: Duration,
    },
    /// It stopped too often to be started again.
    #[error(
        "{server} stopped {restarts} times and is not started again (max_restarts); last: {last}"
    )]
    GaveUp {
        /// `MCP server "NAME"`.
        server: String,
        /// How many restarts it had.
        restarts: u32,
        /// Why it stopped last.
        last: String,
    },
}

/// `1s`, `2m 30s`: a duration as the config writes it.
pub(crate) fn humanize(duration: Duration) -> String {
    humantime::format_duration(duration).to_string()
}
