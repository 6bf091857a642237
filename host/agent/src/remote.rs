//! Tools that run elsewhere (another MCP server, a service): not sandboxed.
//! The agent treats them as it does every tool (arguments checked against
//! their schema, approval, cache, result limits, cancellation) and leaves
//! the running to a [`RemoteTool`].

use std::sync::Arc;

use serde_json::Value;

use super::tool::ToolOutput;
use wasm_agent_sandbox::context::CallContext;
use wasm_agent_sandbox::result::CallError;

/// Runs calls of one tool somewhere else.
#[async_trait::async_trait]
pub trait RemoteTool: Send + Sync + 'static {
    /// Where the tool runs, for messages: `MCP server "github"`.
    fn origin(&self) -> String;

    /// What cached results are filed under: it changes whenever the tool
    /// may answer differently (another server version or definition).
    fn version(&self) -> String;

    /// Runs one call with checked arguments; `progress` receives what the
    /// far side reports. It must end soon after the context's cancellation
    /// fires (the agent does not drop it, so it can tell the far side).
    async fn call(
        &self,
        arguments: Value,
        context: &CallContext,
        progress: ProgressSink,
    ) -> Result<ToolOutput, CallError>;
}

/// Progress a running call reports.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    /// How far it is (grows with each report).
    pub progress: f64,
    /// Out of this much, when known.
    pub total: Option<f64>,
    /// What it is doing.
    pub message: Option<String>,
}

/// Where a call's progress goes (the run's events, or nowhere).
#[derive(Clone, Default)]
pub struct ProgressSink(Option<Arc<dyn Fn(Progress) + Send + Sync>>);

impl ProgressSink {
    /// A sink that calls `report` for each report.
    pub fn new(report: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(report)))
    }

    /// Passes one report on.
    pub fn report(&self, progress: Progress) {
        if let Some(report) = &self.0 {
            report(progress);
        }
    }

    /// Whether anyone listens (a remote side need not ask for progress
    /// when nobody does).
    pub fn is_listening(&self) -> bool {
        self.0.is_some()
    }
}
