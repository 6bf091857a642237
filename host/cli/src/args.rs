//! Command-line arguments. Policy flags mirror the policy keys one to one.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use super::new::Lang;
use wasm_agent::agent::config::AgentConfig;
use wasm_agent::budget::{DEFAULT_REQUEST_CALLS, DEFAULT_REQUEST_RUNS, RequestBudget};
use wasm_agent::policy::{ByteSize, ConfigError, ConfigFile};
use wasm_agent::session::Quotas;

mod policy;
pub use policy::PolicyFlags;

/// Run LLM-agent tools as WebAssembly components under an enforced policy.
#[derive(Debug, Parser)]
#[command(name = "wasm-agent", version, about, max_term_width = 100)]
pub struct Cli {
    /// More log output on stderr (-v: info, -vv: debug); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Export traces (and, under serve, metrics) over OTLP/HTTP to this
    /// collector, e.g. http://127.0.0.1:4318; OTEL_EXPORTER_OTLP_ENDPOINT
    /// does the same.
    #[arg(long, global = true, value_name = "URL")]
    pub otlp: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the tools of components (files, folders of .wasm files, or config aliases).
    Tools(Box<ToolsArgs>),
    /// Compile components into the cache ahead of time (for a container
    /// image or a deployment), so that `serve` starts without compiling.
    Compile(Box<CompileArgs>),
    /// Call one tool once.
    Call(Box<CallArgs>),
    /// Run an agent: a model calls the tools until it answers. Without PROMPT,
    /// chat line by line.
    Run(Box<RunArgs>),
    /// Serve the tools to MCP clients over stdio or streamable HTTP (at /mcp).
    Serve(Box<ServeArgs>),
    /// Pull components from OCI registries into the local store ahead of
    /// time and print their digests.
    Pull {
        /// oci://REGISTRY/REPOSITORY:TAG or oci://REGISTRY/REPOSITORY@sha256:DIGEST
        #[arg(required = true, value_name = "REFERENCE")]
        references: Vec<String>,
        /// Print a JSON array: reference, manifest, digest, path.
        #[arg(long)]
        json: bool,
        /// Also verify each one's cosign signature with this public key.
        #[arg(long, value_name = "FILE")]
        verify_key: Option<PathBuf>,
        /// Where the store is (its oci/ folder; default ~/.cache/wasm-agent).
        #[arg(long, value_name = "DIR", env = "WASM_AGENT_CACHE_DIR")]
        cache_dir: Option<PathBuf>,
        #[command(flatten)]
        registry: RegistryFlags,
    },
    /// Resolve every component of a config (files and OCI references) to its
    /// content digest and write wasm-agent.lock beside the config.
    Lock {
        /// The config file.
        #[arg(long, value_name = "FILE", env = "WASM_AGENT_CONFIG")]
        config: PathBuf,
        /// Where the store is (its oci/ folder; default ~/.cache/wasm-agent).
        #[arg(long, value_name = "DIR", env = "WASM_AGENT_CACHE_DIR")]
        cache_dir: Option<PathBuf>,
        #[command(flatten)]
        registry: RegistryFlags,
    },
    /// Sign components in an OCI registry the way cosign does (a
    /// simple-signing payload at the sha256-DIGEST.sig tag).
    Sign {
        /// The components to sign.
        #[arg(required = true, value_name = "REFERENCE")]
        references: Vec<String>,
        /// The private key: ECDSA P-256 in PEM (PKCS#8 or SEC1), unencrypted.
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
        /// Where the store is (its oci/ folder; default ~/.cache/wasm-agent).
        #[arg(long, value_name = "DIR", env = "WASM_AGENT_CACHE_DIR")]
        cache_dir: Option<PathBuf>,
        #[command(flatten)]
        registry: RegistryFlags,
    },
    /// Access rules: `access explain` shows what an identity may see and call.
    Access {
        #[command(subcommand)]
        command: crate::access::AccessCommand,
    },
    /// Audit logs: `audit verify FILE`.
    Audit {
        #[command(subcommand)]
        command: crate::audit::AuditCommand,
    },
    /// Create a tool project (a working example tool, its build, a README).
    New {
        /// The project's name (letters, digits, '-' and '_').
        name: String,
        /// The language to write the tool in.
        #[arg(long, value_enum)]
        lang: Lang,
        /// Create it here instead of ./NAME.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Rust: the guest-sdk folder of a wasm-agent checkout (default: the
        /// one this binary was built from).
        #[arg(long, value_name = "DIR")]
        sdk: Option<PathBuf>,
    },
}

