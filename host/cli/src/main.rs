//! The `wasm-agent` command line.

mod access;
mod args;
mod audit;
mod audit_verify;
mod call;
mod code_mode;
mod compile;
mod components;
mod console;
mod new;
mod oci_commands;
mod otel;
mod output;
mod remote_tools;
mod resident;
mod run;
mod serve;
mod store;
mod terminal;
mod watch;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Parser;
use wasm_agent::policy::{ConfigFile, Policy};
use wasm_agent::{InMemorySessionStore, SessionStore, ToolHost, ToolHostBuilder};

use args::{Cli, Command, HostFlags, ToolsArgs};
use components::{Location, Target};

/// Exit code when the call returned an error.
const EXIT_CALL_FAILED: u8 = 1;
/// Exit code for usage, config and load errors.
const EXIT_USAGE: u8 = 2;

/// Instantiating a component per call allocates many small objects; mimalloc
/// handles that pattern markedly faster than the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// An error and its causes on one line, each cause only when the text so far
/// does not say it already (library errors print their reason themselves and
/// also keep it as their source).
fn error_chain(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&cause);
        }
    }
    text
}

/// Parses arguments, runs the command and maps every outcome to an exit code.
fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // Idle blocking threads (compiles ran on them) end soon, and their
        // allocator heaps can be given back (`return_freed_memory`).
        .thread_keep_alive(std::time::Duration::from_millis(200))
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if let Err(e) = otel::init(cli.verbose, cli.otlp.as_deref(), &runtime) {
        eprintln!(
            "error: {}",
            wasm_agent::text::one_line(&wasm_agent::redact::text(&error_chain(&e)))
        );
        return ExitCode::from(EXIT_USAGE);
    }
    compile_in_the_background();
    // Calls reserve descriptors from the soft limit: make it as large as allowed.
    if let Err(e) = wasm_agent::sandbox::raise_open_file_limit() {
        tracing::warn!("cannot raise the open-file limit: {e}");
    }
    let code = match runtime.block_on(run(cli)).and_then(|code| {
        // Every record written before the process ends.
        audit::flush()?;
        Ok(code)
    }) {
        Ok(code) => code,
        Err(e) => {
            // Errors may quote a component's own text: escape it.
            eprintln!(
                "error: {}",
                wasm_agent::text::one_line(&wasm_agent::redact::text(&error_chain(&e)))
            );
            ExitCode::from(EXIT_USAGE)
        }
    };
    otel::finish(&runtime);
    // A read of stdin blocked in a worker thread (serve --stdio) must not
    // keep the process alive once the command is done.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    code
}

/// mimalloc's `arena_eager_commit` option (its index in v3's `mi_option_e`,
/// which the crate does not name).
const MI_OPTION_ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// Has mimalloc commit its arenas as they are used, not at once: with eager
/// commit it kept resident every page a burst of work had touched (a load,
/// a compile): 15 of a one-tool server's 38 MiB. It runs as a constructor,
/// before the first allocation reserves the first arena.
#[used]
#[unsafe(link_section = ".init_array")]
static COMMIT_HEAP_ON_DEMAND: extern "C" fn() = {
    extern "C" fn commit_heap_on_demand() {
        // SAFETY: options may be set at any time, before mimalloc's own
        // initialisation too; this one applies to arenas reserved later.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_EAGER_COMMIT, 0) }
    }
    commit_heap_on_demand
};

/// Gives the memory freed after compiling (often hundreds of MiB) back to
/// the system, rather than keeping it for later allocations.
/// Each thread's heap is its own, so the compile threads collect theirs.
pub(crate) fn return_freed_memory() {
    // SAFETY: mi_collect only releases memory mimalloc holds unused.
    let collect = || unsafe { libmimalloc_sys::mi_collect(true) };
    rayon::broadcast(|_| collect());
    collect();
}

