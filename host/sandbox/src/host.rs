//! [`ToolHost`]: load components, list their tools, call them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;
use tokio::sync::broadcast;

use crate::context::CallContext;
use crate::events::{EventBus, ToolEvent};
use crate::registry::{ComponentEntry, Registry, RegistryError, ToolEntry, ToolInfo};
use crate::result::{CallError, ErrorKind, ToolCallResult};
use crate::runtime::{
    Allocator, CacheOutcome, CallId, CallPolicy, CallScope, CompileCache, HostImports, LoadError,
    Sandbox,
};
use crate::specs::{self, SpecError};
use wasm_agent_policy::{Policy, PolicyError};
use wasm_agent_session::{InMemorySessionStore, SessionStore};

/// A call's arguments as the caller has them.
#[derive(Clone, Copy)]
enum Arguments<'a> {
    /// JSON text, parsed once to be validated.
    Text(&'a str),
    /// Parsed already; serialised once for the tool.
    Parsed(&'a Value),
}

/// Default number of calls that may run at once (and instance-pool slots).
pub const DEFAULT_CONCURRENCY: u32 = 128;

/// Why a component could not be added to the host.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The component file cannot be read.
    #[error("cannot read component {path}: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why it cannot be read.
        reason: std::io::Error,
    },
    /// The component is not a usable tool component.
    #[error("component {component}: {reason}")]
    Load {
        /// The component's name.
        component: String,
        /// What is wrong with it.
        reason: LoadError,
    },
    /// The policy cannot be enforced.
    #[error("component {component}: policy {reason}")]
    Policy {
        /// The component's name.
        component: String,
        /// What is wrong with the policy.
        reason: PolicyError,
    },
    /// The component's tool list is unusable.
    #[error("component {component}: {reason}")]
    Spec {
        /// The component's name.
        component: String,
        /// What is wrong with its tool list.
        reason: SpecError,
    },
    /// Two components offer the same tool name.
    #[error(
        "tool {tool:?} of component {component} is already offered by component {existing}; \
         give one of them a prefix (config key `prefix`)"
    )]
    DuplicateTool {
        /// The clashing tool name.
        tool: String,
        /// The component being loaded.
        component: String,
        /// The component that already offers the name.
        existing: String,
    },
    /// A component with that name is loaded already.
    #[error("a component named {0:?} is already loaded")]
    DuplicateComponent(String),
    /// An invalid component name or prefix.
    #[error("{0}")]
    BadName(String),
}

impl From<RegistryError> for HostError {
    fn from(error: RegistryError) -> Self {
        match error {
            RegistryError::DuplicateTool {
                tool,
                component,
                existing,
            } => HostError::DuplicateTool {
                tool,
                component,
                existing,
            },
            RegistryError::DuplicateComponent(id) => HostError::DuplicateComponent(id),
        }
    }
}

/// Where a component comes from.
pub enum ComponentSource {
    /// A `.wasm` file.
    File(PathBuf),
    /// Bytes in memory, with a name for messages.
    Bytes {
        /// The component's name.
        name: String,
        /// The component's bytes.
        bytes: Vec<u8>,
    },
}

impl From<&Path> for ComponentSource {
    fn from(path: &Path) -> Self {
        ComponentSource::File(path.to_path_buf())
    }
}

impl From<PathBuf> for ComponentSource {
    fn from(path: PathBuf) -> Self {
        ComponentSource::File(path)
    }
}

impl From<&str> for ComponentSource {
    fn from(path: &str) -> Self {
        ComponentSource::File(path.into())
    }
}

/// How to add a component.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// The component's name (default: the file stem).
    pub name: Option<String>,
    /// Prepended to each of its tool names.
    pub prefix: Option<String>,
    /// The policy its calls run under.
    pub policy: Policy,
    /// The name its session state is kept under. Without one, state is kept
    /// under the component's content digest, so only the very same bytes
    /// see it; a name (a config alias) keeps it across versions. Either way
    /// a component with another identity never sees it.
    pub state_scope: Option<String>,
}

impl LoadOptions {
    /// Options with this policy.
    pub fn new(policy: Policy) -> Self {
        Self {
            policy,
            ..Self::default()
        }
    }
    /// Sets the component name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
    /// Sets the tool-name prefix.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }
    /// Keeps session state under this name (an operator's alias) instead of
    /// the content digest.
    pub fn state_scope(mut self, name: impl Into<String>) -> Self {
        self.state_scope = Some(name.into());
        self
    }
}

