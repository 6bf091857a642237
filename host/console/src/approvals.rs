//! The approvals pages: the questions waiting for an operator (from every
//! replica, through the shared store), one question's page (where the
//! person behind the call is sent), and the operator's answer, recorded in
//! the audit trail under their name.

use askama::Template;
use http::{Response, StatusCode};
use wasm_agent_audit::record::OperatorAction;
use wasm_agent_mcp::PageBody;

use crate::auth::Operator;
use crate::desk::{Answer, Pending};
use crate::pages::render;
use crate::{Inner, PREFIX, web};

#[derive(Template)]
#[template(path = "approvals.html")]
struct ApprovalsPage<'a> {
    page: &'static str,
    operator: &'a Operator,
    waiting: Vec<Pending>,
    more: bool,
    error: Option<String>,
}

#[derive(Template)]
#[template(path = "question.html")]
struct QuestionPage<'a> {
    page: &'static str,
    operator: &'a Operator,
    question: Option<Pending>,
}

/// The answers an operator may give.
const ANSWERS: [&str; 3] = ["allow_once", "allow_for_session", "deny"];

/// Whether `id` has the form of a question's id (so it never widens a
/// lookup in the store).
fn is_id(id: &str) -> bool {
    id.len() == 45 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `GET /console/approvals[/ID]`.
pub(crate) async fn get(inner: &Inner, operator: &Operator, rest: &str) -> Response<PageBody> {
    let Some(desk) = &inner.desk else {
        return render(&ApprovalsPage {
            page: "approvals",
            operator,
            waiting: Vec::new(),
            more: false,
            error: Some("No tool's questions are answered by operators on this server.".into()),
        });
    };
    match rest {
        "" => {
            let ((waiting, more), error) = match desk.waiting().await {
                Ok(waiting) => (waiting, None),
                Err(error) => (
                    (Vec::new(), false),
                    Some(format!("the shared store does not answer: {error}")),
                ),
            };
            render(&ApprovalsPage {
                page: "approvals",
                operator,
                waiting,
                more,
                error,
            })
        }
        id if is_id(id) => render(&QuestionPage {
            page: "approvals",
            operator,
            question: desk.question(id).await,
        }),
        _ => web::text(StatusCode::NOT_FOUND, "not found: no such question"),
    }
}

/// `POST /console/approvals/ID`: the operator's answer (the CSRF token was
/// checked already).
pub(crate) async fn answer(
    inner: &Inner,
    operator: &Operator,
    id: &str,
    answer: String,
) -> Response<PageBody> {
    let (Some(desk), true) = (&inner.desk, is_id(id)) else {
        return web::text(StatusCode::NOT_FOUND, "not found: no such question");
    };
    if !ANSWERS.contains(&answer.as_str()) {
        return web::text(
            StatusCode::BAD_REQUEST,
            "bad answer: allow_once, allow_for_session or deny",
        );
    }
    let Some(question) = desk.question(id).await else {
        return gone();
    };
    // Nobody approves their own call.
    if question.principal.as_deref() == Some(operator.name.as_str()) {
        return web::text(
            StatusCode::FORBIDDEN,
            "forbidden: this question is about a call you made; another operator must answer it",
        );
    }
    if answer == "allow_for_session" && question.session_choice.is_none() {
        return web::text(
            StatusCode::BAD_REQUEST,
            "this question cannot be answered for the session (the server offers it only with --ask-session)",
        );
    }
    let given = Answer {
        answer: answer.clone(),
        operator: operator.name.clone(),
        key: question.key.clone(),
    };
    // Recorded before it takes effect: no answer counts that the trail
    // could lose.
    let action = OperatorAction {
        operator: operator.name.clone(),
        action: answer.clone(),
        question: Some(id.to_string()),
        tool: Some(question.tool.clone()),
        caller: Some(question.caller()),
        detail: Some(format!("sha256:{}", question.key)),
    };
    if let Err(error) = inner.record_now(action.clone()).await {
        return web::text(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("the answer was not given: its audit record could not be written ({error})"),
        );
    }
    let (response, why) = match desk.answer(id, &given).await {
        Ok(true) => {
            tracing::info!(operator = %operator.name, question = %id, %answer, "an operator answered a question");
            return web::see_other(&format!("{PREFIX}/approvals"));
        }
        Ok(false) => (gone(), "the question no longer waited".to_string()),
        Err(error) => (
            web::text(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("the answer could not be left in the shared store: {error}"),
            ),
            format!("the shared store did not take it: {error}"),
        ),
    };
    // The trail says the answer was given: it also says it did not count.
    let not_taken = OperatorAction {
        action: NOT_TAKEN.into(),
        detail: Some(format!("{answer}: {why}")),
        ..action
    };
    if let Err(error) = inner.record_now(not_taken).await {
        tracing::warn!(%error, "cannot record that an operator's answer did not count");
    }
    response
}

/// The action recorded after an answer that came too late or was not left.
pub(crate) const NOT_TAKEN: &str = "answer_not_taken";

fn gone() -> Response<PageBody> {
    web::text(
        StatusCode::CONFLICT,
        "this question is no longer waiting: it was answered already, or its wait ended",
    )
}
