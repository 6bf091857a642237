//! Access: a caller may call only the tools the access rules let it see,
//! whoever makes the call on its behalf (a tool calling a tool, a script,
//! a delegated run act for the same caller, and are held to the rules of
//! the request they serve as well as to their own pipeline's). A tool it
//! may not call is answered as one that does not exist, before its
//! arguments are looked at.

use std::sync::Arc;

use wasm_agent_access::quota::TenantObserver;
use wasm_agent_access::{AccessRules, Decision};
use wasm_agent_sandbox::context::CallContext;
use wasm_agent_sandbox::result::CallError;

use crate::call::{Called, ToolCall};
use crate::layer::{Layer, Next};

/// Applies the access rules.
pub(crate) struct Access {
    pub(crate) rules: Arc<AccessRules>,
    pub(crate) observer: Option<Arc<dyn TenantObserver>>,
}

#[async_trait::async_trait]
impl Layer for Access {
    fn applies(&self, call: &ToolCall) -> bool {
        self.rules.is_configured() || call.context.access_rules().is_some()
    }

    async fn call(&self, call: &mut ToolCall, next: Next<'_>) -> Called {
        let Some(decision) = decide(&self.rules, &call.context, &call.tool.name) else {
            return next.run(call).await;
        };
        call.context.decided_by = Some(format!("access: {decision}").into());
        if !decision.allowed {
            if let (Some(observer), Some(tenant)) = (&self.observer, &call.context.tenant_id) {
                observer.refused(tenant, "access");
            }
            return Called::refused(call, hidden(&call.tool.name));
        }
        if self.rules.is_configured() {
            call.context.held_to(self.rules.clone());
        }
        next.run(call).await
    }
}

/// What `own` rules and those `context`'s request carries say of `tool`:
/// the first refusal, else the last that allowed (`None`: no rules).
pub(crate) fn decide(
    own: &Arc<AccessRules>,
    context: &CallContext,
    tool: &str,
) -> Option<Decision> {
    let who = context.who();
    let carried = context
        .access_rules()
        .filter(|carried| !Arc::ptr_eq(carried, own));
    let mut allowed = None;
    for rules in std::iter::once(own).chain(carried) {
        if !rules.is_configured() {
            continue;
        }
        let decision = rules.decide(&who, tool);
        if !decision.allowed {
            return Some(decision);
        }
        allowed = Some(decision);
    }
    allowed
}

/// The error for a tool the caller may not see: the words of a name that is
/// not offered at all, with no list of names (the entry points list the
/// caller's own before a call reaches here).
pub(crate) fn hidden(name: &str) -> CallError {
    wasm_agent_sandbox::specs::unknown_tool(name, std::iter::empty())
}
