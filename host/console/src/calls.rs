//! The calls page: a call record made a row, and the live stream of the
//! board's events (server-sent events) that keeps the page current.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use futures::future::BoxFuture;
use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde::Serialize;
use tokio::sync::{OwnedSemaphorePermit, broadcast};
use wasm_agent_mcp::PageBody;
use wasm_agent_sandbox::report::CallReport;

use crate::board::{BoardEvent, CallBoard, Running};
use crate::web;

/// A comment line sent this often keeps proxies from closing the stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// One ended call as the page shows it (and, as JSON, as live pages get it).
#[derive(Clone, Debug, Serialize)]
pub(crate) struct CallRow {
    pub time: String,
    pub tool: String,
    pub caller: String,
    /// `ok` or the error kind.
    pub outcome: String,
    pub took: String,
    pub fuel: String,
    pub memory: String,
    /// What was refused, and what would allow it.
    pub denials: Vec<String>,
    /// `ok` or `failed`, for the row's look.
    pub class: &'static str,
    /// How long it took, in µs (for the hour's figures).
    #[serde(skip)]
    pub duration_us: u64,
    /// How many times its tool was refused something.
    #[serde(skip)]
    pub refusals: u64,
}

impl CallRow {
    /// The row of the call `report` tells of.
    pub(crate) fn of(report: &CallReport) -> Self {
        let outcome = report
            .outcome
            .map_or("ok", |kind| kind.as_str())
            .to_string();
        let usage = report.usage.as_ref();
        let tool_denials = usage.map_or(&[][..], |u| &u.activity.denials[..]);
        let mut denials: Vec<String> = tool_denials
            .iter()
            .map(|d| format!("{}: {}", d.attempt, d.reason))
            .collect();
        // What refused it, when a rule or quota did (not what let it in).
        if let Some(by) = &report.decided_by
            && outcome != "ok"
            && !by.contains(": allow")
        {
            denials.push(format!("decided by {by}"));
        }
        let duration_us = u64::try_from(report.duration.as_micros()).unwrap_or(u64::MAX);
        Self {
            time: humantime::format_rfc3339_micros(report.started).to_string(),
            tool: report.tool.clone(),
            caller: caller(
                report.principal.as_deref().unwrap_or(""),
                report.tenant.as_deref().unwrap_or(""),
            ),
            class: if outcome == "ok" { "ok" } else { "failed" },
            outcome,
            took: micros(duration_us),
            fuel: usage.map_or(String::new(), |u| u.fuel_used.to_string()),
            memory: usage.map_or(String::new(), |u| format!("{} KiB", u.peak_memory / 1024)),
            denials,
            duration_us,
            refusals: tool_denials.len() as u64,
        }
    }
}

impl Running {
    /// Who made the call, for the page.
    pub(crate) fn who(&self) -> String {
        caller(
            self.principal.as_deref().unwrap_or(""),
            self.tenant.as_deref().unwrap_or(""),
        )
    }
}

/// Who made a call, labelled (so no principal can pass for a principal
/// and tenant) and on one line; every page and record of the console
/// names callers so.
pub(crate) fn caller(principal: &str, tenant: &str) -> String {
    let one_line = |text: &str| wasm_agent_sandbox::text::one_line(text).into_owned();
    match (principal, tenant) {
        ("", "") => "anonymous".into(),
        (principal, "") => format!("principal {}", one_line(principal)),
        ("", tenant) => format!("tenant {}", one_line(tenant)),
        (principal, tenant) => format!(
            "principal {}, tenant {}",
            one_line(principal),
            one_line(tenant)
        ),
    }
}

/// A duration in µs, in the unit that reads best.
pub(crate) fn micros(us: u64) -> String {
    match us {
        0..1_000 => format!("{us} µs"),
        1_000..1_000_000 => format!("{:.1} ms", us as f64 / 1e3),
        _ => format!("{:.2} s", us as f64 / 1e6),
    }
}

