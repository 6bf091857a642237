//! The approval step of a client's calls, and the tool calls a sandboxed
//! tool makes (`host.call-tool`) on behalf of one: the approval step and the
//! call, as for the client's own `tools/call`.

use std::sync::Arc;

use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use wasm_agent_sandbox::approval::{self, ApprovalRequest, Verdict};
use wasm_agent_sandbox::context::{CallContext, ToolCaller, ToolOutput};
use wasm_agent_sandbox::{CallError, ErrorKind, ToolCallResult, ToolInfo};

use crate::server::Shared;

/// Calls tools for a tool that one client's request runs.
pub(crate) struct ClientToolCaller {
    pub(crate) shared: Arc<Shared>,
    pub(crate) session_id: String,
    /// The client's request the calling tool runs for.
    pub(crate) request_id: String,
}

#[async_trait::async_trait]
impl ToolCaller for ClientToolCaller {
    fn tools(&self) -> Vec<ToolInfo> {
        self.shared.host.tools()
    }

    async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        context: &CallContext,
    ) -> Result<ToolOutput, CallError> {
        let verdict = self
            .shared
            .approved(
                &self.session_id,
                name,
                &arguments,
                &self.request_id,
                &context.cancellation,
            )
            .await;
        if let Verdict::Denied | Verdict::Cancelled = verdict {
            let refused = refusal(name, self.request_id.clone(), verdict == Verdict::Cancelled);
            return Err(refused
                .error
                .unwrap_or_else(|| CallError::new(ErrorKind::Denied, "not approved")));
        }
        self.shared
            .host
            .call_json(name, &arguments, context)
            .await
            .into_output()
    }
}

impl Shared {
    /// Whether a call may run: the approval step the agent loop takes too.
    pub(crate) async fn approved(
        &self,
        session_id: &str,
        tool: &str,
        arguments: &Value,
        request_id: &str,
        cancellation: &CancellationToken,
    ) -> Verdict {
        let Some(approval) = self.approvals.get(tool) else {
            return Verdict::NotNeeded;
        };
        let request = || ApprovalRequest {
            run_id: session_id.to_string(),
            call_id: request_id.to_string(),
            tool: tool.to_string(),
            arguments: arguments.clone(),
        };
        approval::decide(
            approval,
            arguments,
            request,
            self.approver.as_ref(),
            cancellation,
        )
        .await
    }
}

/// The result of a call refused for want of approval (or cancelled while
/// waiting for it).
pub(crate) fn refusal(tool: &str, call_id: String, cancelled: bool) -> ToolCallResult {
    let error = if cancelled {
        CallError::new(
            ErrorKind::Cancelled,
            format!("the call to {tool:?} was cancelled while waiting for approval"),
        )
    } else {
        CallError::new(
            ErrorKind::Denied,
            format!(
                "tool {tool:?} requires approval, which an MCP client cannot give; \
                 the server's operator can allow it with `wasm-agent serve --approve {tool}` \
                 (or `--approve all`)"
            ),
        )
    };
    ToolCallResult {
        tool: tool.to_string(),
        call_id,
        content: String::new(),
        artifacts: Vec::new(),
        error: Some(error),
        duration: Duration::ZERO,
    }
}
