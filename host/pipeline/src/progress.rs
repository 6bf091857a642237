//! Progress while a call runs: how long it has run, every `every`, told to
//! the entry point that listens (an MCP client that passed a progress token,
//! the terminal of `run` and `call`). Only for the calls the entry point
//! made (a tool's own calls run inside them) and on targets that report no
//! progress of their own (a remote server's reports pass through as they
//! come).

use std::time::Duration;

use crate::call::{Called, ToolCall};
use crate::events::{CallEvents, Progress};
use crate::layer::{Layer, Next};

/// How often a long call reports progress by default.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// The progress step.
pub(crate) struct Ticks {
    pub every: Duration,
}

#[async_trait::async_trait]
impl Layer for Ticks {
    fn applies(&self, call: &ToolCall) -> bool {
        call.events.is_some()
            && call.context.tool_call_depth() == 0
            && !call.tool.target.reports_progress()
    }

    async fn call(&self, call: &mut ToolCall, next: Next<'_>) -> Called {
        let Some(events) = call.events.clone() else {
            return next.run(call).await;
        };
        tokio::select! {
            // The call first: one that finishes in its first poll arms no
            // timer.
            biased;
            called = next.run(call) => called,
            never = tick(&*events, self.every) => match never {},
        }
    }
}

/// Reports the seconds run so far every `every`, until dropped.
async fn tick(events: &dyn CallEvents, every: Duration) -> std::convert::Infallible {
    let started = tokio::time::Instant::now();
    let mut ticks = tokio::time::interval_at(started + every, every);
    loop {
        let now = ticks.tick().await;
        let seconds = (now - started).as_secs_f64();
        events.progress(Progress {
            progress: seconds,
            total: None,
            message: Some(format!("running for {seconds:.0} s")),
        });
    }
}
