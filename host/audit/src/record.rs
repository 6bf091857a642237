//! The JSON of one audit record: a call (from the host's [`CallReport`]) or
//! the opening of the log by a process. `seq` and `prev` are given by the
//! writer, which numbers and chains records in the order it writes them.

use serde::Serialize;
use serde_json::Value;
use wasm_agent_sandbox::CallReport;
use wasm_agent_sandbox::text::redact;

/// Argument texts longer than this are not copied into a record (their
/// digest still is).
pub const MAX_AUDITED_ARGUMENTS: usize = 64 * 1024;

/// What a record is about.
pub enum Event {
    /// A process opened the log.
    Open {
        /// What opened it (`serve`, `call`, an embedder's name).
        entry: String,
        /// Bytes of a torn last record (a write cut short) cut off first.
        torn_bytes: u64,
    },
    /// A call ended or was refused.
    Call(Box<CallReport>),
    /// Records were dropped (the queue was full, or the file could not be
    /// written for long), so the trail has a gap here.
    Gap {
        /// How many.
        dropped: u64,
    },
    /// A person did something in the operator console.
    Operator(OperatorAction),
}

/// What an operator did in the console, for the trail.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OperatorAction {
    /// Who: the operator's name.
    pub operator: String,
    /// What (`log_in`, `log_out`, `allow_once`, `allow_for_session`, `deny`).
    pub action: String,
    /// The question it answered, if any.
    pub question: Option<String>,
    /// The tool the question was about.
    pub tool: Option<String>,
    /// Who made the call asked about.
    pub caller: Option<String>,
    /// The question as the operator saw it.
    pub detail: Option<String>,
}

/// The record's body (without `hash`) as JSON text.
pub fn body(event: &Event, seq: u64, prev: &str, time: std::time::SystemTime) -> String {
    let time = humantime::format_rfc3339_micros(time).to_string();
    let json = match event {
        Event::Open { entry, torn_bytes } => serde_json::to_string(&OpenRecord {
            seq,
            time,
            event: "open",
            entry,
            version: env!("CARGO_PKG_VERSION"),
            pid: std::process::id(),
            user: std::env::var("USER").ok(),
            torn_bytes: *torn_bytes,
            prev,
        }),
        Event::Call(report) => serde_json::to_string(&CallRecord::new(report, seq, time, prev)),
        Event::Operator(action) => serde_json::to_string(&OperatorRecord {
            seq,
            time,
            event: "operator",
            operator: &action.operator,
            action: &action.action,
            question: action.question.as_deref(),
            tool: action.tool.as_deref(),
            caller: action.caller.as_deref(),
            detail: action.detail.as_deref(),
            prev,
        }),
        Event::Gap { dropped } => serde_json::to_string(&GapRecord {
            seq,
            time,
            event: "gap",
            dropped: *dropped,
            prev,
        }),
    };
    // Serialising these structs cannot fail (string keys, no maps of others).
    json.unwrap_or_else(|e| format!("{{\"seq\":{seq},\"error\":\"{e}\",\"prev\":\"{prev}\"}}"))
}

#[derive(Serialize)]
struct OpenRecord<'a> {
    seq: u64,
    time: String,
    event: &'static str,
    entry: &'a str,
    version: &'static str,
    pid: u32,
    user: Option<String>,
    #[serde(skip_serializing_if = "is_zero")]
    torn_bytes: u64,
    prev: &'a str,
}

#[derive(Serialize)]
struct OperatorRecord<'a> {
    seq: u64,
    time: String,
    event: &'static str,
    operator: &'a str,
    action: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    question: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    caller: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
    prev: &'a str,
}

#[derive(Serialize)]
struct GapRecord<'a> {
    seq: u64,
    time: String,
    event: &'static str,
    dropped: u64,
    prev: &'a str,
}

