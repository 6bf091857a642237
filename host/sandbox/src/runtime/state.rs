//! The data of one call's store: WASI context, limits, and the `host` imports.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::http::PolicyHooks;

use super::limits::CallLimiter;
use crate::bindings::imported::{self, Level};
use crate::context::{CallContext, Delegator};
use crate::events::{EventBus, ToolEvent};
use wasm_agent_session::SessionStore;

/// Longest log line kept; longer ones are cut.
const MAX_LOG_LINE: usize = 8 * 1024;
/// Log lines and events one call may produce before further ones are dropped.
const MAX_LOG_LINES: u32 = 1000;
const MAX_EVENTS: u32 = 1000;
/// Largest session-state key and value.
const MAX_STATE_KEY: usize = 256;
const MAX_STATE_VALUE: usize = 1024 * 1024;
/// Largest event payload.
const MAX_EVENT_PAYLOAD: usize = 64 * 1024;
/// Event payload bytes one call may publish in all (events wait in the bus
/// for slow subscribers, so they are host memory the tool causes).
const MAX_EVENT_BYTES: usize = 1024 * 1024;
/// Delegations one call may make.
const MAX_DELEGATIONS: u32 = 8;

/// Everything a call's store holds.
pub struct CallState {
    pub(super) wasi: WasiCtx,
    pub(super) table: ResourceTable,
    pub(super) limiter: CallLimiter,
    pub(super) host: HostImports,
    pub(super) http: WasiHttpCtx,
    pub(super) http_hooks: PolicyHooks,
    /// What the call may still write into its read-write folders.
    pub(super) writes: super::writes::WriteBudget,
}

impl WasiHttpView for CallState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.http_hooks,
        }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// State behind the `wasm-agent:tool/host` imports for one call.
pub struct HostImports {
    pub(crate) tool: Arc<str>,
    /// The component's identity for session state (`alias:NAME` or `sha256:HEX`).
    pub(crate) state_scope: Arc<str>,
    pub(crate) call_id: Arc<str>,
    pub(crate) session_id: String,
    pub(crate) sessions: Arc<dyn SessionStore>,
    pub(crate) dependencies: Arc<BTreeMap<String, String>>,
    pub(crate) events: EventBus,
    pub(crate) cancellation: CancellationToken,
    pub(crate) deadline: Instant,
    pub(crate) log_lines: u32,
    pub(crate) events_sent: u32,
    /// Payload bytes of the events published so far.
    pub(crate) event_bytes: usize,
    /// Agents the policy lets this tool delegate to.
    pub(crate) delegate_to: Vec<String>,
    /// Who runs delegated tasks, and the context to run them in; `None`
    /// outside an agent run or when the policy allows no delegation.
    pub(crate) delegator: Option<(Arc<dyn Delegator>, CallContext)>,
    pub(crate) delegations: u32,
}

impl HostImports {
    /// True once the call was cancelled or ran past its deadline.
    pub fn is_cancelled(&self) -> bool {
        self.cancellation.is_cancelled() || Instant::now() >= self.deadline
    }
}

fn shorten(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str(" [...]");
    }
    text
}

