//! The audit step: no call is answered (run, from the cache, or refused)
//! while a fail-closed audit log cannot be written, and every answer is
//! recorded: refusals, approvals denied, cached results, remote calls, calls
//! made by tools. A sandboxed run writes its own record (only the sandbox
//! knows what the run used); this layer records everything else, and a call
//! dropped before it ends as cancelled.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use wasm_agent_sandbox::report::{CallAuditor, CallReport};
use wasm_agent_sandbox::result::{CallError, ErrorKind};

use crate::call::{Called, ToolCall};
use crate::layer::{Layer, Next};

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
        // Kept on the call, so that a call dropped on the way down (its
        // entry point gone) is recorded as cancelled when it is dropped.
        call.unrecorded = Some(Unrecorded::now(auditor.clone()));
        let mut called = next.run(call).await;
        if let Some(unrecorded) = call.unrecorded.take()
            && !called.recorded
        {
            let mut report = unrecorded.report(call);
            report.call_id = called.call_id.clone();
            report.cached = called.cached;
            report.approval = called.approval.clone().or(report.approval);
            report.outcome = called.error_kind();
            unrecorded.auditor.record(report);
        }
        // The answer waits for its record where the auditor asks it to.
        if let Some(settled) = auditor.settled()
            && let Err(why) = settled.await
        {
            called.result = Err(CallError::new(
                ErrorKind::AuditUnavailable,
                format!(
                    "the call ran, but its record could not be written ({why}), so its result is withheld"
                ),
            ));
        }
        called
    }
}

/// A call on its way down whose record the audit step owes: to write once
/// it is answered, unless its target records it (a sandboxed run).
pub(crate) struct Unrecorded {
    auditor: Arc<dyn CallAuditor>,
    started: SystemTime,
    clock: Instant,
    /// Its target took it, and records it even if it is dropped now.
    handed_on: bool,
}

impl Unrecorded {
    fn now(auditor: Arc<dyn CallAuditor>) -> Self {
        Self {
            auditor,
            started: SystemTime::now(),
            clock: Instant::now(),
            handed_on: false,
        }
    }

    /// The call goes to a target that records its runs itself.
    pub(crate) fn handed_to_recorder(&mut self) {
        self.handed_on = true;
    }

    /// The record of `call`, so far.
    fn report(&self, call: &ToolCall) -> CallReport {
        let arguments = call.arguments.to_string();
        let mut report = CallReport::begin(
            &call.id,
            &call.tool.name,
            &arguments,
            &*self.auditor,
            &call.context,
        );
        report.started = self.started;
        report.duration = self.clock.elapsed();
        call.tool.target.describe(&mut report);
        report
    }

    /// Records `call`, dropped before it was answered, as cancelled (unless
    /// its target records it).
    pub(crate) fn record_cancelled(self, call: &ToolCall) {
        if self.handed_on {
            return;
        }
        let mut report = self.report(call);
        report.outcome = Some(ErrorKind::Cancelled);
        self.auditor.record(report);
    }
}
