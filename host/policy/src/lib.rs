//! The policy of a tool: what it may use and how much. One type for the library
//! builder, the CLI flags and the config file.
//!
//! Everything is denied unless granted: no directories, no environment, no
//! network, and bounded time, memory and output.

#![warn(missing_docs)]

mod address;
mod ask;
mod config;
mod dirs;
mod headers;
mod layer;
mod names;
mod network;
#[cfg(test)]
mod proptests;
mod size;
mod valid;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use address::{address_kind, is_public};
pub use ask::AskGrant;
pub use config::{ComponentLocation, ConfigError, ConfigFile, ToolConfig, VerifyConfig};
pub use dirs::{DirGrant, DirMode, FolderId};
pub use headers::{CredentialHeaders, HeaderTarget};
pub use layer::{LAYER_KEYS, PolicyLayer};
pub use names::{delegation_allowed, tool_call_allowed};
pub use network::{HostPattern, NetworkGrant, PortPattern, default_port};
pub use size::ByteSize;
pub use valid::{Resolved, Unresolved, ValidPolicy};

/// The largest linear memory a 32-bit WebAssembly guest can address.
pub const MAX_MEMORY: ByteSize = ByteSize::gib(4);

/// What a tool may use and how much, enforced by the sandbox on every call.
/// Its `Debug` output leaves out the values of `env` and `http_headers`
/// (they may be credentials).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Wall-clock limit of one call (default 10 s).
    #[serde(with = "duration_text")]
    pub timeout: Duration,
    /// Instruction budget of one call (unlimited when `None`).
    pub fuel: Option<u64>,
    /// Total linear memory of one instance (default 64 MiB).
    pub memory: ByteSize,
    /// Host directories the tool may see, read-only or read-write.
    pub dirs: Vec<DirGrant>,
    /// The tool's environment; nothing is inherited from the host.
    pub env: BTreeMap<String, String>,
    /// Values served to the tool by `host.dependency(name)`.
    pub dependencies: BTreeMap<String, String>,
    /// Largest result (content plus artifacts) a call may return (default 1 MiB).
    pub max_output: ByteSize,
    /// Hosts the tool may reach (`scheme://host[:port]` patterns); none by default.
    pub network: Vec<NetworkGrant>,
    /// Largest HTTP response body a tool may receive (default 10 MiB).
    pub max_response: ByteSize,
    /// Most outgoing HTTP requests one call may make (default 50).
    pub max_requests: u32,
    /// Headers the host adds to `https` requests whose host matches a
    /// pattern (`api.example.com`, `*.example.com`; `http://HOST` to send
    /// them in cleartext too), e.g. credentials. `${VAR}` in a value reads
    /// the host's environment. The tool never sees them.
    pub http_headers: BTreeMap<String, BTreeMap<String, String>>,
    /// Agents the tool may hand sub-tasks to with `host.delegate` (`*` for
    /// any); none by default.
    pub delegate: Vec<String>,
    /// Largest arguments text a call accepts (default 1 MiB); larger ones are
    /// refused before they are parsed.
    pub max_arguments: ByteSize,
    /// Most artifacts one result may carry (default 64).
    pub max_artifacts: u32,
    /// Most host resources (open files, sockets, streams, HTTP fields,
    /// pollables) one call may hold at once (default 256).
    pub max_resources: u32,
    /// Most tools one component may list (default 128).
    pub max_tools: u32,
    /// Longest tool description a component may list (default 16 KiB).
    pub max_description: ByteSize,
    /// Largest parameters schema a component may list per tool (default 64 KiB).
    pub max_schema: ByteSize,
    /// Bytes one call may write into its read-write folders in all (default
    /// 64 MiB).
    pub max_write: ByteSize,
    /// Tools of the host this tool may call with `host.call-tool` (names or
    /// `*` patterns: `calculate`, `json_*`, `*`); none by default. Such
    /// calls take the path a call from the agent or client takes.
    pub call_tools: Vec<String>,
    /// A fresh, empty read-write folder at `/scratch` for each call, removed
    /// when the call ends (its writes count against `max_write`); off by
    /// default.
    pub scratch: bool,
    /// Keep the instance after a call for the next call of the same session
    /// (tenant, user and session id), so what it holds in memory (an
    /// interpreter's variables) persists, like a notebook; off by default.
    /// A kept instance stays within `memory`, is dropped when a call of it
    /// fails or after `kept_idle` unused, and the host keeps a bounded number.
    pub keep_instance: bool,
    /// How long a kept instance may go unused before it is dropped (default
    /// 10 min).
    #[serde(with = "duration_text")]
    pub kept_idle: Duration,
    /// Send the call's W3C `traceparent` with the tool's outgoing HTTP
    /// requests (to hosts `network` allows), so the tool's backends join the
    /// trace; off by default: a tool's requests carry nothing of the host's.
    pub propagate_trace: bool,
    /// Capabilities the tool gets only when the person behind the call
    /// allows them (network patterns, folders), for that call or session;
    /// asked over MCP elicitation or at the terminal, never of the model.
    /// Without someone to ask, they stay denied.
    pub ask: Vec<AskGrant>,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |map: &BTreeMap<String, String>| map.keys().cloned().collect::<Vec<_>>();
        let headers: BTreeMap<&String, Vec<String>> = self
            .http_headers
            .iter()
            .map(|(pattern, headers)| (pattern, names(headers)))
            .collect();
        f.debug_struct("Policy")
            .field("timeout", &self.timeout)
            .field("fuel", &self.fuel)
            .field("memory", &self.memory)
            .field("dirs", &self.dirs)
            .field("env (names)", &names(&self.env))
            .field("dependencies", &self.dependencies)
            .field("max_output", &self.max_output)
            .field("network", &self.network)
            .field("max_response", &self.max_response)
            .field("max_requests", &self.max_requests)
            .field("http_headers (names)", &headers)
            .field("delegate", &self.delegate)
            .field("max_arguments", &self.max_arguments)
            .field("max_artifacts", &self.max_artifacts)
            .field("max_resources", &self.max_resources)
            .field("max_tools", &self.max_tools)
            .field("max_description", &self.max_description)
            .field("max_schema", &self.max_schema)
            .field("max_write", &self.max_write)
            .field("call_tools", &self.call_tools)
            .field("scratch", &self.scratch)
            .field("keep_instance", &self.keep_instance)
            .field("kept_idle", &self.kept_idle)
            .field("propagate_trace", &self.propagate_trace)
            .field("ask", &self.ask)
            .finish()
    }
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(10),
            fuel: None,
            memory: ByteSize::mib(64),
            dirs: Vec::new(),
            env: BTreeMap::new(),
            dependencies: BTreeMap::new(),
            max_output: ByteSize::mib(1),
            network: Vec::new(),
            max_response: ByteSize::mib(10),
            max_requests: 50,
            http_headers: BTreeMap::new(),
            delegate: Vec::new(),
            max_arguments: ByteSize::mib(1),
            max_artifacts: 64,
            max_resources: 256,
            max_tools: 128,
            max_description: ByteSize::kib(16),
            max_schema: ByteSize::kib(64),
            max_write: ByteSize::mib(64),
            call_tools: Vec::new(),
            scratch: false,
            keep_instance: false,
            kept_idle: Duration::from_secs(600),
            propagate_trace: false,
            ask: Vec::new(),
        }
    }
}

