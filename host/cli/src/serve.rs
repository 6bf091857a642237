//! `wasm-agent serve`: the tools over MCP, on stdio or streamable HTTP.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use tokio::net::TcpListener;
use wasm_agent::agent::ApproveTools;
use wasm_agent::agent::config::call_settings;

use crate::code_mode::CodeModeChoice;
use wasm_agent::host::DEFAULT_CONCURRENCY;
use wasm_agent::mcp::{self, HttpOptions, McpServer, McpServerBuilder};
use wasm_agent::metrics::{MeteredCache, MeteredStore, Metrics};
use wasm_agent::policy::{ComponentLocation, ConfigError, ConfigFile};
use wasm_agent::{CancellationToken, ToolHost};

use super::args::ServeArgs;
use super::components::{self, Pins};
use super::store::{open_cache, open_store};
use super::watch::Watcher;
use super::{host_builder, resolve_targets};

pub async fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    if args.token.as_deref().is_some_and(|t| t.trim().is_empty()) {
        bail!("--token (or WASM_AGENT_MCP_TOKEN) is empty: give a secret, or leave it unset");
    }
    if let Some(addr) = args.http
        && !addr.ip().is_loopback()
        && args.token.is_none()
        && args.tokens.is_none()
        && args.auth_issuer.is_none()
    {
        bail!(
            "--http {addr} would expose the tools beyond this machine without a token: \
             pass --token (or set WASM_AGENT_MCP_TOKEN), --tokens FILE or --auth-issuer URL, \
             or bind 127.0.0.1"
        );
    }
    let tokens = match &args.tokens {
        Some(path) => Some(Arc::new(mcp::TokenTable::load(path)?)),
        None => None,
    };
    let state_keys = match &args.request_state_keys {
        Some(path) => Some(mcp::StateKeys::load(path)?),
        None => None,
    };
    let oauth = match &args.auth_issuer {
        Some(issuer) => Some(Arc::new(resource_server(issuer, &args).await?)),
        None => None,
    };
    let config = args.host.load_config()?;
    // The Prometheus metrics go over OTLP too when exporting.
    let metrics = match crate::otel::meter() {
        Some(meter) => Metrics::exporting(&meter),
        None => Metrics::new(),
    };
    let store = MeteredStore::around(
        open_store(&args.host, config.as_ref()).await?,
        metrics.clone(),
    );
    let console = crate::console::Setup::new(
        &args,
        store.clone(),
        tokens.as_ref(),
        state_keys.as_ref(),
        oauth.as_ref(),
    )?;
    if console.is_none()
        && let Some(config) = config.as_ref()
        && let Some((tool, _)) = call_settings(config)?
            .into_iter()
            .find(|(_, s)| s.answered_by == wasm_agent::pipeline::AnsweredBy::Operators)
    {
        bail!(
            "[calls.{tool}] answered_by = \"operators\": operators answer in the console; \
             serve it with --console-tokens FILE or --console-scope SCOPE"
        );
    }
    // The first look at the folders comes before loading, so a file that
    // changes meanwhile is loaded again.
    let watched = match args.watch {
        true => {
            let paths = watched_paths(&args.tools, config.as_ref());
            crate::watch::check_watchable(&paths)?;
            Some(Watcher::new(
                paths,
                args.host.policy.layer(),
                config.clone(),
            ))
        }
        false => None,
    };
    let watched = match watched {
        Some(watcher) => Some(watcher.pinned(Pins::open(&args.host, config.as_ref())?)),
        None => None,
    };
    let code_mode = CodeModeChoice::of(args.code_mode.language.as_deref(), None)?;
    let mut resolved = resolve_targets(&args.tools, config.as_ref(), args.watch)?;
    code_mode.check(&resolved)?;
    // Code mode's interpreter may call the served tools, unless the config
    // or the flags say which.
    code_mode.grant(&mut resolved, args.host.policy.call_tools.is_empty());
    let mut parts = crate::console::Parts {
        provenance: crate::console::provenance(
            &resolved,
            Pins::open(&args.host, config.as_ref())?.as_ref(),
        ),
        ..Default::default()
    };
    let components = components::load_list(resolved, &args.host, config.as_ref()).await?;
    let mut host =
        host_builder(&args.host, config.as_ref(), store, Some("serve"))?.observer(metrics.clone());
    if let Some(console) = &console {
        let log = crate::audit::shared(&args.host.audit, config.as_ref(), "serve")?;
        parts.audit = crate::console::audit_file(log.as_ref());
        parts.actions = log.clone();
        host = host.auditor(console.recording(log.map(|log| log as _)));
    }
    let host = host.build()?;
    metrics.watch(host.gauges());
    // Bad files and policies still exit 2 before serving.
    for (source, options) in &components {
        host.check(source, options).await?;
    }
    let cache = MeteredCache::around(
        open_cache(args.cache.as_deref(), config.as_ref())?,
        metrics.clone(),
    );
    let cache_location = cache.location();
    let access = crate::access::rules(config.as_ref())?;
    let (quotas, quota_store) = crate::access::quotas(config.as_ref())?;
    let mut builder = server_builder(&host, &args, config.as_ref())?
        .access(access.clone())
        .quotas(quotas, quota_store)
        .tenant_observer(metrics.clone())
        .result_cache(cache)
        .code_mode(code_mode.interpreters());
    match state_keys {
        Some(keys) => builder = builder.request_state_keys(keys),
        None if host.session_store().location().starts_with("postgres") && args.http.is_some() => {
            tracing::warn!(
                "no --request-state-keys: a 2026-07-28 client's answer to a question reaches only \
                 this replica; give every replica the same keys file"
            );
        }
        None => {}
    }
    if let Some(console) = &console {
        builder = builder
            .layer(console.in_flight())
            .operator_desk(Arc::new(console.desk.clone()));
        parts.access = access.clone();
        if let Some(config) = config.as_ref() {
            parts.settings = call_settings(config)?.into_iter().collect();
        }
    }
    // Compiling can take seconds: the server answers `initialize` at once
    // and `tools/list` waits for the components (see `McpServerBuilder::loading`).
    let loading = builder.loading();
    let server = builder.build();
    let announce = console.as_ref().map(|c| (c.on, c.announcer()));
    let announce_on = |listener: crate::console::Listener| {
        announce
            .as_ref()
            .filter(|(on, _)| *on == listener)
            .map(|(_, announce)| announce.clone())
    };
    let console = console.map(|setup| {
        let pipeline = server.pipeline().clone();
        parts.probes.push((
            "quota checks answered from this replica's memory".into(),
            Arc::new(move || pipeline.quota_fallbacks().to_string()),
        ));
        let metrics = metrics.clone();
        parts.probes.push((
            format!("result cache ({cache_location}): operations failed, calls went on uncached"),
            Arc::new(move || metrics.cache_failures().to_string()),
        ));
        let on = setup.on;
        let pages: Arc<dyn mcp::Pages> = Arc::new(setup.console(host.clone(), parts));
        (on, pages)
    });
    let pages_on = |listener: crate::console::Listener| {
        console
            .as_ref()
            .filter(|(on, _)| *on == listener)
            .map(|(_, pages)| pages.clone())
    };
    let shutdown = CancellationToken::new();
    let changed = server.tools_changed();
    let mut loader = tokio::spawn({
        let (host, shutdown) = (host.clone(), shutdown.clone());
        let changed = changed.clone();
        async move {
            // Components unchanged since their last load are listed at once,
            // from the listings kept then; their calls wait for them.
            let reports = host.load_all_listing(components, || loading.done()).await?;
            if reports.iter().any(|report| report.listing_changed) {
                changed.notify();
            }
            let names: Vec<String> = host.tools().into_iter().map(|tool| tool.name).collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            for unmatched in access.unmatched(&names) {
                tracing::warn!("[access] {unmatched} matches no loaded tool");
            }
            // Once the threads that compiled have ended.
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            crate::return_freed_memory();
            // Reading the process's mappings takes a few milliseconds.
            tokio::task::spawn_blocking(crate::resident::unmap_start_pages);
            if let Some(watcher) = watched {
                tokio::spawn(async move { watcher.run(host, shutdown, changed).await });
            }
            Ok::<_, wasm_agent::HostError>(())
        }
    });
    let stop = shutdown.clone();
    tokio::spawn(async move {
        stop_signal().await;
        stop.cancel();
    });
    if let Some(addr) = args.metrics_addr {
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on --metrics-addr {addr}"))?;
        eprintln!(
            "wasm-agent: health on http://{0}/readyz, metrics on http://{0}/metrics",
            listener.local_addr()?
        );
        let pages = pages_on(crate::console::Listener::Metrics);
        if pages.is_some() {
            eprintln!(
                "wasm-agent: operator console on http://{}/console",
                listener.local_addr()?
            );
        }
        if let Some(announce) = announce_on(crate::console::Listener::Metrics) {
            announce(listener.local_addr()?);
        }
        let options = HttpOptions {
            hosts: args.host_headers.clone(),
            origins: args.origins.clone(),
            metrics: Some(metrics.clone()),
            pages,
            ..HttpOptions::default()
        };
        tokio::spawn(mcp::serve_health(server.session(), listener, options));
    }
    // Metrics go where --metrics-addr says, else beside the MCP endpoint.
    let main_metrics = args.metrics_addr.is_none().then_some(metrics);
    let serving = serve_on(
        server,
        &args,
        HttpOptions {
            tokens,
            oauth,
            metrics: main_metrics,
            pages: pages_on(crate::console::Listener::Mcp),
            ..HttpOptions::default()
        },
        announce_on(crate::console::Listener::Mcp),
        shutdown.clone(),
    );
    tokio::pin!(serving);
    tokio::select! {
        loaded = &mut loader => {
            loaded.context("loading the components stopped")??;
            serving.await?;
        }
        served = &mut serving => {
            served?;
            // The client left while the components were loading: a load that
            // fails soon after is still reported; a long compile is dropped.
            if let Ok(loaded) = tokio::time::timeout(LOAD_REPORT_GRACE, &mut loader).await {
                loaded.context("loading the components stopped")??;
            }
            loader.abort();
        }
    }
    shutdown.cancel();
    Ok(ExitCode::SUCCESS)
}

