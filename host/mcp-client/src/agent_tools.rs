//! A server's tools as [`AgentTool`]s, and an agent's set kept in step with
//! the server's list.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;
use wasm_agent_agent::{Agent, AgentTool, ProgressSink, RemoteTool, ToolOutput};
use wasm_agent_sandbox::context::CallContext;
use wasm_agent_sandbox::result::{CallError, ErrorKind};

use crate::listing::RemoteToolInfo;
use crate::server::RemoteServer;

/// Applies the operator's settings to a tool before it is offered (the
/// config's `[calls.NAME]`, say); run again for tools listed later.
pub type ToolAdjuster = Arc<dyn Fn(&mut AgentTool) + Send + Sync>;

/// One remote tool, run by its server.
struct McpTool {
    server: RemoteServer,
    /// Its name on the server.
    remote: String,
    version: String,
}

#[async_trait::async_trait]
impl RemoteTool for McpTool {
    fn origin(&self) -> String {
        self.server.spec().label()
    }

    fn version(&self) -> String {
        format!("{}/{}", self.server.spec().name, self.version)
    }

    async fn call(
        &self,
        arguments: Value,
        context: &CallContext,
        progress: ProgressSink,
    ) -> Result<ToolOutput, CallError> {
        // A tool the server defined anew since it was offered is a new
        // tool: not run on the approvals and annotations of the old one.
        if self.server.current_version(&self.remote).await.as_deref() != Some(&*self.version) {
            return Err(CallError::new(
                ErrorKind::Denied,
                format!(
                    "{} changed or removed tool {:?} since it was offered (or its list could \
                     not be taken again since it changed), so this call did not run; its new \
                     definition is offered (and approved) anew from the next turn",
                    self.server.spec().label(),
                    self.remote
                ),
            ));
        }
        self.server
            .call(&self.remote, arguments, context, progress)
            .await
    }
}

/// A public name for `remote`: the prefix, then the name with characters
/// model providers refuse made `_`; `None` when it is too long.
fn public_name(prefix: &str, remote: &str) -> Option<String> {
    let name: String = format!("{prefix}{remote}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    (1..=64).contains(&name.len()).then_some(name)
}

impl RemoteServer {
    /// Its tools as the agent offers them: `prefix` + name, not sandboxed,
    /// approval required when their annotations do not rule out destroying
    /// data or reaching the world outside. Tools whose names or schemas
    /// cannot be offered are left out, with a warning.
    pub fn agent_tools(&self) -> Vec<AgentTool> {
        let mut seen = BTreeSet::new();
        self.tools()
            .iter()
            .filter_map(|info| self.agent_tool(info, &mut seen))
            .collect()
    }

    fn agent_tool(&self, info: &RemoteToolInfo, seen: &mut BTreeSet<String>) -> Option<AgentTool> {
        let spec = self.spec();
        let Some(name) = public_name(&spec.prefix, &info.name) else {
            tracing::warn!(server = %spec.name, tool = %info.name, "left out: its name (with the prefix) is over 64 characters");
            return None;
        };
        if !seen.insert(name.clone()) {
            tracing::warn!(server = %spec.name, tool = %info.name, "left out: another of its tools is offered as {name}");
            return None;
        }
        let runner = Arc::new(McpTool {
            server: self.clone(),
            remote: info.name.clone(),
            version: info.version.clone(),
        });
        // The server's annotations are its own claims: they lower approval
        // only when the operator trusts them.
        let built = AgentTool::remote(
            name,
            info.description.clone(),
            info.input_schema.clone(),
            (info.annotations, spec.trust_annotations),
            runner,
        );
        match built {
            Ok(tool) => Some(tool),
            Err(error) => {
                tracing::warn!(server = %spec.name, "left out: {error}");
                None
            }
        }
    }

    /// Keeps `agent`'s tools from this server in step with the server's
    /// list (after `list_changed` or a restart): new ones added, changed
    /// ones replaced, gone ones removed, each passed through `adjust`
    /// first. Runs already under way keep their tools. Stops when the
    /// returned guard is dropped.
    pub fn keep_in_step(&self, agent: &Agent, adjust: Option<ToolAdjuster>) -> InStep {
        let server = self.clone();
        let agent = agent.clone();
        let mut versions = self.list_versions();
        // The agent's tools from this server so far (not built again).
        let origin = self.spec().label();
        let mut ours: BTreeSet<String> = agent
            .tools()
            .iter()
            .filter(|t| t.remote_origin().as_ref() == Some(&origin))
            .map(|t| t.name().to_string())
            .collect();
        // A list taken between the agent's building and now counts as new.
        versions.mark_changed();
        let task = tokio::spawn(async move {
            while versions.changed().await.is_ok() {
                // Compiling a listing's schemas (up to its byte budget) is
                // CPU work: off the runtime's threads.
                let listed = server.clone();
                let Ok(mut tools) = tokio::task::spawn_blocking(move || listed.agent_tools()).await
                else {
                    continue;
                };
                if let Some(adjust) = &adjust {
                    tools.iter_mut().for_each(|tool| adjust(tool));
                }
                let now: BTreeSet<String> = tools.iter().map(|t| t.name().to_string()).collect();
                for gone in ours.difference(&now) {
                    agent.remove_tool(gone);
                }
                let mut kept = BTreeSet::new();
                for tool in tools {
                    let name = tool.name().to_string();
                    if ours.contains(&name) {
                        let fresh = tool.clone();
                        if let Some(old) = agent.replace_tool(tool) {
                            say_what_changed(&server.spec().label(), &old, &fresh);
                        }
                    } else if let Err(error) = agent.add_tool(tool) {
                        tracing::warn!(server = %server.spec().name, "new tool not offered: {error}");
                        continue;
                    }
                    kept.insert(name);
                }
                tracing::info!(server = %server.spec().name, tools = kept.len(), "the agent's tools from this MCP server were brought up to date");
                ours = kept;
            }
        });
        InStep(task)
    }
}

/// Tells the operator that a tool's definition changed since it was
/// offered, and which parts: its approvals are asked again.
fn say_what_changed(origin: &str, old: &AgentTool, new: &AgentTool) {
    let mut changed = Vec::new();
    if old.description() != new.description() {
        changed.push("description");
    }
    if old.parameters() != new.parameters() {
        changed.push("input schema");
    }
    if old.annotations() != new.annotations() {
        changed.push("annotations");
    }
    if !changed.is_empty() {
        tracing::warn!(
            "{origin} changed tool {}: its {}; it counts as a new tool, and approvals given \
             for it are asked again",
            wasm_agent_sandbox::text::one_line(old.name()),
            changed.join(", ")
        );
    }
}

/// Keeps an agent in step with a server until dropped.
pub struct InStep(tokio::task::JoinHandle<()>);

impl Drop for InStep {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_get_the_prefix_and_lose_what_providers_refuse() {
        assert_eq!(public_name("gh_", "search").as_deref(), Some("gh_search"));
        assert_eq!(
            public_name("", "files.read/v2").as_deref(),
            Some("files_read_v2")
        );
        assert_eq!(public_name("", ""), None);
        assert_eq!(public_name("p_", &"x".repeat(63)), None);
    }
}