pub mod bounds;

/// Text that does not parse as the policy value it should be (a grant, a
/// size, a duration, a pattern): what, the text, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {text:?}: {reason}")]
pub struct ParseError {
    /// What the text should have been (`network grant`, `size`, ...).
    pub what: &'static str,
    /// The text as given.
    pub text: String,
    /// What is wrong with it, and what would be right.
    pub reason: String,
}

impl ParseError {
    /// `text` is not a valid `what`, because of `reason`.
    pub fn new(what: &'static str, text: &str, reason: impl Into<String>) -> Self {
        Self {
            what,
            text: text.to_string(),
            reason: reason.into(),
        }
    }
}

/// A policy that cannot be enforced as written.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    /// A limit is zero or out of range.
    #[error("{key}: {reason}")]
    Limit {
        /// The policy key.
        key: &'static str,
        /// What is wrong with its value.
        reason: String,
    },
    /// A directory grant names a path that is not a directory.
    #[error("dirs: {path} is not a directory the host can open ({reason})")]
    MissingDir {
        /// The host path as given.
        path: PathBuf,
        /// Why it cannot be used.
        reason: String,
    },
    /// A directory grant's guest path is unusable.
    #[error("dirs: guest path {guest:?} {reason}")]
    GuestPath {
        /// The guest path as given.
        guest: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// A credential header cannot be used.
    #[error("http_headers: {0}")]
    Header(String),
    /// An environment variable name is unusable.
    #[error("env: {0:?} is not a valid variable name (non-empty, no '=' or NUL)")]
    EnvName(String),
    /// A `call_tools` pattern can match no tool name.
    #[error(
        "call_tools: {0:?} is not a tool name or pattern (1-64 characters of [a-zA-Z0-9_-], \
         with `*` for any run of them)"
    )]
    CallToolPattern(String),
}

