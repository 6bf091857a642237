//! One tool call inside a run: parse and check the arguments, ask for
//! approval, consult the cache, run the tool, shorten the result for the model.

use std::panic::AssertUnwindSafe;
use std::time::Instant;

use futures::FutureExt;

use serde_json::Value;

use super::Agent;
use super::audited::RemoteAudit;
use super::cached;
use super::context::ToolContext;
use super::limit::{self, OverflowStrategy};
use super::remote::ProgressSink;
use super::run::{AgentEvent, EventSender, Shortened, ToolCallRecord};
use super::tool::{AgentTool, Runner, ToolOutput};
use crate::provider::{ChatRequest, Message, ToolCallRequest, Usage};
use wasm_agent_sandbox::approval::{self, ApprovalRequest, Verdict};
use wasm_agent_sandbox::context::CallContext;
use wasm_agent_sandbox::report::ApprovalNote;
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
        let mut cached = false;
        let outcome = match tool {
            None => Err(specs::unknown_tool(
                &call.name,
                tools.iter().map(|t| t.name.as_str()),
            )),
            Some(tool) => {
                let audit = RemoteAudit::begin(self.inner.auditor.as_ref(), tool, call, context);
                match audit.as_ref().and_then(RemoteAudit::refused) {
                    Some(error) => Err(error),
                    None => {
                        let mut approval = None;
                        let outcome = self
                            .call_tool(tool, call, context, events, &mut cached, &mut approval)
                            .await;
                        if let Some(audit) = audit {
                            let kind = outcome.as_ref().err().map(|e| e.kind);
                            audit.finish(kind, cached, approval);
                        }
                        outcome
                    }
                }
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

    async fn call_tool(
        &self,
        tool: &AgentTool,
        call: &ToolCallRequest,
        context: &CallContext,
        events: Option<&EventSender>,
        cached: &mut bool,
        approval: &mut Option<ApprovalNote>,
    ) -> Result<ToolOutput, CallError> {
        if context.cancellation.is_cancelled() {
            return Err(cancelled());
        }
        let mut arguments = parse_arguments(&call.arguments)?;
        if tool.settings.strict {
            // Strict schemas make optional properties required-but-nullable;
            // the model's nulls mean "not given" to the tool's own schema.
            drop_optional_nulls(&mut arguments, &tool.parameters);
        }
        match &tool.runner {
            Runner::Host(_, validator) | Runner::Remote(_, validator) => {
                specs::check_value(validator, &tool.name, &arguments)
                    .map_err(|message| CallError::new(ErrorKind::InvalidArguments, message))?;
            }
            // The host checks again when it runs the call; checked here only
            // so that nobody is asked to approve a call that could not run.
            Runner::Sandboxed { host, tool: name }
                if tool.settings.requires_approval.required_for(&arguments) =>
            {
                host.check_arguments(name, &arguments)?;
            }
            Runner::Sandboxed { .. } => {}
        }
        let request = || {
            let request = ApprovalRequest {
                run_id: context.run_id.clone(),
                call_id: call.id.clone(),
                tool: tool.name.clone(),
                arguments: arguments.clone(),
            };
            if let Some(sender) = events {
                let _ = sender.send(AgentEvent::ApprovalRequested(request.clone()));
            }
            request
        };
        let decision = approval::decide(
            &tool.settings.requires_approval,
            &arguments,
            request,
            self.inner.approval.as_ref(),
            context.asker(),
            &context.cancellation,
        )
        .await;
        let verdict = decision.verdict;
        // The approval goes with the call to the host's audit trail.
        let approved_context;
        let context = match decision.note {
            None => context,
            Some(note) => {
                approval.replace(note.clone());
                approved_context = context.clone().approval(note);
                &approved_context
            }
        };
        let refused = match verdict {
            Verdict::NotNeeded | Verdict::Approved => None,
            Verdict::Cancelled => Some(cancelled()),
            Verdict::Denied => Some(CallError::new(
                ErrorKind::Denied,
                format!(
                    "the user did not approve this call to {}, so it did not run; do not \
                     retry it: continue without it or ask the user",
                    tool.name
                ),
            )),
        };
        if let Some(error) = refused {
            if let Runner::Sandboxed { host, tool: name } = &tool.runner {
                host.audit_refusal(name, &arguments, context, &error);
            }
            return Err(error);
        }
        let cache_key = tool.settings.cache_ttl.and_then(|ttl| {
            Some((
                cached::key(tool, &arguments, context.tenant_id.as_deref())?,
                ttl,
            ))
        });
        if let Some((key, _)) = &cache_key
            && let Some(hit) = cached::lookup(&*self.inner.cache, key).await
        {
            if let Runner::Sandboxed { host, tool: name } = &tool.runner {
                host.audit_cached(name, &arguments, context);
            }
            *cached = true;
            return Ok(hit);
        }
        let output = match &tool.runner {
            Runner::Sandboxed { host, tool: name } => {
                let result = host.call_json(name, &arguments, context).await;
                match result.error {
                    None => Ok(ToolOutput {
                        content: result.content,
                        artifacts: result.artifacts,
                    }),
                    Some(error) => Err(error),
                }
            }
            Runner::Remote(remote, _) => {
                let progress = match events {
                    Some(sender) => {
                        let (sender, id) = (sender.clone(), call.id.clone());
                        ProgressSink::new(move |progress| {
                            let _ = sender.send(AgentEvent::ToolProgress {
                                id: id.clone(),
                                progress,
                            });
                        })
                    }
                    None => ProgressSink::default(),
                };
                // Not raced against cancellation here: the remote side
                // ends the call itself, telling the far end why.
                remote.call(arguments, context, progress).await
            }
            Runner::Host(run, _) => {
                let tool_context = ToolContext {
                    call: context.clone(),
                    call_id: call.id.clone(),
                    tool: tool.name.clone(),
                    agent: self.clone(),
                };
                // A panicking host tool fails its call, not the run.
                let running = AssertUnwindSafe(run(arguments, tool_context)).catch_unwind();
                tokio::select! {
                    result = running => match result {
                        Ok(result) => result.map_err(|message| CallError::new(ErrorKind::Failed, message)),
                        Err(panic) => Err(CallError::new(
                            ErrorKind::Trap,
                            format!("the tool panicked: {}", panic_message(&*panic)),
                        )),
                    },
                    () = context.cancellation.cancelled() => Err(cancelled()),
                }
            }
        }?;
        // A component replaced during the call may have answered: keep its
        // result only under the version that ran.
        if let Some((key, ttl)) = cache_key
            && cached::version(tool).as_deref() == Some(key.component())
        {
            cached::keep(&*self.inner.cache, &key, &output, ttl).await;
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

fn cancelled() -> CallError {
    CallError::new(
        ErrorKind::Cancelled,
        "the run was cancelled before the tool finished",
    )
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message")
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

    #[test]
    fn panic_messages_are_readable() {
        let caught = std::panic::catch_unwind(|| panic!("boom {}", 1)).unwrap_err();
        assert_eq!(panic_message(&*caught), "boom 1");
    }
}
