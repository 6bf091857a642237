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
use crate::registry::{Code, ComponentEntry, Registry, ToolEntry};
use crate::report::CallAuditor;
use crate::result::{CallError, ErrorKind, ToolCallResult};
use crate::runtime::{Allocator, CallId, CallScope, HostImports, Sandbox};
use crate::{spans, specs};
use wasm_agent_session::SessionStore;

mod audited;
use audited::Unfinished;
mod builder;
mod kept;
mod loading;
mod offered;
mod options;
mod preparing;

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
    /// ([`check_for_call`](Self::check_for_call)) against the component
    /// version `digest`: the call runs only on that version. If the tool was
    /// reloaded since (say, while a person was asked to approve the call),
    /// the new code does not run and the call is refused as `denied`. The
    /// arguments are checked again against the schema of the entry that
    /// runs them.
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
        let entry = self.ready_entry(name, context).await;
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
            // Checked arguments are checked again: the entry that runs them
            // may list another schema than the one they were checked against
            // (a tool offered from a kept listing, then loaded).
            Arguments::Parsed(value) | Arguments::Checked { value, .. } => {
                let text = value.to_string();
                specs::check_arguments_size(&text, policy)?;
                specs::check_value(&entry.validator, &entry.info.name, value).map_err(invalid)?;
                std::borrow::Cow::Owned(text)
            }
        };
        drop(validating);
        let arguments = text.as_ref();
        let Code::Ready(loaded) = &entry.component.code else {
            if context.cancellation.is_cancelled() {
                return Err(CallError::new(
                    ErrorKind::Cancelled,
                    "the call was cancelled while its component loaded",
                ));
            }
            return Err(CallError::new(
                ErrorKind::Failed,
                format!(
                    "component {} of tool {:?} did not load; see the server's log",
                    entry.component.id, entry.info.name
                ),
            ));
        };
        if entry.component.interpreter {
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
                .script(loaded, &entry.component.policy, imports, call)
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
                loaded,
                &entry.component.policy,
                imports,
                &entry.guest_name,
                arguments,
                &context.to_wit(),
            )
            .await
    }

    /// The entry of tool `name` to call: a tool offered from a kept listing
    /// waits until its component is loaded (or the call is cancelled) and is
    /// looked up again, so the call runs on what the load listed.
    async fn ready_entry(&self, name: &str, context: &CallContext) -> Option<Arc<ToolEntry>> {
        let entry = self.inner.tools.get(name)?;
        let Code::Coming(loading) = &entry.component.code else {
            return Some(entry);
        };
        let mut loading = loading.clone();
        tokio::select! {
            // Its sender is dropped once the load replaced the offer or failed.
            _ = loading.changed() => self.inner.tools.get(name),
            () = context.cancellation.cancelled() => Some(entry),
        }
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
