//! Which MCP server to use and how: a command to start (stdio) or a URL
//! (streamable HTTP), from the command line (`--mcp`) or the config
//! (`[agent.mcp.NAME]`).

use std::collections::BTreeMap;
use std::time::Duration;

use wasm_agent_agent::config::McpServerConfig;

use crate::McpClientError;

/// Variables a started server gets from ours unless the config lists more
/// (the ones a program needs to run; never keys or tokens).
pub const INHERITED_ENV: &[&str] = &["PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG"];

/// How long a call may go without an answer or progress (default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How long starting, `initialize` and the first `tools/list` may take.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Restarts of a server that stopped, per process, before it is given up.
pub const DEFAULT_MAX_RESTARTS: u32 = 3;

/// One MCP server whose tools an agent may use.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerSpec {
    /// Its name in messages (and the config's `[agent.mcp.NAME]`).
    pub name: String,
    /// How to reach it.
    pub transport: Transport,
    /// Put before each tool's name (`gh_` makes `search` `gh_search`).
    pub prefix: String,
    /// A call that gets neither an answer nor progress this long fails.
    pub timeout: Duration,
    /// No call takes longer than this, progress or not.
    pub max_call_time: Duration,
    /// Bound on starting, `initialize` and listing the tools.
    pub connect_timeout: Duration,
    /// Restarts after the server stops, before it is given up.
    pub max_restarts: u32,
    /// Whether its tools' annotations may lower approval (the operator's
    /// config says so; by default they are the server's own claims).
    pub trust_annotations: bool,
}

/// How a server is reached.
#[derive(Clone, PartialEq)]
pub enum Transport {
    /// A program started by the host, spoken to over its stdin and stdout.
    Command {
        /// The program.
        program: String,
        /// Its arguments.
        args: Vec<String>,
        /// Its environment besides [`INHERITED_ENV`]: names with values.
        env: BTreeMap<String, String>,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// The endpoint's URL.
        url: String,
        /// A bearer token for it (kept out of `Debug` and logs).
        bearer: Option<String>,
    },
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Command { program, args, env } => f
                .debug_struct("Command")
                .field("program", program)
                .field("args", args)
                .field("env", &env.keys().collect::<Vec<_>>())
                .finish(),
            Transport::Http { url, bearer } => f
                .debug_struct("Http")
                .field("url", &wasm_agent_redact::url(url))
                .field("bearer", &bearer.as_ref().map(|_| "<redacted>"))
                .finish(),
        }
    }
}

impl Transport {
    /// What it is, for messages: the command line or the URL.
    pub fn describe(&self) -> String {
        match self {
            Transport::Command { program, args, .. } => {
                let words =
                    std::iter::once(program.as_str()).chain(args.iter().map(String::as_str));
                shlex::try_join(words).unwrap_or_else(|_| program.clone())
            }
            Transport::Http { url, .. } => wasm_agent_redact::url(url).into_owned(),
        }
    }
}

/// Whether `url` is plain HTTP to somewhere other than this machine (a
/// bearer token would cross the network in the clear), by the parser that
/// connects: `http://evil.example\@127.0.0.1/` goes to evil.example.
fn cleartext_off_machine(url: &str) -> bool {
    let Ok(parsed) = url::Url::parse(url) else {
        return true;
    };
    if parsed.scheme() != "http" {
        return false;
    }
    let host = parsed.host_str().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    !loopback
}

impl ServerSpec {
    /// A server with default bounds and no prefix.
    pub fn new(name: impl Into<String>, transport: Transport) -> Self {
        Self {
            name: name.into(),
            transport,
            prefix: String::new(),
            timeout: DEFAULT_TIMEOUT,
            max_call_time: DEFAULT_TIMEOUT * 10,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_restarts: DEFAULT_MAX_RESTARTS,
            trust_annotations: false,
        }
    }

    /// Whether `--mcp TEXT` names a URL (streamable HTTP) rather than a
    /// command to start.
    pub fn is_url(text: &str) -> bool {
        names_url(text.trim())
    }

