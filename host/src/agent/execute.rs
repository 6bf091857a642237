//! One tool call inside a run: parse and check the arguments, ask for
//! approval, consult the cache, run the tool, shorten the result for the model.

use std::time::Instant;

use serde_json::Value;

use super::Agent;
use super::approval::ApprovalRequest;
use super::cache::CacheKey;
use super::context::ToolContext;
use super::limit::{self, OverflowStrategy};
use super::run::{AgentEvent, EventSender, ToolCallRecord};
use super::tool::{AgentTool, Runner, ToolOutput};
use crate::context::CallContext;
use crate::provider::{ChatRequest, Message, ToolCallRequest, Usage};
use crate::registry;
use crate::result::{CallError, ErrorKind};

/// The most a summarizer is given to read (about 25k tokens).
const SUMMARIZER_INPUT_CHARS: usize = 100_000;

impl Agent {
    /// Runs one call; never fails: every problem becomes the record's error.
    /// Returns the tokens a summary cost, if one was made.
    pub(super) async fn execute(
        &self,
        call: &ToolCallRequest,
        tools: &[AgentTool],
        context: &CallContext,
        events: Option<&EventSender>,
    ) -> (ToolCallRecord, Usage) {
        let started = Instant::now();
        if let Some(sender) = events {
            let _ = sender.send(AgentEvent::ToolCallStarted {
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            });
        }
        let tool = tools.iter().find(|t| t.name == call.name);
        let mut cached = false;
        let outcome = match tool {
            None => Err(unknown_tool(&call.name, tools)),
            Some(tool) => {
                self.call_tool(tool, call, context, events, &mut cached)
                    .await
            }
        };
        let mut record = ToolCallRecord {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            content: String::new(),
            artifacts: Vec::new(),
            error: None,
            duration: started.elapsed(),
            cached,
            model_content: String::new(),
            shortened: None,
        };
        let mut usage = Usage::default();
        match outcome {
            Ok(output) => {
                record.content = output.content;
                record.artifacts = output.artifacts;
                record.model_content = record.content.clone();
                if let Some(tool) = tool
                    && let Some(max_chars) = tool.settings.max_chars
                    && record.content.chars().count() > max_chars
                {
                    let (text, how, spent) = self
                        .shorten(&record.content, max_chars, tool.settings.overflow)
                        .await;
                    record.model_content = text;
                    record.shortened = Some(how);
                    usage = spent;
                }
            }
            Err(error) => {
                record.model_content = format!("Error: {}", error.message);
                record.error = Some(error);
            }
        }
        record.duration = started.elapsed();
        (record, usage)
    }

    async fn call_tool(
        &self,
        tool: &AgentTool,
        call: &ToolCallRequest,
        context: &CallContext,
        events: Option<&EventSender>,
        cached: &mut bool,
    ) -> Result<ToolOutput, CallError> {
        let arguments = parse_arguments(&call.arguments)?;
        if let Runner::Host(_, validator) = &tool.runner {
            registry::check_value(validator, &tool.name, &arguments)
                .map_err(|message| CallError::new(ErrorKind::InvalidArguments, message))?;
        }
        if tool.settings.requires_approval.required_for(&arguments) {
            let request = ApprovalRequest {
                run_id: context.run_id.clone(),
                call_id: call.id.clone(),
                tool: tool.name.clone(),
                arguments: arguments.clone(),
            };
            if let Some(sender) = events {
                let _ = sender.send(AgentEvent::ApprovalRequested(request.clone()));
            }
            if !self.inner.approval.approve(&request).await {
                return Err(CallError::new(
                    ErrorKind::Denied,
                    format!(
                        "the user did not approve this call to {}, so it did not run; do not \
                         retry it: continue without it or ask the user",
                        tool.name
                    ),
                ));
            }
        }
        let cache_key = tool.settings.cache_ttl.map(|ttl| {
            (
                CacheKey::new(&tool.name, &arguments, context.tenant_id.as_deref()),
                ttl,
            )
        });
        if let Some((key, _)) = &cache_key
            && let Some(hit) = self.inner.cache.get(key)
        {
            *cached = true;
            return Ok(hit);
        }
        let output = match &tool.runner {
            Runner::Sandboxed(host) => {
                let result = host.call(&tool.name, &arguments.to_string(), context).await;
                match result.error {
                    None => Ok(ToolOutput {
                        content: result.content,
                        artifacts: result.artifacts,
                    }),
                    Some(error) => Err(error),
                }
            }
            Runner::Host(run, _) => {
                let tool_context = ToolContext {
                    call: context.clone(),
                    call_id: call.id.clone(),
                    tool: tool.name.clone(),
                    agent: self.clone(),
                };
                tokio::select! {
                    result = run(arguments, tool_context) => {
                        result.map_err(|message| CallError::new(ErrorKind::Failed, message))
                    }
                    () = context.cancellation.cancelled() => Err(CallError::new(
                        ErrorKind::Cancelled,
                        "the run was cancelled before the tool finished",
                    )),
                }
            }
        }?;
        if let Some((key, ttl)) = cache_key {
            self.inner.cache.insert(key, output.clone(), ttl);
        }
        Ok(output)
    }

    /// Shortens an oversized result: a summary by the summarizer model, or a
    /// truncation (also when summarizing fails or comes out too long).
    async fn shorten(
        &self,
        text: &str,
        max_chars: usize,
        strategy: OverflowStrategy,
    ) -> (String, &'static str, Usage) {
        if strategy == OverflowStrategy::Summarize {
            let model = self.inner.summarizer.as_ref().unwrap_or(&self.inner.model);
            let request = ChatRequest {
                // A summarizer reads at most this much; huge results are cut first.
                messages: vec![Message::User(limit::summary_prompt(
                    &limit::truncate(text, SUMMARIZER_INPUT_CHARS),
                    max_chars,
                ))],
                ..ChatRequest::default()
            };
            match model.chat(&request, None).await {
                Ok(answer)
                    if !answer.text.trim().is_empty()
                        && answer.text.chars().count() <= max_chars =>
                {
                    return (answer.text, "summarized", answer.usage);
                }
                Ok(answer) => {
                    tracing::warn!(
                        chars = answer.text.chars().count(),
                        max_chars,
                        "summary empty or too long; truncating instead"
                    );
                }
                Err(error) => tracing::warn!(%error, "summarizing failed; truncating instead"),
            }
        }
        (
            limit::truncate(text, max_chars),
            "truncated",
            Usage::default(),
        )
    }
}

/// The model's argument text as a JSON object; an empty text means `{}`
/// (some models send that for tools without parameters).
fn parse_arguments(text: &str) -> Result<Value, CallError> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    let value: Value = serde_json::from_str(text).map_err(|e| {
        CallError::new(
            ErrorKind::InvalidArguments,
            format!("the arguments are not valid JSON ({e}); send one JSON object"),
        )
    })?;
    if !value.is_object() {
        return Err(CallError::new(
            ErrorKind::InvalidArguments,
            "the arguments must be a JSON object",
        ));
    }
    Ok(value)
}

fn unknown_tool(name: &str, tools: &[AgentTool]) -> CallError {
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).take(30).collect();
    CallError::new(
        ErrorKind::UnknownTool,
        format!(
            "there is no tool named {name:?}; available tools: {}",
            names.join(", ")
        ),
    )
}