/// What loading a component did.
#[derive(Clone, Debug, Serialize)]
pub struct LoadReport {
    /// The component's name.
    pub component: String,
    /// Public names of its tools.
    pub tools: Vec<String>,
    /// Whether the compiled code came from the cache.
    pub cache: CacheOutcome,
    /// Time to compile or load the code.
    #[serde(serialize_with = "millis")]
    pub load_time: Duration,
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}

/// Builds a [`ToolHost`].
pub struct ToolHostBuilder {
    concurrency: u32,
    pooling: bool,
    cache_dir: Option<PathBuf>,
    sessions: Option<Arc<dyn SessionStore>>,
    events: EventBus,
}

impl Default for ToolHostBuilder {
    fn default() -> Self {
        Self {
            concurrency: DEFAULT_CONCURRENCY,
            pooling: true,
            cache_dir: CompileCache::default_dir(),
            sessions: None,
            events: EventBus::default(),
        }
    }
}

impl ToolHostBuilder {
    /// How many calls may run at once (default 128); also the pool size.
    pub fn max_concurrency(mut self, calls: u32) -> Self {
        self.concurrency = calls.max(1);
        self
    }
    /// Whether to try the pooling allocator (default yes, with fallback).
    pub fn pooling(mut self, enable: bool) -> Self {
        self.pooling = enable;
        self
    }
    /// Where compiled components are cached (default `~/.cache/wasm-agent`).
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }
    /// Compiles every component afresh.
    pub fn no_cache(mut self) -> Self {
        self.cache_dir = None;
        self
    }
    /// Where tools' session state lives (default: in memory).
    pub fn session_store(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.sessions = Some(store);
        self
    }
    /// Publishes events on this bus (default: a new one).
    pub fn event_bus(mut self, events: EventBus) -> Self {
        self.events = events;
        self
    }
    /// Builds the host.
    pub fn build(self) -> Result<ToolHost, LoadError> {
        let sandbox = Sandbox::new(
            self.concurrency,
            self.pooling,
            CompileCache::new(self.cache_dir),
        )?;
        Ok(ToolHost {
            inner: Arc::new(Inner {
                sandbox,
                tools: Registry::default(),
                sessions: self
                    .sessions
                    .unwrap_or_else(|| Arc::new(InMemorySessionStore::default())),
                events: self.events,
                next_call: AtomicU64::new(1),
            }),
        })
    }
}

/// Runs sandboxed tools. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct ToolHost {
    inner: Arc<Inner>,
}

struct Inner {
    sandbox: Sandbox,
    tools: Registry,
    sessions: Arc<dyn SessionStore>,
    events: EventBus,
    next_call: AtomicU64,
}

/// A component compiled and checked, not yet offered.
struct Prepared {
    report: LoadReport,
    entries: Vec<ToolEntry>,
}

impl ToolHost {
    /// A builder with the defaults.
    pub fn builder() -> ToolHostBuilder {
        ToolHostBuilder::default()
    }

    /// How instances are allocated (pooling, or on-demand as fallback).
    pub fn allocator(&self) -> Allocator {
        self.inner.sandbox.allocator()
    }

    /// Loads a component under `policy`.
    pub async fn load(
        &self,
        source: impl Into<ComponentSource>,
        policy: Policy,
    ) -> Result<LoadReport, HostError> {
        self.load_with(source, LoadOptions::new(policy)).await
    }

    /// Loads a component: compiles it (or takes it from the cache), runs its
    /// `list-tools` under its policy, checks every spec, and adds its tools.
    pub async fn load_with(
        &self,
        source: impl Into<ComponentSource>,
        options: LoadOptions,
    ) -> Result<LoadReport, HostError> {
        let prepared = self.prepare(source.into(), options).await?;
        self.install(prepared, false)
    }

    /// Loads a new version of a component, replacing the tools of the loaded
    /// component with the same name in one step (or adding them if there is
    /// none). If the new version fails to load, the old one stays. Calls in
    /// flight finish on the version they started on.
    pub async fn reload_with(
        &self,
        source: impl Into<ComponentSource>,
        options: LoadOptions,
    ) -> Result<LoadReport, HostError> {
        let prepared = self.prepare(source.into(), options).await?;
        self.install(prepared, true)
    }