    /// `--mcp TEXT`: a URL (`http://`, `https://`) or a command line (split
    /// as a POSIX shell would, without running one). `bearer` goes with a
    /// URL. The name is the URL's host or the program's file name.
    pub fn from_command_line(text: &str, bearer: Option<String>) -> Result<Self, McpClientError> {
        let bad = |reason: &str| McpClientError::BadSpec {
            spec: text.to_string(),
            reason: reason.to_string(),
        };
        let trimmed = text.trim();
        if names_url(trimmed) {
            let host = trimmed
                .split("://")
                .nth(1)
                .and_then(|rest| rest.split(['/', '?', '#']).next())
                .map(|authority| authority.rsplit('@').next().unwrap_or(authority))
                .filter(|host| !host.is_empty())
                .ok_or_else(|| bad("the URL has no host"))?;
            if bearer.is_some() && cleartext_off_machine(trimmed) {
                return Err(bad(
                    "a bearer token goes only over https:// (or plain http:// to this machine)",
                ));
            }
            let transport = Transport::Http {
                url: trimmed.to_string(),
                bearer,
            };
            return Ok(Self::new(host, transport));
        }
        if bearer.is_some() {
            tracing::debug!("a bearer token is only sent to --mcp URLs, not to {text:?}");
        }
        let words = shlex::split(trimmed).ok_or_else(|| bad("unbalanced quotes"))?;
        let (program, args) = words
            .split_first()
            .ok_or_else(|| bad("give a command to start, or an http(s):// URL"))?;
        let name = std::path::Path::new(program)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| program.clone());
        Ok(Self::new(
            name,
            Transport::Command {
                program: program.clone(),
                args: args.to_vec(),
                env: BTreeMap::new(),
            },
        ))
    }

    /// `[agent.mcp.NAME]` of the config. A bearer token is read from the
    /// variable `bearer_env` names; the variable must be set.
    pub fn from_config(name: &str, config: &McpServerConfig) -> Result<Self, McpClientError> {
        let bad = |reason: String| McpClientError::BadConfig {
            section: format!("[agent.mcp.{name}]"),
            reason,
        };
        let transport = match (&config.command, &config.url) {
            (Some(_), Some(_)) => return Err(bad("give `command` or `url`, not both".into())),
            (None, None) => {
                return Err(bad(
                    "give `command = [\"PROGRAM\", \"ARG\", ...]` (stdio) or `url = \"https://...\"` (streamable HTTP)"
                        .into(),
                ));
            }
            (Some(command), None) => {
                let (program, args) = command
                    .split_first()
                    .ok_or_else(|| bad("`command` is empty: give the program first".into()))?;
                if config.bearer_env.is_some() {
                    return Err(bad(
                        "`bearer_env` goes with `url`; a command gets `env`".into()
                    ));
                }
                let mut env = BTreeMap::new();
                for entry in &config.env {
                    match entry.split_once('=') {
                        Some((key, value)) if !key.is_empty() => {
                            env.insert(key.to_string(), value.to_string());
                        }
                        Some(_) => return Err(bad(format!("env entry {entry:?} has no name"))),
                        None => match std::env::var(entry) {
                            Ok(value) => {
                                env.insert(entry.clone(), value);
                            }
                            Err(_) => tracing::warn!(
                                "[agent.mcp.{name}] env: {entry} is not set here, so not passed on"
                            ),
                        },
                    }
                }
                Transport::Command {
                    program: program.clone(),
                    args: args.to_vec(),
                    env,
                }
            }
            (None, Some(url)) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(bad(format!("url {url:?} is not an http(s):// URL")));
                }
                if !config.env.is_empty() {
                    return Err(bad(
                        "`env` goes with `command`; a URL gets `bearer_env`".into()
                    ));
                }
                if config.bearer_env.is_some() && cleartext_off_machine(url) {
                    return Err(bad(
                        "a bearer token goes only over https:// (or plain http:// to this machine)"
                            .into(),
                    ));
                }
                let bearer = match &config.bearer_env {
                    None => None,
                    Some(variable) => Some(std::env::var(variable).map_err(|_| {
                        bad(format!("bearer_env names {variable}, which is not set"))
                    })?),
                };
                Transport::Http {
                    url: url.clone(),
                    bearer,
                }
            }
        };
        let mut spec = Self::new(name, transport);
        spec.prefix = config.prefix.clone();
        spec.timeout = config.timeout.unwrap_or(spec.timeout);
        spec.max_call_time = config.max_call_time.unwrap_or(spec.max_call_time);
        spec.connect_timeout = config.connect_timeout.unwrap_or(spec.connect_timeout);
        spec.max_restarts = config.max_restarts.unwrap_or(spec.max_restarts);
        spec.trust_annotations = config.trust_annotations;
        Ok(spec)
    }

    /// `MCP server "NAME"`, for messages.
    pub fn label(&self) -> String {
        format!("MCP server {:?}", self.name)
    }
}

/// Gives servers with the same name distinct ones (`python3`, `python3-2`),
/// in order.
pub fn distinct_names(specs: &mut [ServerSpec]) {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for spec in specs.iter_mut() {
        let count = seen.entry(spec.name.clone()).or_default();
        *count += 1;
        if *count > 1 {
            spec.name = format!("{}-{count}", spec.name);
        }
    }
}

