//! The audit reports of calls the agent runs itself: tools from other MCP
//! servers (sandboxed calls are reported by their host). Reported to the
//! agent's [`CallAuditor`] when they end, as cancelled if dropped first.

use std::sync::Arc;
use std::time::Instant;

use wasm_agent_sandbox::context::CallContext;
use wasm_agent_sandbox::report::{ApprovalNote, CallAuditor, CallReport, RemoteOrigin};
use wasm_agent_sandbox::result::{CallError, ErrorKind};

use super::tool::{AgentTool, Runner};
use crate::provider::ToolCallRequest;

/// A remote call's report, waiting for its end.
pub(crate) struct RemoteAudit {
    auditor: Arc<dyn CallAuditor>,
    report: Option<CallReport>,
    started: Instant,
}

impl RemoteAudit {
    /// The report of `call` of `tool` when it runs elsewhere and there is
    /// an auditor; `None` otherwise.
    pub fn begin(
        auditor: Option<&Arc<dyn CallAuditor>>,
        tool: &AgentTool,
        call: &ToolCallRequest,
        context: &CallContext,
    ) -> Option<Self> {
        let (auditor, Runner::Remote(remote, _)) = (auditor?, &tool.runner) else {
            return None;
        };
        let mut report = CallReport::begin(
            &call.id,
            &tool.name,
            &call.arguments,
            auditor.wants_arguments(),
            context,
        );
        report.remote = Some(RemoteOrigin {
            origin: remote.origin(),
            version: remote.version(),
        });
        Some(Self {
            auditor: auditor.clone(),
            report: Some(report),
            started: Instant::now(),
        })
    }

    /// Why calls may not run now (an audit log that cannot be written and
    /// fails closed), if they may not.
    pub fn refused(&self) -> Option<CallError> {
        self.auditor.refusal()
    }

    /// Hands the finished report to the auditor.
    pub fn finish(
        mut self,
        outcome: Option<ErrorKind>,
        cached: bool,
        approval: Option<ApprovalNote>,
    ) {
        if let Some(mut report) = self.report.take() {
            report.outcome = outcome;
            report.cached = cached;
            report.approval = approval.or(report.approval);
            report.duration = self.started.elapsed();
            self.auditor.record(report);
        }
    }
}

impl Drop for RemoteAudit {
    fn drop(&mut self) {
        if let Some(mut report) = self.report.take() {
            report.outcome = Some(ErrorKind::Cancelled);
            report.duration = self.started.elapsed();
            self.auditor.record(report);
        }
    }
}
