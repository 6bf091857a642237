//! `serve`'s operator console: its flags, the operators, and the console
//! put together from what `serve` loads.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::bail;
use clap::{Args, ValueEnum};
use wasm_agent::SessionStore;
use wasm_agent::ToolHost;
use wasm_agent::access::AccessRules;
use wasm_agent::console::{CallBoard, Console, Desk, InFlight, Operators, Provenance, Recording};
use wasm_agent::mcp::{ResourceServer, StateKeys, TokenTable};
use wasm_agent::pipeline::CallSettings;
use wasm_agent::report::CallAuditor;

use crate::args::ServeArgs;
use crate::components::{Location, Pins, Target};

/// The console's flags.
#[derive(Debug, Args)]
#[command(next_help_heading = "Operator console")]
pub struct ConsoleFlags {
    /// Serve the operator console at /console, for the operators of this
    /// tokens file (the --tokens format; none of its tokens may be an MCP
    /// client's).
    #[arg(long, value_name = "FILE")]
    pub console_tokens: Option<PathBuf>,
    /// Serve the console to holders of OAuth access tokens (of
    /// --auth-issuer) granting this scope.
    #[arg(long, value_name = "SCOPE")]
    pub console_scope: Option<String>,
    /// The listener the console is on: the MCP endpoint's (--http) or the
    /// health and metrics one (--metrics-addr), off the public port.
    #[arg(long, value_name = "LISTENER")]
    pub console_on: Option<Listener>,
    /// The console's address as people open it (behind a load balancer or
    /// proxy), for the links clients' users are sent to (default: the
    /// listener's own address). An https:// address (a TLS proxy in
    /// front) marks the console's cookies Secure.
    #[arg(long, value_name = "URL")]
    pub console_url: Option<String>,
}

/// Where the console is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Listener {
    /// Beside `/mcp` (--http).
    Mcp,
    /// On --metrics-addr.
    Metrics,
}

/// The console being set up: the board every call is put on, and who may
/// log in.
pub struct Setup {
    pub board: Arc<CallBoard>,
    pub on: Listener,
    /// Where questions answered by operators wait.
    pub desk: Desk,
    operators: Operators,
    url: Option<String>,
}

impl Setup {
    /// The console the flags ask for, if any, with its operators; refuses
    /// flags that cannot work together.
    pub fn new(
        args: &ServeArgs,
        store: Arc<dyn SessionStore>,
        clients: Option<&Arc<TokenTable>>,
        keys: Option<&StateKeys>,
        oauth: Option<&Arc<ResourceServer>>,
    ) -> anyhow::Result<Option<Self>> {
        let flags = &args.console;
        if flags.console_tokens.is_none() && flags.console_scope.is_none() {
            if flags.console_on.is_some() {
                bail!("--console-on needs --console-tokens FILE or --console-scope SCOPE");
            }
            return Ok(None);
        }
        let on = match (flags.console_on, args.http, args.metrics_addr) {
            (Some(Listener::Mcp), None, _) => bail!("--console-on mcp needs --http"),
            (Some(Listener::Metrics), _, None) => {
                bail!("--console-on metrics needs --metrics-addr")
            }
            (Some(on), _, _) => on,
            (None, Some(_), _) => Listener::Mcp,
            (None, None, Some(_)) => Listener::Metrics,
            (None, None, None) => bail!(
                "the console is served over HTTP: give --http or --metrics-addr \
                 (or leave out --console-tokens and --console-scope)"
            ),
        };
        let tokens = match &flags.console_tokens {
            Some(path) => {
                let table = TokenTable::load(path)?;
                let shared = clients.is_some_and(|c| table.overlaps(c))
                    || args
                        .token
                        .as_deref()
                        .is_some_and(|t| table.identify(t).is_some());
                if shared {
                    bail!(
                        "{}: a token in it is also an MCP client's (--tokens or --token); \
                         operators need tokens of their own",
                        path.display()
                    );
                }
                Some(Arc::new(table))
            }
            None => None,
        };
        let oauth = match (&flags.console_scope, oauth) {
            (Some(scope), Some(_)) if args.auth_scopes.iter().any(|s| s == scope.trim()) => bail!(
                "--console-scope {scope:?} is also required of MCP clients (--auth-scope): \
                 every client's token would open the console; use a scope only operators hold"
            ),
            (Some(scope), Some(server)) if !scope.trim().is_empty() => {
                Some((server.clone(), scope.trim().to_string()))
            }
            (Some(_), Some(_)) => bail!("--console-scope is empty: name the scope operators hold"),
            (Some(_), None) => {
                bail!("--console-scope needs --auth-issuer: the issuer of the tokens")
            }
            (None, _) => None,
        };
        let url = match &flags.console_url {
            Some(url) if url.starts_with("http://") || url.starts_with("https://") => Some(
                url.trim_end_matches('/')
                    .trim_end_matches("/console")
                    .to_string(),
            ),
            Some(url) => bail!("--console-url {url:?}: give an http:// or https:// URL"),
            None => None,
        };
        // Replicas given the same request-state keys accept each other's logins.
        let keys = keys.cloned().unwrap_or_else(StateKeys::random);
        Ok(Some(Self {
            board: CallBoard::new(),
            on,
            desk: Desk::new(store.clone(), keys.clone(), args.host.ask.wait),
            operators: Operators::new(tokens, oauth, keys)
                .logouts_in(store)
                .over_https(url.as_ref().is_some_and(|url| url.starts_with("https://"))),
            url,
        }))
    }

