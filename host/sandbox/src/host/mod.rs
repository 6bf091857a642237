//! [`ToolHost`]: load components, list their tools, call them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::broadcast;
use tracing::Instrument;

use crate::context::CallContext;
use crate::events::{EventBus, ToolEvent};
use crate::observe::CallObserver;
use crate::registry::{ComponentEntry, Registry, ToolEntry};
use crate::report::{CallAuditor, ComponentIdentity};
use crate::result::{CallError, ErrorKind, ToolCallResult};
use crate::runtime::{
    Allocator, CallId, CallPolicy, CallScope, HostImports, KeptInstances, LoadError, LoadFileError,
    Sandbox,
};
use crate::{spans, specs};
use wasm_agent_policy::Policy;
use wasm_agent_session::SessionStore;

mod audited;
use audited::Unfinished;
mod builder;
mod offered;
mod options;
mod preparing;
use preparing::{blocking, check_interpreter_policy, identify, resolve_policy};

pub use crate::runtime::{HostGauges, PoolUse};
pub use builder::ToolHostBuilder;
pub use options::{
    ComponentSource, DEFAULT_CONCURRENCY, DEFAULT_KEPT_INSTANCES, HostError, LoadOptions,
    LoadReport,
};

/// A call's arguments as the caller has them.
#[derive(Clone, Copy)]
enum Arguments<'a> {
    /// JSON text, parsed once to be validated.
    Text(&'a str),
    /// Parsed already; serialised once for the tool.
    Parsed(&'a Value),
    /// Parsed and checked already against the schema of the component
    /// version `digest`, which alone may run the call.
    Checked { value: &'a Value, digest: &'a str },
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
    observer: Option<Arc<dyn CallObserver>>,
    auditor: Option<Arc<dyn CallAuditor>>,
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

    /// A handle on the host's live counters: refusals by kind and the
    /// instance pool's use (it keeps nothing else of the host alive).
    pub fn gauges(&self) -> HostGauges {
        self.inner.sandbox.gauges()
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

    /// Loads several components at once: they compile (or come from the
    /// cache) in parallel, and their tools are added in the order given,
    /// each as soon as it and those before it are ready (so which of two
    /// clashing names wins does not depend on timing, and a slow component
    /// holds back only those after it). Stops at the first that fails in
    /// that order; those before it stay loaded.
    pub async fn load_all(
        &self,
        components: impl IntoIterator<Item = (ComponentSource, LoadOptions)>,
    ) -> Result<Vec<LoadReport>, HostError> {
        let mut prepared: futures::stream::FuturesOrdered<_> = components
            .into_iter()
            .map(|(source, options)| self.prepare(source, options))
            .collect();
        let mut reports = Vec::with_capacity(prepared.len());
        while let Some(component) = futures::StreamExt::next(&mut prepared).await {
            reports.push(self.install(component?, false)?);
        }
        Ok(reports)
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

    /// Checks, without compiling, what loading `source` with `options`
    /// checks first: its name and prefix, that its file opens, and its policy
    /// (folders exist, variables are set). A server can refuse bad input
    /// this way before it starts answering, and load in the background.
    pub async fn check(
        &self,
        source: &ComponentSource,
        options: &LoadOptions,
    ) -> Result<(), HostError> {
        let (id, _) = identify(source, options)?;
        if let ComponentSource::File(path) = source {
            std::fs::File::open(path).map_err(|reason| HostError::Read {
                path: path.clone(),
                reason,
            })?;
        }
        resolve_policy(&id, options.policy.clone()).await.map(drop)
    }

    /// Compiles a component and checks its tool specs, without adding them.
    async fn prepare(
        &self,
        source: ComponentSource,
        options: LoadOptions,
    ) -> Result<Prepared, HostError> {
        let (id, prefix) = identify(&source, &options)?;
        let origin: Arc<str> = match (&options.origin, &source) {
            (Some(origin), _) => origin.as_str().into(),
            (None, ComponentSource::File(path)) => path.display().to_string().into(),
            (None, ComponentSource::Bytes { name, .. }) => format!("bytes:{name}").into(),
        };
        let policy = resolve_policy(&id, options.policy).await?;
        let shutting_down = || HostError::ShuttingDown(id.clone());
        let host = self.clone();
        let component_id = id.clone();
        let loaded = blocking(move || {
            let sandbox = &host.inner.sandbox;
            let load_error = |reason| HostError::Load {
                component: component_id.clone(),
                reason,
            };
            match source {
                ComponentSource::File(path) => sandbox.load_file(&path).map_err(|e| match e {
                    LoadFileError::Read(reason) => HostError::Read { path, reason },
                    LoadFileError::Load(reason) => load_error(reason),
                }),
                ComponentSource::Bytes { bytes, .. } => sandbox.load(&bytes).map_err(load_error),
            }
        })
        .await
        .ok_or_else(shutting_down)??;
        let actual = format!("sha256:{}", hex::encode(loaded.digest));
        if let Some(expected) = &options.expected_digest
            && *expected != actual
        {
            return Err(HostError::WrongDigest {
                component: id,
                expected: expected.clone(),
                actual,
            });
        }
        if loaded.is_interpreter() {
            check_interpreter_policy(&id, &policy)?;
        }
        let sandbox = &self.inner.sandbox;
        let (cache, load_time) = (loaded.cache, loaded.load_time);
        let state_scope: Arc<str> = match &options.state_scope {
            Some(name) => format!("alias:{name}").into(),
            None => format!("sha256:{}", hex::encode(loaded.digest)).into(),
        };
        let component = Arc::new(ComponentEntry {
            id: id.as_str().into(),
            identity: ComponentIdentity {
                name: id.as_str().into(),
                source: origin,
                digest: actual.into(),
            },
            state_scope,
            loaded,
            dependencies: Arc::new(policy.dependencies.clone()),
            kept: policy
                .keep_instance
                .then(|| KeptInstances::new(policy.kept_idle, self.inner.sandbox.kept_budget())),
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

    /// Where the tools' session state is kept.
    pub fn session_store(&self) -> &Arc<dyn SessionStore> {
        &self.inner.sessions
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

    /// Calls a tool whose arguments were checked already
    /// ([`check_arguments`](Self::check_arguments)) against the component
    /// version `digest`: the call runs only on that version. If the tool was
    /// reloaded since (say, while a person was asked to approve the call),
    /// the new code does not run and the call is refused as `denied`.
    pub async fn call_pinned(
        &self,
        name: &str,
        arguments: &Value,
        digest: &str,
        context: &CallContext,
    ) -> ToolCallResult {
        let arguments = Arguments::Checked {
            value: arguments,
            digest,
        };
        self.call_with(name, arguments, context).await
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
        let draft = self.inner.auditor.as_ref().map(|auditor| {
            audited::Draft::new(
                auditor.clone(),
                &call_id,
                name,
                arguments,
                context,
                entry.as_deref(),
            )
        });
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
        // A call dropped before it ends (its caller was cancelled and went
        // away) still reports that it finished, as cancelled.
        let known = entry.as_ref().map(|entry| entry.info.name.as_str());
        let observer = self.inner.observer.as_deref().map(|o| (o, known));
        if let Some((observer, tool)) = observer {
            observer.call_started(tool);
        }
        let span = spans::call(known, &call_id, context);
        // What the run used goes to the audit record and the span, if either
        // will read it.
        let usage = match &draft {
            Some(draft) => Some(draft.usage.clone()),
            None => (!span.is_disabled() || context.meter.is_some())
                .then(crate::runtime::UsageSink::new),
        };
        let refused = draft.as_ref().and_then(audited::Draft::refused);
        let mut unfinished = Unfinished {
            events: &self.inner.events,
            observer,
            draft,
            call_id: &call_id,
            tool: name,
            started,
        };
        let outcome = match (&entry, refused) {
            (_, Some(refused)) => Err(refused),
            (None, None) => Err(self.unknown_tool(name)),
            (Some(entry), None) if !arguments.may_run_on(entry) => Err(reloaded(entry)),
            (Some(entry), None) => {
                self.run_call(entry, &call_id, arguments, context, usage.clone())
                    .instrument(span.clone())
                    .await
            }
        };
        let draft = unfinished.draft.take();
        std::mem::forget(unfinished);
        match outcome {
            Ok(output) => {
                result.content = output.content;
                result.artifacts = output.artifacts;
            }
            Err(error) => result.error = Some(error),
        }
        result.duration = started.elapsed();
        let kind = result.error.as_ref().map(|e| e.kind);
        let used = usage.and_then(|sink| sink.get());
        // The fuel burned is charged to the call's meter (its quotas).
        if let (Some(meter), Some(used)) = (&context.meter, &used) {
            meter.fetch_add(used.fuel_used, Ordering::Relaxed);
        }
        spans::finish_call(&span, result.error.as_ref(), used.as_ref());
        if let Some((observer, tool)) = observer {
            observer.call_finished(tool, kind, result.duration);
        }
        if let Some(draft) = draft {
            draft.finish(kind, result.duration);
        }
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
        usage: Option<crate::runtime::UsageSink>,
    ) -> Result<crate::runtime::GuestOutput, CallError> {
        let policy = &entry.component.policy;
        let invalid = |message| CallError::new(ErrorKind::InvalidArguments, message);
        let validating = spans::validate().entered();
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
            Arguments::Checked { value, .. } => std::borrow::Cow::Owned(value.to_string()),
        };
        drop(validating);
        let arguments = text.as_ref();
        if entry.component.loaded.is_interpreter() {
            let imports = |time| {
                self.host_imports(
                    &entry.component,
                    &entry.info.name,
                    context.session_id.clone(),
                    call_id,
                    context,
                )
                .within(time)
            };
            let call = crate::runtime::ScriptCall {
                name: &entry.guest_name,
                arguments,
                context,
                usage,
            };
            return self
                .inner
                .sandbox
                .script(
                    &entry.component.loaded,
                    &entry.component.policy,
                    imports,
                    call,
                )
                .await;
        }
        let mut imports = self.host_imports(
            &entry.component,
            &entry.info.name,
            context.session_id.clone(),
            call_id,
            context,
        );
        if let Some(kept) = &entry.component.kept {
            imports = imports.keeping(kept.clone(), context);
        }
        if let Some(usage) = usage {
            imports = imports.reporting_to(usage);
        }
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
        // Compared outside the registry's lock, so a reload never waits.
        let names = self.inner.tools.names();
        specs::unknown_tool(name, names.iter().map(String::as_str))
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

impl Arguments<'_> {
    /// Whether the call may run on `entry`'s component version.
    fn may_run_on(&self, entry: &ToolEntry) -> bool {
        match self {
            Arguments::Checked { digest, .. } => *entry.component.identity.digest == **digest,
            _ => true,
        }
    }
}

/// The refusal of a call pinned to a component version that was replaced.
fn reloaded(entry: &ToolEntry) -> CallError {
    CallError::new(
        ErrorKind::Denied,
        format!(
            "tool {:?} was reloaded (now {}) after this call was checked and approved, so the \
             new version did not run; call it again to be asked about the new version",
            entry.info.name, entry.component.identity.digest
        ),
    )
}
