//! `host.call-tool` and `host.callable-tools`: a tool calls the host's other
//! tools, if its policy grants their names (`call_tools`) and its caller
//! (the agent loop, the MCP server, the CLI) offers them; at most
//! [`MAX_TOOL_CALLS`] per call, and a called tool calls no further.
//!
//! The call itself is the caller's: it takes the path the caller's own calls
//! take (validation, approval, the called tool's policy, events), in a
//! context one level deeper, cancelled with the calling tool's call.

use serde_json::Value;

use super::reach::Reach;
use crate::bindings::imported::ToolCallError;
use crate::bindings::types;
use crate::context::{CallContext, ToolCaller};
use crate::result::ErrorKind;
use crate::runtime::denials::{DenialKind, Denials};
use crate::tool::ToolInfo;
use wasm_agent_policy::tool_call_allowed;

/// Calls of other tools one call may make.
pub const MAX_TOOL_CALLS: u32 = 64;
/// How deep calls of tools by tools may go: a tool called by a tool may not
/// call tools itself. (The instance pool has room for one called tool per
/// call slot; see `engine`.)
pub const MAX_TOOL_CALL_DEPTH: u32 = 1;

/// What one call may call, and through whom (`None` when no caller is set
/// or the policy grants nothing).
pub type ToolCalls = Reach<dyn ToolCaller>;

impl ToolCalls {
    /// The specs of the tools this call may call (none at the depth limit).
    pub fn callable(&self) -> Vec<types::ToolSpec> {
        let Some((caller, context)) = &self.through else {
            return Vec::new();
        };
        if context.tool_call_depth >= MAX_TOOL_CALL_DEPTH {
            return Vec::new();
        }
        caller
            .tools(context)
            .into_iter()
            .filter(|tool| {
                tool_call_allowed(&self.allowed, &tool.name) && *tool.name != *self.call.tool
            })
            .map(spec_of)
            .collect()
    }

    /// Calls `name` for the running call (in its slot); a refusal is
    /// recorded in `denials` and returned with the kind a direct call would
    /// have.
    pub async fn call(
        &self,
        name: String,
        arguments: String,
        denials: &Denials,
    ) -> Result<types::ToolOutput, ToolCallError> {
        self.call_as(name, arguments, denials, CallContext::tool_called)
            .await
    }

    /// Calls `name` for a paused script (in a slot of its own), as
    /// [`call`](Self::call); and whether a question of the call was taken
    /// with the answer (the script then stops until it comes).
    pub async fn call_for_script(
        &self,
        name: String,
        arguments: String,
        denials: &Denials,
    ) -> (Result<types::ToolOutput, ToolCallError>, bool) {
        let mut deferred = None;
        let result = self
            .call_as(name, arguments, denials, |context: &CallContext| {
                let (called, flag) = context.script_called();
                deferred = flag;
                called
            })
            .await;
        let deferred = deferred.is_some_and(|flag| flag.load(std::sync::atomic::Ordering::Acquire));
        (result, deferred)
    }

    async fn call_as(
        &self,
        name: String,
        arguments: String,
        denials: &Denials,
        context_of: impl FnOnce(&CallContext) -> CallContext,
    ) -> Result<types::ToolOutput, ToolCallError> {
        if !tool_call_allowed(&self.allowed, &name) {
            let reason = format!(
                "the policy of tool {:?} does not allow calling tool {name:?}; add \
                 --allow-call-tool {name} (config: call_tools = [\"{name}\"]) to allow it",
                self.call.tool
            );
            denials.record(
                DenialKind::CallTool,
                format!("to call tool {name:?}"),
                reason.clone(),
            );
            return Err(refusal(ErrorKind::CapabilityDenied, reason));
        }
        let Some((caller, context)) = &self.through else {
            return Err(refusal(
                ErrorKind::CapabilityDenied,
                "this call was made without a tool caller (the embedder did not set one), so \
                 it cannot call other tools"
                    .into(),
            ));
        };
        if context.tool_call_depth >= MAX_TOOL_CALL_DEPTH {
            return Err(refusal(
                ErrorKind::CapabilityDenied,
                format!(
                    "tool {:?} was itself called by a tool, and a tool called by a tool may \
                     not call further tools",
                    self.call.tool
                ),
            ));
        }
        if *name == *self.call.tool {
            return Err(refusal(
                ErrorKind::CapabilityDenied,
                format!("tool {name:?} may not call itself"),
            ));
        }
        if !self.one_more(MAX_TOOL_CALLS) {
            return Err(refusal(
                ErrorKind::CapabilityDenied,
                format!("a call may call other tools at most {MAX_TOOL_CALLS} times"),
            ));
        }
        let arguments: Value = serde_json::from_str(&arguments).map_err(|e| {
            refusal(
                ErrorKind::InvalidArguments,
                format!("the arguments for tool {name:?} are not valid JSON: {e}"),
            )
        })?;
        tracing::info!(
            tool = %self.call.tool, call_id = %self.call.call_id, called = %name, "calling a tool"
        );
        let output = caller
            .call_tool(&name, arguments, &context_of(context))
            .await
            .map_err(|error| refusal(error.kind, error.message))?;
        Ok(types::ToolOutput {
            content: output.content,
            artifacts: output
                .artifacts
                .into_iter()
                .map(|a| types::Artifact {
                    kind: a.kind,
                    mime_type: a.mime_type,
                    data: a.data,
                })
                .collect(),
        })
    }
}

fn refusal(kind: ErrorKind, message: String) -> ToolCallError {
    ToolCallError {
        kind: kind.as_str().to_string(),
        message,
    }
}

/// A tool's info as the spec the calling tool sees.
fn spec_of(tool: ToolInfo) -> types::ToolSpec {
    types::ToolSpec {
        name: tool.name,
        description: tool.description,
        parameters: tool.parameters.to_string(),
        annotations: tool.annotations.into(),
    }
}
