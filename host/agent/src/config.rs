//! The `[agent]` section of `wasm-agent.toml`: the model and loop settings;
//! and the per-tool call settings of `[calls.<tool>]`, which every entry
//! point applies (`[agent.tools.<tool>]`, their older place, still works
//! with a warning).
//!
//! ```toml
//! [agent]
//! model = "openai:gpt-4o-mini"
//! instructions = "Answer briefly."
//! max_tool_roundtrips = 8
//! router = { kind = "lexical", max_tools = 8 }
//! # code_mode = "python"
//!
//! [calls.query_db]
//! requires_approval = { pointer = "/table", in = ["users", "orders"] }
//! cache_ttl = "5m"
//! max_chars = 4000
//! on_overflow = "summarize"
//!
//! [agent.mcp.github]      # tools from another MCP server (not sandboxed)
//! url = "https://api.githubcopilot.com/mcp/"
//! bearer_env = "GITHUB_TOKEN"
//! prefix = "gh_"
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use wasm_agent_policy::{ConfigError, ConfigFile};

use super::limit::OverflowStrategy;
use super::tool::ToolSettings;
use wasm_agent_pipeline::{AnsweredBy, CallSettings};
use wasm_agent_sandbox::approval::{Approval, ApprovalRule};

/// The `[agent]` section.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// `PROVIDER:MODEL`.
    pub model: Option<String>,
    /// The provider's base URL (OpenAI-compatible servers).
    pub base_url: Option<String>,
    /// System instructions.
    pub instructions: Option<String>,
    /// Roundtrips per run (default 10).
    pub max_tool_roundtrips: Option<usize>,
    /// Parallel batch size of tool calls (default 5).
    pub parallel_tool_calls: Option<usize>,
    /// Upper bound on tokens per answer.
    pub max_tokens: Option<u32>,
    /// `PROVIDER:MODEL` that summarizes oversized results.
    pub summarizer: Option<String>,
    /// Narrow the tools offered per run.
    pub router: Option<RouterConfig>,
    /// Code mode: `"python"` or `"javascript"` (one `run_code` tool whose
    /// code calls the other tools).
    pub code_mode: Option<super::code_mode::Language>,
    /// Per-tool call settings, by public tool name: `[calls.<tool>]` over
    /// the deprecated `[agent.tools.<tool>]`.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolConfig>,
    /// MCP servers whose tools the agent uses too, by name.
    #[serde(default)]
    pub mcp: BTreeMap<String, McpServerConfig>,
}

/// `[agent.mcp.NAME]`: an MCP server whose tools are offered beside the
/// sandboxed ones. They run where the server runs: not sandboxed.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// Start this program with these arguments; speak MCP over its stdio.
    pub command: Option<Vec<String>>,
    /// Or use the streamable HTTP endpoint at this URL.
    pub url: Option<String>,
    /// The environment variable whose value is the bearer token for `url`.
    pub bearer_env: Option<String>,
    /// The command's environment besides PATH, HOME and the like: `NAME`
    /// passes ours on, `NAME=value` sets one.
    #[serde(default)]
    pub env: Vec<String>,
    /// Put before each of its tools' names.
    #[serde(default)]
    pub prefix: String,
    /// A call with neither an answer nor progress this long fails (default 60s).
    #[serde(default, with = "wasm_agent_policy::duration_text::option")]
    pub timeout: Option<Duration>,
    /// No call takes longer, progress or not (default 10m).
    #[serde(default, with = "wasm_agent_policy::duration_text::option")]
    pub max_call_time: Option<Duration>,
    /// Bound on starting it and listing its tools (default 30s).
    #[serde(default, with = "wasm_agent_policy::duration_text::option")]
    pub connect_timeout: Option<Duration>,
    /// Times it is started again after it stops (default 3).
    pub max_restarts: Option<u32>,
    /// Take its tools' annotations (read-only, not destructive, closed
    /// world) at their word, so that such tools run without approval
    /// (default false: they are its own claims, and every tool of it asks).
    #[serde(default)]
    pub trust_annotations: bool,
}

impl AgentConfig {
    /// The `[agent]` section of a config file (defaults when it has none),
    /// its `tools` being the per-tool call settings: `[calls.<tool>]`, laid
    /// over the older `[agent.tools.<tool>]` (still read, with a warning
    /// naming the new place).
    pub fn from_file(file: &ConfigFile) -> Result<Self, ConfigError> {
        let mut config: Self = file.section("agent")?;
        warn_legacy(file, config.tools.keys());
        let calls: BTreeMap<String, ToolConfig> = file.section("calls")?;
        for (tool, call) in calls {
            match config.tools.get_mut(&tool) {
                Some(old) => old.overlay(call),
                None => {
                    config.tools.insert(tool, call);
                }
            }
        }
        Ok(config)
    }
}

