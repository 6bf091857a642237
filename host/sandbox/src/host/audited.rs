//! The audit report of each call: drafted when it starts, finished when it
//! ends (or when its future is dropped, as cancelled).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Arguments;
use crate::context::CallContext;
use crate::events::{EventBus, ToolEvent};
use crate::observe::CallObserver;
use crate::registry::ToolEntry;
use crate::report::{CallAuditor, CallReport};
use crate::result::{CallError, ErrorKind};
use crate::runtime::UsageSink;

/// A call's report, waiting for its end.
pub(super) struct Draft {
    auditor: Arc<dyn CallAuditor>,
    report: CallReport,
    /// Where the sandbox leaves what the run used.
    pub usage: UsageSink,
}

impl Draft {
    /// The report of call `call_id` of `tool` (offered by `entry`, if any).
    pub fn new(
        auditor: Arc<dyn CallAuditor>,
        call_id: &str,
        tool: &str,
        arguments: Arguments<'_>,
        context: &CallContext,
        entry: Option<&ToolEntry>,
    ) -> Self {
        let text = match arguments {
            Arguments::Text(text) => std::borrow::Cow::Borrowed(text),
            Arguments::Parsed(value) | Arguments::Checked { value, .. } => {
                std::borrow::Cow::Owned(value.to_string())
            }
        };
        let mut report = CallReport::begin(call_id, tool, &text, &*auditor, context);
        report.component = entry.map(|e| e.component.identity.clone());
        Self {
            auditor,
            report,
            usage: UsageSink::new(),
        }
    }

    /// Why calls may not run now, if the auditor refuses them.
    pub fn refused(&self) -> Option<CallError> {
        self.auditor.refusal()
    }

    /// Hands the finished report to the auditor.
    pub fn finish(mut self, outcome: Option<ErrorKind>, duration: Duration) {
        self.report.usage = self.usage.take();
        self.report.outcome = outcome;
        self.report.duration = duration;
        self.auditor.record(self.report);
    }
}

/// Publishes a cancelled `Finished` for a call whose future is dropped
/// before it ends (forgotten once it does end).
pub(super) struct Unfinished<'a> {
    pub events: &'a EventBus,
    pub observer: Option<(&'a dyn CallObserver, Option<&'a str>)>,
    pub draft: Option<Draft>,
    pub call_id: &'a str,
    pub tool: &'a str,
    pub started: Instant,
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if let Some((observer, tool)) = self.observer {
            observer.call_finished(tool, Some(ErrorKind::Cancelled), self.started.elapsed());
        }
        if let Some(draft) = self.draft.take() {
            draft.finish(Some(ErrorKind::Cancelled), self.started.elapsed());
        }
        self.events.publish_with(|| ToolEvent::Finished {
            call_id: self.call_id.to_string(),
            tool: self.tool.to_string(),
            duration_ms: self.started.elapsed().as_secs_f64() * 1000.0,
            error: Some(ErrorKind::Cancelled),
        });
    }
}