/// `wasm-agent tools`.
#[derive(Debug, Args)]
pub struct ToolsArgs {
    /// Component files, folders or aliases from the config; none = every configured tool.
    pub targets: Vec<String>,
    /// Print the full specs as JSON.
    #[arg(long)]
    pub json: bool,
    /// List the tools another MCP server offers instead: a command line to
    /// start ('python3 server.py', spoken to over stdio) or an http(s)://
    /// URL (streamable HTTP). Repeatable.
    #[arg(
        long = "mcp",
        value_name = "'COMMAND ARGS'|URL",
        conflicts_with = "targets"
    )]
    pub mcp: Vec<String>,
    /// The environment variable holding a bearer token for the --mcp URL.
    #[arg(long, value_name = "VAR", requires = "mcp")]
    pub mcp_bearer_env: Option<String>,
    #[command(flatten)]
    pub host: HostFlags,
}

/// `wasm-agent compile`.
#[derive(Debug, Args)]
pub struct CompileArgs {
    /// Component files, folders or aliases from the config; none = every configured tool.
    pub targets: Vec<String>,
    /// Print one JSON object per component: component, tools, cache
    /// (`hit` or `compiled`), load_time_ms.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub host: HostFlags,
}

/// `wasm-agent call`.
#[derive(Debug, Args)]
pub struct CallArgs {
    /// The component file or config alias.
    pub component: String,
    /// The tool's name.
    pub tool: String,
    /// Arguments as JSON text, or `-` to read them from stdin (default `{}`).
    pub arguments: Option<String>,
    /// Print exactly one JSON object: tool, content, artifacts, error, duration_ms.
    #[arg(long)]
    pub json: bool,
    /// Session id (tools keep state per session).
    #[arg(long, default_value = "default")]
    pub session: String,
    /// User id given to the tool.
    #[arg(long)]
    pub user: Option<String>,
    /// Tenant id given to the tool.
    #[arg(long)]
    pub tenant: Option<String>,
    /// Metadata given to the tool (a JSON object).
    #[arg(long, value_name = "JSON")]
    pub metadata: Option<String>,
    /// Also load these components, folders or config aliases, so the tool
    /// can call their tools (with --allow-call-tool: code mode).
    #[arg(long = "with", value_name = "COMPONENT|DIR", num_args = 1..)]
    pub with: Vec<String>,
    /// Approve, without asking, calls that need approval of TOOL (or all)
    /// when the tool calls them (the tool named here is approved by naming
    /// it).
    #[arg(long, value_name = "TOOL|all")]
    pub approve: Vec<String>,
    #[command(flatten)]
    pub host: HostFlags,
}

