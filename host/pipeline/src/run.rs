//! The bottom of the pipeline: the call itself, on the version its
//! arguments were checked (and approved) for.

use wasm_agent_sandbox::result::{CallError, ErrorKind};

use crate::call::{Called, ToolCall};

/// Runs `call` on its target.
pub(crate) async fn run(call: &mut ToolCall) -> Called {
    let target = call.tool.target.clone();
    // Set by the check, which every call passes first.
    let Some(version) = call.version.clone() else {
        let error = CallError::new(
            ErrorKind::InvalidArguments,
            format!("the call to {:?} reached its run unchecked", call.tool.name),
        );
        return Called::refused(call, error);
    };
    if call.context.cancellation.is_cancelled() {
        return Called::refused(call, cancelled(&call.tool.name));
    }
    if target.records_runs()
        && let Some(unrecorded) = call.unrecorded.as_mut()
    {
        unrecorded.handed_to_recorder();
    }
    let run = target.run(call.running(), &version).await;
    let recorded = run.recorded_as.is_some();
    let mut called = Called::new(run.result, run.recorded_as.unwrap_or(call.id.clone()));
    called.recorded = recorded;
    called
}

/// The error of a call cancelled before it ran.
pub(crate) fn cancelled(tool: &str) -> CallError {
    CallError::new(
        ErrorKind::Cancelled,
        format!("the call to {tool:?} was cancelled before it ran"),
    )
}