    /// What to do once the console's listener is bound on an address: the
    /// links people are sent lead there, unless --console-url says otherwise.
    /// Without it, clients are sent links only to the MCP listener's own
    /// address, and only one they can open (not 0.0.0.0, not the private
    /// --metrics-addr).
    pub fn announcer(&self) -> Arc<dyn Fn(std::net::SocketAddr) + Send + Sync> {
        let (desk, url, on) = (self.desk.clone(), self.url.clone(), self.on);
        Arc::new(move |local: std::net::SocketAddr| match &url {
            Some(url) => desk.set_base(url.clone()),
            None if on == Listener::Mcp && !local.ip().is_unspecified() => {
                desk.set_base(format!("http://{local}"))
            }
            None => tracing::warn!(
                "the console's address for clients' links is not known: give --console-url, \
                 or clients are not sent to questions' pages"
            ),
        })
    }

    /// The host's auditor: the board told of every call, and `log` as before.
    pub fn recording(&self, log: Option<Arc<dyn CallAuditor>>) -> Arc<dyn CallAuditor> {
        Arc::new(Recording::new(self.board.clone(), log))
    }

    /// The pipeline layer that shows calls in flight.
    pub fn in_flight(&self) -> Arc<InFlight> {
        Arc::new(InFlight(self.board.clone()))
    }

    /// The console of `host`'s tools.
    pub fn console(self, host: ToolHost, parts: Parts) -> Console {
        let mut builder = Console::builder(host, self.operators, self.board)
            .access(parts.access)
            .desk(self.desk);
        if let Some(log) = parts.actions {
            builder = builder.record_actions(log);
        }
        for (tool, settings) in parts.settings {
            builder = builder.call_settings(tool, settings);
        }
        for (component, provenance) in parts.provenance {
            builder = builder.provenance(component, provenance);
        }
        if let Some(path) = parts.audit {
            builder = builder.audit_log(path);
        }
        for (name, probe) in parts.probes {
            builder = builder.state(name, probe);
        }
        builder.build()
    }
}

/// What the console shows besides the host.
#[derive(Default)]
pub struct Parts {
    pub access: Arc<AccessRules>,
    pub settings: BTreeMap<String, CallSettings>,
    pub provenance: BTreeMap<String, Provenance>,
    pub audit: Option<PathBuf>,
    /// Where operators' actions are recorded.
    pub actions: Option<Arc<wasm_agent::audit::AuditLog>>,
    pub probes: Vec<(String, wasm_agent::console::StateProbe)>,
}

/// How each target is checked before it loads, by component name.
pub fn provenance(targets: &[Target], pins: Option<&Pins>) -> BTreeMap<String, Provenance> {
    targets
        .iter()
        .map(|target| {
            let signature = match (&target.location, &target.verify) {
                (Location::Registry(_), Some(key)) => {
                    format!("verified with {}", key.display())
                }
                (Location::Registry(_), None) => "not checked: no verify key configured".into(),
                (Location::File(_), _) => "none: a local file carries no signature".into(),
            };
            let lock = match (pins, &target.alias) {
                (Some(pins), Some(_)) => format!("pinned in {}", pins.path().display()),
                _ => "not locked".into(),
            };
            let reference = match &target.location {
                Location::Registry(reference) => Some(reference.to_string()),
                Location::File(_) => None,
            };
            (
                target.name.clone(),
                Provenance {
                    signature,
                    lock,
                    reference,
                },
            )
        })
        .collect()
}

/// The audit log file the console searches, if the log is a file.
pub fn audit_file(log: Option<&Arc<wasm_agent::audit::AuditLog>>) -> Option<PathBuf> {
    let path = log?.path();
    crate::audit::postgres_url(path)
        .is_none()
        .then(|| path.to_path_buf())
}