/// The per-tool call settings of a config file, which every entry point
/// (`run`, `serve`, `call`) applies (see [`AgentConfig::from_file`]).
pub fn call_settings(file: &ConfigFile) -> Result<BTreeMap<String, CallSettings>, ConfigError> {
    let tools = AgentConfig::from_file(file)?.tools;
    Ok(tools
        .into_iter()
        .map(|(tool, config)| {
            let settings = config.apply_to(ToolSettings::default()).call_settings();
            (tool, settings)
        })
        .collect())
}

/// Warns once per process of `[agent.tools.<tool>]` sections.
fn warn_legacy<'a>(file: &ConfigFile, tools: impl Iterator<Item = &'a String>) {
    static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let tools: Vec<&String> = tools.collect();
    if tools.is_empty() || WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    for tool in tools {
        tracing::warn!(
            "{}: [agent.tools.{tool}] is deprecated: move its keys to [calls.{tool}], which \
             every entry point (run, serve, call) applies",
            file.path.display()
        );
    }
}

/// `router = { kind = "lexical" | "model", model = "...", max_tools, min_tools }`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterConfig {
    /// Which router.
    pub kind: RouterKind,
    /// For `kind = "model"`: `PROVIDER:MODEL` (default: the agent's model).
    pub model: Option<String>,
    /// Offer at most this many tools (default 8).
    #[serde(default = "default_max_tools")]
    pub max_tools: usize,
    /// Fewer picks fall back to every tool (default 1).
    #[serde(default = "default_min_tools")]
    pub min_tools: usize,
}

fn default_max_tools() -> usize {
    8
}

fn default_min_tools() -> usize {
    1
}

/// The router kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RouterKind {
    /// BM25 over names and descriptions, offline.
    Lexical,
    /// A model picks.
    Model,
}

/// `[calls.<tool>]` (formerly `[agent.tools.<tool>]`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolConfig {
    /// Cache results this long, e.g. `"5m"` (per tenant and principal).
    #[serde(default, with = "wasm_agent_policy::duration_text::option")]
    pub cache_ttl: Option<Duration>,
    /// Share cached results among a tenant's principals (only for tools
    /// whose results do not depend on who asks).
    pub cache_shared: Option<bool>,
    /// `"always"`, `"never"`, a rule or a list of rules.
    pub requires_approval: Option<ApprovalConfig>,
    /// Shorten results longer than this many characters.
    pub max_chars: Option<usize>,
    /// `"truncate"` (default) or `"summarize"`.
    pub on_overflow: Option<OverflowStrategy>,
    /// OpenAI strict mode.
    pub strict: Option<bool>,
    /// `"person"` (default): its questions are asked of the person behind
    /// the call; `"operators"`: of the operators, in `serve`'s console.
    pub answered_by: Option<AnsweredByConfig>,
}

/// Who answers a tool's questions, as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnsweredByConfig {
    /// The person behind the call.
    Person,
    /// The operators, in the console.
    Operators,
}

/// How `requires_approval` may be written.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(
    untagged,
    expecting = "\"always\", \"never\", { pointer = \"/key\", in = [...] } or a list of such rules"
)]
pub enum ApprovalConfig {
    /// `"always"` or `"never"`.
    Keyword(ApprovalKeyword),
    /// One rule.
    Rule(ApprovalRule),
    /// Any of several rules.
    Rules(Vec<ApprovalRule>),
}

/// `"always"` or `"never"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalKeyword {
    /// Ask every time.
    Always,
    /// Never ask.
    Never,
}

impl ToolConfig {
    /// `other`'s keys laid over these.
    pub fn overlay(&mut self, other: ToolConfig) {
        self.cache_ttl = other.cache_ttl.or(self.cache_ttl);
        self.cache_shared = other.cache_shared.or(self.cache_shared);
        self.requires_approval = other.requires_approval.or(self.requires_approval.take());
        self.max_chars = other.max_chars.or(self.max_chars);
        self.on_overflow = other.on_overflow.or(self.on_overflow);
        self.strict = other.strict.or(self.strict);
        self.answered_by = other.answered_by.or(self.answered_by);
    }

