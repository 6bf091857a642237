//! `host.delegate`: hand a sub-task to a named agent, if the policy names it
//! and an agent loop runs the call; at most a few times per call.

use std::sync::Arc;

use crate::context::{CallContext, Delegator};
use crate::runtime::denials::{DenialKind, Denials};
use crate::runtime::imports::CallId;

/// Delegations one call may make.
const MAX_DELEGATIONS: u32 = 8;

/// What one call may delegate, and to whom.
pub struct Delegation {
    call: CallId,
    /// Agents the policy lets this tool delegate to (`*` for any).
    allowed: Vec<String>,
    /// Who runs delegated tasks, and the context to run them in; `None`
    /// outside an agent run or when the policy allows no delegation.
    delegator: Option<(Arc<dyn Delegator>, CallContext)>,
    made: u32,
}

impl Delegation {
    /// `call` may delegate to `allowed` through the delegator of `context`.
    pub fn new(call: CallId, allowed: Vec<String>, context: &CallContext) -> Self {
        let delegator = context
            .delegator
            .as_ref()
            .filter(|_| !allowed.is_empty())
            .map(|handle| (handle.0.clone(), context.clone()));
        Self {
            call,
            allowed,
            delegator,
            made: 0,
        }
    }

    /// The agent's answer, or why there is none (a refusal is recorded in
    /// `denials`).
    pub async fn delegate(
        &mut self,
        agent: String,
        input: String,
        denials: &Denials,
    ) -> Result<String, String> {
        if !wasm_agent_policy::delegation_allowed(&self.allowed, &agent) {
            let reason = format!(
                "the policy of tool {:?} does not allow delegating to agent {agent:?}; add \
                 --allow-delegate {agent} (config: delegate = [\"{agent}\"]) to allow it",
                self.call.tool
            );
            denials.record(
                DenialKind::Delegate,
                format!("delegate to agent {agent:?}"),
                reason.clone(),
            );
            return Err(reason);
        }
        let Some((delegator, context)) = &self.delegator else {
            return Err("no agent is running this call, so there is nobody to delegate to".into());
        };
        self.made = self.made.saturating_add(1);
        if self.made > MAX_DELEGATIONS {
            return Err(format!(
                "a call may delegate at most {MAX_DELEGATIONS} times"
            ));
        }
        tracing::info!(tool = %self.call.tool, call_id = %self.call.call_id, agent, "delegating");
        delegator
            .delegate(&agent, &input, context)
            .await
            .map_err(|e| e.to_string())
    }
}
