//! Approval before risky calls: which calls need it ([`Approval`]), who
//! decides ([`ApprovalHandler`]), and the one step every entry point (the
//! agent loop, the MCP server) takes before running a call ([`decide`]).

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::ask::{Asking, Outcome, Subject};

/// Whether a tool's calls need approval.
#[derive(Clone, Default)]
pub enum Approval {
    /// Never ask.
    #[default]
    Never,
    /// Ask before every call.
    Always,
    /// Ask when the closure returns true for the arguments.
    When(Arc<dyn Fn(&Value) -> bool + Send + Sync>),
}

impl Approval {
    /// Ask when any of `rules` matches the arguments.
    pub fn rules(rules: Vec<ApprovalRule>) -> Self {
        Approval::When(Arc::new(move |arguments| {
            rules.iter().any(|rule| rule.matches(arguments))
        }))
    }

    /// Whether a call with these arguments needs approval.
    pub fn required_for(&self, arguments: &Value) -> bool {
        match self {
            Approval::Never => false,
            Approval::Always => true,
            Approval::When(rule) => rule(arguments),
        }
    }
}

impl fmt::Debug for Approval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Approval::Never => "Never",
            Approval::Always => "Always",
            Approval::When(_) => "When(..)",
        })
    }
}

/// A rule on the arguments: the value at a JSON pointer is one of a list
/// (config: `{ pointer = "/table", in = ["users", "orders"] }`).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRule {
    /// JSON pointer into the arguments, e.g. `/table`.
    pub pointer: String,
    /// Values that need approval; empty means "whenever the pointer exists".
    #[serde(default, rename = "in")]
    pub values: Vec<Value>,
}

impl ApprovalRule {
    /// Whether the rule matches these arguments.
    pub fn matches(&self, arguments: &Value) -> bool {
        match arguments.pointer(&self.pointer) {
            None => false,
            Some(_) if self.values.is_empty() => true,
            Some(value) => self.values.contains(value),
        }
    }
}

/// A call waiting for approval.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ApprovalRequest {
    /// The run asking.
    pub run_id: String,
    /// The call's id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The arguments the model chose.
    pub arguments: Value,
}

/// Decides whether a call may run.
#[async_trait::async_trait]
pub trait ApprovalHandler: Send + Sync + 'static {
    /// True to let the call run.
    async fn approve(&self, request: &ApprovalRequest) -> bool;

    /// Who decides calls of `tool`, for the audit trail (`the operator
    /// (--approve)`, `the user at the terminal`).
    fn decided_by(&self, tool: &str) -> String {
        let _ = tool;
        "the approval handler".into()
    }
}

/// Denies every call that needs approval (the default: nothing risky runs
/// unless someone said so).
#[derive(Clone, Copy, Debug, Default)]
pub struct DenyAll;

#[async_trait::async_trait]
impl ApprovalHandler for DenyAll {
    async fn approve(&self, _: &ApprovalRequest) -> bool {
        false
    }

    fn decided_by(&self, _: &str) -> String {
        "the default policy (nobody may approve)".into()
    }
}

/// Approves calls of the listed tools (or of every tool), denies the rest.
#[derive(Clone, Debug, Default)]
pub struct ApproveTools {
    all: bool,
    tools: BTreeSet<String>,
}

impl ApproveTools {
    /// Approves every call.
    pub fn all() -> Self {
        Self {
            all: true,
            tools: BTreeSet::new(),
        }
    }

    /// Approves calls of these tools; `"all"` approves every tool.
    pub fn named<I: IntoIterator<Item = S>, S: Into<String>>(tools: I) -> Self {
        let tools: BTreeSet<String> = tools.into_iter().map(Into::into).collect();
        Self {
            all: tools.contains("all"),
            tools,
        }
    }

    /// Whether calls of `tool` are approved.
    pub fn covers(&self, tool: &str) -> bool {
        self.all || self.tools.contains(tool)
    }
}

