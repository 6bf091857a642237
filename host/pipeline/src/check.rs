//! The argument check: every call's arguments against its tool's schema
//! (and bounds), before anyone is asked to approve it or a cache is
//! consulted; the version checked is the one the call may run on.

use wasm_agent_sandbox::result::{CallError, ErrorKind};

use crate::call::{Called, ToolCall};
use crate::layer::{Layer, Next};

/// Checks arguments and fixes the version the call runs on.
pub(crate) struct Check;

#[async_trait::async_trait]
impl Layer for Check {
    async fn call(&self, call: &mut ToolCall, next: Next<'_>) -> Called {
        if !call.arguments.is_object() {
            let error = CallError::new(
                ErrorKind::InvalidArguments,
                "the arguments must be a JSON object",
            );
            return Called::refused(call, error);
        }
        match call.tool.target.check(&call.arguments) {
            Ok(version) => call.version = Some(version),
            Err(error) => return Called::refused(call, error),
        }
        next.run(call).await
    }
}