#[derive(Serialize)]
struct CallRecord<'a> {
    seq: u64,
    time: String,
    event: &'static str,
    call_id: &'a str,
    run_id: &'a str,
    session_id: &'a str,
    principal: Option<&'a str>,
    tenant: Option<&'a str>,
    tool: &'a str,
    component: Option<&'a str>,
    source: Option<&'a str>,
    digest: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    remote: Option<RemoteRecord<'a>>,
    depth: u32,
    arguments_digest: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments_omitted: Option<String>,
    approval: Option<ApprovalRecord<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    decided_by: Option<&'a str>,
    denials: Vec<DenialRecord<'a>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    more_denials: bool,
    requests: Vec<RequestRecord<'a>>,
    #[serde(skip_serializing_if = "is_zero")]
    more_requests: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    asked: Vec<AskedRecord>,
    outcome: &'static str,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    cached: bool,
    duration_us: u64,
    fuel_used: Option<u64>,
    peak_memory: Option<u64>,
    prev: &'a str,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Where a tool that is not sandboxed ran.
#[derive(Serialize)]
struct RemoteRecord<'a> {
    origin: &'a str,
    version: &'a str,
}

#[derive(Serialize)]
struct ApprovalRecord<'a> {
    decision: &'static str,
    by: &'a str,
    /// What the person asked answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    answer: Option<&'static str>,
}

/// A question about an `ask` grant during the call, and its answer.
#[derive(Serialize)]
struct AskedRecord {
    question: String,
    answer: &'static str,
    by: String,
}

#[derive(Serialize)]
struct DenialRecord<'a> {
    kind: &'static str,
    attempt: &'a str,
    reason: &'a str,
}

#[derive(Serialize)]
struct RequestRecord<'a> {
    request: &'a str,
    decision: &'static str,
}

impl<'a> CallRecord<'a> {
    fn new(report: &'a CallReport, seq: u64, time: String, prev: &'a str) -> Self {
        let component = report.component.as_ref();
        let usage = report.usage.as_ref();
        let (arguments, arguments_omitted) = match report.arguments.as_deref() {
            None => (None, None),
            Some(text) if text.len() > MAX_AUDITED_ARGUMENTS => (
                None,
                Some(format!(
                    "{} bytes, over the {MAX_AUDITED_ARGUMENTS}-byte audit cap",
                    text.len()
                )),
            ),
            Some(text) => match serde_json::from_str::<Value>(text) {
                Ok(mut value) => {
                    redact(&mut value);
                    (Some(value), None)
                }
                Err(_) => (None, Some("not JSON".into())),
            },
        };
        Self {
            seq,
            time,
            event: "call",
            call_id: &report.call_id,
            run_id: &report.run_id,
            session_id: &report.session_id,
            principal: report.principal.as_deref(),
            tenant: report.tenant.as_deref(),
            tool: &report.tool,
            component: component.map(|c| &*c.name),
            source: component.map(|c| &*c.source),
            digest: component.map(|c| &*c.digest),
            remote: report.remote.as_ref().map(|r| RemoteRecord {
                origin: &r.origin,
                version: &r.version,
            }),
            depth: report.depth,
            arguments_digest: &report.arguments_digest,
            arguments,
            arguments_omitted,
            approval: report.approval.as_ref().map(|a| ApprovalRecord {
                decision: a.verdict.as_str(),
                by: &a.by,
                answer: a.asked.map(|outcome| outcome.as_str()),
            }),
            decided_by: report.decided_by.as_deref(),
            denials: usage
                .map(|u| {
                    u.activity
                        .denials
                        .iter()
                        .map(|d| DenialRecord {
                            kind: d.kind.as_str(),
                            attempt: &d.attempt,
                            reason: &d.reason,
                        })
                        .collect()
                })
                .unwrap_or_default(),
            more_denials: usage.is_some_and(|u| u.activity.more_denials),
            requests: usage
                .map(|u| {
                    u.activity
                        .requests
                        .iter()
                        .map(|r| RequestRecord {
                            request: &r.attempt,
                            decision: if r.allowed { "allowed" } else { "denied" },
                        })
                        .collect()
                })
                .unwrap_or_default(),
            more_requests: usage.map_or(0, |u| u.activity.more_requests),
            asked: usage
                .map(|u| {
                    u.activity
                        .asked
                        .iter()
                        .map(|asked| AskedRecord {
                            question: asked.question.text(),
                            answer: asked.outcome.as_str(),
                            by: asked.by.clone(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            outcome: report.outcome.map_or("ok", |kind| kind.as_str()),
            cached: report.cached,
            duration_us: u64::try_from(report.duration.as_micros()).unwrap_or(u64::MAX),
            fuel_used: usage.map(|u| u.fuel_used),
            peak_memory: usage.map(|u| u.peak_memory),
            prev,
        }
    }
}