#[async_trait::async_trait]
impl ApprovalHandler for ApproveTools {
    async fn approve(&self, request: &ApprovalRequest) -> bool {
        self.covers(&request.tool)
    }

    fn decided_by(&self, _: &str) -> String {
        "the operator (--approve)".into()
    }
}

#[async_trait::async_trait]
impl<F> ApprovalHandler for F
where
    F: Fn(&ApprovalRequest) -> bool + Send + Sync + 'static,
{
    async fn approve(&self, request: &ApprovalRequest) -> bool {
        self(request)
    }
}

/// What became of a call that may need approval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The call needs no approval.
    NotNeeded,
    /// The handler approved it.
    Approved,
    /// The handler refused it.
    Denied,
    /// The call was cancelled while waiting for an answer.
    Cancelled,
}

impl Verdict {
    /// Its name in the audit trail (`approved`, `denied`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::NotNeeded => "not_needed",
            Verdict::Approved => "approved",
            Verdict::Denied => "denied",
            Verdict::Cancelled => "cancelled",
        }
    }
}

/// What became of a call that may need approval, and the note for its
/// audit record (`None` when no approval was needed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Approved, denied, cancelled, or not needed.
    pub verdict: Verdict,
    /// Who decided, and what the person answered if one was asked.
    pub note: Option<crate::report::ApprovalNote>,
}

impl Decision {
    fn by(verdict: Verdict, by: String, asked: Option<Outcome>) -> Self {
        Self {
            verdict,
            note: Some(crate::report::ApprovalNote { verdict, by, asked }),
        }
    }
}

