//! Who may use the console: operators, proved by a token of the operators'
//! tokens file or an OAuth access token granting the console's scope (never
//! an MCP client's token as such). A login is a sealed cookie naming the
//! operator, good for [`LOGIN_TTL`] and only while the token that opened
//! it is still listed; every form carries a CSRF token derived from it.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use wasm_agent_mcp::{ResourceServer, StateKeys, TokenTable};
use wasm_agent_session::{SessionError, SessionStore};

/// The login cookie.
pub(crate) const LOGIN_COOKIE: &str = "wa_console";
/// The cookie that binds the login form to the browser that loaded it.
pub(crate) const FORM_COOKIE: &str = "wa_console_form";
/// How long a login lasts at most.
pub const LOGIN_TTL: Duration = Duration::from_secs(8 * 3600);
/// What sealed logins are bound to, so no other sealed value passes as one.
const PURPOSE: &str = "wasm-agent console login v1";
/// What the login form's nonce is sealed for.
const FORM_PURPOSE: &str = "wasm-agent console login form v1";
/// How long a login form may be sent after it was loaded.
pub(crate) const FORM_TTL: Duration = Duration::from_secs(600);
/// Where a login that was logged out is marked (in the shared store, so
/// every replica refuses it), for as long as it would have lasted.
const LOGGED_OUT: &str = "console-logout:";

/// How operators prove who they are.
#[derive(Clone)]
pub struct Operators {
    tokens: Option<Arc<TokenTable>>,
    oauth: Option<(Arc<ResourceServer>, String)>,
    keys: StateKeys,
    /// Where logouts are marked.
    logouts: Option<Arc<dyn SessionStore>>,
    /// Whether browsers reach the console over HTTPS (cookies then `Secure`).
    https: bool,
}

impl std::fmt::Debug for Operators {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operators")
            .field("tokens", &self.tokens.is_some())
            .field("oauth_scope", &self.oauth.as_ref().map(|(_, scope)| scope))
            .finish()
    }
}

/// An operator logged in.
#[derive(Clone, Debug)]
pub struct Operator {
    /// Their name: the tokens file's principal, or `oauth:` and the token's
    /// subject.
    pub name: String,
    /// The CSRF token every form of theirs must send back.
    pub csrf: String,
}

/// What the login cookie holds (sealed: readable, not changeable).
#[derive(Serialize, Deserialize)]
struct Login {
    /// The operator.
    op: String,
    /// `tokens` or `oauth`.
    by: String,
    /// The fingerprint of the token (tokens file), checked on every request.
    #[serde(default)]
    fp: String,
    /// This login's own id: two logins are never one cookie (a logout ends
    /// only its own).
    #[serde(default)]
    id: String,
}

/// Why a login was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LoginError {
    /// The token is not an operator's.
    #[error("that token is not an operator's token")]
    NotAnOperator,
    /// An OAuth token without the console's scope.
    #[error("that token does not grant the console's scope {0:?}")]
    MissingScope(String),
    /// An OAuth token that never expires.
    #[error("that token has no expiry (exp): the console takes only tokens that expire")]
    NoExpiry,
}

impl Operators {
    /// Operators of `tokens` (a tokens file of their own), and of `oauth`
    /// holding `scope`; logins sealed with `keys` (shared by replicas, so a
    /// login is good on each).
    pub fn new(
        tokens: Option<Arc<TokenTable>>,
        oauth: Option<(Arc<ResourceServer>, String)>,
        keys: StateKeys,
    ) -> Self {
        Self {
            tokens,
            oauth,
            keys,
            logouts: None,
            https: false,
        }
    }

    /// Browsers reach the console over HTTPS (a TLS proxy in front): its
    /// cookies are marked `Secure`, never sent over plain HTTP.
    pub fn over_https(mut self, https: bool) -> Self {
        self.https = https;
        self
    }

