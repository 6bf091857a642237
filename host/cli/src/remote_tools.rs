//! `run --mcp` and `[agent.mcp.NAME]`: tools from other MCP servers offered
//! beside the sandboxed ones (they are not sandboxed).

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use wasm_agent::ToolInfo;
use wasm_agent::agent::config::AgentConfig;
use wasm_agent::agent::{Agent, AgentTool};
use wasm_agent::ask::Asking;
use wasm_agent::mcp_client::spec::distinct_names;
use wasm_agent::mcp_client::{InStep, RemoteServer, ServerSpec, ToolAdjuster};

/// Flags naming MCP servers whose tools a run uses.
#[derive(Debug, Args)]
pub struct McpFlags {
    /// Offer the tools of another MCP server too (they run there, not in
    /// the sandbox): a command line to start ('python3 server.py', spoken
    /// to over stdio) or an http(s):// URL (streamable HTTP). Repeatable;
    /// [agent.mcp.NAME] in the config does the same with more settings.
    #[arg(long = "mcp", value_name = "'COMMAND ARGS'|URL")]
    pub servers: Vec<String>,
    /// The environment variable holding a bearer token for the --mcp URL
    /// (one URL; the config gives each server its own).
    #[arg(long, value_name = "VAR")]
    pub mcp_bearer_env: Option<String>,
    /// Let the --mcp servers' tool annotations (read-only, not destructive,
    /// closed world) spare their calls approval; by default they are the
    /// servers' own claims and every call asks (config: trust_annotations).
    #[arg(long)]
    pub mcp_trust_annotations: bool,
}

/// The config's servers (by name), then the command line's, connected to
/// in parallel; their questions to the person go to `asking`.
pub async fn connect(
    flags: &McpFlags,
    settings: &AgentConfig,
    asking: Option<Asking>,
) -> anyhow::Result<Vec<RemoteServer>> {
    let mut specs = Vec::new();
    for (name, config) in &settings.mcp {
        specs.push(ServerSpec::from_config(name, config)?);
    }
    let urls = flags
        .servers
        .iter()
        .filter(|s| ServerSpec::is_url(s))
        .count();
    if flags.mcp_bearer_env.is_some() && urls != 1 {
        anyhow::bail!(
            "--mcp-bearer-env gives one token to one --mcp URL, and {urls} are given; name the \
             servers in the config ([agent.mcp.NAME] url, bearer_env) to give each its own"
        );
    }
    let bearer = match &flags.mcp_bearer_env {
        None => None,
        Some(variable) => Some(
            std::env::var(variable)
                .with_context(|| format!("--mcp-bearer-env names {variable}, which is not set"))?,
        ),
    };
    let mut from_flags = Vec::new();
    for text in &flags.servers {
        let mut spec = ServerSpec::from_command_line(text, bearer.clone())?;
        spec.trust_annotations = flags.mcp_trust_annotations;
        from_flags.push(spec);
    }
    specs.extend(from_flags);
    distinct_names(&mut specs);
    let connecting = specs
        .into_iter()
        .map(|spec| RemoteServer::connect_asking(spec, asking.clone()));
    Ok(futures::future::try_join_all(connecting).await?)
}

/// Every server's tools; a name offered twice (by two servers, or by a
/// server and a component) is refused, naming both.
pub fn tools(servers: &[RemoteServer], sandboxed: &[AgentTool]) -> anyhow::Result<Vec<AgentTool>> {
    let mut offered: BTreeMap<String, String> = sandboxed
        .iter()
        .map(|tool| (tool.name().to_string(), "a sandboxed component".to_string()))
        .collect();
    let mut tools = Vec::new();
    for server in servers {
        let label = server.spec().label();
        for tool in server.agent_tools() {
            if let Some(other) = offered.get(tool.name()) {
                anyhow::bail!(
                    "the tool {} is offered by {label} and by {other}; give the server a prefix \
                     ([agent.mcp.{}] prefix = \"...\")",
                    tool.name(),
                    server.spec().name
                );
            }
            offered.insert(tool.name().to_string(), label.clone());
            tools.push(tool);
        }
    }
    Ok(tools)
}

/// Keeps `agent`'s tools in step with each server's list, settings applied,
/// while the guards live.
pub fn keep_in_step(
    servers: &[RemoteServer],
    agent: &Agent,
    settings: &AgentConfig,
) -> Vec<InStep> {
    let per_tool = Arc::new(settings.tools.clone());
    let adjust: ToolAdjuster = Arc::new(move |tool: &mut AgentTool| {
        if let Some(config) = per_tool.get(tool.name()) {
            tool.settings = config.apply_to(tool.settings.clone());
        }
    });
    servers
        .iter()
        .map(|server| server.keep_in_step(agent, Some(adjust.clone())))
        .collect()
}

/// `tools --mcp`: the tools the servers list, in their order, as the
/// sandboxed ones are shown (`mcp:NAME` in place of a component).
pub async fn listed(
    servers: Vec<String>,
    bearer_env: Option<String>,
) -> anyhow::Result<Vec<ToolInfo>> {
    let flags = McpFlags {
        servers,
        mcp_bearer_env: bearer_env,
        mcp_trust_annotations: false,
    };
    let connected = connect(&flags, &AgentConfig::default(), None).await?;
    let mut tools = Vec::new();
    for server in &connected {
        tools.extend(server.tools().iter().map(|tool| ToolInfo {
            name: tool.name.clone(),
            component: format!("mcp:{}", server.spec().name),
            digest: String::new(),
            description: tool.description.clone(),
            parameters: tool.input_schema.clone(),
            annotations: tool.annotations,
        }));
    }
    close(&connected).await;
    Ok(tools)
}

/// Ends every server's connection (started ones get a moment to exit).
pub async fn close(servers: &[RemoteServer]) {
    futures::future::join_all(servers.iter().map(RemoteServer::close)).await;
}
