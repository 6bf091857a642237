//! The config's `[access]` rules, and `wasm-agent access explain`: what an
//! identity sees and may call under a config, and which rule decided, with
//! nothing called.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};
use wasm_agent::ToolHost;
use wasm_agent::access::quota::{QuotaConfig, QuotaStore, Quotas};
use wasm_agent::access::{AccessConfig, AccessRules, Credentials, Source, Who};
use wasm_agent::policy::ConfigFile;

use crate::args::HostFlags;

/// The access rules of `config` (none without an `[access]` section).
pub fn rules(config: Option<&ConfigFile>) -> anyhow::Result<Arc<AccessRules>> {
    let Some(config) = config else {
        return Ok(Arc::default());
    };
    let Some(section) = config.section::<Option<AccessConfig>>("access")? else {
        return Ok(Arc::default());
    };
    let rules =
        AccessRules::new(section).map_err(|e| anyhow::anyhow!("{}: {e}", config.path.display()))?;
    Ok(Arc::new(rules))
}

/// Quotas and where they are counted (`None`: this process's memory).
pub type QuotaSettings = (Arc<Quotas>, Option<Arc<dyn QuotaStore>>);

/// The quotas of `config`'s `[quotas]` section (none without one), with
/// the counters they are kept in: its `store` (Redis, shared by replicas),
/// else this process's memory.
pub fn quotas(config: Option<&ConfigFile>) -> anyhow::Result<QuotaSettings> {
    let Some(config) = config else {
        return Ok(Default::default());
    };
    let Some(section) = config.section::<Option<QuotaConfig>>("quotas")? else {
        return Ok(Default::default());
    };
    let quotas =
        Quotas::new(section).map_err(|e| anyhow::anyhow!("{}: {e}", config.path.display()))?;
    let store = match quotas.store() {
        Some(url) => {
            let store = wasm_agent::access::RedisQuotaStore::open(url)
                .map_err(|e| anyhow::anyhow!("{}: [quotas] store: {e}", config.path.display()))?;
            Some(Arc::new(store) as Arc<dyn QuotaStore>)
        }
        None => None,
    };
    Ok((Arc::new(quotas), store))
}

/// `wasm-agent access`.
#[derive(Debug, Subcommand)]
pub enum AccessCommand {
    /// Print what an identity sees and may call under the config's [access]
    /// rules, and which rule decided each tool; nothing is called.
    Explain(Box<ExplainArgs>),
}

/// `wasm-agent access explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// One tool only: exit status 0 when the identity may call it, 1 when not.
    pub tool: Option<String>,
    /// The principal (a tokens-file entry's `principal`; `oauth:SUB` for
    /// an OAuth token; default with --claims: `oauth:` and its `sub`).
    #[arg(long, value_name = "PRINCIPAL")]
    pub principal: Option<String>,
    /// The tenant.
    #[arg(long, value_name = "TENANT")]
    pub tenant: Option<String>,
    /// A JSON file of an OAuth access token's claims (`scope`, `groups`,
    /// ...); the identity is then an OAuth one.
    #[arg(long, value_name = "FILE")]
    pub claims: Option<PathBuf>,
    /// How the identity proved itself: local (call, run), shared (a server
    /// without per-caller tokens), tokens (--tokens), oauth. Default: oauth
    /// with --claims, else tokens.
    #[arg(long, value_enum)]
    pub source: Option<SourceArg>,
    /// Print JSON: the identity, and each tool with its decision.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub host: HostFlags,
}

/// `--source`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum SourceArg {
    /// The person at the terminal.
    Local,
    /// A server without per-caller tokens.
    Shared,
    /// A tokens-file entry.
    Tokens,
    /// An OAuth token.
    Oauth,
}

impl From<SourceArg> for Source {
    fn from(source: SourceArg) -> Self {
        match source {
            SourceArg::Local => Source::Local,
            SourceArg::Shared => Source::Shared,
            SourceArg::Tokens => Source::Tokens,
            SourceArg::Oauth => Source::Oauth,
        }
    }
}

/// Runs `access explain`.
pub async fn explain(args: ExplainArgs) -> anyhow::Result<ExitCode> {
    let config = args.host.load_config()?;
    if config.is_none() {
        anyhow::bail!("access explain reads the rules of a config: pass --config FILE");
    }
    let rules = rules(config.as_ref())?;
    let credentials = credentials(&args)?;
    let principal = args.principal.clone().or_else(|| {
        let sub = credentials.claims.get("sub")?.as_str()?;
        Some(format!("oauth:{sub}"))
    });
    let who = Who {
        principal: principal.as_deref(),
        tenant: args.tenant.as_deref(),
        credentials: Some(&credentials),
    };
    let host: ToolHost = crate::load_targets(&[], &args.host).await?;
    let mut names: Vec<String> = host.tools().into_iter().map(|tool| tool.name).collect();
    let loaded: Vec<&str> = names.iter().map(String::as_str).collect();
    for unmatched in rules.unmatched(&loaded) {
        eprintln!("note: [access] {unmatched} matches no tool the config loads");
    }
    if let Some(tool) = &args.tool {
        if !names.contains(tool) {
            anyhow::bail!("the config loads no tool named {tool:?}");
        }
        names = vec![tool.clone()];
    }
    let decisions: Vec<_> = names
        .iter()
        .map(|name| (name, rules.decide(&who, name)))
        .collect();
    if args.json {
        let tools: Vec<Value> = decisions
            .iter()
            .map(|(name, decision)| {
                json!({"tool": name, "allowed": decision.allowed, "decided_by": decision.to_string()})
            })
            .collect();
        let identity = json!({
            "principal": who.principal,
            "tenant": who.tenant,
            "source": credentials.source.as_str(),
            "scopes": credentials.scopes,
        });
        let out = json!({"identity": identity, "tools": tools});
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        let shown = |value: Option<&str>| value.map_or("none".to_string(), |v| format!("{v:?}"));
        println!(
            "identity: principal {}, tenant {}, source {}{}",
            shown(who.principal),
            shown(who.tenant),
            credentials.source,
            match credentials.scopes.is_empty() {
                true => String::new(),
                false => format!(", scopes {}", credentials.scopes.join(" ")),
            }
        );
        let width = names.iter().map(String::len).max().unwrap_or(4).max(4);
        for (name, decision) in &decisions {
            let mark = if decision.allowed {
                "may call"
            } else {
                "hidden  "
            };
            println!("  {name:<width$}  {mark}  {decision}");
        }
    }
    let denied = args.tool.is_some() && decisions.iter().any(|(_, d)| !d.allowed);
    Ok(if denied {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The credentials `args` describe.
fn credentials(args: &ExplainArgs) -> anyhow::Result<Credentials> {
    let mut credentials = match &args.claims {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read --claims {}", path.display()))?;
            let claims: Map<String, Value> = serde_json::from_str(&text).with_context(|| {
                format!("--claims {} is not a JSON object of claims", path.display())
            })?;
            Credentials::oauth(claims)
        }
        None => Credentials::new(Source::Tokens),
    };
    if let Some(source) = args.source {
        credentials.source = source.into();
    }
    Ok(credentials)
}
