//! Approval before risky calls: which calls need it ([`Approval`]) and who
//! decides without asking a person ([`ApprovalHandler`]). The step itself is
//! the call pipeline's (`wasm-agent-pipeline`'s `approve` layer).

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

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
    /// The version that would run: its component's digest (`sha256:HEX`),
    /// or a remote tool's version. An approval covers this version only.
    pub version: String,
    /// The arguments the model chose.
    pub arguments: Value,
}

/// How the approval of one call went, and who decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalNote {
    /// Approved, denied, or cancelled while waiting.
    pub verdict: Verdict,
    /// Who decided (the handler's [`decided_by`](crate::approval::ApprovalHandler::decided_by),
    /// or the person asked).
    pub by: String,
    /// What the person answered, when one was asked.
    pub asked: Option<crate::ask::Outcome>,
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
    /// The question went to the person with the call's answer; the call
    /// did not run, and is made again with the answer.
    Pending,
}

impl Verdict {
    /// Its name in the audit trail (`approved`, `denied`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::NotNeeded => "not_needed",
            Verdict::Approved => "approved",
            Verdict::Denied => "denied",
            Verdict::Cancelled => "cancelled",
            Verdict::Pending => "pending",
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
            version: "sha256:00".into(),
            arguments: json!({}),
        };
        let handler = ApproveTools::named(["drop_table"]);
        assert!(handler.approve(&request("drop_table")).await);
        assert!(!handler.approve(&request("delete")).await);
        assert!(ApproveTools::named(["all"]).approve(&request("x")).await);
        assert!(!DenyAll.approve(&request("x")).await);
    }
}
