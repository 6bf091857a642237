//! # wasm-agent-console
//!
//! The operator console at `/console` of `wasm-agent serve --http` (or of
//! its `--metrics-addr` listener): the loaded tools with their policies as
//! applied, the calls in flight and the recent ones (live), the questions
//! of tools answered by operators (the [`Desk`], shared by replicas through
//! the session store), the audit log searched and its chain checked, and
//! the hour's health.
//!
//! Operators log in with a token of their own (`--console-tokens`, never an
//! MCP client's) or an OAuth access token granting the console's scope.
//! Every page is rendered here from typed templates, with one small script
//! of the binary's own for live updates; every response forbids inline
//! script and anything from another origin, and every form carries a CSRF
//! token. The server checks `Host` and `Origin` as it does for `/mcp`.

#![warn(missing_docs)]

mod approvals;
mod audit;
mod auth;
mod board;
mod calls;
mod desk;
mod health;
mod pages;
mod series;
mod tools;
mod web;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use tokio::sync::Semaphore;
use wasm_agent_access::AccessRules;
use wasm_agent_audit::AuditLog;
use wasm_agent_mcp::{PageBody, Pages};
use wasm_agent_pipeline::CallSettings;
use wasm_agent_sandbox::ToolHost;

pub use auth::{LOGIN_TTL, LoginError, Operator, Operators};
pub use board::{CallBoard, InFlight, RECENT, Recording, Running};
pub use desk::{Desk, Pending};

/// The path the console answers under.
pub const PREFIX: &str = "/console";
/// Most live pages open at once (each holds a stream).
pub const MAX_STREAMS: usize = 16;

/// How a component was checked before it was loaded, as the console shows
/// it.
#[derive(Clone, Debug, Default)]
pub struct Provenance {
    /// The `oci://` reference it was pulled from (`None`: a file).
    pub reference: Option<String>,
    /// Its signature's state (`verified with cosign.pub`, `unsigned`, ...).
    pub signature: String,
    /// Its lock's state (`pinned in wasm-agent.lock`, `not locked`).
    pub lock: String,
}

/// A line of the health page's stores table, read when the page is.
pub type StateProbe = Arc<dyn Fn() -> String + Send + Sync>;

/// The console: cheap to clone.
#[derive(Clone)]
pub struct Console {
    inner: Arc<Inner>,
}

struct Inner {
    operators: Operators,
    host: ToolHost,
    settings: BTreeMap<String, CallSettings>,
    provenance: BTreeMap<String, Provenance>,
    access: Arc<AccessRules>,
    board: Arc<CallBoard>,
    audit: Option<PathBuf>,
    probes: Vec<(String, StateProbe)>,
    streams: Arc<Semaphore>,
    /// Audit searches and exports: one at a time.
    audit_jobs: Arc<Semaphore>,
    /// Where questions answered by operators wait.
    desk: Option<Desk>,
    /// Where operators' actions are recorded.
    actions: Option<Arc<AuditLog>>,
}

impl Inner {
    /// Records what an operator did, where actions are recorded.
    fn record(&self, action: wasm_agent_audit::record::OperatorAction) {
        if let Some(log) = &self.actions {
            log.operator_action(action);
        }
    }

