//! What the host offers: its tools by name, their argument checks, and
//! what each tool's policy lets it do beyond its own sandbox.

use std::sync::Arc;

use serde_json::Value;

use super::ToolHost;
use crate::registry::ToolInfo;
use crate::report::{CallAuditor, ComponentIdentity};
use crate::result::{CallError, ErrorKind};
use crate::specs;

impl ToolHost {
    /// Whether the host offers a tool with this public name.
    pub fn has_tool(&self, name: &str) -> bool {
        self.inner.tools.contains(name)
    }

    /// The tool with this public name, if the host offers it.
    pub fn tool(&self, name: &str) -> Option<ToolInfo> {
        self.inner.tools.get(name).map(|t| t.info.clone())
    }

    /// The component that offers tool `name` (its name, source and digest),
    /// for audit records of calls answered without running it.
    pub fn component_of(&self, name: &str) -> Option<ComponentIdentity> {
        self.inner
            .tools
            .get(name)
            .map(|t| t.component.identity.clone())
    }

    /// The policy tool `name`'s calls run under, as validated and resolved
    /// (what the operator's console shows; secrets in it are only in
    /// `env` values and `http_headers` values).
    pub fn policy_of(&self, name: &str) -> Option<wasm_agent_policy::Policy> {
        self.inner
            .tools
            .get(name)
            .map(|t| (*t.component.policy).clone())
    }

    /// Who is told of every call (the audit trail), if anyone.
    pub fn auditor(&self) -> Option<&Arc<dyn CallAuditor>> {
        self.inner.auditor.as_ref()
    }

    /// Checks `arguments` against the tool's schema (and its policy's size
    /// bound) without calling it: entry points check before they ask anyone
    /// to approve a call that could not run anyway.
    pub fn check_arguments(&self, name: &str, arguments: &Value) -> Result<(), CallError> {
        self.check_for_call(name, arguments).map(drop)
    }

    /// [`check_arguments`](Self::check_arguments), returning the digest of
    /// the component version they were checked against: the one
    /// [`call_pinned`](Self::call_pinned) then runs them on.
    pub fn check_for_call(&self, name: &str, arguments: &Value) -> Result<Arc<str>, CallError> {
        let Some(entry) = self.inner.tools.get(name) else {
            return Err(self.unknown_tool(name));
        };
        specs::check_value_size(arguments, &entry.component.policy)?;
        specs::check_value(&entry.validator, &entry.info.name, arguments)
            .map_err(|message| CallError::new(ErrorKind::InvalidArguments, message))?;
        Ok(entry.component.identity.digest.clone())
    }

    /// The digest of the component version that offers tool `name` now.
    pub fn digest_of(&self, name: &str) -> Option<Arc<str>> {
        self.inner
            .tools
            .get(name)
            .map(|entry| entry.component.identity.digest.clone())
    }

    /// Whether the policy of tool `caller` lets it call tool `callee`
    /// (`call_tools`; a tool never calls itself). Whether a call is then
    /// made depends on the entry point's [`ToolCaller`](crate::context::ToolCaller).
    pub fn may_call(&self, caller: &str, callee: &str) -> bool {
        caller != callee
            && self.inner.tools.get(caller).is_some_and(|entry| {
                wasm_agent_policy::tool_call_allowed(&entry.component.policy.call_tools, callee)
            })
    }

    /// Whether tool `name` is an interpreter's: its calls are scripts run in
    /// segments (world `interpreter`).
    pub fn is_interpreter(&self, name: &str) -> bool {
        self.inner
            .tools
            .get(name)
            .is_some_and(|entry| entry.component.interpreter)
    }

    /// Whether a call of tool `name` may itself ask the person something:
    /// its policy has `ask` grants, or lets it call other tools (whose
    /// approval its entry point asks about). An entry point opens a channel
    /// to the person only for such calls (and for calls needing approval).
    pub fn may_ask(&self, name: &str) -> bool {
        self.inner.tools.get(name).is_some_and(|entry| {
            let policy = &entry.component.policy;
            !policy.ask.is_empty() || !policy.call_tools.is_empty()
        })
    }

    /// Whether calls of tool `name` keep something for the next call of
    /// their session: its component uses session state, or its instance is
    /// kept (`keep_instance`).
    pub fn keeps_state(&self, name: &str) -> bool {
        self.inner
            .tools
            .get(name)
            .is_some_and(|entry| entry.component.uses_state || entry.component.kept.is_some())
    }

    /// Every tool the host offers, by name.
    pub fn tools(&self) -> Vec<ToolInfo> {
        self.inner.tools.infos()
    }
}
