//! `wasm-agent compile`: components compiled into the cache ahead of time,
//! for a container image or a deployment, so that `serve` and `call` load
//! them without compiling (which takes seconds for an interpreter's
//! component).

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::bail;
use wasm_agent::sandbox::CacheOutcome;
use wasm_agent::{InMemorySessionStore, LoadReport};

use crate::args::CompileArgs;

/// Compiles (or finds in the cache) every component `args` names and says
/// which, with its tools and how long it took.
pub async fn compile(args: CompileArgs) -> anyhow::Result<ExitCode> {
    let CompileArgs {
        targets,
        json,
        host,
    } = args;
    if host.no_cache {
        bail!("--no-cache: nothing compiled would be kept; compile fills the cache (--cache-dir)");
    }
    let config = host.load_config()?;
    let resolved = crate::resolve_targets(&targets, config.as_ref(), false)?;
    if resolved.is_empty() {
        bail!("nothing to compile: name component files, folders or config aliases");
    }
    let components = crate::components::load_list(resolved, &host, config.as_ref()).await?;
    let sessions = Arc::new(InMemorySessionStore::default());
    let tool_host = crate::host_builder(&host, config.as_ref(), sessions, None)?.build()?;
    let reports = tool_host.load_all(components).await?;
    for report in &reports {
        match json {
            true => println!("{}", serde_json::to_string(report)?),
            false => println!("{}", line(report)),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One component's report as a line of text.
fn line(report: &LoadReport) -> String {
    let done = match report.cache {
        CacheOutcome::Hit => "already compiled (cache)",
        CacheOutcome::Compiled => "compiled",
    };
    format!(
        "{}: {done} in {:.2} s; tools: {}",
        report.component,
        report.load_time.as_secs_f64(),
        report.tools.join(", ")
    )
}