/// How long a server whose client has gone still waits for its components'
/// load, to report a failure.
const LOAD_REPORT_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Serves on stdio or HTTP, as the arguments say, until `shutdown`.
async fn serve_on(
    server: McpServer,
    args: &ServeArgs,
    // Who may call (tokens, OAuth) and the metrics to serve, if any.
    admission: HttpOptions,
    // Told the address once bound (the console's links).
    bound: Option<Arc<dyn Fn(std::net::SocketAddr) + Send + Sync>>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    match args.http {
        None => server.serve_stdio_until(shutdown).await?,
        Some(addr) => {
            let listener = TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr}"))?;
            let local = listener.local_addr()?;
            let url = format!("http://{local}{}", mcp::MCP_PATH);
            eprintln!("wasm-agent: serving MCP on {url}");
            if admission.pages.is_some() {
                eprintln!("wasm-agent: operator console on http://{local}/console");
            }
            if let Some(bound) = bound {
                bound(local);
            }
            let options = HttpOptions {
                token: args.token.clone(),
                hosts: args.host_headers.clone(),
                origins: args.origins.clone(),
                max_body: usize::try_from(args.max_body.0).unwrap_or(usize::MAX),
                idle_session: args.session_idle,
                max_tenant_sessions: args.max_tenant_sessions as usize,
                ..admission
            };
            mcp::serve_http(server, listener, options, shutdown).await;
        }
    }
    Ok(())
}

