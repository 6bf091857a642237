//! How an HTTP MCP server admits requests ([`HttpOptions`]), and where
//! ([`MCP_PATH`]).

use std::sync::Arc;
use std::time::Duration;

use wasm_agent_metrics::Metrics;

use super::identity::TokenTable;
use super::oauth::ResourceServer;
use super::pages::Pages;

/// The path the MCP endpoint answers on.
pub const MCP_PATH: &str = "/mcp";

/// How an HTTP MCP server admits requests.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// Required as `Authorization: Bearer <token>` when set.
    pub token: Option<String>,
    /// Tokens with their identities (`--tokens FILE`); any of them, or
    /// `token`, is accepted when set.
    pub tokens: Option<Arc<TokenTable>>,
    /// Bearer JWTs of an issuer (`--auth-issuer`), accepted beside the tokens.
    pub oauth: Option<Arc<ResourceServer>>,
    /// Accepted `Host` names besides the loopback ones (any port).
    pub hosts: Vec<String>,
    /// Accepted `Origin`s besides loopback ones (`http://localhost:*`, ...).
    /// Requests without an `Origin` (non-browser clients) are accepted.
    pub origins: Vec<String>,
    /// Largest request body, in bytes.
    pub max_body: usize,
    /// New sessions are refused (503) while this many are open.
    pub max_sessions: usize,
    /// New sessions of a tenant are refused (429) while it holds this many
    /// (identities without a tenant are bound by `max_sessions` alone).
    pub max_tenant_sessions: usize,
    /// Connections beyond this many wait to be accepted.
    pub max_connections: usize,
    /// A session with no request and no open stream for this long is
    /// closed.
    pub idle_session: Duration,
    /// Served at `/metrics` when set (leave unset when metrics are served
    /// on another address).
    pub metrics: Option<Arc<Metrics>>,
    /// Pages served under their own path (the operator console), after the
    /// `Host` and `Origin` checks `/mcp` has.
    pub pages: Option<Arc<dyn Pages>>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            token: None,
            tokens: None,
            oauth: None,
            hosts: Vec::new(),
            origins: Vec::new(),
            max_body: 4 << 20,
            max_sessions: 1024,
            max_tenant_sessions: 768,
            max_connections: 4096,
            idle_session: Duration::from_secs(300),
            metrics: None,
            pages: None,
        }
    }
}