fn names_url(text: &str) -> bool {
    text.starts_with("http://") || text.starts_with("https://")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_split_like_a_shell_and_urls_stay_whole() {
        let spec = ServerSpec::from_command_line("python3 'my server.py' --flag", None).unwrap();
        assert_eq!(spec.name, "python3");
        let Transport::Command { program, args, .. } = &spec.transport else {
            panic!("{spec:?}")
        };
        assert_eq!(program, "python3");
        assert_eq!(args, &["my server.py", "--flag"]);
        assert_eq!(spec.transport.describe(), "python3 'my server.py' --flag");

        let spec = ServerSpec::from_command_line(
            "https://user@mcp.example.com:8443/mcp?x=1",
            Some("t0ken".into()),
        )
        .unwrap();
        assert_eq!(spec.name, "mcp.example.com:8443");
        assert!(!format!("{spec:?}").contains("t0ken"));
        assert!(!format!("{spec:?}").contains("x=1"));
        assert_eq!(
            spec.transport.describe(),
            "https://mcp.example.com:8443/mcp"
        );
        let secret =
            ServerSpec::from_command_line("https://u:pw@h.example/mcp?key=k", None).unwrap();
        assert_eq!(secret.transport.describe(), "https://h.example/mcp");
        // Tokens do not cross the network in the clear.
        let error = ServerSpec::from_command_line("http://h.example/mcp", Some("t".into()));
        assert!(error.unwrap_err().to_string().contains("https://"));
        // Parsed as the client connects: a backslash ends the host.
        for off_machine in [
            r"http://evil.example\@127.0.0.1/mcp",
            "http://evil.example#@127.0.0.1/mcp",
            "http://127.0.0.1.evil.example/mcp",
        ] {
            let error = ServerSpec::from_command_line(off_machine, Some("t".into()));
            assert!(error.is_err(), "{off_machine}");
        }
        for local in [
            "http://127.0.0.1:9/mcp",
            "http://localhost/mcp",
            "http://[::1]:8/mcp",
            "http://127.1:9/mcp",
        ] {
            assert!(
                ServerSpec::from_command_line(local, Some("t".into())).is_ok(),
                "{local}"
            );
        }

        for bad in ["", "   ", "python3 'open", "http:///path"] {
            let error = ServerSpec::from_command_line(bad, None).unwrap_err();
            assert!(error.to_string().contains("--mcp"), "{error}");
        }
    }

    #[test]
    fn config_sections_become_specs_and_bad_ones_say_what_is_wrong() {
        let config = McpServerConfig {
            command: Some(vec!["node".into(), "server.js".into()]),
            env: vec!["MODE=ro".into()],
            prefix: "js_".into(),
            timeout: Some(Duration::from_secs(5)),
            ..McpServerConfig::default()
        };
        let spec = ServerSpec::from_config("js", &config).unwrap();
        assert_eq!(spec.prefix, "js_");
        assert_eq!(spec.timeout, Duration::from_secs(5));
        let Transport::Command { env, .. } = &spec.transport else {
            panic!("{spec:?}")
        };
        assert_eq!(env["MODE"], "ro");

        let cases = [
            (McpServerConfig::default(), "give `command"),
            (
                McpServerConfig {
                    command: Some(vec![]),
                    ..McpServerConfig::default()
                },
                "`command` is empty",
            ),
            (
                McpServerConfig {
                    url: Some("ftp://x".into()),
                    ..McpServerConfig::default()
                },
                "not an http(s):// URL",
            ),
            (
                McpServerConfig {
                    url: Some("https://x/mcp".into()),
                    bearer_env: Some("WASM_AGENT_TEST_SURELY_UNSET".into()),
                    ..McpServerConfig::default()
                },
                "bearer_env names WASM_AGENT_TEST_SURELY_UNSET, which is not set",
            ),
        ];
        for (config, expected) in cases {
            let error = ServerSpec::from_config("x", &config)
                .unwrap_err()
                .to_string();
            assert!(error.starts_with("[agent.mcp.x]: "), "{error}");
            assert!(error.contains(expected), "{error}");
        }
    }

    #[test]
    fn same_names_are_numbered() {
        let mut specs: Vec<ServerSpec> = ["python3 a.py", "python3 b.py", "node c.js"]
            .iter()
            .map(|text| ServerSpec::from_command_line(text, None).unwrap())
            .collect();
        distinct_names(&mut specs);
        let names: Vec<_> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["python3", "python3-2", "node"]);
    }
}
