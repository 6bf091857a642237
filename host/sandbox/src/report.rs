//! [`CallAuditor`]: told of every call with what an audit trail records:
//! who asked, which component (by content digest) ran with what arguments
//! (by digest), who approved it, what the sandbox refused and let through,
//! how it ended and what it used.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::approval::Verdict;
use crate::result::ErrorKind;
use crate::runtime::CallUsage;

/// Receives a report of every call of a host, including calls refused
/// before they ran (by approval, or by the auditor itself).
pub trait CallAuditor: Send + Sync {
    /// Whether calls may run now; `Err` says why not (an audit log that
    /// cannot be written and fails closed). Asked before each call.
    fn admit(&self) -> Result<(), String>;

    /// Whether reports should carry the arguments themselves, not only
    /// their digest.
    fn wants_arguments(&self) -> bool {
        false
    }

    /// A call ended. Runs on the calling task: hand the report on quickly.
    fn record(&self, report: CallReport);
}

/// One call, as the host saw it.
#[derive(Clone, Debug)]
pub struct CallReport {
    /// When it began.
    pub started: SystemTime,
    /// The host's id of the call (`call-N`).
    pub call_id: String,
    /// The agent run (or MCP session) it belongs to.
    pub run_id: String,
    /// The session its state is kept under.
    pub session_id: String,
    /// Who asked (the context's user).
    pub principal: Option<String>,
    /// Their tenant.
    pub tenant: Option<String>,
    /// The tool name as called.
    pub tool: String,
    /// The component that offers it (none for an unknown tool).
    pub component: Option<ComponentIdentity>,
    /// `sha256:HEX` of the arguments as the caller sent them.
    pub arguments_digest: String,
    /// The arguments themselves, when the auditor wants them.
    pub arguments: Option<String>,
    /// How approval went, when the call needed it.
    pub approval: Option<ApprovalNote>,
    /// What the run used and did (none when it never reached the sandbox).
    pub usage: Option<CallUsage>,
    /// Why it failed; `None` when it succeeded.
    pub outcome: Option<ErrorKind>,
    /// How long it took.
    pub duration: Duration,
    /// How many tool calls deep it was (0: the agent's or client's own).
    pub depth: u32,
    /// Answered from a result cache, without running.
    pub cached: bool,
}

/// Which component a call ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ComponentIdentity {
    /// Its name in the host.
    pub name: Arc<str>,
    /// Where it came from: a path or an `oci://` reference.
    pub source: Arc<str>,
    /// Its content digest, `sha256:HEX`.
    pub digest: Arc<str>,
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

/// The digest of an argument text, `sha256:HEX`.
pub fn arguments_digest(arguments: &str) -> String {
    use sha2::Digest as _;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(arguments)))
}
