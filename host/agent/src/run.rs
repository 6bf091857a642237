//! One run of the loop: ask the model, run the tools it chose in parallel
//! batches, feed the results back, until it answers or a limit is reached.

use std::sync::Arc;
use std::time::Duration;

use serde::{Serialize, Serializer};
use tokio::sync::mpsc;
use tracing::Instrument;

use super::spans;
use super::tool::AgentTool;
use super::{Agent, AgentError};
use crate::provider::{ChatRequest, Message, ToolCallRequest, ToolResultMessage, Usage};
use wasm_agent_sandbox::approval::ApprovalRequest;
use wasm_agent_sandbox::context::CallContext;
use wasm_agent_sandbox::result::{Artifact, CallError};

/// How to run.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Run, session, user and tenant ids, metadata and cancellation.
    pub context: CallContext,
    /// Earlier messages of the conversation (from [`RunOutput::messages`]).
    pub history: Vec<Message>,
    /// Overrides the agent's roundtrip limit.
    pub max_tool_roundtrips: Option<usize>,
}

impl RunOptions {
    /// Defaults: a fresh context, no history.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the run context.
    pub fn context(mut self, context: CallContext) -> Self {
        self.context = context;
        self
    }
    /// Continues a conversation.
    pub fn history(mut self, messages: Vec<Message>) -> Self {
        self.history = messages;
        self
    }
    /// Sets the roundtrip limit of this run.
    pub fn max_tool_roundtrips(mut self, roundtrips: usize) -> Self {
        self.max_tool_roundtrips = Some(roundtrips);
        self
    }
}

/// Why a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model gave its answer.
    Answered,
    /// The model still wanted tools after the roundtrip limit.
    MaxToolRoundtrips,
    /// The run was cancelled.
    Cancelled,
}

/// How an oversized result was shortened for the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shortened {
    /// Cut to fit (JSON-aware).
    Truncated,
    /// Summarized by the summarizer model.
    Summarized,
}

impl std::fmt::Display for Shortened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Shortened::Truncated => "truncated",
            Shortened::Summarized => "summarized",
        })
    }
}

/// One tool call of a run, with everything it produced.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolCallRecord {
    /// The call's id.
    pub id: String,
    /// The tool.
    pub name: String,
    /// The arguments as the model wrote them.
    pub arguments: String,
    /// The full result text (empty on error).
    pub content: String,
    /// Structured data for the application.
    pub artifacts: Vec<Artifact>,
    /// Why it failed, if it did.
    pub error: Option<CallError>,
    /// Wall-clock time.
    #[serde(rename = "duration_ms", serialize_with = "millis")]
    pub duration: Duration,
    /// Whether the result came from the cache.
    pub cached: bool,
    /// What the model was shown (`Error: ...`, or a shortened result).
    pub model_content: String,
    /// How the result was shortened for the model, if it was.
    pub shortened: Option<Shortened>,
}

impl ToolCallRecord {
    /// True when the call succeeded.
    pub fn is_ok(&self) -> bool {
        self.error.is_none()
    }
}

/// What a run produced.
#[derive(Clone, Debug, Serialize)]
pub struct RunOutput {
    /// The run's id.
    pub run_id: String,
    /// The session.
    pub session_id: String,
    /// The model's final text.
    pub text: String,
    /// Every tool call, in order.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Tokens used by every model request of the run (router and summaries
    /// included).
    pub usage: Usage,
    /// Model turns whose tool calls were run.
    pub roundtrips: usize,
    /// Why the run ended.
    pub stop_reason: StopReason,
    /// The tools the model was offered.
    pub tools_offered: Vec<String>,
    /// The whole conversation, to continue it in a later run.
    #[serde(skip)]
    pub messages: Vec<Message>,
}

/// Something that happened during a streamed run.
#[derive(Debug)]
pub enum AgentEvent {
    /// A piece of the model's text.
    TextDelta(String),
    /// A tool call began.
    ToolCallStarted {
        /// The call's id.
        id: String,
        /// The tool.
        name: String,
        /// The arguments as the model wrote them.
        arguments: String,
    },
    /// A call waits for approval.
    ApprovalRequested(ApprovalRequest),
    /// A remote tool reported how far its call is.
    ToolProgress {
        /// The call's id.
        id: String,
        /// What it reported.
        progress: crate::remote::Progress,
    },
    /// A tool call ended.
    ToolCallFinished(ToolCallRecord),
    /// The run ended.
    Done(Box<Result<RunOutput, AgentError>>),
}

/// The events of a streamed run; the last one is [`AgentEvent::Done`].
pub struct RunStream {
    receiver: mpsc::UnboundedReceiver<AgentEvent>,
    _cancel_on_drop: tokio_util::sync::DropGuard,
}

