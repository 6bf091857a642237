//! What an entry point hears of a call while it runs: approvals asked
//! ([`CallEvents`]) and progress ([`Progress`], through a [`ProgressSink`]).

use std::sync::Arc;

use wasm_agent_sandbox::approval::ApprovalRequest;

/// What an entry point wants to hear of a call while it runs.
pub trait CallEvents: Send + Sync + 'static {
    /// The call needs approval; the question is being put.
    fn approval_requested(&self, request: &ApprovalRequest) {
        let _ = request;
    }

    /// The tool reported progress (remote tools).
    fn progress(&self, progress: Progress) {
        let _ = progress;
    }
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

/// Where a call's progress goes (the entry point's events, or nowhere).
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
