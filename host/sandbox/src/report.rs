//! [`CallAuditor`]: told of every call with what an audit trail records:
//! who asked, which component (by content digest) ran with what arguments
//! (by digest), who approved it, what the sandbox refused and let through,
//! how it ended and what it used.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

pub use crate::approval::ApprovalNote;
use crate::context::CallContext;
use crate::result::{CallError, ErrorKind};
use crate::runtime::CallUsage;

/// Receives a report of every call of a host, including calls refused
/// before they ran (by approval, or by the auditor itself).
pub trait CallAuditor: Send + Sync {
    /// Whether calls may run now; `Err` says why not (an audit log that
    /// cannot be written and fails closed). Asked before each call.
    fn admit(&self) -> Result<(), String>;

    /// [`admit`](Self::admit)'s refusal as the error of a call that did not
    /// run, if calls are refused now.
    fn refusal(&self) -> Option<CallError> {
        self.admit().err().map(|why| {
            CallError::new(
                ErrorKind::AuditUnavailable,
                format!("the call did not run: {why}"),
            )
        })
    }

    /// Whether reports should carry the arguments themselves, not only
    /// their digest.
    fn wants_arguments(&self) -> bool {
        false
    }

    /// The digest of an arguments text in this auditor's reports; a log
    /// keys it (HMAC) so that it confirms no guess at a redacted value.
    fn arguments_digest(&self, arguments: &str) -> String {
        arguments_digest(arguments)
    }

    /// A call ended. Runs on the calling task: hand the report on quickly.
    fn record(&self, report: CallReport);

    /// A wait until every report handed over so far is kept for good, when
    /// answers must wait for their records (an audit log failing closed:
    /// no call is answered whose record a crash could still lose). `Err`
    /// says why they could not be kept.
    fn settled(&self) -> Option<Settled> {
        None
    }
}

/// The wait of [`CallAuditor::settled`].
pub type Settled = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>>;

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
    /// The component that offers it (none for an unknown tool, or one that
    /// ran elsewhere).
    pub component: Option<ComponentIdentity>,
    /// Where the tool ran when not in a sandbox of this host (another MCP
    /// server, as `MCP server "github"`), with the tool's version there.
    pub remote: Option<RemoteOrigin>,
    /// The digest of the arguments as the caller sent them: `sha256:HEX`,
    /// or `hmac-sha256:HEX` keyed by the audit log's secret.
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
    /// What let it through (or refused it): an access rule, a quota.
    pub decided_by: Option<String>,
}

impl CallReport {
    /// The report for `auditor` of call `call_id` of `tool` with
    /// `arguments` (their text as the caller sent it: digested as the
    /// auditor digests, kept only when it wants them), starting now in
    /// `context`, with nothing known yet of how it ends.
    pub fn begin(
        call_id: &str,
        tool: &str,
        arguments: &str,
        auditor: &dyn CallAuditor,
        context: &CallContext,
    ) -> Self {
        Self {
            started: SystemTime::now(),
            call_id: call_id.to_string(),
            run_id: context.run_id.clone(),
            session_id: context.session_id.clone(),
            principal: context.user_id.clone(),
            tenant: context.tenant_id.clone(),
            tool: tool.to_string(),
            component: None,
            remote: None,
            arguments_digest: auditor.arguments_digest(arguments),
            arguments: auditor.wants_arguments().then(|| arguments.to_string()),
            approval: context.approval.clone(),
            usage: None,
            outcome: None,
            duration: Duration::ZERO,
            depth: context.tool_call_depth,
            cached: false,
            decided_by: context.decided_by.as_deref().map(String::from),
        }
    }
}

/// Where a tool that is not sandboxed here ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteOrigin {
    /// The server, as messages name it (`MCP server "github"`).
    pub origin: String,
    /// The tool's version there (it changes with the server's version and
    /// the tool's definition).
    pub version: String,
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

/// The digest of an argument text, `sha256:HEX`.
pub fn arguments_digest(arguments: &str) -> String {
    use sha2::Digest as _;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(arguments)))
}