impl Policy {
    /// Sets the wall-clock limit of one call.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
    /// Sets an instruction budget for one call.
    pub fn fuel(mut self, fuel: u64) -> Self {
        self.fuel = Some(fuel);
        self
    }
    /// Sets the memory limit of one instance.
    pub fn memory(mut self, memory: ByteSize) -> Self {
        self.memory = memory;
        self
    }
    /// Grants a host directory at a guest path.
    pub fn allow_dir(
        mut self,
        host: impl Into<PathBuf>,
        guest: impl Into<String>,
        mode: DirMode,
    ) -> Self {
        self.dirs.push(DirGrant {
            host: host.into(),
            guest: Some(guest.into()),
            mode,
            identity: None,
        });
        self
    }
    /// Sets one environment variable of the tool.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }
    /// Sets a value served by `host.dependency(name)`.
    pub fn dependency(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.dependencies.insert(name.into(), value.into());
        self
    }
    /// Grants access to hosts matching `grant` (`scheme://host[:port]`).
    pub fn allow_host(mut self, grant: NetworkGrant) -> Self {
        self.network.push(grant);
        self
    }
    /// Sets the largest HTTP response body a tool may receive.
    pub fn max_response(mut self, max_response: ByteSize) -> Self {
        self.max_response = max_response;
        self
    }
    /// Sets how many HTTP requests one call may make.
    pub fn max_requests(mut self, max_requests: u32) -> Self {
        self.max_requests = max_requests;
        self
    }
    /// Adds a header to requests whose host matches `host_pattern`.
    pub fn http_header(
        mut self,
        host_pattern: impl Into<String>,
        name: impl Into<String>,
        value: impl Into<String>,
    ) -> Self {
        self.http_headers
            .entry(host_pattern.into())
            .or_default()
            .insert(name.into(), value.into());
        self
    }
    /// Lets the tool delegate to the agent named `agent` (`*`: any agent).
    pub fn allow_delegate(mut self, agent: impl Into<String>) -> Self {
        self.delegate.push(agent.into());
        self
    }
    /// Whether the tool may delegate to `agent`.
    pub fn may_delegate_to(&self, agent: &str) -> bool {
        delegation_allowed(&self.delegate, agent)
    }
    /// Sets the largest result a call may return.
    pub fn max_output(mut self, max_output: ByteSize) -> Self {
        self.max_output = max_output;
        self
    }
    /// Sets the largest arguments text a call accepts.
    pub fn max_arguments(mut self, max_arguments: ByteSize) -> Self {
        self.max_arguments = max_arguments;
        self
    }
    /// Sets how many artifacts one result may carry.
    pub fn max_artifacts(mut self, max_artifacts: u32) -> Self {
        self.max_artifacts = max_artifacts;
        self
    }
    /// Sets how many host resources one call may hold at once.
    pub fn max_resources(mut self, max_resources: u32) -> Self {
        self.max_resources = max_resources;
        self
    }
    /// Sets how many tools the component may list.
    pub fn max_tools(mut self, max_tools: u32) -> Self {
        self.max_tools = max_tools;
        self
    }
    /// Sets the longest tool description the component may list.
    pub fn max_description(mut self, max_description: ByteSize) -> Self {
        self.max_description = max_description;
        self
    }
    /// Sets how many bytes one call may write into its read-write folders.
    pub fn max_write(mut self, max_write: ByteSize) -> Self {
        self.max_write = max_write;
        self
    }
    /// Lets the tool call the host's tools matching `pattern` (`calculate`,
    /// `json_*`, `*`) with `host.call-tool`.
    pub fn allow_call_tool(mut self, pattern: impl Into<String>) -> Self {
        self.call_tools.push(pattern.into());
        self
    }
    /// Keeps the instance for the next call of the same session, dropped
    /// after `idle` unused (see [`Policy::keep_instance`]).
    pub fn keep_instance(mut self, idle: Duration) -> Self {
        self.keep_instance = true;
        self.kept_idle = idle;
        self
    }