/// `wasm-agent serve`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("transport").required(true))]
pub struct ServeArgs {
    /// Talk MCP over stdin/stdout (for clients that start the server).
    #[arg(long, group = "transport")]
    pub stdio: bool,
    /// Serve streamable HTTP on ADDR (default 127.0.0.1:8787); port 0 picks one.
    #[arg(
        long,
        group = "transport",
        value_name = "ADDR",
        num_args = 0..=1,
        default_missing_value = "127.0.0.1:8787"
    )]
    pub http: Option<SocketAddr>,
    /// Component files or folders of .wasm files (default: every configured tool).
    #[arg(long = "tools", value_name = "COMPONENT|DIR", num_args = 1..)]
    pub tools: Vec<String>,
    /// Reload components added to, changed in or removed from the tools
    /// folders (and named files), and tell clients the tool list changed.
    #[arg(long)]
    pub watch: bool,
    /// Allow calls that need approval for TOOL (or all); refused otherwise.
    #[arg(long, value_name = "TOOL|all")]
    pub approve: Vec<String>,
    /// HTTP: require `Authorization: Bearer TOKEN`.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "WASM_AGENT_MCP_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// HTTP: accept the tokens whose SHA-256 digests FILE lists, each with
    /// its principal and tenant ([[tokens]] sha256, principal, tenant).
    #[arg(long, value_name = "FILE", env = "WASM_AGENT_MCP_TOKENS")]
    pub tokens: Option<PathBuf>,
    /// Keys that seal the requestState of questions asked with a call's
    /// answer (2026-07-28 clients): [[keys]] id, secret (hex, 32+ bytes);
    /// the first seals, all open. Replicas must share them (default: a key
    /// of this process alone).
    #[arg(long, value_name = "FILE", env = "WASM_AGENT_REQUEST_STATE_KEYS")]
    pub request_state_keys: Option<PathBuf>,
    #[command(flatten)]
    pub code_mode: CodeModeFlag,
    /// HTTP: accept bearer JWTs this OAuth issuer signed (keys from its
    /// metadata's jwks_uri); the principal is `sub`.
    #[arg(long, value_name = "URL")]
    pub auth_issuer: Option<String>,
    /// HTTP: the audience tokens must name: this server's public URL
    /// (e.g. https://tools.example.com/mcp).
    #[arg(long, value_name = "URL", requires = "auth_issuer")]
    pub auth_audience: Option<String>,
    /// HTTP: the token claim that names the tenant (tokens without it are refused).
    #[arg(long, value_name = "CLAIM", requires = "auth_issuer")]
    pub auth_tenant_claim: Option<String>,
    /// HTTP: the issuer's key set, if its metadata does not name it.
    #[arg(long, value_name = "URL", requires = "auth_issuer")]
    pub auth_jwks: Option<String>,
    /// HTTP: a scope every token must grant (`scope` or `scp` claim; 403
    /// insufficient_scope otherwise), advertised in the metadata (repeatable).
    #[arg(long = "auth-scope", value_name = "SCOPE", requires = "auth_issuer")]
    pub auth_scopes: Vec<String>,
    /// HTTP: refuse tokens rather than check them with issuer keys fetched
    /// longer ago than this (the issuer unreachable meanwhile).
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = parse_duration, requires = "auth_issuer")]
    pub auth_keys_max_age: Duration,
    /// HTTP: also accept this browser Origin (e.g. https://app.example.com:443).
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub origins: Vec<String>,
    /// HTTP: also accept requests for this Host name (loopback names always are).
    #[arg(long = "allow-host-header", value_name = "NAME")]
    pub host_headers: Vec<String>,
    /// HTTP: largest request body.
    #[arg(long, value_name = "SIZE", default_value = "4MiB")]
    pub max_body: ByteSize,
    /// HTTP: close a session after this long with no request and no open
    /// stream (its tool state goes with it).
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_session_idle)]
    pub session_idle: Duration,
    /// Calls one tenant may have in flight at once (default: three quarters
    /// of --max-concurrency); more are refused as rate_limited, so no tenant
    /// takes every call slot. Calls without a tenant are not bound by it.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tenant_calls: Option<u32>,
    /// HTTP: sessions one tenant may hold open (default 768 of the 1024 a
    /// server holds); more are refused with 429.
    #[arg(long, value_name = "N", default_value = "768", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tenant_sessions: u32,
    /// Where results of tools with a cache_ttl ([calls.NAME]) are
    /// kept: memory: (default) or redis://HOST:PORT[/DB], shared by
    /// replicas. Calls go on uncached, with a warning, while Redis is down.
    // A string, parsed later: clap would echo a refused URL, password and all.
    #[arg(long, value_name = "URL", env = "WASM_AGENT_CACHE")]
    pub cache: Option<String>,
    /// Longest `tools/list` and `tools/call` wait for components still
    /// compiling at start (at most 1h; the default stays under clients'
    /// usual 60 s request timeout); then the tools loaded so far are
    /// listed, and clients hear `list_changed` once the rest are in.
    #[arg(long, value_name = "DURATION", default_value = "50s", value_parser = parse_load_wait)]
    pub load_wait: Duration,
    /// Also answer GET /healthz and /readyz here (no token), e.g. on an
    /// address only the load balancer reaches; /mcp answers them too.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    #[command(flatten)]
    pub console: crate::console::ConsoleFlags,
    #[command(flatten)]
    pub host: HostFlags,
}

/// `wasm-agent run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// What to ask; without it, read prompts line by line (a chat).
    pub prompt: Option<String>,
    /// PROVIDER:MODEL: openai:, anthropic:, gemini:, ollama: or openai-compatible:
    /// (default: [agent] model in the config).
    #[arg(long, short, value_name = "PROVIDER:MODEL", env = "WASM_AGENT_MODEL")]
    pub model: Option<String>,
    /// The provider's base URL (needed for openai-compatible:).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Component files, folders or config aliases (default: every configured tool).
    #[arg(long = "tools", value_name = "COMPONENT|DIR")]
    pub tools: Vec<String>,
    /// System instructions (default: [agent] instructions).
    #[arg(long, value_name = "TEXT")]
    pub instructions: Option<String>,
    /// Session id: tools' state and, when given, the conversation persist
    /// across runs.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// User id given to tools.
    #[arg(long)]
    pub user: Option<String>,
    /// Tenant id given to tools (cached results are kept per tenant).
    #[arg(long)]
    pub tenant: Option<String>,
    /// Where results of tools with a cache_ttl are kept: memory: (default)
    /// or redis://HOST:PORT[/DB], shared by every run and replica. Calls go
    /// on uncached, with a warning, while Redis is down.
    // A string, parsed later: clap would echo a refused URL, password and all.
    #[arg(long, value_name = "URL", env = "WASM_AGENT_CACHE")]
    pub cache: Option<String>,
    /// Approve calls of TOOL without asking (repeatable; `all` approves every tool).
    #[arg(long, value_name = "TOOL|all")]
    pub approve: Vec<String>,
    /// Model turns with tool calls per prompt (default 10).
    #[arg(long, value_name = "N")]
    pub max_roundtrips: Option<usize>,
    /// Tool calls of one turn run in parallel batches of N (default 5).
    #[arg(long, value_name = "N")]
    pub parallel: Option<usize>,
    #[command(flatten)]
    pub code_mode: CodeModeFlag,
    /// Print the whole run (text, tool calls, usage) as one JSON object.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub mcp: crate::remote_tools::McpFlags,
    #[command(flatten)]
    pub host: HostFlags,
}