impl imported::Host for CallState {
    fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        let host = &mut self.host;
        host.log_lines += 1;
        if host.log_lines > MAX_LOG_LINES {
            if host.log_lines == MAX_LOG_LINES + 1 {
                tracing::warn!(tool = %host.tool, call_id = %host.call_id, "tool logged more than {MAX_LOG_LINES} lines; dropping the rest");
            }
            return Ok(());
        }
        let message = shorten(message, MAX_LOG_LINE);
        let message = crate::text::one_line(&message);
        let (tool, call_id) = (&*host.tool, &*host.call_id);
        match level {
            Level::Trace => tracing::trace!(target: "wasm_agent::tool", tool, call_id, "{message}"),
            Level::Debug => tracing::debug!(target: "wasm_agent::tool", tool, call_id, "{message}"),
            Level::Info => tracing::info!(target: "wasm_agent::tool", tool, call_id, "{message}"),
            Level::Warn => tracing::warn!(target: "wasm_agent::tool", tool, call_id, "{message}"),
            Level::Error => tracing::error!(target: "wasm_agent::tool", tool, call_id, "{message}"),
        }
        Ok(())
    }

    fn get_state(&mut self, key: String) -> wasmtime::Result<Option<String>> {
        let host = &self.host;
        Ok(host.sessions.get(&host.session_id, &host.state_scope, &key))
    }

    fn set_state(&mut self, key: String, value: String) -> wasmtime::Result<()> {
        let host = &self.host;
        if key.is_empty() || key.len() > MAX_STATE_KEY {
            wasmtime::bail!("set-state: keys must be 1-{MAX_STATE_KEY} bytes");
        }
        if value.len() > MAX_STATE_VALUE {
            wasmtime::bail!(
                "set-state: the value of {key:?} is {} bytes, more than the {MAX_STATE_VALUE} allowed",
                value.len()
            );
        }
        if serde_json::from_str::<serde::de::IgnoredAny>(&value).is_err() {
            wasmtime::bail!("set-state: the value of {key:?} is not JSON text");
        }
        host.sessions
            .set(&host.session_id, &host.state_scope, &key, value)
            .map_err(|e| wasmtime::format_err!("set-state: {e}"))
    }

    fn dependency(&mut self, name: String) -> wasmtime::Result<Option<String>> {
        Ok(self.host.dependencies.get(&name).cloned())
    }

    fn emit(&mut self, name: String, payload: String) -> wasmtime::Result<()> {
        let host = &mut self.host;
        host.events_sent += 1;
        if host.events_sent > MAX_EVENTS {
            return Ok(());
        }
        if payload.len() > MAX_EVENT_PAYLOAD {
            wasmtime::bail!(
                "emit: the payload of {name:?} is {} bytes, more than the {MAX_EVENT_PAYLOAD} allowed",
                payload.len()
            );
        }
        host.event_bytes = host.event_bytes.saturating_add(payload.len());
        if host.event_bytes > MAX_EVENT_BYTES {
            if host.event_bytes - payload.len() <= MAX_EVENT_BYTES {
                tracing::warn!(tool = %host.tool, call_id = %host.call_id, "tool emitted more than {MAX_EVENT_BYTES} bytes of events; dropping the rest");
            }
            return Ok(());
        }
        let payload = serde_json::from_str(&payload)
            .map_err(|_| wasmtime::format_err!("emit: the payload of {name:?} is not JSON text"))?;
        host.events.publish(ToolEvent::Emitted {
            call_id: host.call_id.to_string(),
            tool: host.tool.to_string(),
            name: shorten(name, 256),
            payload,
        });
        Ok(())
    }

    fn cancelled(&mut self) -> wasmtime::Result<bool> {
        Ok(self.host.is_cancelled())
    }

    async fn delegate(
        &mut self,
        agent: String,
        input: String,
    ) -> wasmtime::Result<Result<String, String>> {
        let host = &mut self.host;
        if !wasm_agent_policy::delegation_allowed(&host.delegate_to, &agent) {
            let reason = format!(
                "the policy of tool {:?} does not allow delegating to agent {agent:?}; add \
                 --allow-delegate {agent} (config: delegate = [\"{agent}\"]) to allow it",
                host.tool
            );
            self.http_hooks
                .denials
                .record(format!("delegate to agent {agent:?}"), reason.clone());
            return Ok(Err(reason));
        }
        let Some((delegator, context)) = &host.delegator else {
            return Ok(Err(
                "no agent is running this call, so there is nobody to delegate to".into(),
            ));
        };
        host.delegations += 1;
        if host.delegations > MAX_DELEGATIONS {
            return Ok(Err(format!(
                "a call may delegate at most {MAX_DELEGATIONS} times"
            )));
        }
        tracing::info!(tool = %host.tool, call_id = %host.call_id, agent, "delegating");
        Ok(delegator.delegate(&agent, &input, context).await)
    }
}

impl crate::bindings::types::Host for CallState {}