    /// The attributes of the console's cookies besides their path and age.
    pub(crate) fn cookie_attributes(&self) -> &'static str {
        match self.https {
            true => "HttpOnly; SameSite=Strict; Secure",
            false => "HttpOnly; SameSite=Strict",
        }
    }

    /// Logouts marked in `store` (the replicas' shared store): a login
    /// logged out on one replica is refused by all.
    pub fn logouts_in(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.logouts = Some(store);
        self
    }

    /// Ends the login `cookie` on every replica.
    pub(crate) async fn log_out(&self, cookie: &str) -> Result<(), SessionError> {
        match &self.logouts {
            Some(store) => store.open_mailbox(&logged_out(cookie), LOGIN_TTL).await,
            None => Ok(()),
        }
    }

    /// The operator a login cookie names (see [`operator`](Self::operator)),
    /// unless it was logged out. When the shared store cannot say, the
    /// login holds only where that is not `strict`.
    pub(crate) async fn signed_in(&self, cookie: &str, strict: bool) -> Option<Operator> {
        let operator = self.operator(cookie)?;
        let Some(store) = &self.logouts else {
            return Some(operator);
        };
        let address = logged_out(cookie);
        match store.mailbox(&address).await {
            Ok(Some(_)) => None,
            Ok(None) => Some(operator),
            Err(error) => {
                tracing::warn!(%error, "cannot check console logouts in the shared store");
                (!strict).then_some(operator)
            }
        }
    }

    /// What OAuth logins are sealed for: this issuer, audience and scope.
    fn oauth_purpose(&self) -> Option<String> {
        let (server, scope) = self.oauth.as_ref()?;
        let (issuer, audience) = server.issuer_and_audience();
        Some(format!("{PURPOSE} oauth\0{issuer}\0{audience}\0{scope}"))
    }

    /// A login form's nonce: sealed, so a cookie planted by another page
    /// on this site cannot stand in for one.
    pub(crate) fn form_nonce(&self) -> String {
        self.keys.seal(
            FORM_PURPOSE,
            &uuid::Uuid::new_v4().simple().to_string(),
            FORM_TTL,
        )
    }

    /// Whether `nonce` is a login form's nonce this server sealed, unexpired.
    pub(crate) fn is_form_nonce(&self, nonce: &str) -> bool {
        self.keys.open::<String>(FORM_PURPOSE, nonce).is_some()
    }

    /// The OAuth scope that makes an operator, if OAuth tokens are accepted.
    pub(crate) fn oauth_scope(&self) -> Option<String> {
        self.oauth.as_ref().map(|(_, scope)| scope.clone())
    }

    /// Logs in with `token`: the cookie value and the operator's name.
    pub(crate) async fn log_in(&self, token: &str) -> Result<(String, String), LoginError> {
        let token = token.trim();
        if let Some(identity) = self.tokens.as_ref().and_then(|t| t.identify(token)) {
            let name = identity.principal.clone().unwrap_or_default();
            let login = Login {
                op: name.clone(),
                by: "tokens".into(),
                fp: TokenTable::fingerprint(token),
                id: uuid::Uuid::new_v4().simple().to_string(),
            };
            return Ok((self.keys.seal(PURPOSE, &login, LOGIN_TTL), name));
        }
        let Some((oauth, scope)) = &self.oauth else {
            return Err(LoginError::NotAnOperator);
        };
        let identity = oauth
            .identify(token)
            .await
            .map_err(|_| LoginError::NotAnOperator)?;
        if !identity.credentials.scopes.iter().any(|s| s == scope) {
            return Err(LoginError::MissingScope(scope.clone()));
        }
        let name = identity.principal.clone().unwrap_or_default();
        // No longer than the token itself (`exp` may be a float).
        let exp = identity
            .credentials
            .claims
            .get("exp")
            .and_then(serde_json::Value::as_f64)
            .filter(|exp| exp.is_finite() && *exp > 0.0)
            .ok_or(LoginError::NoExpiry)?;
        let left = Duration::from_secs((exp.floor() as u64).saturating_sub(now_secs()));
        let login = Login {
            op: name.clone(),
            by: "oauth".into(),
            fp: String::new(),
            id: uuid::Uuid::new_v4().simple().to_string(),
        };
        let purpose = self.oauth_purpose().unwrap_or_default();
        Ok((self.keys.seal(&purpose, &login, left.min(LOGIN_TTL)), name))
    }

    /// The operator a login cookie names, if it is intact, unexpired, and
    /// its token still listed.
    pub(crate) fn operator(&self, cookie: &str) -> Option<Operator> {
        // An OAuth login is sealed for the issuer, audience and scope it
        // was made under: changing any of them ends it.
        let login: Login = self.keys.open(PURPOSE, cookie).or_else(|| {
            self.oauth_purpose()
                .and_then(|purpose| self.keys.open(&purpose, cookie))
        })?;
        let valid = match login.by.as_str() {
            "tokens" => self
                .tokens
                .as_ref()
                .is_some_and(|t| t.holds(&login.op, &login.fp)),
            "oauth" => self.oauth.is_some(),
            _ => false,
        };
        valid.then(|| Operator {
            name: login.op,
            csrf: csrf_of(cookie),
        })
    }
}

