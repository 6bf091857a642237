//! `host.delegate`: hand a sub-task to a named agent, if the policy names it
//! and an agent loop runs the call; at most a few times per call.

use super::reach::Reach;
use crate::context::Delegator;
use crate::runtime::denials::{DenialKind, Denials};

/// Delegations one call may make.
const MAX_DELEGATIONS: u32 = 8;

/// What one call may delegate, and to whom (`None` outside an agent run or
/// when the policy allows no delegation).
pub type Delegation = Reach<dyn Delegator>;

impl Delegation {
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
        let Some((delegator, context)) = &self.through else {
            return Err("no agent is running this call, so there is nobody to delegate to".into());
        };
        if !self.one_more(MAX_DELEGATIONS) {
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
