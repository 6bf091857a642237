//! The same MCP server (`McpServer`, every call down the call pipeline)
//! behind rmcp's own transports instead of wasm-agent's, for `make bench`
//! to measure side by side (`tests/mcp/bench_transports.py`):
//!
//! ```text
//! rmcp_transports stdio COMPONENT...        rmcp's service loop on rmcp::transport::stdio()
//! rmcp_transports stdio-pipes COMPONENT...  the same loop on rmcp's non-blocking pipes
//! rmcp_transports http COMPONENT...         rmcp's StreamableHttpService (sessions) on 127.0.0.1
//! ```
//!
//! Components load under the default policy, their compiled code kept in
//! `WASM_AGENT_CACHE_DIR`.

use std::convert::Infallible;
use std::sync::Arc;

use anyhow::{Context, bail};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;
use wasm_agent_mcp::McpServer;
use wasm_agent_policy::Policy;
use wasm_agent_sandbox::ToolHost;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mode = args
        .next()
        .context("usage: rmcp_transports stdio|stdio-pipes|http COMPONENT...")?;
    let mut host = ToolHost::builder();
    if let Some(dir) = std::env::var_os("WASM_AGENT_CACHE_DIR") {
        host = host.cache_dir(dir);
    }
    let host = host.build()?;
    for component in args {
        host.load(std::path::PathBuf::from(&component), Policy::default())
            .await
            .with_context(|| format!("cannot load {component}"))?;
    }
    let server = McpServer::builder(host).build();
    let stop = CancellationToken::new();
    match mode.as_str() {
        "stdio" => {
            server
                .serve_transport(rmcp::transport::stdio(), stop)
                .await?
        }
        "stdio-pipes" => {
            let pipes = rmcp::transport::stdio_pipes();
            server.serve_transport(pipes, stop).await?
        }
        "http" => serve_http(server).await?,
        other => bail!("unknown mode {other:?}: stdio, stdio-pipes or http"),
    }
    Ok(())
}

/// rmcp's streamable HTTP service, with sessions, as its README serves it.
async fn serve_http(server: McpServer) -> anyhow::Result<()> {
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .disable_allowed_origins();
    let service = Arc::new(StreamableHttpService::new(
        move || Ok(server.session()),
        Arc::new(LocalSessionManager::default()),
        config,
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    eprintln!("serving MCP on http://{}/mcp", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let service = service.clone();
        let handler = hyper::service::service_fn(move |request| {
            let service = service.clone();
            async move { Ok::<_, Infallible>(service.handle(request).await) }
        });
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), handler);
            let _ = connection.await;
        });
    }
}