    /// Compiles a component and checks its tool specs, without adding them.
    async fn prepare(
        &self,
        source: ComponentSource,
        options: LoadOptions,
    ) -> Result<Prepared, HostError> {
        let (default_name, bytes) = match source {
            ComponentSource::File(path) => {
                let bytes = tokio::fs::read(&path)
                    .await
                    .map_err(|reason| HostError::Read {
                        path: path.clone(),
                        reason,
                    })?;
                let stem = path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "component".into());
                (stem, bytes)
            }
            ComponentSource::Bytes { name, bytes } => (name, bytes),
        };
        let id = options.name.unwrap_or(default_name);
        let prefix = options.prefix.unwrap_or_default();
        if !prefix.is_empty() && !specs::valid_name(&prefix) {
            return Err(HostError::BadName(format!(
                "prefix {prefix:?} may only contain [a-zA-Z0-9_-]"
            )));
        }
        // Resolving reads folders and the environment, and compiling takes
        // long: both run on the blocking pool, never on an async worker.
        let policy = options.policy;
        let policy = blocking(move || policy.validate_and_resolve())
            .await
            .map_err(|reason| HostError::Policy {
                component: id.clone(),
                reason,
            })?;
        let host = self.clone();
        let loaded = blocking(move || host.inner.sandbox.load(&bytes))
            .await
            .map_err(|reason| HostError::Load {
                component: id.clone(),
                reason,
            })?;
        let sandbox = &self.inner.sandbox;
        let (cache, load_time) = (loaded.cache, loaded.load_time);
        let state_scope: Arc<str> = match &options.state_scope {
            Some(name) => format!("alias:{name}").into(),
            None => format!("sha256:{}", hex::encode(loaded.digest)).into(),
        };
        let component = Arc::new(ComponentEntry {
            id: id.as_str().into(),
            state_scope,
            loaded,
            dependencies: Arc::new(policy.dependencies.clone()),
            policy: CallPolicy::new(policy),
        });
        let imports = self.host_imports(
            &component,
            &format!("{id}/list-tools"),
            "load".into(),
            "list-tools",
            &CallContext::default(),
        );
        let specs = sandbox
            .list_tools(&component.loaded, &component.policy, imports)
            .await
            .map_err(|e| HostError::Load {
                component: id.clone(),
                reason: LoadError::ListTools(e),
            })?;
        let entries =
            specs::check_specs(specs, &prefix, &component).map_err(|reason| HostError::Spec {
                component: id.clone(),
                reason,
            })?;
        Ok(Prepared {
            report: LoadReport {
                component: id,
                tools: entries.iter().map(|e| e.info.name.clone()).collect(),
                cache,
                load_time,
            },
            entries,
        })
    }

    /// Adds a prepared component's tools, first removing those of the
    /// component with the same name when `replace` is set.
    fn install(&self, prepared: Prepared, replace: bool) -> Result<LoadReport, HostError> {
        let Prepared { report, entries } = prepared;
        self.inner
            .tools
            .install(&report.component, entries, replace)?;
        Ok(report)
    }

    /// Whether the host offers a tool with this public name.
    pub fn has_tool(&self, name: &str) -> bool {
        self.inner.tools.contains(name)
    }

    /// The tool with this public name, if the host offers it.
    pub fn tool(&self, name: &str) -> Option<ToolInfo> {
        self.inner.tools.get(name).map(|t| t.info.clone())
    }

    /// Every tool the host offers, by name.
    pub fn tools(&self) -> Vec<ToolInfo> {
        self.inner.tools.infos()
    }

    /// Removes one tool; returns whether it existed. Calls in flight finish.
    pub fn remove(&self, name: &str) -> bool {
        self.inner.tools.remove(name)
    }

    /// Removes every tool of a component; returns how many there were.
    pub fn remove_component(&self, component: &str) -> usize {
        self.inner.tools.remove_component(component)
    }

    /// Receives tool started/finished/emitted events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<ToolEvent> {
        self.inner.events.subscribe()
    }

    /// The event bus (to publish application events beside the tools').
    pub fn events(&self) -> &EventBus {
        &self.inner.events
    }

    /// Calls a tool with JSON-text arguments. Every failure, whether invalid
    /// arguments, a limit, a trap or the tool's own error, is in the result.
    pub async fn call(&self, name: &str, arguments: &str, context: &CallContext) -> ToolCallResult {
        self.call_with(name, Arguments::Text(arguments), context)
            .await
    }

    /// Calls a tool with arguments already parsed (as an agent loop or an MCP
    /// server has them): validated as they are, serialised once for the tool.
    pub async fn call_json(
        &self,
        name: &str,
        arguments: &Value,
        context: &CallContext,
    ) -> ToolCallResult {
        self.call_with(name, Arguments::Parsed(arguments), context)
            .await
    }

    async fn call_with(
        &self,
        name: &str,
        arguments: Arguments<'_>,
        context: &CallContext,
    ) -> ToolCallResult {
        let started = Instant::now();
        let call_id = format!(
            "call-{}",
            self.inner.next_call.fetch_add(1, Ordering::Relaxed)
        );
        let entry = self.inner.tools.get(name);
        let mut result = ToolCallResult {
            tool: name.to_string(),
            call_id: call_id.clone(),
            content: String::new(),
            artifacts: Vec::new(),
            error: None,
            duration: Duration::ZERO,
        };
        self.inner.events.publish_with(|| ToolEvent::Started {
            call_id: call_id.clone(),
            tool: name.to_string(),
            run_id: context.run_id.clone(),
            session_id: context.session_id.clone(),
        });
        let outcome = match entry {
            None => Err(self.unknown_tool(name)),
            Some(entry) => self.run_call(&entry, &call_id, arguments, context).await,
        };
        match outcome {
            Ok(output) => {
                result.content = output.content;
                result.artifacts = output.artifacts;
            }
            Err(error) => result.error = Some(error),
        }
        result.duration = started.elapsed();
        self.inner.events.publish_with(|| ToolEvent::Finished {
            call_id,
            tool: name.to_string(),
            duration_ms: result.duration.as_secs_f64() * 1000.0,
            error: result.error.as_ref().map(|e| e.kind),
        });
        result
    }

    async fn run_call(
        &self,
        entry: &ToolEntry,
        call_id: &str,
        arguments: Arguments<'_>,
        context: &CallContext,
    ) -> Result<crate::runtime::GuestOutput, CallError> {
        let policy = &entry.component.policy;
        let invalid = |message| CallError::new(ErrorKind::InvalidArguments, message);
        let text = match arguments {
            Arguments::Text(text) => {
                specs::check_arguments_size(text, policy)?;
                let value: Value = serde_json::from_str(text)
                    .map_err(|e| invalid(format!("the arguments are not valid JSON: {e}")))?;
                specs::check_value(&entry.validator, &entry.info.name, &value).map_err(invalid)?;
                std::borrow::Cow::Borrowed(text)
            }
            Arguments::Parsed(value) => {
                let text = value.to_string();
                specs::check_arguments_size(&text, policy)?;
                specs::check_value(&entry.validator, &entry.info.name, value).map_err(invalid)?;
                std::borrow::Cow::Owned(text)
            }
        };
        let arguments = text.as_ref();
        let imports = self.host_imports(
            &entry.component,
            &entry.info.name,
            context.session_id.clone(),
            call_id,
            context,
        );
        self.inner
            .sandbox
            .call(
                &entry.component.loaded,
                &entry.component.policy,
                imports,
                &entry.guest_name,
                arguments,
                &context.to_wit(),
            )
            .await
    }

    /// The error for a call of a tool the host does not offer, with a
    /// "did you mean" hint.
    pub fn unknown_tool(&self, name: &str) -> CallError {
        self.inner.tools.unknown_tool(name)
    }

    fn host_imports(
        &self,
        component: &ComponentEntry,
        tool: &str,
        session_id: String,
        call_id: &str,
        context: &CallContext,
    ) -> HostImports {
        let scope = CallScope {
            call: CallId {
                tool: tool.into(),
                call_id: call_id.into(),
            },
            session_id,
            state_scope: component.state_scope.clone(),
            context,
        };
        HostImports::new(
            scope,
            &component.policy,
            component.dependencies.clone(),
            self.inner.sessions.clone(),
            self.inner.events.clone(),
        )
    }
}

/// Runs blocking `work` on tokio's blocking pool; a panic in it resumes here.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(error) => std::panic::resume_unwind(error.into_panic()),
    }
}