    /// Sends the call's `traceparent` with the tool's HTTP requests (see
    /// [`Policy::propagate_trace`]).
    pub fn propagate_trace(mut self, propagate: bool) -> Self {
        self.propagate_trace = propagate;
        self
    }

    /// Lets the tool have `grant` when the person behind the call allows it.
    pub fn ask(mut self, grant: AskGrant) -> Self {
        self.ask.push(grant);
        self
    }

    /// Gives each call a fresh, empty read-write folder at `/scratch`.
    pub fn scratch(mut self, scratch: bool) -> Self {
        self.scratch = scratch;
        self
    }
    /// Sets the largest parameters schema the component may list per tool.
    pub fn max_schema(mut self, max_schema: ByteSize) -> Self {
        self.max_schema = max_schema;
        self
    }
}

/// Durations as text (`500ms`, `5s`, `1m 30s`), as operators write them.
pub mod duration_text {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer, de};

    /// Writes a duration as text (`1m 30s`).
    pub fn serialize<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&humantime::format_duration(*value))
    }

    /// Reads a duration from text.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(deserializer)?;
        parse(&text).map_err(de::Error::custom)
    }

    /// Parses `500ms`, `5s`, `2m`.
    pub fn parse(text: &str) -> Result<Duration, crate::ParseError> {
        humantime::parse_duration(text.trim()).map_err(|e| {
            crate::ParseError::new(
                "duration",
                text,
                format!("{e}; expected e.g. 500ms, 5s or 2m"),
            )
        })
    }

    /// For optional fields.
    pub mod option {
        use super::*;

        /// Writes an optional duration as text.
        pub fn serialize<S: Serializer>(
            value: &Option<Duration>,
            serializer: S,
        ) -> Result<S::Ok, S::Error> {
            match value {
                Some(value) => super::serialize(value, serializer),
                None => serializer.serialize_none(),
            }
        }

        /// Reads an optional duration from text.
        pub fn deserialize<'de, D: Deserializer<'de>>(
            deserializer: D,
        ) -> Result<Option<Duration>, D::Error> {
            super::deserialize(deserializer).map(Some)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_denies_everything_and_bounds_resources() {
        let policy = Policy::default();
        assert!(policy.dirs.is_empty());
        assert!(policy.env.is_empty());
        assert!(policy.network.is_empty());
        assert_eq!(policy.timeout, Duration::from_secs(10));
        assert_eq!(policy.memory, ByteSize::mib(64));
        assert_eq!(policy.max_output, ByteSize::mib(1));
    }

    #[test]
    fn header_values_read_the_host_environment() {
        let key = "WASM_AGENT_TEST_TOKEN_42";
        // SAFETY: no other test reads or writes this variable.
        unsafe { std::env::set_var(key, "s3cret") };
        let policy = Policy::default()
            .http_header(
                "api.example.com",
                "Authorization",
                format!("Bearer ${{{key}}}"),
            )
            .validate_and_resolve()
            .unwrap();
        let headers = &policy.credential_headers()[0];
        assert!(headers.target.applies("https", "api.example.com"));
        assert_eq!(headers.headers[0].0, "authorization");
        assert_eq!(headers.headers[0].1, "Bearer s3cret");
        assert!(headers.headers[0].1.is_sensitive());
        assert!(!format!("{policy:?}").contains("s3cret"));
        let err = Policy::default()
            .http_header("api.example.com", "X-Key", "${WASM_AGENT_SURELY_UNSET}")
            .validate_and_resolve()
            .unwrap_err();
        assert!(err.to_string().contains("WASM_AGENT_SURELY_UNSET"), "{err}");
        let err = Policy::default()
            .http_header("bad host!", "X", "1")
            .validate()
            .unwrap_err();
        assert!(err.to_string().contains("bad host!"), "{err}");
    }

    #[test]
    fn debug_output_leaves_out_secret_values() {
        let policy = Policy::default().env("TOKEN", "env-s3cret").http_header(
            "api.example.com",
            "Authorization",
            "Bearer literal-s3cret",
        );
        let shown = format!("{policy:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(
            shown.contains("TOKEN") && shown.contains("Authorization"),
            "{shown}"
        );
    }

    #[test]
    fn validation_names_the_key() {
        let err = Policy::default()
            .timeout(Duration::ZERO)
            .validate()
            .unwrap_err();
        assert!(err.to_string().starts_with("timeout:"), "{err}");
        let err = Policy::default()
            .memory(ByteSize::gib(8))
            .validate()
            .unwrap_err();
        assert!(err.to_string().starts_with("memory:"), "{err}");
        let err = Policy::default().env("A=B", "1").validate().unwrap_err();
        assert_eq!(err, PolicyError::EnvName("A=B".into()));
        let err = Policy::default()
            .max_response(ByteSize(0))
            .validate()
            .unwrap_err();
        assert!(err.to_string().starts_with("max_response:"), "{err}");
    }

    #[test]
    fn every_limit_has_an_upper_bound() {
        let year = Duration::from_secs(365 * 24 * 3600);
        let cases: Vec<(&str, Policy)> = vec![
            ("timeout", Policy::default().timeout(year)),
            ("timeout", Policy::default().timeout(Duration::MAX)),
            (
                "max_output",
                Policy::default().max_output(ByteSize(u64::MAX)),
            ),
            (
                "max_response",
                Policy::default().max_response(ByteSize(u64::MAX)),
            ),
            ("max_requests", Policy::default().max_requests(u32::MAX)),
            (
                "max_arguments",
                Policy::default().max_arguments(ByteSize(u64::MAX)),
            ),
            (
                "max_arguments",
                Policy::default().max_arguments(ByteSize(0)),
            ),
            ("max_artifacts", Policy::default().max_artifacts(u32::MAX)),
            ("max_resources", Policy::default().max_resources(u32::MAX)),
            ("max_resources", Policy::default().max_resources(1)),
            ("max_tools", Policy::default().max_tools(0)),
            (
                "max_description",
                Policy::default().max_description(ByteSize::gib(2)),
            ),
            ("max_schema", Policy::default().max_schema(ByteSize::gib(2))),
            ("max_write", Policy::default().max_write(ByteSize(u64::MAX))),
        ];
        for (key, policy) in cases {
            let err = policy.validate().unwrap_err();
            assert!(
                err.to_string().starts_with(&format!("{key}:")),
                "{key}: {err}"
            );
        }
        let longest = Policy::default()
            .timeout(bounds::TIMEOUT)
            .validate()
            .unwrap();
        assert!(
            std::time::Instant::now()
                .checked_add(longest.timeout)
                .is_some()
        );
    }
}