/// Calls one tenant may have in flight: `--max-tenant-calls`, else three
/// quarters of the call slots.
fn tenant_calls(args: &ServeArgs) -> usize {
    let slots = args.host.max_concurrency.unwrap_or(DEFAULT_CONCURRENCY);
    match args.max_tenant_calls {
        Some(calls) => calls as usize,
        None => (slots as usize * 3 / 4).max(1),
    }
}

/// The server's settings, with the per-tool call settings of
/// `[calls.<tool>]` and the operator's `--approve` list.
fn server_builder(
    host: &ToolHost,
    args: &ServeArgs,
    config: Option<&ConfigFile>,
) -> Result<McpServerBuilder, ConfigError> {
    let mut builder = McpServer::builder(host.clone())
        .load_wait(args.load_wait)
        .approval_handler(Arc::new(ApproveTools::named(args.approve.iter().cloned())))
        .ask_wait(args.host.ask.wait)
        .offer_session_approval(args.host.ask.offer_session)
        .tenant_calls(Some(tenant_calls(args)))
        .request_budget(args.host.max_request_calls, args.host.max_request_runs);
    if let Some(config) = config {
        for (tool, settings) in call_settings(config)? {
            builder = builder.call_settings(tool, settings);
        }
    }
    Ok(builder)
}

/// The files and folders `--watch` polls: those named (config aliases stand
/// for their component files), or every configured component file.
/// Registry components are not watched: a reference names fixed content or
/// a tag, which a restart resolves again.
fn watched_paths(tools: &[String], config: Option<&ConfigFile>) -> Vec<PathBuf> {
    let file = |component: &ComponentLocation| match component {
        ComponentLocation::File(path) => Some(path.clone()),
        ComponentLocation::Registry(_) => None,
    };
    if tools.is_empty() {
        return config
            .map(|c| {
                c.tools
                    .values()
                    .filter_map(|t| file(&t.component))
                    .collect()
            })
            .unwrap_or_default();
    }
    tools
        .iter()
        .filter_map(|target| match config.and_then(|c| c.tools.get(target)) {
            Some(tool) => file(&tool.component),
            None if wasm_agent::oci::ComponentRef::is_reference(target) => None,
            None => Some(PathBuf::from(target)),
        })
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

/// The resource server `--auth-issuer` and its flags describe, with the
/// issuer's keys fetched.
async fn resource_server(issuer: &str, args: &ServeArgs) -> anyhow::Result<mcp::ResourceServer> {
    let audience = args.auth_audience.clone().context(
        "--auth-issuer needs --auth-audience URL: this server's public URL, which tokens \
         must name as their audience (e.g. https://tools.example.com/mcp)",
    )?;
    let options = mcp::OAuthOptions {
        issuer: issuer.to_string(),
        audience,
        tenant_claim: args.auth_tenant_claim.clone(),
        jwks_url: args.auth_jwks.clone(),
        scopes: args.auth_scopes.clone(),
        keys_max_age: args.auth_keys_max_age,
    };
    Ok(mcp::ResourceServer::start(options).await?)
}
