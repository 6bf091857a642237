//! Calls tools make of other tools (`host.call-tool`): calls like any other,
//! down the same pipeline (audit, check, approval, cache), one level deeper
//! and within the calling call's context (its caller, tenant, session and
//! the person who can be asked).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use wasm_agent_sandbox::context::{CallContext, ToolCaller, ToolOutput};
use wasm_agent_sandbox::registry::ToolInfo;
use wasm_agent_sandbox::result::CallError;

use crate::Pipeline;
use crate::call::ToolCall;
use crate::events::CallEvents;
use crate::tools::ToolSet;

/// The [`ToolCaller`] of an entry point whose tools are a [`ToolSet`].
pub struct PipelineCaller {
    pipeline: Pipeline,
    tools: Arc<dyn ToolSet>,
    events: Option<Arc<dyn CallEvents>>,
    /// The id of the call whose tools call others (their ids derive from it).
    parent: String,
    made: AtomicU64,
}

impl PipelineCaller {
    /// Calls of `tools` through `pipeline`, made while call `parent` runs.
    pub fn new(pipeline: Pipeline, tools: Arc<dyn ToolSet>, parent: impl Into<String>) -> Self {
        Self {
            pipeline,
            tools,
            events: None,
            parent: parent.into(),
            made: AtomicU64::new(0),
        }
    }

    /// Tells `events` of the nested calls' approvals and progress.
    pub fn events(mut self, events: Arc<dyn CallEvents>) -> Self {
        self.events = Some(events);
        self
    }
}

#[async_trait::async_trait]
impl ToolCaller for PipelineCaller {
    fn tools(&self, context: &CallContext) -> Vec<ToolInfo> {
        self.pipeline.visible(&*self.tools, context)
    }

    async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        context: &CallContext,
    ) -> Result<ToolOutput, CallError> {
        let tool = self.pipeline.tool(&*self.tools, name, context)?;
        let number = self.made.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("{}/tool-call-{number}", self.parent);
        let mut call = ToolCall::new(tool, id, arguments, context.clone());
        call.events = self.events.clone();
        self.pipeline.call(call).await.result
    }
}
