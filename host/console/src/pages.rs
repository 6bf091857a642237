//! The console's pages: each a template filled from the host, the board or
//! the audit log, and the forms (log in, log out, an answer to a question,
//! handed to `approvals`).

use std::time::Duration;

use askama::Template;
use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use serde::Deserialize;
use wasm_agent_audit::record::OperatorAction;
use wasm_agent_mcp::PageBody;

use crate::approvals;
use crate::audit::{self, AuditRow, Filter};
use crate::auth::{self, FORM_COOKIE, LOGIN_COOKIE, LOGIN_TTL, Operator, Operators};
use crate::board::Running;
use crate::calls::{self, CallRow};
use crate::health;
use crate::tools::{self, ToolFacts, ToolRow};
use crate::{Inner, PREFIX, web};

/// Longest the health page waits for the session store.
const STORE_CHECK: Duration = Duration::from_secs(2);
/// Longest a live page's check of its login waits for the shared store
/// (unanswered: the login is taken to be over).
const STILL_IN_WAIT: Duration = Duration::from_secs(5);

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage {
    form: String,
    oauth: Option<String>,
    error: Option<String>,
}

#[derive(Template)]
#[template(path = "tools.html")]
struct ToolsPage<'a> {
    page: &'static str,
    operator: &'a Operator,
    tools: Vec<ToolRow>,
}

#[derive(Template)]
#[template(path = "calls.html")]
struct CallsPage<'a> {
    page: &'static str,
    operator: &'a Operator,
    running: Vec<Running>,
    recent: Vec<std::sync::Arc<CallRow>>,
}

struct Chain {
    text: String,
    class: &'static str,
}

#[derive(Template)]
#[template(path = "audit.html")]
struct AuditPage<'a> {
    page: &'static str,
    operator: &'a Operator,
    chain: Option<Chain>,
    filter: Filter,
    query: String,
    error: Option<String>,
    summary: String,
    rows: Vec<AuditRow>,
}

#[derive(Template)]
#[template(path = "health.html")]
struct HealthPage<'a> {
    page: &'static str,
    operator: &'a Operator,
    calls: u64,
    denials: u64,
    latency: String,
    calls_chart: String,
    latency_chart: String,
    denials_chart: String,
    stores: Vec<(String, String)>,
}

/// A filled template as a page (a template that cannot render is a 500).
pub(crate) fn render(template: &impl Template) -> Response<PageBody> {
    match template.render() {
        Ok(page) => web::html(StatusCode::OK, page),
        Err(error) => {
            tracing::warn!(%error, "a console page did not render");
            web::text(StatusCode::INTERNAL_SERVER_ERROR, "the page did not render")
        }
    }
}

/// The console's stylesheet and script, from the binary.
pub(crate) fn asset(kind: &str) -> Response<PageBody> {
    match kind {
        "css" => web::respond(
            StatusCode::OK,
            "text/css; charset=utf-8",
            Bytes::from_static(include_bytes!("../assets/console.css")),
        ),
        "svg" => web::respond(
            StatusCode::OK,
            "image/svg+xml",
            Bytes::from_static(include_bytes!("../assets/icon.svg")),
        ),
        _ => web::respond(
            StatusCode::OK,
            "text/javascript; charset=utf-8",
            Bytes::from_static(include_bytes!("../assets/live.js")),
        ),
    }
}

/// The login form, bound to this browser by a cookie of its own.
pub(crate) fn login_form(operators: &Operators, error: Option<String>) -> Response<PageBody> {
    let form = operators.form_nonce();
    let oauth = operators.oauth_scope();
    let status = if error.is_some() {
        StatusCode::UNAUTHORIZED
    } else {
        StatusCode::OK
    };
    let mut response = render(&LoginPage {
        form: form.clone(),
        oauth,
        error,
    });
    *response.status_mut() = status;
    let attributes = operators.cookie_attributes();
    web::set_cookie(
        &mut response,
        (FORM_COOKIE, &form),
        attributes,
        auth::FORM_TTL.as_secs(),
    );
    response
}

#[derive(Deserialize)]
struct LoginForm {
    #[serde(default)]
    form: String,
    #[serde(default)]
    token: String,
}

