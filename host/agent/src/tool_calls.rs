//! The tool calls a sandboxed tool makes (`host.call-tool`) during a run:
//! each takes the path of the model's own calls ([`Agent::execute`]:
//! validation, approval, cache, events), among all the run's tools.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use wasm_agent_sandbox::context::{CallContext, ToolCaller, ToolOutput};
use wasm_agent_sandbox::registry::ToolInfo;
use wasm_agent_sandbox::result::CallError;

use super::Agent;
use super::run::{AgentEvent, EventSender};
use super::tool::AgentTool;
use crate::provider::ToolCallRequest;

impl Agent {
    /// The caller of the tools a run's tools call: every tool of the run,
    /// whether or not the router offered it.
    pub(super) fn run_tool_caller(
        &self,
        tools: Arc<[AgentTool]>,
        events: Option<EventSender>,
    ) -> Arc<dyn ToolCaller> {
        Arc::new(RunToolCaller {
            agent: self.clone(),
            tools,
            events,
            made: AtomicU64::new(0),
        })
    }
}

/// Calls tools for the tools of one run.
struct RunToolCaller {
    agent: Agent,
    /// Every tool of the run, whether or not the router offered it.
    tools: Arc<[AgentTool]>,
    events: Option<EventSender>,
    /// Numbers the calls, for their ids.
    made: AtomicU64,
}

#[async_trait::async_trait]
impl ToolCaller for RunToolCaller {
    fn tools(&self, _context: &CallContext) -> Vec<ToolInfo> {
        // The run's tools are those its caller may call already.
        self.tools
            .iter()
            .map(|tool| ToolInfo {
                name: tool.name.clone(),
                component: String::new(),
                digest: String::new(),
                description: tool.description.clone(),
                parameters: tool.parameters.clone(),
                annotations: tool.annotations,
            })
            .collect()
    }

    async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        context: &CallContext,
    ) -> Result<ToolOutput, CallError> {
        let number = self.made.fetch_add(1, Ordering::Relaxed) + 1;
        let call = ToolCallRequest {
            id: format!("tool_call_{number}"),
            name: name.to_string(),
            arguments: arguments.to_string(),
        };
        let (record, _) = self
            .agent
            .execute(&call, &self.tools, context, self.events.as_ref())
            .await;
        if let Some(sender) = &self.events {
            let _ = sender.send(AgentEvent::ToolCallFinished(record.clone()));
        }
        match record.error {
            None => Ok(ToolOutput {
                content: record.content,
                artifacts: record.artifacts,
            }),
            Some(error) => Err(error),
        }
    }
}
