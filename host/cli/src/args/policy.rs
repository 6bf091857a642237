//! The policy keys as flags, one to one.

use std::collections::BTreeMap;
use std::time::Duration;

use clap::Args;

use super::parse_duration;
use wasm_agent::policy::{AskGrant, ByteSize, DirGrant, NetworkGrant, PolicyLayer};

/// Policy keys as flags; each overrides the config (lists and maps extend it).
#[derive(Debug, Args)]
#[command(next_help_heading = "Policy")]
pub struct PolicyFlags {
    /// Wall-clock limit per call, e.g. 500ms, 5s (default 10s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Instruction budget per call (default unlimited).
    #[arg(long, value_name = "N")]
    pub fuel: Option<u64>,
    /// Memory limit per call, e.g. 32MiB (default 64MiB).
    #[arg(long, value_name = "SIZE")]
    pub memory: Option<ByteSize>,
    /// Grant a host directory: HOST[:GUEST][:ro|:rw] (default guest = absolute host path, ro).
    #[arg(long = "allow-dir", value_name = "HOST[:GUEST][:ro|:rw]")]
    pub dirs: Vec<DirGrant>,
    /// Set an environment variable of the tool (nothing is inherited).
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = parse_pair)]
    pub env: Vec<(String, String)>,
    /// Set a dependency value served by host.dependency(NAME).
    #[arg(long = "dependency", value_name = "NAME=VALUE", value_parser = parse_pair)]
    pub dependencies: Vec<(String, String)>,
    /// Largest result (content + artifacts), e.g. 1MiB (default 1MiB).
    #[arg(long, value_name = "SIZE")]
    pub max_output: Option<ByteSize>,
    /// Grant network access: scheme://host[:port], e.g. https://api.example.com,
    /// https://*.example.com, http://127.0.0.1:8080, tcp://10.0.0.0/8:5432 (repeatable).
    #[arg(long = "allow-host", value_name = "PATTERN")]
    pub network: Vec<NetworkGrant>,
    /// Largest HTTP response body a tool may receive, e.g. 10MiB (default 10MiB).
    #[arg(long, value_name = "SIZE")]
    pub max_response: Option<ByteSize>,
    /// Most HTTP requests one call may make (default 50).
    #[arg(long, value_name = "N")]
    pub max_requests: Option<u32>,
    /// Add a header to requests for matching hosts, e.g.
    /// 'api.example.com:Authorization=Bearer ${TOKEN}' (${VAR} reads the host
    /// environment; the tool never sees the value).
    #[arg(long = "http-header", value_name = "HOST:NAME=VALUE", value_parser = parse_header)]
    pub http_headers: Vec<(String, String, String)>,
    /// Let the tool hand sub-tasks to the agent NAME with host.delegate
    /// (repeatable; `*` for any agent). Used by `run`.
    #[arg(long = "allow-delegate", value_name = "NAME")]
    pub delegate: Vec<String>,
    /// Largest arguments text a call accepts, e.g. 256KiB (default 1MiB).
    #[arg(long, value_name = "SIZE")]
    pub max_arguments: Option<ByteSize>,
    /// Most artifacts one result may carry (default 64).
    #[arg(long, value_name = "N")]
    pub max_artifacts: Option<u32>,
    /// Most host resources (files, sockets, streams, HTTP fields) one call may
    /// hold at once (default 256).
    #[arg(long, value_name = "N")]
    pub max_resources: Option<u32>,
    /// Most tools one component may list (default 128).
    #[arg(long, value_name = "N")]
    pub max_tools: Option<u32>,
    /// Longest tool description a component may list (default 16KiB).
    #[arg(long, value_name = "SIZE")]
    pub max_description: Option<ByteSize>,
    /// Largest parameters schema a component may list per tool (default 64KiB).
    #[arg(long, value_name = "SIZE")]
    pub max_schema: Option<ByteSize>,
    /// Bytes one call may write into its read-write folders, e.g. 1GiB
    /// (default 64MiB).
    #[arg(long, value_name = "SIZE")]
    pub max_write: Option<ByteSize>,
    /// Let the tool call the host's tools matching PATTERN with
    /// host.call-tool (repeatable; `json_*`, `*` for all). Code mode.
    #[arg(long = "allow-call-tool", value_name = "PATTERN")]
    pub call_tools: Vec<String>,
    /// Give each call a fresh, empty read-write folder at /scratch, removed
    /// when the call ends (run_python returns the files left in it).
    #[arg(long)]
    pub scratch: bool,
    /// Keep the tool's instance for the next call of the same session, so
    /// its variables persist (run_python, run_javascript as notebooks).
    #[arg(long)]
    pub keep_instance: bool,
    /// Drop a kept instance after this long unused (default 10m).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub kept_idle: Option<Duration>,
    /// Send the call's W3C traceparent with the tool's outgoing HTTP
    /// requests, so its backends join the trace (with --otlp).
    #[arg(long)]
    pub propagate_trace: bool,
    /// Let the tool have a capability once the person behind the call allows
    /// it (MCP elicitation, or the terminal): a network pattern such as
    /// https://*.github.com or a folder such as /home/me/docs:ro (repeatable).
    #[arg(long = "ask", value_name = "PATTERN|FOLDER")]
    pub ask: Vec<AskGrant>,
}

impl PolicyFlags {
    /// The flags as a policy layer over the config.
    pub fn layer(&self) -> PolicyLayer {
        PolicyLayer {
            timeout: self.timeout,
            fuel: self.fuel,
            memory: self.memory,
            dirs: self.dirs.clone(),
            env: self.env.iter().cloned().collect::<BTreeMap<_, _>>(),
            dependencies: self.dependencies.iter().cloned().collect(),
            max_output: self.max_output,
            network: self.network.clone(),
            max_response: self.max_response,
            max_requests: self.max_requests,
            delegate: self.delegate.clone(),
            max_arguments: self.max_arguments,
            max_artifacts: self.max_artifacts,
            max_resources: self.max_resources,
            max_tools: self.max_tools,
            max_description: self.max_description,
            max_schema: self.max_schema,
            max_write: self.max_write,
            call_tools: self.call_tools.clone(),
            scratch: self.scratch.then_some(true),
            keep_instance: self.keep_instance.then_some(true),
            kept_idle: self.kept_idle,
            propagate_trace: self.propagate_trace.then_some(true),
            ask: self.ask.clone(),
            http_headers: self.http_headers.iter().fold(
                BTreeMap::<String, BTreeMap<String, String>>::new(),
                |mut all, (pattern, name, value)| {
                    all.entry(pattern.clone())
                        .or_default()
                        .insert(name.clone(), value.clone());
                    all
                },
            ),
        }
    }
}

fn parse_header(text: &str) -> Result<(String, String, String), String> {
    let (pattern, header) = text
        .split_once(':')
        .ok_or_else(|| format!("expected HOST:NAME=VALUE, got {text:?}"))?;
    let (name, value) = parse_pair(header)?;
    Ok((pattern.to_string(), name, value))
}

fn parse_pair(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
        _ => Err(format!("expected KEY=VALUE, got {text:?}")),
    }
}