    /// These settings laid over `base`.
    pub fn apply_to(&self, mut base: ToolSettings) -> ToolSettings {
        if let Some(ttl) = self.cache_ttl {
            base.cache_ttl = Some(ttl);
        }
        if let Some(shared) = self.cache_shared {
            base.cache_shared = shared;
        }
        if let Some(approval) = &self.requires_approval {
            base.requires_approval = match approval {
                ApprovalConfig::Keyword(ApprovalKeyword::Always) => Approval::Always,
                ApprovalConfig::Keyword(ApprovalKeyword::Never) => Approval::Never,
                ApprovalConfig::Rule(rule) => Approval::rules(vec![rule.clone()]),
                ApprovalConfig::Rules(rules) => Approval::rules(rules.clone()),
            };
        }
        if let Some(max_chars) = self.max_chars {
            base.max_chars = Some(max_chars);
        }
        if let Some(overflow) = self.on_overflow {
            base.overflow = overflow;
        }
        if let Some(strict) = self.strict {
            base.strict = strict;
        }
        if let Some(by) = self.answered_by {
            base.answered_by = match by {
                AnsweredByConfig::Person => AnsweredBy::Person,
                AnsweredByConfig::Operators => AnsweredBy::Operators,
            };
        }
        base
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_every_key() {
        let config: AgentConfig = toml::from_str(
            r#"
            model = "openai:gpt-4o-mini"
            max_tool_roundtrips = 3
            router = { kind = "lexical", max_tools = 4 }
            [tools.query]
            cache_ttl = "5m"
            requires_approval = { pointer = "/table", in = ["users"] }
            max_chars = 100
            on_overflow = "summarize"
            strict = true
            [tools.drop]
            requires_approval = "always"
            "#,
        )
        .unwrap();
        assert_eq!(config.router.as_ref().unwrap().min_tools, 1);
        let query = config.tools["query"].apply_to(ToolSettings::default());
        assert_eq!(query.cache_ttl, Some(Duration::from_secs(300)));
        assert!(
            query
                .requires_approval
                .required_for(&json!({"table": "users"}))
        );
        assert!(
            !query
                .requires_approval
                .required_for(&json!({"table": "logs"}))
        );
        assert_eq!(query.overflow, OverflowStrategy::Summarize);
        assert!(query.strict);
        let drop = config.tools["drop"].apply_to(ToolSettings::default());
        assert!(drop.requires_approval.required_for(&json!({})));
    }

    #[test]
    fn mcp_servers_parse() {
        let config: AgentConfig = toml::from_str(
            r#"
            [mcp.files]
            command = ["python3", "files.py"]
            env = ["HOME", "MODE=ro"]
            prefix = "fs_"
            timeout = "5s"
            [mcp.gh]
            url = "https://example.com/mcp"
            bearer_env = "GH_TOKEN"
            max_restarts = 0
            "#,
        )
        .unwrap();
        let files = &config.mcp["files"];
        assert_eq!(files.command.as_deref().unwrap(), ["python3", "files.py"]);
        assert_eq!(files.timeout, Some(Duration::from_secs(5)));
        assert_eq!(config.mcp["gh"].bearer_env.as_deref(), Some("GH_TOKEN"));
        let error = toml::from_str::<AgentConfig>(
            "[mcp.x]
cmd = [\"a\"]",
        )
        .unwrap_err();
        assert!(error.to_string().contains("command"), "{error}");
    }

    fn parse_file(text: &str) -> Result<ConfigFile, ConfigError> {
        let dir = std::env::temp_dir().join("wasm-agent-agent-config-test");
        std::fs::create_dir_all(&dir).unwrap();
        ConfigFile::parse(text, &dir.join("wasm-agent.toml"))
    }

    #[test]
    fn errors_name_key_and_line() {
        let err =
            parse_file("[agent]\nmodel = \"openai:m\"\n\n[agent.tools.q]\ncache_ttl = \"later\"\n")
                .and_then(|file| AgentConfig::from_file(&file))
                .unwrap_err();
        assert_eq!(err.key.as_deref(), Some("agent.tools.q.cache_ttl"), "{err}");
        assert_eq!(err.line, Some(5), "{err}");
        let err = parse_file("[agent]\nmax_roundtrips = 3\n")
            .and_then(|file| AgentConfig::from_file(&file))
            .unwrap_err();
        assert_eq!(err.line, Some(2), "{err}");
        assert!(err.to_string().contains("max_tool_roundtrips"), "{err}");
        let config =
            AgentConfig::from_file(&parse_file("[agent]\nmodel = \"anthropic:claude\"\n").unwrap())
                .unwrap();
        assert_eq!(config.model.as_deref(), Some("anthropic:claude"));
    }

    #[test]
    fn bad_approval_says_what_is_allowed() {
        let error = toml::from_str::<AgentConfig>("[tools.x]\nrequires_approval = \"sometimes\"")
            .unwrap_err()
            .to_string();
        assert!(error.contains("\"always\", \"never\""), "{error}");
    }
}
