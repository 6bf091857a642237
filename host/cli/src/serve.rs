//! `wasm-agent serve`: the tools over MCP, on stdio or streamable HTTP.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use tokio::net::TcpListener;
use wasm_agent::agent::config::AgentConfig;
use wasm_agent::agent::{ApproveTools, ToolSettings};
use wasm_agent::mcp::{self, HttpOptions, McpServer};
use wasm_agent::policy::{ConfigError, ConfigFile};
use wasm_agent::{CancellationToken, ToolHost};

use super::args::ServeArgs;
use super::watch::Watcher;
use super::{load_folders, run::open_store};

pub async fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    if args.token.as_deref().is_some_and(|t| t.trim().is_empty()) {
        bail!("--token (or WASM_AGENT_MCP_TOKEN) is empty: give a secret, or leave it unset");
    }
    if let Some(addr) = args.http
        && !addr.ip().is_loopback()
        && args.token.is_none()
    {
        bail!(
            "--http {addr} would expose the tools beyond this machine without a token: \
             pass --token (or set WASM_AGENT_MCP_TOKEN), or bind 127.0.0.1"
        );
    }
    let config = args.host.load_config()?;
    let store = Arc::new(open_store(args.host.data_dir.clone()).await?);
    // The first look at the folders comes before loading, so a file that
    // changes meanwhile is loaded again.
    let watched = args.watch.then(|| {
        let paths = watched_paths(&args.tools, config.as_ref());
        Watcher::new(paths, args.host.policy.layer(), config.clone())
    });
    let host = load_folders(&args.tools, &args.host, config.as_ref(), store, args.watch).await?;
    let server = build_server(&host, &args, config.as_ref())?;
    let shutdown = CancellationToken::new();
    if let Some(watcher) = watched {
        let (changed, shutdown) = (server.tools_changed(), shutdown.clone());
        tokio::spawn(async move { watcher.run(host, shutdown, changed).await });
    }
    let stop = shutdown.clone();
    tokio::spawn(async move {
        stop_signal().await;
        stop.cancel();
    });
    match args.http {
        None => server.serve_stdio_until(shutdown.clone()).await?,
        Some(addr) => {
            let listener = TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr}"))?;
            let local = listener.local_addr()?;
            let url = format!("http://{local}{}", mcp::MCP_PATH);
            eprintln!("wasm-agent: serving MCP on {url}");
            let options = HttpOptions {
                token: args.token.clone(),
                hosts: args.host_headers.clone(),
                origins: args.origins.clone(),
                max_body: usize::try_from(args.max_body.0).unwrap_or(usize::MAX),
                ..HttpOptions::default()
            };
            mcp::serve_http(server, listener, options, shutdown.clone()).await;
        }
    }
    shutdown.cancel();
    Ok(ExitCode::SUCCESS)
}

/// The server, with the approval rules of `[agent.tools.<tool>]` and the
/// operator's `--approve` list.
fn build_server(
    host: &ToolHost,
    args: &ServeArgs,
    config: Option<&ConfigFile>,
) -> Result<McpServer, ConfigError> {
    let mut builder = McpServer::builder(host.clone())
        .approval_handler(Arc::new(ApproveTools::named(args.approve.iter().cloned())));
    if let Some(config) = config {
        for (tool, settings) in AgentConfig::from_file(config)?.tools {
            let approval = settings.apply_to(ToolSettings::default()).requires_approval;
            builder = builder.requires_approval(tool, approval);
        }
    }
    Ok(builder.build())
}

/// The files and folders `--watch` polls: those named (config aliases stand
/// for their component files), or every configured component.
fn watched_paths(tools: &[String], config: Option<&ConfigFile>) -> Vec<PathBuf> {
    let component = |alias: &str| {
        config
            .and_then(|c| c.tools.get(alias))
            .map(|tool| tool.component.clone())
    };
    if tools.is_empty() {
        return config
            .map(|c| c.tools.values().map(|t| t.component.clone()).collect())
            .unwrap_or_default();
    }
    tools
        .iter()
        .map(|target| component(target).unwrap_or_else(|| PathBuf::from(target)))
        .collect()
}

/// Ctrl-C or SIGTERM.
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