/// The board's events as server-sent events, until the page goes away or
/// its login ends (`still_in` is asked at least every [`KEEP_ALIVE`]; the
/// page is then told to reload, which leads to the login page); `permit`
/// (one of the console's few streams) is held as long.
pub(crate) fn events(
    board: &Arc<CallBoard>,
    permit: OwnedSemaphorePermit,
    still_in: impl Fn() -> BoxFuture<'static, bool> + Send + Sync + 'static,
) -> Response<PageBody> {
    let receiver = board.subscribe();
    let state = (receiver, permit, still_in, Instant::now(), false);
    let stream = futures::stream::unfold(
        state,
        |(mut receiver, permit, still_in, checked, ended)| async move {
            if ended {
                return None;
            }
            let checked = if checked.elapsed() >= KEEP_ALIVE {
                // Checked in a task of its own: the body must stay `Sync`.
                if !tokio::spawn(still_in()).await.unwrap_or(false) {
                    let reload = Bytes::from_static(b"event: reload\ndata: {}\n\n");
                    return Some((reload, (receiver, permit, still_in, checked, true)));
                }
                Instant::now()
            } else {
                checked
            };
            let chunk = match tokio::time::timeout(KEEP_ALIVE, receiver.recv()).await {
                Err(_) => ": keep-alive\n\n".to_string(),
                Ok(Ok(event)) => sse(&event),
                // Fell behind: the page reloads what it shows.
                Ok(Err(broadcast::error::RecvError::Lagged(_))) => {
                    "event: reload\ndata: {}\n\n".to_string()
                }
                Ok(Err(broadcast::error::RecvError::Closed)) => return None,
            };
            Some((
                Bytes::from(chunk),
                (receiver, permit, still_in, checked, false),
            ))
        },
    );
    let body = BodyExt::boxed(StreamBody::new(stream.map(|chunk| Ok(Frame::data(chunk)))));
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    web::secure(headers);
    response
}

/// One event in the stream's format: its kind, and its JSON on one line
/// (JSON text has no raw line breaks, so one `data:` line carries it).
fn sse(event: &BoardEvent) -> String {
    let (kind, data) = match event {
        BoardEvent::Call { json, .. } => ("call", json.to_string()),
        BoardEvent::Started(running) => (
            "started",
            serde_json::json!({
                "id": running.id, "tool": running.tool, "caller": running.who(),
                "started": running.started,
            })
            .to_string(),
        ),
        BoardEvent::Ended { id } => ("ended", serde_json::json!({ "id": id }).to_string()),
    };
    format!("event: {kind}\ndata: {data}\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};
    use wasm_agent_sandbox::result::ErrorKind;
    use wasm_agent_sandbox::runtime::{CallActivity, CallUsage, Denial, DenialKind};

    fn refused_fetch() -> CallReport {
        CallReport {
            started: SystemTime::UNIX_EPOCH,
            call_id: "call-1".into(),
            run_id: String::new(),
            session_id: String::new(),
            principal: Some("alice".into()),
            tenant: Some("acme".into()),
            tool: "fetch".into(),
            component: None,
            remote: None,
            arguments_digest: String::new(),
            arguments: None,
            approval: None,
            usage: Some(CallUsage {
                fuel_used: 1234,
                peak_memory: 2_097_152,
                activity: CallActivity {
                    denials: vec![Denial {
                        attempt: "GET https://evil.example/".into(),
                        reason: "no network grant matches; allow it with --allow-host".into(),
                        kind: DenialKind::Network,
                    }],
                    ..CallActivity::default()
                },
            }),
            outcome: Some(ErrorKind::CapabilityDenied),
            duration: Duration::from_micros(1500),
            depth: 0,
            cached: false,
            decided_by: Some("access: allow by the default".into()),
        }
    }

    #[test]
    fn a_refused_call_says_what_was_refused_and_what_would_allow_it() {
        let row = CallRow::of(&refused_fetch());
        assert_eq!(row.caller, "principal alice, tenant acme");
        assert_eq!(row.took, "1.5 ms");
        assert_eq!(row.memory, "2048 KiB");
        assert_eq!(
            (row.class, row.outcome.as_str()),
            ("failed", "capability_denied")
        );
        // What let it in is not what refused it.
        assert_eq!(
            row.denials,
            ["GET https://evil.example/: no network grant matches; allow it with --allow-host"]
        );
        assert_eq!((row.duration_us, row.refusals), (1500, 1));
    }

    #[test]
    fn callers_cannot_pass_for_others() {
        assert_eq!(caller("x (acme)", ""), "principal x (acme)");
        assert_eq!(caller("x", "acme"), "principal x, tenant acme");
        assert_eq!(caller("a\nb", ""), "principal a\\nb");
    }

    #[test]
    fn events_are_one_line_of_json_each() {
        let mut report = refused_fetch();
        report.tool = "t\nx".into();
        let row = Arc::new(CallRow::of(&report));
        let json: Arc<str> = serde_json::to_string(&*row).unwrap().into();
        let text = sse(&BoardEvent::Call { row, json });
        assert!(text.starts_with("event: call\ndata: {"));
        assert_eq!(text.matches('\n').count(), 3, "{text:?}");
    }
}
