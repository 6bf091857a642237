//! One tool call inside a run: the model's argument text made a call, down
//! the call pipeline (audit, check, approval, cache, the call), and the
//! result shortened for the model.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use super::Agent;
use super::limit::{self, OverflowStrategy};
use super::remote::Progress;
use super::run::{AgentEvent, EventSender, Shortened, ToolCallRecord};
use super::tool::AgentTool;
use crate::provider::{ChatRequest, Message, ToolCallRequest, Usage};
use wasm_agent_pipeline::{CallEvents, Called, ToolCall};
use wasm_agent_sandbox::approval::ApprovalRequest;
use wasm_agent_sandbox::context::CallContext;
use wasm_agent_sandbox::result::{CallError, ErrorKind};
use wasm_agent_sandbox::specs;

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
        let (outcome, cached) = match tool {
            None => (
                Err(specs::unknown_tool(
                    &call.name,
                    tools.iter().map(|t| t.name.as_str()),
                )),
                false,
            ),
            Some(tool) => {
                let called = self.call_tool(tool, call, context, events).await;
                (called.result, called.cached)
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
                        .shorten(
                            &record.content,
                            max_chars,
                            tool.settings.overflow,
                            &context.cancellation,
                        )
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

    /// The model's call as a pipeline call: its argument text parsed (a
    /// strict schema's nulls dropped), then down the pipeline.
    async fn call_tool(
        &self,
        tool: &AgentTool,
        call: &ToolCallRequest,
        context: &CallContext,
        events: Option<&EventSender>,
    ) -> Called {
        let mut arguments = match parse_arguments(&call.arguments) {
            Ok(arguments) => arguments,
            Err(error) => return Called::new(Err(error), call.id.clone()),
        };
        if tool.settings.strict {
            // Strict schemas make optional properties required-but-nullable;
            // the model's nulls mean "not given" to the tool's own schema.
            drop_optional_nulls(&mut arguments, &tool.parameters);
        }
        let mut request = ToolCall::new(
            tool.pipeline_tool(self),
            call.id.clone(),
            arguments,
            context.clone(),
        );
        if let Some(sender) = events {
            request = request.events(Arc::new(RunEvents {
                sender: sender.clone(),
                id: call.id.clone(),
            }));
        }
        self.inner.pipeline.call(request).await
    }

    /// Shortens an oversized result: a summary by the summarizer model, or a
    /// truncation (also when summarizing fails or comes out too long).
    async fn shorten(
        &self,
        text: &str,
        max_chars: usize,
        strategy: OverflowStrategy,
        cancellation: &tokio_util::sync::CancellationToken,
    ) -> (String, Shortened, Usage) {
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
            let answer = tokio::select! {
                answer = model.chat(&request, None) => Some(answer),
                () = cancellation.cancelled() => None,
            };
            match answer {
                None => {}
                Some(Ok(answer))
                    if !answer.text.trim().is_empty()
                        && answer.text.chars().count() <= max_chars =>
                {
                    return (answer.text, Shortened::Summarized, answer.usage);
                }
                Some(Ok(answer)) => {
                    tracing::warn!(
                        chars = answer.text.chars().count(),
                        max_chars,
                        "summary empty or too long; truncating instead"
                    );
                }
                Some(Err(error)) => {
                    tracing::warn!(%error, "summarizing failed; truncating instead")
                }
            }
        }
        (
            limit::truncate(text, max_chars),
            Shortened::Truncated,
            Usage::default(),
        )
    }
}

/// A call's approval questions and progress as the run's events.
struct RunEvents {
    sender: EventSender,
    id: String,
}

impl CallEvents for RunEvents {
    fn approval_requested(&self, request: &ApprovalRequest) {
        let _ = self
            .sender
            .send(AgentEvent::ApprovalRequested(request.clone()));
    }

    fn progress(&self, progress: Progress) {
        let _ = self.sender.send(AgentEvent::ToolProgress {
            id: self.id.clone(),
            progress,
        });
    }
}

/// Removes `null` values of properties that `schema` does not require, at
/// every level of nested objects and arrays it describes.
fn drop_optional_nulls(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(map) => {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                return;
            };
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            map.retain(|key, v| !v.is_null() || required.contains(&key.as_str()));
            for (key, v) in map.iter_mut() {
                if let Some(sub_schema) = properties.get(key) {
                    drop_optional_nulls(v, sub_schema);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    drop_optional_nulls(item, item_schema);
                }
            }
        }
        _ => {}
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn optional_nulls_are_dropped_at_every_level() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "limit": {"type": "integer"},
                "filter": {"type": "object", "properties": {"tag": {"type": "string"}}},
                "rows": {"type": "array", "items": {"type": "object", "properties": {"note": {"type": "string"}}, "required": []}}
            },
            "required": ["name", "filter"]
        });
        let mut arguments = json!({
            "name": null, "limit": null,
            "filter": {"tag": null},
            "rows": [{"note": null}, {"note": "x"}]
        });
        drop_optional_nulls(&mut arguments, &schema);
        assert_eq!(
            arguments,
            json!({"name": null, "filter": {}, "rows": [{}, {"note": "x"}]})
        );
    }
}