/// Where the logout of login `cookie` is marked.
fn logged_out(cookie: &str) -> String {
    format!(
        "{LOGGED_OUT}{}",
        hex::encode(Sha256::digest(cookie.as_bytes()))
    )
}

/// The CSRF token of a login: a page of another site cannot read the
/// cookie (HttpOnly, SameSite=Strict), so it cannot make this.
fn csrf_of(cookie: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(b"wasm-agent console csrf\0");
    hash.update(cookie.as_bytes());
    hex::encode(&hash.finalize()[..16])
}

/// Whether `sent` is `expected`, compared in time that does not depend on
/// where they differ.
pub(crate) fn same_secret(sent: &str, expected: &str) -> bool {
    sent.len() == expected.len()
        && sent
            .bytes()
            .zip(expected.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn operators() -> Operators {
        let table = TokenTable::parse(
            &format!(
                "[[tokens]]\nsha256 = \"{}\"\nprincipal = \"olga\"\n",
                hex::encode(Sha256::digest(b"op-secret"))
            ),
            std::path::Path::new("ops.toml"),
        )
        .unwrap();
        Operators::new(Some(Arc::new(table)), None, StateKeys::random())
    }

    #[tokio::test]
    async fn a_login_names_its_operator_and_nothing_else_passes() {
        let ops = operators();
        assert_eq!(
            ops.log_in("wrong").await.unwrap_err(),
            LoginError::NotAnOperator
        );
        let (cookie, name) = ops.log_in(" op-secret\n").await.unwrap();
        assert_eq!(name, "olga");
        let operator = ops.operator(&cookie).expect("a valid login");
        assert_eq!(operator.name, "olga");
        assert_eq!(operator.csrf.len(), 32);
        // Changed anywhere, it is refused.
        let mut forged = cookie.clone().into_bytes();
        let at = forged.len() / 2;
        forged[at] = if forged[at] == b'A' { b'B' } else { b'A' };
        assert!(ops.operator(&String::from_utf8(forged).unwrap()).is_none());
        // Other keys (another deployment) do not open it.
        let other = Operators::new(ops.tokens.clone(), None, StateKeys::random());
        assert!(other.operator(&cookie).is_none());
    }

    #[tokio::test]
    async fn a_login_ends_when_its_token_leaves_the_file() {
        let ops = operators();
        let (cookie, _) = ops.log_in("op-secret").await.unwrap();
        let rotated = TokenTable::parse(
            &format!(
                "[[tokens]]\nsha256 = \"{}\"\nprincipal = \"olga\"\n",
                hex::encode(Sha256::digest(b"new-secret"))
            ),
            std::path::Path::new("ops.toml"),
        )
        .unwrap();
        let after = Operators::new(Some(Arc::new(rotated)), None, ops.keys.clone());
        assert!(after.operator(&cookie).is_none());
    }

    #[tokio::test]
    async fn a_login_logged_out_on_one_replica_is_refused_by_all() {
        let store: Arc<dyn SessionStore> =
            Arc::new(wasm_agent_session::InMemorySessionStore::default());
        let ops = operators().logouts_in(store.clone());
        let other = Operators::new(ops.tokens.clone(), None, ops.keys.clone()).logouts_in(store);
        let (cookie, _) = ops.log_in("op-secret").await.unwrap();
        let (kept, _) = ops.log_in("op-secret").await.unwrap();
        assert!(other.signed_in(&cookie, true).await.is_some());
        ops.log_out(&cookie).await.unwrap();
        assert!(other.signed_in(&cookie, false).await.is_none());
        assert!(ops.signed_in(&cookie, true).await.is_none());
        // Only that login: another of the same operator holds.
        assert!(other.signed_in(&kept, true).await.is_some());
    }

    #[test]
    fn cookies_are_secure_only_behind_https() {
        assert!(!operators().cookie_attributes().contains("Secure"));
        let https = operators().over_https(true).cookie_attributes();
        assert_eq!(https, "HttpOnly; SameSite=Strict; Secure");
    }

    #[test]
    fn form_nonces_are_this_servers_and_nothing_else_is() {
        let ops = operators();
        let nonce = ops.form_nonce();
        assert!(ops.is_form_nonce(&nonce));
        assert!(!ops.is_form_nonce("x"));
        // A login cookie is not a form nonce, nor the reverse.
        assert!(ops.operator(&nonce).is_none());
        let other = Operators::new(ops.tokens.clone(), None, StateKeys::random());
        assert!(!other.is_form_nonce(&nonce));
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abcd", "abcd"));
        assert!(!same_secret("abcd", "abce"));
        assert!(!same_secret("abc", "abcd"));
        assert!(!same_secret("", "abcd"));
    }
}