/// The one approval step of every entry point (the agent loop, the MCP
/// server): when `approval` requires it for `arguments`, `handler` (the
/// operator's standing approvals) is asked first (`request` builds the
/// question only then); if it does not approve and `asking` reaches a
/// person, they are asked (never the model). Stops waiting when the call is
/// cancelled.
pub async fn decide(
    approval: &Approval,
    arguments: &Value,
    request: impl FnOnce() -> ApprovalRequest,
    handler: &dyn ApprovalHandler,
    asking: Option<&Asking>,
    cancellation: &CancellationToken,
) -> Decision {
    if !approval.required_for(arguments) {
        return Decision {
            verdict: Verdict::NotNeeded,
            note: None,
        };
    }
    let request = request();
    let by_handler = || handler.decided_by(&request.tool);
    let approved = tokio::select! {
        // A call cancelled already is never approved, however fast the answer.
        biased;
        () = cancellation.cancelled() => None,
        approved = handler.approve(&request) => Some(approved),
    };
    match (approved, asking) {
        (None, _) => Decision::by(Verdict::Cancelled, by_handler(), None),
        (Some(true), _) => Decision::by(Verdict::Approved, by_handler(), None),
        (Some(false), None) => Decision::by(Verdict::Denied, by_handler(), None),
        (Some(false), Some(asking)) => {
            let summary = crate::ask::summary(&request.arguments);
            let asked = asking
                .ask(&request.tool, Subject::Call { summary }, cancellation)
                .await;
            let verdict = match asked.outcome {
                outcome if outcome.allowed() => Verdict::Approved,
                Outcome::Cancelled => Verdict::Cancelled,
                _ => Verdict::Denied,
            };
            Decision::by(verdict, asked.by, Some(asked.outcome))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rules_match_values_at_pointers() {
        let rule = ApprovalRule {
            pointer: "/table".into(),
            values: vec![json!("users"), json!("orders")],
        };
        assert!(rule.matches(&json!({"table": "users"})));
        assert!(!rule.matches(&json!({"table": "products"})));
        assert!(!rule.matches(&json!({"other": "users"})));
        let any = ApprovalRule {
            pointer: "/force".into(),
            values: vec![],
        };
        assert!(any.matches(&json!({"force": false})));
        let approval = Approval::rules(vec![rule, any]);
        assert!(approval.required_for(&json!({"force": true})));
        assert!(!approval.required_for(&json!({"table": "x"})));
    }

    #[tokio::test]
    async fn approve_tools_lists() {
        let request = |tool: &str| ApprovalRequest {
            run_id: "r".into(),
            call_id: "c".into(),
            tool: tool.into(),
            arguments: json!({}),
        };
        let handler = ApproveTools::named(["drop_table"]);
        assert!(handler.approve(&request("drop_table")).await);
        assert!(!handler.approve(&request("delete")).await);
        assert!(ApproveTools::named(["all"]).approve(&request("x")).await);
        assert!(!DenyAll.approve(&request("x")).await);
    }

    #[tokio::test]
    async fn decide_asks_only_when_needed_and_gives_up_on_cancel() {
        let request = || ApprovalRequest {
            run_id: "r".into(),
            call_id: "c".into(),
            tool: "drop".into(),
            arguments: json!({}),
        };
        let live = CancellationToken::new();
        let never = Approval::Never;
        let always = Approval::Always;
        let args = json!({});
        let asked = || -> ApprovalRequest { panic!("asked although no approval is needed") };
        assert_eq!(
            decide(&never, &args, asked, &DenyAll, None, &live)
                .await
                .verdict,
            Verdict::NotNeeded
        );
        assert_eq!(
            decide(&always, &args, request, &DenyAll, None, &live)
                .await
                .verdict,
            Verdict::Denied
        );
        let all = ApproveTools::all();
        assert_eq!(
            decide(&always, &args, request, &all, None, &live)
                .await
                .verdict,
            Verdict::Approved
        );
        struct Silent;
        #[async_trait::async_trait]
        impl ApprovalHandler for Silent {
            async fn approve(&self, _: &ApprovalRequest) -> bool {
                std::future::pending().await
            }
        }
        let cancelled = CancellationToken::new();
        cancelled.cancel();
        assert_eq!(
            decide(&always, &args, request, &Silent, None, &cancelled)
                .await
                .verdict,
            Verdict::Cancelled
        );
    }

    #[tokio::test]
    async fn the_person_is_asked_only_when_the_operator_did_not_approve() {
        async fn ask(handler: &dyn ApprovalHandler, asking: &Asking) -> Decision {
            let request = || ApprovalRequest {
                run_id: "r".into(),
                call_id: "c".into(),
                tool: "drop".into(),
                arguments: json!({"table": "users"}),
            };
            let (args, live) = (json!({"table": "users"}), CancellationToken::new());
            decide(
                &Approval::Always,
                &args,
                request,
                handler,
                Some(asking),
                &live,
            )
            .await
        }
        use crate::ask::{Asker, Question, Reply, SessionAnswers};
        struct Person(std::sync::atomic::AtomicUsize, Reply);
        #[async_trait::async_trait]
        impl Asker for Person {
            async fn ask(&self, question: &Question) -> Reply {
                assert!(matches!(question.subject, Subject::Call { .. }));
                self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                self.1
            }
            fn who(&self) -> String {
                "the person".into()
            }
        }
        let yes = Arc::new(Person(Default::default(), Reply::Once));
        let asking = Asking::new(yes.clone(), Arc::new(SessionAnswers::default()));
        let operator = ApproveTools::named(["drop"]);
        let decided = ask(&operator, &asking).await;
        assert_eq!(decided.verdict, Verdict::Approved);
        assert_eq!(decided.note.unwrap().by, "the operator (--approve)");
        assert_eq!(yes.0.load(std::sync::atomic::Ordering::SeqCst), 0);
        let decided = ask(&DenyAll, &asking).await;
        let note = decided.note.unwrap();
        assert_eq!(
            (decided.verdict, note.by.as_str()),
            (Verdict::Approved, "the person")
        );
        assert_eq!(note.asked, Some(Outcome::AllowedOnce));
        let no = Asking::new(
            Arc::new(Person(Default::default(), Reply::Deny)),
            Arc::default(),
        );
        let decided = ask(&DenyAll, &no).await;
        assert_eq!(decided.verdict, Verdict::Denied);
        assert_eq!(decided.note.unwrap().asked, Some(Outcome::Denied));
    }
}
