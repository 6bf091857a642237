//! How a tool runs, once the pipeline's layers let a call through: in the
//! sandbox ([`Sandboxed`]), elsewhere ([`RemoteTool`], such as another MCP
//! server's tool), or as an entry point's own trusted code.

use std::sync::Arc;

use serde_json::Value;
use wasm_agent_sandbox::context::{CallContext, ToolOutput};
use wasm_agent_sandbox::host::ToolHost;
use wasm_agent_sandbox::report::{CallAuditor, CallReport, RemoteOrigin};
use wasm_agent_sandbox::result::{CallError, ErrorKind};
use wasm_agent_sandbox::specs;

use crate::events::{CallEvents, ProgressSink};

/// A call as its target runs it: checked, approved, on one version.
pub struct Running<'a> {
    /// The entry point's id of the call.
    pub id: &'a str,
    /// The tool's name.
    pub tool: &'a str,
    /// The checked arguments.
    pub arguments: &'a Value,
    /// Who and what it is for (its approval note set, if it needed one).
    pub context: &'a CallContext,
    /// Who hears of its progress.
    pub events: Option<&'a Arc<dyn CallEvents>>,
}

/// What running a call gave.
pub struct Run {
    /// The output, or why there is none.
    pub result: Result<ToolOutput, CallError>,
    /// The id of the audit record the target wrote itself, if it did.
    pub recorded_as: Option<String>,
}

impl From<Result<ToolOutput, CallError>> for Run {
    fn from(result: Result<ToolOutput, CallError>) -> Self {
        Self {
            result,
            recorded_as: None,
        }
    }
}

/// How one tool runs.
#[async_trait::async_trait]
pub trait Target: Send + Sync + 'static {
    /// The version calls run on now: its component's digest, a remote
    /// tool's version; `None` once the tool is gone. Cached results and
    /// approvals are filed under it.
    fn version(&self) -> Option<String>;

    /// Checks arguments against the tool's schema (and its bounds); the
    /// version they were checked against, the one the call may run on.
    fn check(&self, arguments: &Value) -> Result<String, CallError>;

    /// Fills in where the tool runs, on the audit record of a call the
    /// pipeline records (the component, or the remote origin).
    fn describe(&self, report: &mut CallReport);

    /// Whether its runs write their own audit records (the sandbox's, which
    /// know what the run used).
    fn records_runs(&self) -> bool {
        false
    }

    /// The auditor its runs are recorded with, if it has one of its own
    /// (used when the pipeline has none).
    fn auditor(&self) -> Option<Arc<dyn CallAuditor>> {
        None
    }

    /// Whether its runs report progress themselves (a remote server's); the
    /// pipeline reports the time run for those that do not.
    fn reports_progress(&self) -> bool {
        false
    }

    /// Runs a call whose arguments were checked against `version`, on that
    /// version only.
    async fn run(&self, call: Running<'_>, version: &str) -> Run;
}

/// A component's tool in a [`ToolHost`], by the name the host knows it by.
pub struct Sandboxed {
    host: ToolHost,
    name: String,
}

impl Sandboxed {
    /// Tool `name` of `host`.
    pub fn new(host: ToolHost, name: impl Into<String>) -> Self {
        Self {
            host,
            name: name.into(),
        }
    }
}

#[async_trait::async_trait]
impl Target for Sandboxed {
    fn version(&self) -> Option<String> {
        self.host
            .digest_of(&self.name)
            .map(|digest| digest.to_string())
    }

    fn check(&self, arguments: &Value) -> Result<String, CallError> {
        let digest = self.host.check_for_call(&self.name, arguments)?;
        Ok(digest.to_string())
    }

    fn describe(&self, report: &mut CallReport) {
        report.component = self.host.component_of(&self.name);
    }

    fn records_runs(&self) -> bool {
        self.host.auditor().is_some()
    }

    fn auditor(&self) -> Option<Arc<dyn CallAuditor>> {
        self.host.auditor().cloned()
    }

    async fn run(&self, call: Running<'_>, version: &str) -> Run {
        let result = self
            .host
            .call_pinned(&self.name, call.arguments, version, call.context)
            .await;
        let recorded_as = self.records_runs().then(|| result.call_id.clone());
        Run {
            result: result.into_output(),
            recorded_as,
        }
    }
}

/// Runs calls of one tool somewhere else (another MCP server, a service):
/// not sandboxed. The pipeline treats it as every tool (arguments checked
/// against its schema, approval, cache, audit).
#[async_trait::async_trait]
pub trait RemoteTool: Send + Sync + 'static {
    /// Where the tool runs, for messages: `MCP server "github"`.
    fn origin(&self) -> String;

    /// What cached results and approvals are filed under: it changes
    /// whenever the tool may answer differently (another server version or
    /// definition).
    fn version(&self) -> String;

    /// Runs one call with checked arguments; `progress` receives what the
    /// far side reports. It must end soon after the context's cancellation
    /// fires (the pipeline does not drop it, so it can tell the far side).
    async fn call(
        &self,
        arguments: Value,
        context: &CallContext,
        progress: ProgressSink,
    ) -> Result<ToolOutput, CallError>;
}

/// A [`RemoteTool`] with its argument schema, as a [`Target`].
pub struct Remote {
    tool: Arc<dyn RemoteTool>,
    validator: Arc<jsonschema::Validator>,
    name: String,
}

impl Remote {
    /// `tool`, called `name`, whose arguments `validator` checks.
    pub fn new(
        name: impl Into<String>,
        tool: Arc<dyn RemoteTool>,
        validator: Arc<jsonschema::Validator>,
    ) -> Self {
        Self {
            tool,
            validator,
            name: name.into(),
        }
    }
}

#[async_trait::async_trait]
impl Target for Remote {
    fn version(&self) -> Option<String> {
        Some(format!("remote/{}", self.tool.version()))
    }

    fn check(&self, arguments: &Value) -> Result<String, CallError> {
        check_schema(&self.validator, &self.name, arguments)?;
        Ok(format!("remote/{}", self.tool.version()))
    }

    fn describe(&self, report: &mut CallReport) {
        report.remote = Some(RemoteOrigin {
            origin: self.tool.origin(),
            version: self.tool.version(),
        });
    }

    fn reports_progress(&self) -> bool {
        true
    }

    async fn run(&self, call: Running<'_>, _version: &str) -> Run {
        let progress = match call.events {
            Some(events) => {
                let events = events.clone();
                ProgressSink::new(move |progress| events.progress(progress))
            }
            None => ProgressSink::default(),
        };
        // Not raced against cancellation: the remote side ends the call
        // itself, telling the far end why.
        self.tool
            .call(call.arguments.clone(), call.context, progress)
            .await
            .into()
    }
}

/// Checks `arguments` of tool `name` against `validator`.
pub fn check_schema(
    validator: &jsonschema::Validator,
    name: &str,
    arguments: &Value,
) -> Result<(), CallError> {
    specs::check_value(validator, name, arguments)
        .map_err(|message| CallError::new(ErrorKind::InvalidArguments, message))
}