impl RunStream {
    /// The next event, or `None` after `Done`.
    pub async fn next(&mut self) -> Option<AgentEvent> {
        self.receiver.recv().await
    }
}

pub(super) type EventSender = mpsc::UnboundedSender<AgentEvent>;

impl Agent {
    /// Runs the agent on `input` until the model answers.
    ///
    /// Tool failures never end a run: they go back to the model as
    /// `Error: ...` results. Only a failed model request (after retries)
    /// is an error; cancellation ends the run with [`StopReason::Cancelled`].
    pub async fn run(&self, input: &str, options: RunOptions) -> Result<RunOutput, AgentError> {
        self.run_inner(input, options, None).await
    }

    /// Runs the agent in a task and streams what happens.
    ///
    /// Dropping the stream cancels the run.
    pub fn stream(&self, input: &str, mut options: RunOptions) -> RunStream {
        let (sender, receiver) = mpsc::unbounded_channel();
        // Only this run's token: the caller's may be shared with other work.
        let token = options.context.cancellation.child_token();
        options.context.cancellation = token.clone();
        let agent = self.clone();
        let input = input.to_string();
        tokio::spawn(async move {
            let events = sender.clone();
            let run =
                tokio::spawn(async move { agent.run_inner(&input, options, Some(&events)).await });
            // A panicking host tool must not leave the consumer waiting forever.
            let outcome = run
                .await
                .unwrap_or_else(|e| Err(AgentError::Aborted(e.to_string())));
            let _ = sender.send(AgentEvent::Done(Box::new(outcome)));
        });
        RunStream {
            receiver,
            _cancel_on_drop: token.drop_guard(),
        }
    }

    async fn run_inner(
        &self,
        input: &str,
        options: RunOptions,
        events: Option<&EventSender>,
    ) -> Result<RunOutput, AgentError> {
        let span = spans::run(&options.context.run_id, &options.context.session_id);
        let outcome = self
            .run_steps(input, options, events)
            .instrument(span.clone())
            .await;
        match &outcome {
            Ok(output) => spans::finish_run(&span, &output.usage, output.roundtrips, None),
            Err(AgentError::ModelFailed { partial, .. }) => spans::finish_run(
                &span,
                &partial.usage,
                partial.roundtrips,
                Some("model_failed"),
            ),
            Err(_) => spans::finish_run(&span, &Usage::default(), 0, Some("agent_error")),
        }
        outcome
    }

