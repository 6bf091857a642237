//! The approval step of a client's calls, and the tool calls a sandboxed
//! tool makes (`host.call-tool`) on behalf of one: the approval step and the
//! call, as for the client's own `tools/call`.

use std::sync::Arc;

use std::time::Duration;

use serde_json::Value;
use wasm_agent_sandbox::ApprovalNote;
use wasm_agent_sandbox::approval::{self, ApprovalRequest, Verdict};
use wasm_agent_sandbox::ask::Outcome;
use wasm_agent_sandbox::context::{CallContext, ToolCaller, ToolOutput};
use wasm_agent_sandbox::{CallError, ErrorKind, ToolCallResult, ToolInfo};

use crate::server::Shared;

/// Calls tools for a tool that one client's request runs.
pub(crate) struct ClientToolCaller {
    pub(crate) shared: Arc<Shared>,
    /// The client's request the calling tool runs for.
    pub(crate) request_id: String,
}

#[async_trait::async_trait]
impl ToolCaller for ClientToolCaller {
    fn tools(&self) -> Vec<ToolInfo> {
        self.shared.host.tools()
    }

    async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        context: &CallContext,
    ) -> Result<ToolOutput, CallError> {
        let context = match self
            .shared
            .approved(name, &arguments, &self.request_id, context)
            .await
        {
            Ok(None) => std::borrow::Cow::Borrowed(context),
            Ok(Some(note)) => std::borrow::Cow::Owned(context.clone().approval(note)),
            Err(refused) => {
                return Err(refused
                    .error
                    .unwrap_or_else(|| CallError::new(ErrorKind::Denied, "not approved")));
            }
        };
        self.shared
            .host
            .call_json(name, &arguments, &context)
            .await
            .into_output()
    }
}

impl Shared {
    /// Whether a call within `context` may run (the approval step the
    /// agent loop takes too): the approval note to call with, if one was
    /// needed, or the refusal, told to the audit trail.
    pub(crate) async fn approved(
        &self,
        tool: &str,
        arguments: &Value,
        request_id: &str,
        context: &CallContext,
    ) -> Result<Option<ApprovalNote>, ToolCallResult> {
        let Some(approval) = self.approvals.get(tool) else {
            return Ok(None);
        };
        // Nobody is asked about a call that could not run anyway.
        if approval.required_for(arguments)
            && let Err(error) = self.host.check_arguments(tool, arguments)
        {
            return Err(refusal(
                tool,
                request_id.to_string(),
                Refused::Invalid(error),
            ));
        }
        let request = || ApprovalRequest {
            run_id: context.session_id.clone(),
            call_id: request_id.to_string(),
            tool: tool.to_string(),
            arguments: arguments.clone(),
        };
        let handler = self.approver.as_ref();
        let asking = context.asker();
        let decision = approval::decide(
            approval,
            arguments,
            request,
            handler,
            asking,
            &context.cancellation,
        )
        .await;
        let note = decision.note;
        match decision.verdict {
            Verdict::NotNeeded | Verdict::Approved => Ok(note),
            verdict @ (Verdict::Denied | Verdict::Cancelled) => {
                let why = match verdict {
                    Verdict::Cancelled => Refused::Cancelled,
                    _ => match note.as_ref().and_then(|n| n.asked) {
                        Some(Outcome::NoAnswer) => Refused::NoAnswer(self.ask_wait),
                        Some(Outcome::Denied) => Refused::ByTheUser,
                        _ => Refused::NobodyToAsk,
                    },
                };
                let mut refused = refusal(tool, request_id.to_string(), why);
                if let (Some(error), Some(note)) = (&refused.error, note) {
                    let context = context.clone().approval(note);
                    refused.call_id = self.host.audit_refusal(tool, arguments, &context, error);
                }
                Err(refused)
            }
        }
    }
}

/// Why a call that needs approval did not run.
pub(crate) enum Refused {
    /// Nobody could be asked: the client did not declare elicitation.
    NobodyToAsk,
    /// The client's user said no.
    ByTheUser,
    /// The client's user did not answer within this long.
    NoAnswer(Duration),
    /// The call was cancelled while waiting for the answer.
    Cancelled,
    /// Its arguments could not pass, so nobody was asked.
    Invalid(CallError),
}

/// The result of a call refused for want of approval (or cancelled while
/// waiting for it). Its text is for the model: it says what happened, never
/// how to answer.
pub(crate) fn refusal(tool: &str, call_id: String, why: Refused) -> ToolCallResult {
    let (kind, message) = match why {
        Refused::Invalid(error) => (error.kind, error.message),
        Refused::Cancelled => (
            ErrorKind::Cancelled,
            format!("the call to {tool:?} was cancelled while waiting for approval"),
        ),
        Refused::ByTheUser => (
            ErrorKind::Denied,
            format!(
                "the user did not approve this call to {tool:?}, so it did not run; do not \
                 retry it: continue without it or ask the user"
            ),
        ),
        Refused::NoAnswer(wait) => (
            ErrorKind::Denied,
            format!(
                "the user did not answer whether to allow this call to {tool:?} within {}, \
                 so it did not run",
                humantime::format_duration(wait)
            ),
        ),
        Refused::NobodyToAsk => (
            ErrorKind::Denied,
            format!(
                "tool {tool:?} requires approval, and this MCP client cannot be asked (it did \
                 not declare the elicitation capability); the server's operator can allow it \
                 with `wasm-agent serve --approve {tool}` (or `--approve all`)"
            ),
        ),
    };
    ToolCallResult {
        tool: tool.to_string(),
        call_id,
        content: String::new(),
        artifacts: Vec::new(),
        error: Some(CallError::new(kind, message)),
        duration: Duration::ZERO,
    }
}
