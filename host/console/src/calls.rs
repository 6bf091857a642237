//! The calls page: a call record made a row, and the live stream of the
//! board's events (server-sent events) that keeps the page current.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, broadcast};
use wasm_agent_mcp::PageBody;

use crate::board::{BoardEvent, CallBoard, Running};
use crate::web;

/// A comment line sent this often keeps proxies from closing the stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// One ended call as the page shows it.
pub(crate) struct CallRow {
    pub time: String,
    pub tool: String,
    pub caller: String,
    pub outcome: String,
    pub took: String,
    pub fuel: String,
    pub memory: String,
    /// What was refused, and what would allow it.
    pub denials: Vec<String>,
    /// `ok` or `failed`, for the row's look.
    pub class: &'static str,
}

impl CallRow {
    /// The row of a call record.
    pub(crate) fn of(record: &Value) -> Self {
        let text = |key: &str| record.get(key).and_then(Value::as_str).unwrap_or("");
        let number = |key: &str| record.get(key).and_then(Value::as_u64);
        let outcome = text("outcome").to_string();
        let mut denials: Vec<String> = record
            .get("denials")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|d| {
                let field = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("");
                format!("{}: {}", field("attempt"), field("reason"))
            })
            .collect();
        // What refused it, when a rule or quota did (not what let it in).
        if let Some(by) = record.get("decided_by").and_then(Value::as_str)
            && outcome != "ok"
            && !by.contains(": allow")
        {
            denials.push(format!("decided by {by}"));
        }
        Self {
            time: text("time").to_string(),
            tool: text("tool").to_string(),
            caller: caller(text("principal"), text("tenant")),
            class: if outcome == "ok" { "ok" } else { "failed" },
            outcome,
            took: number("duration_us").map_or(String::new(), micros),
            fuel: number("fuel_used").map_or(String::new(), |f| f.to_string()),
            memory: number("peak_memory").map_or(String::new(), |b| format!("{} KiB", b / 1024)),
            denials,
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

fn caller(principal: &str, tenant: &str) -> String {
    match (principal, tenant) {
        ("", "") => "anonymous".into(),
        (principal, "") => principal.into(),
        ("", tenant) => format!("(tenant {tenant})"),
        (principal, tenant) => format!("{principal} ({tenant})"),
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
    still_in: impl Fn() -> bool + Send + Sync + 'static,
) -> Response<PageBody> {
    let receiver = board.subscribe();
    let state = (receiver, permit, still_in, Instant::now(), false);
    let stream = futures::stream::unfold(
        state,
        |(mut receiver, permit, still_in, checked, ended)| async move {
            if ended {
                return None;
            }
            let checked = match checked.elapsed() >= KEEP_ALIVE {
                true if !still_in() => {
                    let reload = Bytes::from_static(b"event: reload\ndata: {}\n\n");
                    return Some((reload, (receiver, permit, still_in, checked, true)));
                }
                true => Instant::now(),
                false => checked,
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

/// One event in the stream's format: its kind, and its JSON on one line.
fn sse(event: &BoardEvent) -> String {
    let kind = match event {
        BoardEvent::Started(_) => "started",
        BoardEvent::Ended { .. } => "ended",
        BoardEvent::Call { .. } => "call",
    };
    let data = match event {
        BoardEvent::Call { record } => {
            let row = CallRow::of(record);
            serde_json::json!({
                "time": row.time, "tool": row.tool, "caller": row.caller,
                "outcome": row.outcome, "took": row.took, "fuel": row.fuel,
                "memory": row.memory, "denials": row.denials, "class": row.class,
            })
        }
        BoardEvent::Started(running) => serde_json::json!({
            "id": running.id, "tool": running.tool, "caller": running.who(),
            "started": running.started,
        }),
        BoardEvent::Ended { id } => serde_json::json!({ "id": id }),
    };
    // JSON text has no raw line breaks, so one `data:` line carries it.
    format!("event: {kind}\ndata: {data}\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_refused_call_says_what_was_refused_and_what_would_allow_it() {
        let row = CallRow::of(&json!({
            "time": "2026-12-05T10:00:00Z", "tool": "fetch", "principal": "alice",
            "tenant": "acme", "outcome": "capability_denied", "duration_us": 1500,
            "fuel_used": 1234, "peak_memory": 2_097_152,
            "denials": [{"kind": "network", "attempt": "GET https://evil.example/",
                         "reason": "no network grant matches; allow it with --allow-host"}],
        }));
        assert_eq!(row.caller, "alice (acme)");
        assert_eq!(row.took, "1.5 ms");
        assert_eq!(row.memory, "2048 KiB");
        assert_eq!(row.class, "failed");
        assert_eq!(
            row.denials,
            ["GET https://evil.example/: no network grant matches; allow it with --allow-host"]
        );
    }

    #[test]
    fn events_are_one_line_of_json_each() {
        let record = Arc::new(json!({"tool": "t\nx", "outcome": "ok", "time": "now"}));
        let text = sse(&BoardEvent::Call { record });
        assert!(text.starts_with("event: call\ndata: {"));
        assert_eq!(text.matches('\n').count(), 3, "{text:?}");
    }
}