/// Flags shared by every command that loads components.
#[derive(Debug, Args)]
pub struct HostFlags {
    /// Config file with [defaults] and [tools.<alias>] sections.
    #[arg(long, value_name = "FILE", env = "WASM_AGENT_CONFIG")]
    pub config: Option<PathBuf>,
    /// Where compiled components are cached (default ~/.cache/wasm-agent).
    #[arg(long, value_name = "DIR", env = "WASM_AGENT_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Compile every component afresh; write no cache.
    #[arg(long)]
    pub no_cache: bool,
    /// Where session state is kept (default ~/.local/share/wasm-agent).
    #[arg(long, value_name = "DIR", env = "WASM_AGENT_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// The session store: sqlite:PATH (default: sessions.db in the data
    /// dir), postgres://USER@HOST:PORT/DB (shared by replicas) or memory:.
    // A string, parsed later: clap would echo a refused URL, password and all.
    #[arg(long, value_name = "URL", env = "WASM_AGENT_STORE")]
    pub store: Option<String>,
    /// Sandboxed calls that may run at once; more wait their turn.
    #[arg(long, value_name = "N")]
    pub max_concurrency: Option<u32>,
    /// Tool calls one request (a `call`, an MCP tools/call, a `run`) may
    /// cause in all, by tools calling tools and delegated agents included.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_REQUEST_CALLS,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_request_calls: u32,
    /// Tool state one principal may keep in all its sessions and tools
    /// (keys and values), in any store.
    #[arg(long, value_name = "SIZE", default_value = "256MiB")]
    pub state_per_principal: ByteSize,
    /// Tool state one tenant may keep in all, its principals together.
    #[arg(long, value_name = "SIZE", default_value = "1GiB")]
    pub state_per_tenant: ByteSize,
    /// A session whose tool state and conversation were last written longer
    /// ago than this has them deleted, in any store.
    #[arg(long, value_name = "DURATION", default_value = "30days", value_parser = parse_state_idle)]
    pub state_idle: Duration,
    /// Delegated agent runs one request may cause in all.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_REQUEST_RUNS)]
    pub max_request_runs: u32,
    /// Instances tools with --keep-instance may keep between calls, in all
    /// (default 16).
    #[arg(long, value_name = "N")]
    pub max_kept_instances: Option<u32>,
    /// Refuse components whose content digest differs from wasm-agent.lock
    /// beside the config (as `locked = true` in the config does).
    #[arg(long)]
    pub locked: bool,
    #[command(flatten)]
    pub registry: RegistryFlags,
    #[command(flatten)]
    pub audit: crate::audit::AuditFlags,
    #[command(flatten)]
    pub ask: AskFlags,
    #[command(flatten)]
    pub policy: PolicyFlags,
}

/// How the person behind the calls is asked (approvals, `ask` grants): the
/// MCP client's user over elicitation, or the user at the terminal.
#[derive(Debug, Args)]
#[command(next_help_heading = "Asking the user")]
pub struct AskFlags {
    /// How long a question waits for the user's answer; no answer denies.
    #[arg(long = "ask-wait", value_name = "DURATION", default_value = "2m", value_parser = parse_duration)]
    pub wait: Duration,
    /// Offer "allow for this session" besides "allow once" and "deny".
    #[arg(long = "ask-session")]
    pub offer_session: bool,
}

/// How components named `oci://...` are pulled.
#[derive(Debug, Args)]
#[command(next_help_heading = "Registries")]
pub struct RegistryFlags {
    /// Use only components already in the local store; no network.
    #[arg(long)]
    pub offline: bool,
    /// Speak plain HTTP to this registry (loopback only, e.g. 127.0.0.1:5000).
    #[arg(long, value_name = "HOST:PORT")]
    pub insecure_registry: Vec<String>,
    /// Longest a pull (manifest and component) may take.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub registry_timeout: Duration,
    /// Largest component pulled.
    #[arg(long, value_name = "SIZE", default_value = "256MiB")]
    pub max_component_size: ByteSize,
}

