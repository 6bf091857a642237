//! [`AgentTool`]: a tool an agent can call: sandboxed (a component in a
//! [`ToolHost`]), a trusted Rust closure, or remote (run elsewhere, such as
//! by another MCP server), with its per-tool settings.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use serde_json::Value;

use super::context::ToolContext;
use super::limit::OverflowStrategy;
use super::remote::RemoteTool;
use super::{Agent, AgentError};
use crate::provider::ToolDefinition;
use wasm_agent_pipeline::{
    AnsweredBy, CallSettings, Remote, Run, Running, Sandboxed, Target, Tool,
};
use wasm_agent_sandbox::approval::Approval;
use wasm_agent_sandbox::host::ToolHost;
use wasm_agent_sandbox::registry::{Annotations, ToolInfo};
use wasm_agent_sandbox::report::CallReport;
use wasm_agent_sandbox::result::{CallError, ErrorKind};

pub use wasm_agent_sandbox::context::ToolOutput;

type HostFuture = Pin<Box<dyn Future<Output = Result<ToolOutput, String>> + Send>>;
type HostFn = Arc<dyn Fn(Value, ToolContext) -> HostFuture + Send + Sync>;

/// How a tool runs.
#[derive(Clone)]
pub(crate) enum Runner {
    /// A component's tool, called through its host (isolated, policy-bound)
    /// by the name the host knows it by.
    Sandboxed { host: ToolHost, tool: String },
    /// A trusted closure in this process; arguments checked by the agent.
    Host(HostFn, Arc<jsonschema::Validator>),
    /// Run elsewhere; arguments checked by the agent.
    Remote(Arc<dyn RemoteTool>, Arc<jsonschema::Validator>),
}

/// Per-tool behaviour of the agent loop.
#[derive(Clone, Default)]
pub struct ToolSettings {
    /// Cache successful results this long (per tenant and principal);
    /// `None` disables.
    pub cache_ttl: Option<Duration>,
    /// Share cached results among a tenant's principals.
    pub cache_shared: bool,
    /// Whether a call needs approval first.
    pub requires_approval: Approval,
    /// Results longer than this many characters are shortened for the model.
    pub max_chars: Option<usize>,
    /// How to shorten an oversized result.
    pub overflow: OverflowStrategy,
    /// Send the schema in OpenAI strict mode.
    pub strict: bool,
    /// Who answers the questions of its calls: the person (default) or the
    /// operators, in the console.
    pub answered_by: AnsweredBy,
}

/// A tool an agent can call.
#[derive(Clone)]
pub struct AgentTool {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) parameters: Value,
    pub(crate) annotations: Annotations,
    pub(crate) runner: Runner,
    /// The tool's settings.
    pub settings: ToolSettings,
}

impl AgentTool {
    /// A sandboxed tool from `host`, as listed by [`ToolHost::tools`].
    pub fn sandboxed(host: &ToolHost, info: ToolInfo) -> Self {
        Self {
            runner: Runner::Sandboxed {
                host: host.clone(),
                tool: info.name.clone(),
            },
            name: info.name,
            description: info.description,
            parameters: info.parameters,
            annotations: info.annotations,
            settings: ToolSettings::default(),
        }
    }

    /// Every tool of `host`, sandboxed.
    pub fn all_from(host: &ToolHost) -> Vec<Self> {
        host.tools()
            .into_iter()
            .map(|info| Self::sandboxed(host, info))
            .collect()
    }

    /// A trusted tool run in this process: `run` receives the validated
    /// arguments and the run context; an `Err` is shown to the model.
    pub fn host<F, Fut, O>(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        run: F,
    ) -> Result<Self, AgentError>
    where
        F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, String>> + Send + 'static,
        O: Into<ToolOutput>,
    {
        let name = name.into();
        let validator = checked_tool(&name, &parameters)?;
        let run = Arc::new(run);
        let runner: HostFn = Arc::new(move |arguments, context| {
            let future = run(arguments, context);
            Box::pin(async move { future.await.map(Into::into) })
        });
        Ok(Self {
            name,
            description: description.into(),
            parameters,
            annotations: Annotations::default(),
            runner: Runner::Host(runner, Arc::new(validator)),
            settings: ToolSettings::default(),
        })
    }

    /// A tool run elsewhere (see [`RemoteTool`]). Calls need approval by
    /// default, unless `trusted` annotations say it neither destroys data
    /// nor reaches the world outside (untrusted ones are only shown);
    /// settings can say otherwise.
    pub fn remote(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        (annotations, trusted): (Annotations, bool),
        runner: Arc<dyn RemoteTool>,
    ) -> Result<Self, AgentError> {
        let name = name.into();
        let validator = checked_tool(&name, &parameters)?;
        let requires_approval = if !trusted || annotations.destructive || annotations.open_world {
            Approval::Always
        } else {
            Approval::Never
        };
        Ok(Self {
            name,
            description: description.into(),
            parameters,
            annotations,
            runner: Runner::Remote(runner, Arc::new(validator)),
            settings: ToolSettings {
                requires_approval,
                ..ToolSettings::default()
            },
        })
    }

    /// The tool's public name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the tool does.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// JSON Schema of its arguments.
    pub fn parameters(&self) -> &Value {
        &self.parameters
    }

    /// Behaviour hints.
    pub fn annotations(&self) -> Annotations {
        self.annotations
    }

