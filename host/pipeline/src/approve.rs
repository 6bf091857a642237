//! The approval step: a call whose tool's settings require approval runs
//! only if the operator's standing approvals ([`ApprovalHandler`]) allow it
//! or the person behind the call says yes (never the model). The question
//! names the exact tool, version and arguments; an answer "for this
//! session" covers exactly those; and the call then runs on the version
//! approved, never on one loaded meanwhile.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use wasm_agent_sandbox::approval::{Approval, ApprovalHandler, ApprovalRequest, Verdict};
use wasm_agent_sandbox::ask::{Asking, OPERATORS, Outcome, Subject};
use wasm_agent_sandbox::report::ApprovalNote;
use wasm_agent_sandbox::result::{CallError, ErrorKind};

use crate::call::{Called, ToolCall};
use crate::layer::{Layer, Next};
use crate::question;

/// Asks for approval where a tool's settings require it.
pub(crate) struct Approve {
    pub(crate) handler: Arc<dyn ApprovalHandler>,
}

#[async_trait::async_trait]
impl Layer for Approve {
    fn applies(&self, call: &ToolCall) -> bool {
        !matches!(call.tool.settings.approval, Approval::Never)
    }

    async fn call(&self, call: &mut ToolCall, next: Next<'_>) -> Called {
        if !call.tool.settings.approval.required_for(&call.arguments) {
            return next.run(call).await;
        }
        let request = ApprovalRequest {
            run_id: call.context.run_id.clone(),
            call_id: call.id.clone(),
            tool: call.tool.name.clone(),
            version: call.version.clone().unwrap_or_default(),
            arguments: call.arguments.clone(),
        };
        if let Some(events) = &call.events {
            events.approval_requested(&request);
        }
        let asking = call.context.asker();
        let (note, refused) =
            decide(&*self.handler, &request, asking, &call.context.cancellation).await;
        match refused {
            None => {
                call.context.approval = Some(note.clone());
                let mut called = next.run(call).await;
                called.approval = Some(note);
                called
            }
            Some(why) => {
                let mut called = Called::refused(call, refusal(&request.tool, why));
                called.approval = Some(note);
                called
            }
        }
    }
}

/// Why a call that needs approval did not run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The operator's approvals (named) did not allow it, and nobody could
    /// be asked (an MCP client without elicitation, no terminal).
    NobodyToAsk(String),
    /// The person said no.
    ByTheUser,
    /// An operator said no (in the console).
    ByAnOperator,
    /// No operator answered within this long.
    NoOperatorAnswer(Duration),
    /// The operators' desk could not take the question (too many of the
    /// caller's waiting, or the shared store not answering).
    DeskUnavailable,
    /// The person did not answer within this long.
    NoAnswer(Duration),
    /// The call was cancelled while waiting for the answer.
    Cancelled,
    /// The question went to the person with the call's answer (an MCP
    /// input-required result); the call is made again with the answer.
    Pending,
}

/// The operator's standing approvals first, then the person, if one can be
/// asked: how it went (for the audit record) and, if the call may not run,
/// why. A cancelled call is never approved, however fast the answer.
pub async fn decide(
    handler: &dyn ApprovalHandler,
    request: &ApprovalRequest,
    asking: Option<&Asking>,
    cancellation: &CancellationToken,
) -> (ApprovalNote, Option<Refused>) {
    let by_handler = || handler.decided_by(&request.tool);
    let note = |verdict, by, asked| ApprovalNote { verdict, by, asked };
    let approved = tokio::select! {
        biased;
        () = cancellation.cancelled() => None,
        approved = handler.approve(request) => Some(approved),
    };
    match (approved, asking) {
        (None, _) => (
            note(Verdict::Cancelled, by_handler(), None),
            Some(Refused::Cancelled),
        ),
        (Some(true), _) => (note(Verdict::Approved, by_handler(), None), None),
        (Some(false), None) => (
            note(Verdict::Denied, by_handler(), None),
            Some(Refused::NobodyToAsk(by_handler())),
        ),
        (Some(false), Some(asking)) => {
            let subject = Subject::Call {
                summary: question::summary(&request.arguments),
                version: request.version.clone(),
                arguments: question::exact(&request.arguments),
            };
            let asked = asking.ask(&request.tool, subject, cancellation).await;
            let operators = asked.by == OPERATORS;
            let wait = asking.max_wait();
            let (verdict, refused) = match asked.outcome {
                outcome if outcome.allowed() => (Verdict::Approved, None),
                Outcome::Cancelled => (Verdict::Cancelled, Some(Refused::Cancelled)),
                Outcome::NoAnswer if operators => {
                    (Verdict::Denied, Some(Refused::NoOperatorAnswer(wait)))
                }
                Outcome::NoAnswer => (Verdict::Denied, Some(Refused::NoAnswer(wait))),
                Outcome::Unavailable if operators => {
                    (Verdict::Denied, Some(Refused::DeskUnavailable))
                }
                Outcome::Unavailable => (Verdict::Denied, Some(Refused::NobodyToAsk(by_handler()))),
                Outcome::Pending => (Verdict::Pending, Some(Refused::Pending)),
                _ if operators => (Verdict::Denied, Some(Refused::ByAnOperator)),
                _ => (Verdict::Denied, Some(Refused::ByTheUser)),
            };
            (note(verdict, asked.by, Some(asked.outcome)), refused)
        }
    }
}

/// The error of a call refused for want of approval. Its text is for the
/// model: it says what happened, never how to answer.
pub fn refusal(tool: &str, why: Refused) -> CallError {
    let (kind, message) = match why {
        Refused::Cancelled => (
            ErrorKind::Cancelled,
            format!("the call to {tool:?} was cancelled while waiting for approval"),
        ),
        Refused::Pending => (
            ErrorKind::Denied,
            format!(
                "the call to {tool:?} waits for the user's answer; it runs when it is made \
                 again with that answer"
            ),
        ),
        Refused::ByTheUser => (
            ErrorKind::Denied,
            format!(
                "the user did not approve this call to {tool:?}, so it did not run; do not \
                 retry it: continue without it or ask the user"
            ),
        ),
        Refused::ByAnOperator => (
            ErrorKind::Denied,
            format!(
                "an operator did not approve this call to {tool:?}, so it did not run; do not \
                 retry it: continue without it"
            ),
        ),
        Refused::NoOperatorAnswer(wait) => (
            ErrorKind::Denied,
            format!(
                "no operator answered whether to allow this call to {tool:?} within {}, so it \
                 did not run",
                humantime::format_duration(wait)
            ),
        ),
        Refused::DeskUnavailable => (
            ErrorKind::Denied,
            format!(
                "the call to {tool:?} needs an operator's approval, and the operators' console \
                 could not take the question now (too many of this caller's are waiting, or \
                 its store does not answer), so it did not run"
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
        Refused::NobodyToAsk(by) => (
            ErrorKind::Denied,
            format!(
                "tool {tool:?} requires approval: {by} did not approve this call, and nobody \
                 could be asked (an MCP client must declare the elicitation capability; \
                 `run` and `call` ask at a terminal), so it did not run; the operator can \
                 allow it with `--approve {tool}` (or `--approve all`)"
            ),
        ),
    };
    CallError::new(kind, message)
}