/// Components compile on rayon's threads (wasmtime's parallel compilation);
/// they run at a lower priority, so a server compiling in the background
/// still answers its client at once.
fn compile_in_the_background() {
    let lower_priority = |_: usize| {
        #[cfg(target_os = "linux")]
        // SAFETY: setpriority on the calling thread (its id from gettid) has
        // no memory effects; a failure only leaves the priority as it was.
        unsafe {
            let thread = libc::gettid() as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, thread, 10);
        }
    };
    if let Err(e) = rayon::ThreadPoolBuilder::new()
        .thread_name(|i| format!("wasm-agent-compile-{i}"))
        .start_handler(lower_priority)
        .build_global()
    {
        tracing::debug!("cannot set up the compile threads: {e}");
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Tools(args) => {
            let ToolsArgs {
                targets,
                json,
                mcp,
                mcp_bearer_env,
                host,
            } = *args;
            let tools = if mcp.is_empty() {
                load_targets(&targets, &host).await?.tools()
            } else {
                remote_tools::listed(mcp, mcp_bearer_env).await?
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&tools)?);
            } else {
                print!("{}", output::tools_table(&tools));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Compile(args) => compile::compile(*args).await,
        Command::Call(args) => call::call(*args).await,
        Command::Pull {
            references,
            json,
            verify_key,
            cache_dir,
            registry,
        } => {
            oci_commands::pull(
                &references,
                json,
                verify_key.as_deref(),
                cache_dir.as_deref(),
                &registry,
            )
            .await
        }
        Command::Lock {
            config,
            cache_dir,
            registry,
        } => oci_commands::lock(&config, cache_dir.as_deref(), &registry).await,
        Command::Sign {
            references,
            key,
            cache_dir,
            registry,
        } => oci_commands::sign(&references, &key, cache_dir.as_deref(), &registry).await,
        Command::Run(args) => run::run(*args).await,
        Command::Serve(args) => serve::serve(*args).await,
        Command::Access {
            command: access::AccessCommand::Explain(args),
        } => access::explain(*args).await,
        Command::Audit {
            command:
                audit::AuditCommand::Verify {
                    file,
                    partial,
                    json,
                    heads,
                },
        } => audit_verify::verify(&file, partial, &heads, json).map(|()| ExitCode::SUCCESS),
        Command::New {
            name,
            lang,
            dir,
            sdk,
        } => new::new_project(&name, lang, dir, sdk),
    }
}

fn read_arguments(arguments: Option<String>) -> anyhow::Result<String> {
    match arguments.as_deref() {
        None => Ok("{}".into()),
        Some("-") => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("cannot read the arguments from stdin")?;
            Ok(text)
        }
        Some(text) => Ok(text.to_string()),
    }
}

async fn load_targets(targets: &[String], flags: &HostFlags) -> anyhow::Result<ToolHost> {
    let config = flags.load_config()?;
    load_targets_with(
        targets,
        flags,
        config.as_ref(),
        Arc::new(InMemorySessionStore::default()),
        None,
    )
    .await
}

/// Loads components into a new host whose tools keep state in `sessions`.
async fn load_targets_with(
    targets: &[String],
    flags: &HostFlags,
    config: Option<&ConfigFile>,
    sessions: Arc<dyn SessionStore>,
    entry: Option<&str>,
) -> anyhow::Result<ToolHost> {
    load_targets_adjusted(targets, flags, config, sessions, entry, |_, _| {}).await
}

/// [`load_targets_with`], after `adjust` has seen each target's name and
/// policy (as the config gives it, before the flags).
async fn load_targets_adjusted(
    targets: &[String],
    flags: &HostFlags,
    config: Option<&ConfigFile>,
    sessions: Arc<dyn SessionStore>,
    entry: Option<&str>,
    adjust: impl Fn(&str, &mut Policy),
) -> anyhow::Result<ToolHost> {
    let mut resolved = resolve_targets(targets, config, false)?;
    for target in &mut resolved {
        adjust(&target.name, &mut target.policy);
    }
    let components = components::load_list(resolved, flags, config).await?;
    let host = host_builder(flags, config, sessions, entry)?.build()?;
    host.load_all(components).await?;
    Ok(host)
}

/// A host with the flags' concurrency and cache, and no tools yet; for a
/// command that makes calls (`entry`), the audit log, if one is named.
fn host_builder(
    flags: &HostFlags,
    config: Option<&ConfigFile>,
    sessions: Arc<dyn SessionStore>,
    entry: Option<&str>,
) -> anyhow::Result<ToolHostBuilder> {
    let mut builder = ToolHost::builder().session_store(sessions);
    if let Some(entry) = entry
        && let Some(log) = audit::shared(&flags.audit, config, entry)?
    {
        builder = builder.auditor(log);
    }
    if let Some(calls) = flags.max_concurrency {
        builder = builder.max_concurrency(calls);
    }
    if let Some(instances) = flags.max_kept_instances {
        builder = builder.max_kept_instances(instances);
    }
    if flags.no_cache {
        builder = builder.no_cache();
    } else if let Some(dir) = &flags.cache_dir {
        builder = builder.cache_dir(dir);
    }
    Ok(builder)
}