    /// Whether it runs in the sandbox.
    pub fn is_sandboxed(&self) -> bool {
        matches!(self.runner, Runner::Sandboxed { .. })
    }

    /// Where a remote tool runs (`None` for sandboxed and host tools).
    pub fn remote_origin(&self) -> Option<String> {
        match &self.runner {
            Runner::Remote(remote, _) => Some(remote.origin()),
            _ => None,
        }
    }

    /// Caches successful results for `ttl` (per tenant and principal).
    pub fn cache_ttl(mut self, ttl: Duration) -> Self {
        self.settings.cache_ttl = Some(ttl);
        self
    }

    /// Shares cached results among a tenant's principals: only for tools
    /// whose results do not depend on who asks.
    pub fn cache_shared(mut self, shared: bool) -> Self {
        self.settings.cache_shared = shared;
        self
    }

    /// Requires approval before calls.
    pub fn requires_approval(mut self, approval: Approval) -> Self {
        self.settings.requires_approval = approval;
        self
    }

    /// Shortens results over `max_chars` characters with `overflow`.
    pub fn max_chars(mut self, max_chars: usize, overflow: OverflowStrategy) -> Self {
        self.settings.max_chars = Some(max_chars);
        self.settings.overflow = overflow;
        self
    }

    /// Sends the schema in OpenAI strict mode.
    pub fn strict(mut self, strict: bool) -> Self {
        self.settings.strict = strict;
        self
    }

    /// Replaces all settings.
    pub fn with_settings(mut self, settings: ToolSettings) -> Self {
        self.settings = settings;
        self
    }

    pub(crate) fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.parameters.clone(),
            strict: self.settings.strict,
        }
    }
}

impl ToolSettings {
    /// The settings of the call pipeline's steps.
    pub fn call_settings(&self) -> CallSettings {
        CallSettings {
            approval: self.requires_approval.clone(),
            cache_ttl: self.cache_ttl,
            cache_shared: self.cache_shared,
            answered_by: self.answered_by,
        }
    }
}

impl AgentTool {
    /// The tool as the call pipeline calls it, in `agent`'s runs.
    /// The name the tool goes down the pipeline by: a sandboxed tool's name
    /// in the host (code mode's `run_code` is its interpreter's), so access
    /// rules, approvals and records name the tool that runs.
    pub(crate) fn pipeline_name(&self) -> &str {
        match &self.runner {
            Runner::Sandboxed { tool, .. } => tool,
            _ => &self.name,
        }
    }

    pub(crate) fn pipeline_tool(&self, agent: &Agent) -> Tool {
        let target: Arc<dyn Target> = match &self.runner {
            Runner::Sandboxed { host, tool } => Arc::new(Sandboxed::new(host.clone(), tool)),
            Runner::Remote(remote, validator) => {
                Arc::new(Remote::new(&self.name, remote.clone(), validator.clone()))
            }
            Runner::Host(run, validator) => Arc::new(InProcess {
                name: self.name.clone(),
                run: run.clone(),
                validator: validator.clone(),
                agent: agent.clone(),
            }),
        };
        Tool {
            name: self.pipeline_name().to_string(),
            target,
            settings: self.settings.call_settings(),
        }
    }
}

/// A trusted closure of this process as the pipeline's target.
struct InProcess {
    name: String,
    run: HostFn,
    validator: Arc<jsonschema::Validator>,
    agent: Agent,
}

#[async_trait::async_trait]
impl Target for InProcess {
    fn version(&self) -> Option<String> {
        Some("host".into())
    }

    fn check(&self, arguments: &Value) -> Result<String, CallError> {
        wasm_agent_pipeline::target::check_schema(&self.validator, &self.name, arguments)?;
        Ok("host".into())
    }

    fn describe(&self, _: &mut CallReport) {}

    async fn run(&self, call: Running<'_>, _version: &str) -> Run {
        let context = ToolContext {
            call: call.context.clone(),
            call_id: call.id.to_string(),
            tool: self.name.clone(),
            agent: self.agent.clone(),
        };
        // A panicking host tool fails its call, not the run.
        let running = AssertUnwindSafe((self.run)(call.arguments.clone(), context)).catch_unwind();
        let result = tokio::select! {
            result = running => match result {
                Ok(result) => result.map_err(|message| CallError::new(ErrorKind::Failed, message)),
                Err(panic) => Err(CallError::new(
                    ErrorKind::Trap,
                    format!("the tool panicked: {}", panic_message(&*panic)),
                )),
            },
            () = call.context.cancellation.cancelled() => Err(CallError::new(
                ErrorKind::Cancelled,
                "the run was cancelled before the tool finished",
            )),
        };
        result.into()
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message")
}

/// A valid name and a usable schema, compiled.
fn checked_tool(name: &str, parameters: &Value) -> Result<jsonschema::Validator, AgentError> {
    if !wasm_agent_sandbox::specs::valid_name(name) {
        return Err(AgentError::BadTool(format!(
            "tool name {name:?} is invalid: use 1-64 characters of [a-zA-Z0-9_-]"
        )));
    }
    wasm_agent_sandbox::specs::compile_schema(parameters)
        .map_err(|e| AgentError::BadTool(format!("tool {name:?} has an unusable schema: {e}")))
}

impl std::fmt::Debug for AgentTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentTool")
            .field("name", &self.name)
            .field("sandboxed", &self.is_sandboxed())
            .finish_non_exhaustive()
    }
}