/// A login: the form must come from this browser's login page (no page
/// of another site can log a browser in as someone else).
pub(crate) async fn log_in(inner: &Inner, request: Request<Incoming>) -> Response<PageBody> {
    let operators = &inner.operators;
    let bound = web::cookie(request.headers(), FORM_COOKIE).map(String::from);
    let form: LoginForm = match web::form_text(request.into_body()).await {
        Ok(text) => match web::parse_form(&text) {
            Ok(form) => form,
            Err(error) => return web::text(StatusCode::BAD_REQUEST, &error),
        },
        Err(refusal) => return refusal,
    };
    let bound = bound.is_some_and(|b| !b.is_empty() && auth::same_secret(&form.form, &b));
    if !bound || !operators.is_form_nonce(&form.form) {
        return web::text(
            StatusCode::FORBIDDEN,
            "forbidden: the login form's CSRF token is missing or wrong; load the login page again",
        );
    }
    match operators.log_in(&form.token).await {
        Ok((cookie, name)) => {
            tracing::info!(operator = %name, "an operator logged in to the console");
            inner.record(OperatorAction {
                operator: name.clone(),
                action: "log_in".into(),
                ..OperatorAction::default()
            });
            let mut response = web::see_other(&format!("{PREFIX}/tools"));
            let attributes = operators.cookie_attributes();
            web::set_cookie(
                &mut response,
                (LOGIN_COOKIE, &cookie),
                attributes,
                LOGIN_TTL.as_secs(),
            );
            web::set_cookie(&mut response, (FORM_COOKIE, ""), attributes, 0);
            response
        }
        Err(error) => login_form(operators, Some(error.to_string())),
    }
}

#[derive(Deserialize)]
struct ActionForm {
    #[serde(default)]
    csrf: String,
    /// An answer to a question (`/approvals/ID`).
    #[serde(default)]
    answer: String,
}

/// A form an operator sent: refused unless it carries their CSRF token.
pub(crate) async fn post(
    inner: &Inner,
    operator: &Operator,
    cookie: &str,
    path: &str,
    request: Request<Incoming>,
) -> Response<PageBody> {
    let text = match web::form_text(request.into_body()).await {
        Ok(text) => text,
        Err(refusal) => return refusal,
    };
    let form: ActionForm = match web::parse_form(&text) {
        Ok(form) => form,
        Err(error) => return web::text(StatusCode::BAD_REQUEST, &error),
    };
    if !auth::same_secret(&form.csrf, &operator.csrf) {
        return web::text(
            StatusCode::FORBIDDEN,
            "forbidden: the form's CSRF token is missing or wrong; reload the page and try again",
        );
    }
    match path {
        "/logout" => {
            tracing::info!(operator = %operator.name, "an operator logged out of the console");
            let ended = inner.operators.log_out(cookie).await;
            inner.record(OperatorAction {
                operator: operator.name.clone(),
                action: "log_out".into(),
                ..OperatorAction::default()
            });
            // The browser forgets the login either way.
            let mut response = match ended {
                Ok(()) => web::see_other(&format!("{PREFIX}/login")),
                Err(error) => web::text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &format!(
                        "logged out in this browser only: the shared store did not take the \
                         logout ({error}), so a copy of the login is still good until it expires"
                    ),
                ),
            };
            let attributes = inner.operators.cookie_attributes();
            web::set_cookie(&mut response, (LOGIN_COOKIE, ""), attributes, 0);
            response
        }
        path => match path.strip_prefix("/approvals/") {
            Some(id) => approvals::answer(inner, operator, id, form.answer).await,
            None => web::text(StatusCode::NOT_FOUND, "not found"),
        },
    }
}

/// A page an operator asked for.
pub(crate) async fn get(
    inner: &Inner,
    operator: &Operator,
    cookie: &str,
    path: &str,
    query: Option<&str>,
) -> Response<PageBody> {
    match path {
        "" | "/" => web::see_other(&format!("{PREFIX}/tools")),
        "/tools" => render(&ToolsPage {
            page: "tools",
            operator,
            tools: tools::rows(&ToolFacts {
                host: &inner.host,
                settings: &inner.settings,
                provenance: &inner.provenance,
                access: &inner.access,
            }),
        }),
        "/calls" => render(&CallsPage {
            page: "calls",
            operator,
            running: inner.board.running(),
            recent: inner.board.recent(),
        }),
        "/calls/events" => match inner.streams.clone().try_acquire_owned() {
            Ok(permit) => calls::events(&inner.board, permit, still_in(inner, cookie)),
            Err(_) => web::text(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!(
                    "too many live pages are open (at most {})",
                    crate::MAX_STREAMS
                ),
            ),
        },
        "/audit" => audit_page(inner, operator, query).await,
        "/audit/export" => export(inner, query).await,
        "/health" => health_page(inner, operator).await,
        "/approvals" => approvals::get(inner, operator, "").await,
        path if path.starts_with("/approvals/") => {
            approvals::get(inner, operator, &path["/approvals/".len()..]).await
        }
        _ => web::text(StatusCode::NOT_FOUND, "not found"),
    }
}

/// Whether the login `cookie` still holds (a live page's stream ends
/// when it does not).
fn still_in(
    inner: &Inner,
    cookie: &str,
) -> impl Fn() -> BoxFuture<'static, bool> + Send + Sync + 'static {
    let (operators, cookie) = (inner.operators.clone(), cookie.to_string());
    move || {
        let (operators, cookie) = (operators.clone(), cookie.clone());
        Box::pin(async move {
            let check = operators.signed_in(&cookie, true);
            matches!(
                tokio::time::timeout(STILL_IN_WAIT, check).await,
                Ok(Some(_))
            )
        })
    }
}

