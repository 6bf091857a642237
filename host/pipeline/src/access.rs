//! Access: a caller may call only the tools the access rules let it see,
//! whoever makes the call on its behalf (a tool calling a tool, a script,
//! a delegated run act for the same caller). A tool it may not call is
//! answered as one that does not exist, before its arguments are looked at.

use std::sync::Arc;

use wasm_agent_access::AccessRules;
use wasm_agent_sandbox::result::CallError;

use crate::call::{Called, ToolCall};
use crate::layer::{Layer, Next};

/// Applies the access rules.
pub(crate) struct Access {
    pub(crate) rules: Arc<AccessRules>,
}

#[async_trait::async_trait]
impl Layer for Access {
    fn applies(&self, _call: &ToolCall) -> bool {
        self.rules.is_configured()
    }

    async fn call(&self, call: &mut ToolCall, next: Next<'_>) -> Called {
        let decision = self.rules.decide(&call.context.who(), &call.tool.name);
        call.context.decided_by = Some(format!("access: {decision}").into());
        if !decision.allowed {
            return Called::refused(call, hidden(&call.tool.name));
        }
        next.run(call).await
    }
}

/// The error for a tool the caller may not see: the words of a name that is
/// not offered at all, with no list of names (the entry points list the
/// caller's own before a call reaches here).
pub(crate) fn hidden(name: &str) -> CallError {
    wasm_agent_sandbox::specs::unknown_tool(name, std::iter::empty())
}