    async fn run_steps(
        &self,
        input: &str,
        options: RunOptions,
        events: Option<&EventSender>,
    ) -> Result<RunOutput, AgentError> {
        // Sandboxed tools of this run delegate through this agent.
        let context = options.context.delegator(Arc::new(self.clone()));
        let max_roundtrips = options
            .max_tool_roundtrips
            .unwrap_or(self.inner.options.max_tool_roundtrips);
        let mut usage = Usage::default();
        let all_tools: Arc<[AgentTool]> = self.tools_for(&context).into();
        // Tools the run's tools call (`host.call-tool`) take the path of the
        // model's own calls, among all the run's tools.
        let context = context.tool_caller(self.run_tool_caller(all_tools.clone(), events.cloned()));
        let tools = match &self.inner.code_mode {
            // One tool whose code calls the others.
            Some(mode) => vec![mode.run_code_tool(&all_tools)?],
            None => tokio::select! {
                tools = self.route(input, all_tools.to_vec(), &mut usage) => tools,
                // Cancelled while routing: the loop below stops at once.
                () = context.cancellation.cancelled() => Vec::new(),
            },
        };
        let mut output = RunOutput {
            run_id: context.run_id.clone(),
            session_id: context.session_id.clone(),
            text: String::new(),
            tool_calls: Vec::new(),
            usage,
            roundtrips: 0,
            stop_reason: StopReason::Answered,
            tools_offered: tools.iter().map(|t| t.name.clone()).collect(),
            messages: Vec::new(),
        };
        let mut request = ChatRequest {
            model: String::new(),
            system: self.inner.instructions.clone(),
            messages: options.history,
            tools: tools.iter().map(AgentTool::definition).collect(),
            max_tokens: self.inner.options.max_tokens,
        };
        request.messages.push(Message::User(input.to_string()));
        let show_text = events.map(|sender| {
            let sender = sender.clone();
            move |text: &str| {
                let _ = sender.send(AgentEvent::TextDelta(text.to_string()));
            }
        });
        loop {
            let sink = show_text
                .as_ref()
                .map(|f| f as &(dyn Fn(&str) + Send + Sync));
            let answer = tokio::select! {
                answer = self.inner.model.chat(&request, sink) => answer,
                () = context.cancellation.cancelled() => {
                    output.stop_reason = StopReason::Cancelled;
                    break;
                }
            };
            let answer = match answer {
                Ok(answer) => answer,
                Err(source) => {
                    output.messages = request.messages;
                    return Err(AgentError::ModelFailed {
                        source,
                        partial: Box::new(output),
                    });
                }
            };
            output.usage += answer.usage;
            output.text = answer.text.clone();
            let mut calls = answer.tool_calls;
            for (index, call) in calls.iter_mut().enumerate() {
                if call.id.is_empty() {
                    call.id = format!("call_{}_{}", output.roundtrips + 1, index + 1);
                }
            }
            request.messages.push(Message::Assistant {
                text: answer.text,
                tool_calls: calls.clone(),
            });
            if calls.is_empty() {
                break;
            }
            if output.roundtrips >= max_roundtrips {
                // Every tool call needs an answer for the history to stay valid.
                let note = format!(
                    "Error: not run; the run reached its limit of {max_roundtrips} tool roundtrips"
                );
                for call in &calls {
                    request
                        .messages
                        .push(result_message(call, note.clone(), true));
                }
                output.stop_reason = StopReason::MaxToolRoundtrips;
                if output.text.is_empty() {
                    output.text = format!(
                        "Stopped: the model still wanted tools after {max_roundtrips} roundtrips \
                         and gave no final answer."
                    );
                }
                break;
            }
            output.roundtrips += 1;
            for batch in calls.chunks(self.inner.options.parallel_tool_calls) {
                let runs = batch
                    .iter()
                    .map(|call| self.execute(call, &tools, &context, events));
                for (record, spent) in futures::future::join_all(runs).await {
                    output.usage += spent;
                    request.messages.push(result_message(
                        &ToolCallRequest {
                            id: record.id.clone(),
                            name: record.name.clone(),
                            arguments: String::new(),
                        },
                        record.model_content.clone(),
                        !record.is_ok(),
                    ));
                    if let Some(sender) = events {
                        let _ = sender.send(AgentEvent::ToolCallFinished(record.clone()));
                    }
                    output.tool_calls.push(record);
                }
            }
            if context.cancellation.is_cancelled() {
                output.stop_reason = StopReason::Cancelled;
                break;
            }
        }
        output.messages = request.messages;
        Ok(output)
    }

    /// The run's tools: the resolver's choice, or all of them.
    fn tools_for(&self, context: &CallContext) -> Vec<AgentTool> {
        let mut all = self.tools();
        // Under this agent's rules and those of the request it serves (a
        // delegated run's caller's).
        all.retain(|tool| self.inner.pipeline.allows(context, tool.pipeline_name()));
        match &self.inner.resolver {
            Some(resolve) => resolve(context, &all),
            None => all,
        }
    }

    /// Narrows `tools` with the router, if there is one and there are more
    /// tools than it may offer; any failure offers them all.
    async fn route(&self, input: &str, tools: Vec<AgentTool>, usage: &mut Usage) -> Vec<AgentTool> {
        let Some(settings) = &self.inner.router else {
            return tools;
        };
        if tools.len() <= settings.max_tools {
            return tools;
        }
        let definitions: Vec<_> = tools.iter().map(AgentTool::definition).collect();
        let picked = match settings
            .router
            .select(input, &definitions, settings.max_tools)
            .await
        {
            Ok(selection) => {
                *usage += selection.usage;
                let mut names = selection.tools;
                let mut seen = std::collections::HashSet::new();
                names.retain(|name| {
                    tools.iter().any(|t| &t.name == name) && seen.insert(name.clone())
                });
                names.truncate(settings.max_tools);
                names
            }
            Err(error) => {
                tracing::warn!(%error, "tool router failed; offering every tool");
                return tools;
            }
        };
        if picked.len() < settings.min_tools.max(1) {
            tracing::warn!(
                picked = picked.len(),
                min = settings.min_tools,
                "tool router picked too few tools; offering every tool"
            );
            return tools;
        }
        picked
            .iter()
            .filter_map(|name| tools.iter().find(|t| &t.name == name).cloned())
            .collect()
    }
}

fn result_message(call: &ToolCallRequest, content: String, is_error: bool) -> Message {
    Message::ToolResult(ToolResultMessage {
        call_id: call.id.clone(),
        name: call.name.clone(),
        content,
        is_error,
    })
}

fn millis<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64((duration.as_secs_f64() * 1_000_000.0).round() / 1000.0)
}
