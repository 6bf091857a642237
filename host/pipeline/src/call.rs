//! One call as it goes down the pipeline ([`ToolCall`]), the tool it is a
//! call of ([`Tool`]: how it runs and its per-tool settings), and what comes
//! back up ([`Called`]).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use wasm_agent_sandbox::approval::Approval;
use wasm_agent_sandbox::context::{CallContext, ToolOutput};
use wasm_agent_sandbox::report::ApprovalNote;
use wasm_agent_sandbox::result::{CallError, ErrorKind, ToolCallResult};

use crate::audit::Unrecorded;
use crate::events::CallEvents;
use crate::target::{Running, Target};

/// Per-tool settings of the pipeline's steps, the same for every entry point
/// (config: `[calls.TOOL]`).
#[derive(Clone, Debug, Default)]
pub struct CallSettings {
    /// Whether a call needs approval first.
    pub approval: Approval,
    /// Keep successful results this long (`None`: not cached).
    pub cache_ttl: Option<Duration>,
    /// Share cached results among the principals of a tenant (never across
    /// tenants): only for tools whose result does not depend on who asks.
    pub cache_shared: bool,
    /// Who answers the questions of its calls (approval, `ask` grants).
    pub answered_by: AnsweredBy,
}

/// Who answers the questions of a tool's calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AnsweredBy {
    /// The person behind the call (the MCP client's user, the terminal).
    #[default]
    Person,
    /// The operators, in the console; the person is told where.
    Operators,
}

/// A tool as the pipeline calls it: its name, how it runs, its settings.
#[derive(Clone)]
pub struct Tool {
    /// The name callers use.
    pub name: String,
    /// How it runs.
    pub target: Arc<dyn Target>,
    /// Its settings.
    pub settings: CallSettings,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// One call: made by an entry point from its wire format, handed down the
/// pipeline's layers.
pub struct ToolCall {
    /// The tool called.
    pub tool: Tool,
    /// The entry point's id of the call (a model's tool-call id, an MCP
    /// request id): in approval questions and in records of calls that
    /// did not run.
    pub id: String,
    /// The arguments, a JSON object.
    pub arguments: Value,
    /// Who and what the call is for; its cancellation ends the call.
    pub context: CallContext,
    /// Who hears of approvals asked and progress.
    pub events: Option<Arc<dyn CallEvents>>,
    /// The version the call runs on, set by the argument check (the
    /// component's digest, a remote tool's version).
    pub(crate) version: Option<String>,
    /// The record the audit step owes until the call is answered or handed
    /// to a target that records its own runs (the sandbox, which knows
    /// what the run used); a call dropped before either is recorded as
    /// cancelled.
    pub(crate) unrecorded: Option<Unrecorded>,
}

impl Drop for ToolCall {
    fn drop(&mut self) {
        if let Some(unrecorded) = self.unrecorded.take() {
            unrecorded.record_cancelled(self);
        }
    }
}

impl ToolCall {
    /// A call of `tool` with `arguments`, known to its entry point as `id`.
    pub fn new(tool: Tool, id: impl Into<String>, arguments: Value, context: CallContext) -> Self {
        Self {
            tool,
            id: id.into(),
            arguments,
            context,
            events: None,
            version: None,
            unrecorded: None,
        }
    }

    /// Tells `events` of approvals asked and progress.
    pub fn events(mut self, events: Arc<dyn CallEvents>) -> Self {
        self.events = Some(events);
        self
    }

    /// The version the call runs on, once the arguments are checked.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// The call as its target runs it.
    pub(crate) fn running(&self) -> Running<'_> {
        Running {
            id: &self.id,
            tool: &self.tool.name,
            arguments: &self.arguments,
            context: &self.context,
            events: self.events.as_ref(),
        }
    }
}

/// What became of a call.
#[derive(Clone, Debug)]
pub struct Called {
    /// The output, or why there is none.
    pub result: Result<ToolOutput, CallError>,
    /// The id the call's audit record has: the sandbox's `call-N` for a run
    /// there, else the entry point's id.
    pub call_id: String,
    /// Answered from the result cache, without running.
    pub cached: bool,
    /// How approval went, when the call needed it.
    pub approval: Option<ApprovalNote>,
    /// How long the pipeline took.
    pub duration: Duration,
    /// Whether the target wrote the audit record itself.
    pub(crate) recorded: bool,
}

impl Called {
    /// A call answered by `result` under `call_id`.
    pub fn new(result: Result<ToolOutput, CallError>, call_id: impl Into<String>) -> Self {
        Self {
            result,
            call_id: call_id.into(),
            cached: false,
            approval: None,
            duration: Duration::ZERO,
            recorded: false,
        }
    }

    /// A call refused before it ran.
    pub fn refused(call: &ToolCall, error: CallError) -> Self {
        Self::new(Err(error), call.id.clone())
    }

    /// Why it failed, if it did.
    pub fn error_kind(&self) -> Option<ErrorKind> {
        self.result.as_ref().err().map(|e| e.kind)
    }

    /// The answer as a call of `tool`'s result (as printed, or made MCP
    /// content).
    pub fn into_result(self, tool: &str) -> ToolCallResult {
        let (content, artifacts, error) = match self.result {
            Ok(output) => (output.content, output.artifacts, None),
            Err(error) => (String::new(), Vec::new(), Some(error)),
        };
        ToolCallResult {
            tool: tool.to_string(),
            call_id: self.call_id,
            content,
            artifacts,
            error,
            duration: self.duration,
        }
    }
}
