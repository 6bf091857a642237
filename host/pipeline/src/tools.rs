//! The tools an entry point offers, as the pipeline calls them: a
//! [`ToolSet`] names them and gives each its target and settings.
//! [`HostTools`] is a [`ToolHost`]'s tools with per-tool settings (the MCP
//! server, `wasm-agent call`).

use std::collections::BTreeMap;
use std::sync::Arc;

use wasm_agent_sandbox::host::ToolHost;
use wasm_agent_sandbox::registry::ToolInfo;
use wasm_agent_sandbox::result::CallError;

use crate::call::{CallSettings, Tool};
use crate::target::Sandboxed;

/// The tools calls may be made of.
pub trait ToolSet: Send + Sync + 'static {
    /// Their specs.
    fn infos(&self) -> Vec<ToolInfo>;

    /// The tool `name`, if offered.
    fn tool(&self, name: &str) -> Option<Tool>;

    /// The error for a name that is not offered ("did you mean").
    fn unknown(&self, name: &str) -> CallError {
        let infos = self.infos();
        wasm_agent_sandbox::specs::unknown_tool(name, infos.iter().map(|i| i.name.as_str()))
    }
}

/// A [`ToolHost`]'s tools, each with its settings (none: the defaults).
#[derive(Clone)]
pub struct HostTools {
    host: ToolHost,
    settings: Arc<BTreeMap<String, CallSettings>>,
}

impl HostTools {
    /// The tools of `host`, with `settings` by tool name.
    pub fn new(host: ToolHost, settings: BTreeMap<String, CallSettings>) -> Self {
        Self {
            host,
            settings: Arc::new(settings),
        }
    }

    /// The host.
    pub fn host(&self) -> &ToolHost {
        &self.host
    }

    /// The settings of tool `name`.
    pub fn settings(&self, name: &str) -> Option<&CallSettings> {
        self.settings.get(name)
    }
}

impl ToolSet for HostTools {
    fn infos(&self) -> Vec<ToolInfo> {
        self.host.tools()
    }

    fn tool(&self, name: &str) -> Option<Tool> {
        if !self.host.has_tool(name) {
            return None;
        }
        Some(Tool {
            name: name.to_string(),
            target: Arc::new(Sandboxed::new(self.host.clone(), name)),
            settings: self.settings.get(name).cloned().unwrap_or_default(),
        })
    }

    fn unknown(&self, name: &str) -> CallError {
        self.host.unknown_tool(name)
    }
}