    /// Records what an operator did and waits until it is written (an error
    /// when it could not be and the log fails closed).
    async fn record_now(
        &self,
        action: wasm_agent_audit::record::OperatorAction,
    ) -> Result<(), String> {
        let Some(log) = self.actions.clone() else {
            return Ok(());
        };
        log.operator_action(action);
        let flushed = tokio::task::spawn_blocking(move || match log.flush() {
            Err(error) if log.fails_closed() => Err(error.to_string()),
            _ => Ok(()),
        })
        .await;
        flushed.unwrap_or_else(|_| Err("the audit writer stopped".into()))
    }
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console")
            .field("operators", &self.inner.operators)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Console`].
pub struct ConsoleBuilder {
    inner: Inner,
}

impl Console {
    /// A console of `host`'s tools for `operators`, showing the calls
    /// `board` is told of (give the host a [`Recording`] auditor and the
    /// pipeline the [`InFlight`] layer of the same board).
    pub fn builder(host: ToolHost, operators: Operators, board: Arc<CallBoard>) -> ConsoleBuilder {
        ConsoleBuilder {
            inner: Inner {
                operators,
                host,
                settings: BTreeMap::new(),
                provenance: BTreeMap::new(),
                access: Arc::default(),
                board,
                audit: None,
                probes: Vec::new(),
                streams: Arc::new(Semaphore::new(MAX_STREAMS)),
                audit_jobs: Arc::new(Semaphore::new(1)),
                desk: None,
                actions: None,
            },
        }
    }
}

impl ConsoleBuilder {
    /// Tool `tool`'s call settings (approval, cache), as the pipeline has them.
    pub fn call_settings(mut self, tool: impl Into<String>, settings: CallSettings) -> Self {
        self.inner.settings.insert(tool.into(), settings);
        self
    }

    /// How component `component` was checked.
    pub fn provenance(mut self, component: impl Into<String>, provenance: Provenance) -> Self {
        self.inner.provenance.insert(component.into(), provenance);
        self
    }

    /// The access rules calls are held to.
    pub fn access(mut self, rules: Arc<AccessRules>) -> Self {
        self.inner.access = rules;
        self
    }

    /// The audit log file to search and check.
    pub fn audit_log(mut self, path: impl Into<PathBuf>) -> Self {
        self.inner.audit = Some(path.into());
        self
    }

    /// Where the questions of tools answered by operators wait (give the
    /// pipeline the same desk).
    pub fn desk(mut self, desk: Desk) -> Self {
        self.inner.desk = Some(desk);
        self
    }

    /// Records every operator's action (log in, log out, each answer) in
    /// `log`, naming the operator.
    pub fn record_actions(mut self, log: Arc<AuditLog>) -> Self {
        self.inner.actions = Some(log);
        self
    }

    /// A line of the health page: `name` and its state, read by `probe`.
    pub fn state(mut self, name: impl Into<String>, probe: StateProbe) -> Self {
        self.inner.probes.push((name.into(), probe));
        self
    }

    /// The console.
    pub fn build(self) -> Console {
        Console {
            inner: Arc::new(self.inner),
        }
    }
}

#[async_trait::async_trait]
impl Pages for Console {
    fn prefix(&self) -> &str {
        PREFIX
    }

    async fn answer(&self, request: Request<Incoming>) -> Response<PageBody> {
        if let Some(refusal) = web::cross_site(&request) {
            return refusal;
        }
        let path = request
            .uri()
            .path()
            .strip_prefix(PREFIX)
            .unwrap_or("")
            .to_string();
        let method = request.method().clone();
        match (&method, path.as_str()) {
            (&Method::GET, "/assets/console.css") => return pages::asset("css"),
            (&Method::GET, "/assets/live.js") => return pages::asset("js"),
            (&Method::GET, "/assets/icon.svg") => return pages::asset("svg"),
            (&Method::GET, "/login") => return pages::login_form(&self.inner.operators, None),
            (&Method::POST, "/login") => {
                return pages::log_in(&self.inner, request).await;
            }
            _ => {}
        }
        let cookie = web::cookie(request.headers(), auth::LOGIN_COOKIE)
            .unwrap_or("")
            .to_string();
        // Should the shared store not say whether a login was logged out,
        // it still shows the tools and health pages (what an operator needs
        // when the store is down) and may log out, and nothing else.
        let strict = !matches!(
            (&method, path.as_str()),
            (&Method::GET, "/tools" | "/health") | (&Method::POST, "/logout")
        );
        let Some(operator) = self.inner.operators.signed_in(&cookie, strict).await else {
            return match method {
                Method::GET => web::see_other(&format!("{PREFIX}/login")),
                _ => web::text(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized: log in to the console as an operator first",
                ),
            };
        };
        if method == Method::POST {
            return pages::post(&self.inner, &operator, &cookie, &path, request).await;
        }
        if method != Method::GET {
            return web::text(StatusCode::METHOD_NOT_ALLOWED, "use GET or POST");
        }
        let query = request.uri().query().map(String::from);
        pages::get(&self.inner, &operator, &cookie, &path, query.as_deref()).await
    }
}
