//! [`ToolContext`]: what a host tool gets besides its arguments.

use serde_json::Value;

use super::{Agent, AgentError};
use wasm_agent_sandbox::context::CallContext;
use wasm_agent_sandbox::events::ToolEvent;
use wasm_agent_session::{Owner, SessionError, StateScope};

/// The run context of one host-tool call.
#[derive(Clone)]
pub struct ToolContext {
    /// Run, session, user and tenant ids, metadata and cancellation.
    pub call: CallContext,
    /// This call's id.
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    pub(crate) agent: Agent,
}

impl ToolContext {
    /// The tool's session state for `key` (scoped to this tool, session
    /// and owner); `None` when unset or not JSON.
    pub async fn get_state(&self, key: &str) -> Result<Option<Value>, SessionError> {
        let text = self.agent.inner.sessions.get(&self.scope(), key).await?;
        Ok(text.and_then(|text| serde_json::from_str(&text).ok()))
    }

    /// Sets the tool's session state for `key`.
    pub async fn set_state(&self, key: &str, value: &Value) -> Result<(), SessionError> {
        self.agent
            .inner
            .sessions
            .set(&self.scope(), key, value.to_string())
            .await
    }

    /// A dependency value configured on the agent
    /// ([`super::AgentBuilder::dependency`]).
    pub fn dependency(&self, name: &str) -> Option<&str> {
        self.agent.inner.dependencies.get(name).map(String::as_str)
    }

    /// Publishes an event on the agent's event bus.
    pub fn emit(&self, name: &str, payload: Value) {
        self.agent.inner.events.publish_with(|| ToolEvent::Emitted {
            call_id: self.call_id.clone(),
            tool: self.tool.clone(),
            name: name.to_string(),
            payload,
        });
    }

    /// True once the run has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.call.cancellation.is_cancelled()
    }

    /// Hands `input` to the agent named `agent` (registered with
    /// [`super::AgentBuilder::sub_agent`]) and returns its answer.
    pub async fn delegate(&self, agent: &str, input: &str) -> Result<String, AgentError> {
        self.agent.delegate(agent, input, &self.call).await
    }

    /// Host tools keep state apart from components of the same name.
    /// Host tools keep state under `host/NAME`, apart from every component.
    fn scope(&self) -> StateScope {
        StateScope {
            owner: Owner::new(self.call.tenant_id.as_deref(), self.call.user_id.as_deref()),
            session: self.call.session_id.clone(),
            component: format!("host/{}", self.tool).into(),
        }
    }
}