impl HostFlags {
    /// The limits of tool state, as the flags set them.
    pub fn quotas(&self) -> Quotas {
        let bytes = |size: ByteSize| usize::try_from(size.0).unwrap_or(usize::MAX);
        Quotas {
            max_owner_bytes: bytes(self.state_per_principal),
            max_tenant_bytes: bytes(self.state_per_tenant),
            max_idle: self.state_idle,
            ..Quotas::default()
        }
    }

    /// A fresh budget for one request, as the flags set it.
    pub fn request_budget(&self) -> RequestBudget {
        RequestBudget::new(self.max_request_calls, self.max_request_runs)
    }

    /// The config file named by `--config`, parsed and checked (its
    /// `[agent]` section too, whatever the command).
    pub fn load_config(&self) -> Result<Option<ConfigFile>, ConfigError> {
        let Some(path) = self.config.as_deref() else {
            return Ok(None);
        };
        let file = ConfigFile::load(path)?;
        AgentConfig::from_file(&file)?;
        Ok(Some(file))
    }
}

pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("{e}: expected a duration such as 500ms, 5s or 2m"))
}

fn parse_state_idle(text: &str) -> Result<Duration, String> {
    let idle = parse_duration(text)?;
    if idle < Duration::from_secs(1) {
        return Err("must be at least 1s".into());
    }
    Ok(idle)
}

fn parse_session_idle(text: &str) -> Result<Duration, String> {
    let idle = parse_duration(text)?;
    if idle.is_zero() {
        return Err(format!("{text}: a session must be allowed some idle time"));
    }
    Ok(idle)
}

fn parse_load_wait(text: &str) -> Result<Duration, String> {
    let wait = parse_duration(text)?;
    if wait > Duration::from_secs(3600) {
        return Err(format!(
            "{text} is longer than the 1h a client may be kept waiting"
        ));
    }
    Ok(wait)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    /// Every policy key has a flag: the layer built from flags covers them all.
    #[test]
    fn every_policy_key_has_a_flag() {
        let cli = Cli::try_parse_from([
            "wasm-agent",
            "call",
            "c.wasm",
            "t",
            "--timeout",
            "1s",
            "--fuel",
            "5",
            "--memory",
            "2MiB",
            "--allow-dir",
            "/tmp",
            "--env",
            "A=1",
            "--dependency",
            "B=2",
            "--max-output",
            "1KiB",
            "--allow-host",
            "https://example.com",
            "--max-response",
            "1MiB",
            "--max-requests",
            "3",
            "--http-header",
            "a.com:X=1",
            "--allow-delegate",
            "researcher",
            "--max-arguments",
            "1KiB",
            "--max-artifacts",
            "2",
            "--max-resources",
            "32",
            "--max-tools",
            "4",
            "--max-description",
            "1KiB",
            "--max-schema",
            "4KiB",
            "--max-write",
            "1MiB",
            "--scratch",
            "--allow-call-tool",
            "calculate",
            "--keep-instance",
            "--kept-idle",
            "5m",
            "--propagate-trace",
            "--ask",
            "https://*.github.com",
        ])
        .unwrap();
        let Command::Call(call) = cli.command else {
            panic!("not a call")
        };
        let host = call.host;
        let layer = serde_json::to_value(host.policy.layer()).unwrap();
        let policy = serde_json::to_value(wasm_agent::Policy::default()).unwrap();
        let flag_keys: Vec<_> = layer.as_object().unwrap().keys().cloned().collect();
        let missing: Vec<_> = policy
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| !flag_keys.contains(k))
            .collect();
        assert!(
            missing.is_empty(),
            "policy keys without a flag: {missing:?}"
        );
    }
}

/// `--code-mode[=LANGUAGE]` of `run` and `serve`.
#[derive(Debug, Clone, Args)]
pub struct CodeModeFlag {
    /// Code mode: offer one tool, run_code, the interpreter, whose
    /// description lists the other tools as functions its code may call
    /// (=python: Monty's run_monty if loaded, else CPython's run_python;
    /// =monty, =cpython, =javascript; alone: whichever is loaded). The
    /// interpreter may call every tool unless its config or
    /// --allow-call-tool names which.
    #[arg(
        long = "code-mode",
        value_name = "LANGUAGE",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "auto"
    )]
    pub language: Option<String>,
}