async fn audit_page(inner: &Inner, operator: &Operator, query: Option<&str>) -> Response<PageBody> {
    let (filter, _job) = match audit_job(inner, query) {
        Ok(job) => job,
        Err(refusal) => return *refusal,
    };
    let mut page = AuditPage {
        page: "audit",
        operator,
        chain: None,
        query: filter.query(),
        filter: filter.clone(),
        error: None,
        summary: String::new(),
        rows: Vec::new(),
    };
    if let Some(path) = inner.audit.clone() {
        let searched = tokio::task::spawn_blocking(move || {
            (audit::chain_state(&path), audit::search(&path, filter))
        })
        .await;
        let Ok(((text, holds), found)) = searched else {
            return web::text(StatusCode::INTERNAL_SERVER_ERROR, "the search stopped");
        };
        page.chain = Some(Chain {
            text,
            class: if holds { "holds" } else { "broken" },
        });
        match found {
            Ok(found) => {
                page.summary = match found.matched {
                    n if n as usize > audit::SHOWN => {
                        format!("{n} records match; the newest {} are shown.", audit::SHOWN)
                    }
                    1 => "1 record matches.".into(),
                    n => format!("{n} records match."),
                };
                page.rows = found.rows;
            }
            Err(error) => page.error = Some(error),
        }
    }
    render(&page)
}

async fn export(inner: &Inner, query: Option<&str>) -> Response<PageBody> {
    let Some(path) = inner.audit.clone() else {
        return web::text(StatusCode::NOT_FOUND, "this server keeps no audit log file");
    };
    let (filter, _job) = match audit_job(inner, query) {
        Ok(job) => job,
        Err(refusal) => return *refusal,
    };
    let exported = tokio::task::spawn_blocking(move || audit::export(&path, filter)).await;
    match exported {
        Ok(Ok((lines, cut))) => {
            let mut response =
                web::respond(StatusCode::OK, "application/jsonl", Bytes::from(lines));
            let headers = response.headers_mut();
            headers.insert(
                http::header::CONTENT_DISPOSITION,
                http::HeaderValue::from_static("attachment; filename=\"audit.jsonl\""),
            );
            if cut {
                headers.insert(
                    http::HeaderName::from_static("x-wasm-agent-truncated"),
                    http::HeaderValue::from_static("the export stopped at its 64 MiB limit"),
                );
            }
            response
        }
        Ok(Err(error)) => web::text(StatusCode::BAD_REQUEST, &error),
        Err(_) => web::text(StatusCode::INTERNAL_SERVER_ERROR, "the export stopped"),
    }
}

/// A search of the audit log, read from `query`, and the turn it runs in
/// (one search or export at a time: each reads the whole log).
fn audit_job(
    inner: &Inner,
    query: Option<&str>,
) -> Result<(Filter, tokio::sync::OwnedSemaphorePermit), Box<Response<PageBody>>> {
    let filter = web::query::<Filter>(query)
        .map_err(|e| format!("bad search: {e}"))
        .and_then(Filter::bounded)
        .map_err(|error| Box::new(web::text(StatusCode::BAD_REQUEST, &error)))?;
    let job = inner
        .audit_jobs
        .clone()
        .try_acquire_owned()
        .map_err(|_| Box::new(busy()))?;
    Ok((filter, job))
}

/// The answer while another audit search or export runs (one at a time:
/// each reads the whole log).
fn busy() -> Response<PageBody> {
    let mut response = web::text(
        StatusCode::SERVICE_UNAVAILABLE,
        "another audit search or export is running; try again in a moment",
    );
    response.headers_mut().insert(
        http::header::RETRY_AFTER,
        http::HeaderValue::from_static("2"),
    );
    response
}

async fn health_page(inner: &Inner, operator: &Operator) -> Response<PageBody> {
    let charts = health::charts(&inner.board.series().last_hour(std::time::SystemTime::now()));
    let store = inner.host.session_store();
    let store_state = match tokio::time::timeout(STORE_CHECK, store.check()).await {
        Ok(Ok(())) => "answers".to_string(),
        Ok(Err(error)) => format!("does not answer: {error}"),
        Err(_) => format!("does not answer within {STORE_CHECK:?}"),
    };
    let mut stores = vec![(format!("session store ({})", store.location()), store_state)];
    stores.extend(
        inner
            .probes
            .iter()
            .map(|(name, probe)| (name.clone(), probe())),
    );
    stores.push((
        "calls in flight".into(),
        inner.board.running().len().to_string(),
    ));
    for (kind, count) in inner.host.gauges().denials() {
        stores.push((format!("refused since start: {kind}"), count.to_string()));
    }
    render(&HealthPage {
        page: "health",
        operator,
        calls: charts.calls,
        denials: charts.denials,
        latency: charts.latency,
        calls_chart: charts.calls_chart,
        latency_chart: charts.latency_chart,
        denials_chart: charts.denials_chart,
        stores,
    })
}