/// The components `targets` name (files, folders, config aliases, `oci://`
/// references), or every configured one.
fn resolve_targets(
    targets: &[String],
    config: Option<&ConfigFile>,
    may_be_empty: bool,
) -> anyhow::Result<Vec<Target>> {
    let configured = |alias: &str| -> anyhow::Result<Option<Target>> {
        let Some(config) = config else {
            return Ok(None);
        };
        let (Some(tool), Some(policy)) = (config.tools.get(alias), config.policy_for(alias)) else {
            return Ok(None);
        };
        Ok(Some(Target {
            name: alias.to_string(),
            alias: Some(alias.to_string()),
            location: Location::of(&tool.component, alias)?,
            prefix: tool.prefix.clone(),
            policy,
            verify: tool.verify.as_ref().map(|v| v.key.clone()),
        }))
    };
    if targets.is_empty() {
        let Some(config) = config else {
            bail!("name a component file, a folder of components, or a config alias (--config)");
        };
        let mut all = Vec::new();
        for alias in config.tools.keys() {
            all.extend(configured(alias)?);
        }
        return Ok(all);
    }
    let mut resolved = Vec::new();
    for target in targets {
        if let Some(tool) = configured(target)? {
            resolved.push(tool);
            continue;
        }
        if wasm_agent::oci::ComponentRef::is_reference(target) {
            resolved.push(reference_target(target.parse()?, config));
            continue;
        }
        let path = Path::new(target);
        let files = if path.is_dir() {
            let files = wasm_files(path)?;
            if files.is_empty() && !may_be_empty {
                bail!("{target}: the folder holds no .wasm files");
            }
            files
        } else if path.is_file() {
            vec![path.to_path_buf()]
        } else {
            bail!("{target}: no such component file, folder, config alias or oci:// reference");
        };
        for file in files {
            resolved.push(file_target(file, config));
        }
    }
    Ok(resolved)
}

/// A component file, with its config section's settings if one names it.
fn file_target(file: PathBuf, config: Option<&ConfigFile>) -> Target {
    let canonical = file.canonicalize().ok();
    let configured = config.and_then(|config| {
        config.tools.values().find(|t| match &t.component {
            wasm_agent::policy::ComponentLocation::File(path) => {
                path.canonicalize().ok() == canonical
            }
            wasm_agent::policy::ComponentLocation::Registry(_) => false,
        })
    });
    let name = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "component".into());
    named_target(
        name,
        Location::File(file),
        configured.map(|t| t.alias.as_str()),
        config,
    )
}

/// An `oci://` reference, with the settings of a config section that names it.
fn reference_target(
    reference: wasm_agent::oci::ComponentRef,
    config: Option<&ConfigFile>,
) -> Target {
    let text = reference.to_string();
    let configured = config.and_then(|config| {
        config.tools.values().find(|t| {
            matches!(&t.component, wasm_agent::policy::ComponentLocation::Registry(r) if *r == text)
        })
    });
    let name = reference.name().to_string();
    named_target(
        name,
        Location::Registry(reference),
        configured.map(|t| t.alias.as_str()),
        config,
    )
}

/// A target with its config section's settings (`alias`), or the defaults'.
fn named_target(
    name: String,
    location: Location,
    alias: Option<&str>,
    config: Option<&ConfigFile>,
) -> Target {
    if let (Some(alias), Some(config)) = (alias, config)
        && let (Some(tool), Some(policy)) = (config.tools.get(alias), config.policy_for(alias))
    {
        return Target {
            name: alias.to_string(),
            alias: Some(alias.to_string()),
            location,
            prefix: tool.prefix.clone(),
            policy,
            verify: tool.verify.as_ref().map(|v| v.key.clone()),
        };
    }
    Target {
        name,
        alias: None,
        location,
        prefix: None,
        policy: config.map(ConfigFile::default_policy).unwrap_or_default(),
        verify: config
            .and_then(|c| c.verify.as_ref())
            .map(|v| v.key.clone()),
    }
}

fn wasm_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let path = entry?.path();
        if path.is_file() && path.extension().is_some_and(|e| e == "wasm") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    #[test]
    fn error_chains_say_each_cause_once() {
        let error = anyhow::anyhow!("disk full")
            .context("write failed: disk full")
            .context("cannot save");
        assert_eq!(error_chain(&error), "cannot save: write failed: disk full");
        let error = anyhow::anyhow!("no such file").context("cannot read a.wasm");
        assert_eq!(error_chain(&error), "cannot read a.wasm: no such file");
    }
}
