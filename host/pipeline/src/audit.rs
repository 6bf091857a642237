//! The audit step: no call is answered (run, from the cache, or refused)
//! while a fail-closed audit log cannot be written, and every answer is
//! recorded: refusals, approvals denied, cached results, remote calls, calls
//! made by tools. A sandboxed run writes its own record (only the sandbox
//! knows what the run used); this layer records everything else, and a call
//! dropped before it ends as cancelled.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use wasm_agent_sandbox::report::{CallAuditor, CallReport};
use wasm_agent_sandbox::result::ErrorKind;

use crate::call::{Called, ToolCall};
use crate::layer::{Layer, Next};
use crate::target::Target;

/// Refuses calls while the auditor does, and records what the target did
/// not. The auditor is the pipeline's, or else the target's own (a
/// sandboxed tool's host's).
pub(crate) struct Audit {
    pub(crate) auditor: Option<Arc<dyn CallAuditor>>,
}

#[async_trait::async_trait]
impl Layer for Audit {
    fn applies(&self, call: &ToolCall) -> bool {
        self.auditor.is_some() || call.tool.target.auditor().is_some()
    }

    async fn call(&self, call: &mut ToolCall, next: Next<'_>) -> Called {
        let Some(auditor) = self.auditor.clone().or_else(|| call.tool.target.auditor()) else {
            return next.run(call).await;
        };
        if let Some(error) = auditor.refusal() {
            return Called::refused(call, error);
        }
        let mut pending = Pending {
            auditor: &*auditor,
            draft: Some(draft(&*auditor, call)),
            target: call.tool.target.clone(),
            handed_on: call.handed_to_recorder.clone(),
            started: Instant::now(),
        };
        let called = next.run(call).await;
        if let Some(mut report) = pending.draft.take()
            && !called.recorded
        {
            report.call_id = called.call_id.clone();
            report.cached = called.cached;
            report.approval = called.approval.clone().or(report.approval);
            report.outcome = called.error_kind();
            report.duration = pending.started.elapsed();
            pending.target.describe(&mut report);
            auditor.record(report);
        }
        called
    }
}

/// The report of `call`, begun now with what is known of it.
fn draft(auditor: &dyn CallAuditor, call: &ToolCall) -> CallReport {
    let arguments = call.arguments.to_string();
    CallReport::begin(
        &call.id,
        &call.tool.name,
        &arguments,
        auditor.wants_arguments(),
        &call.context,
    )
}

/// A report not yet recorded: recorded as cancelled if the call's future
/// is dropped first, unless the target had taken the call (its own record
/// says so).
struct Pending<'a> {
    auditor: &'a dyn CallAuditor,
    draft: Option<CallReport>,
    target: Arc<dyn Target>,
    handed_on: Arc<AtomicBool>,
    started: Instant,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if let Some(mut report) = self.draft.take()
            && !self.handed_on.load(Ordering::Acquire)
        {
            report.outcome = Some(ErrorKind::Cancelled);
            report.duration = self.started.elapsed();
            self.target.describe(&mut report);
            self.auditor.record(report);
        }
    }
}
