//! The `ask` grants of one call. A network destination the policy lists
//! under `ask` is asked about, through the call's [`Asking`], the first time
//! the tool tries it; the answer holds for the rest of the call (and for the
//! session when the person said so). The wait is not charged to the call's
//! timeout: it is bounded by the question's own wait.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::sync::CancellationToken;
use wasm_agent_policy::{DirGrant, NetworkGrant};

use crate::ask::{Asking, Outcome, Subject};
use crate::runtime::deadline::CallDeadline;
use crate::runtime::denials::{DenialKind, Denials};

/// Most destinations one call is asked about; past this the rest are denied
/// without asking (a tool cannot flood the person with questions).
const MAX_QUESTIONS: usize = 8;

/// What one call may be asked about, and what was answered; one per store,
/// renewed for each call it runs.
#[derive(Clone, Debug, Default)]
pub struct Asks(Arc<Mutex<Option<CallAsks>>>);

/// The asking side of one call.
#[derive(Debug)]
pub struct CallAsks {
    /// The tool the questions are about.
    pub tool: Arc<str>,
    /// Who is asked; nobody when `None`.
    pub asking: Option<Asking>,
    /// The policy's `ask` network patterns.
    pub patterns: Arc<Vec<NetworkGrant>>,
    /// The call's deadline, pushed back while a question waits.
    pub deadline: CallDeadline,
    /// The call's cancellation.
    pub cancellation: CancellationToken,
    /// Destinations answered in this call: allowed or not.
    decided: HashMap<String, bool>,
}

/// What a question of one call needs, taken from its [`CallAsks`] so the
/// lock is not held while the person is asked.
struct AskContext {
    tool: Arc<str>,
    asking: Option<Asking>,
    deadline: CallDeadline,
    cancellation: CancellationToken,
}

impl CallAsks {
    fn context(&self) -> AskContext {
        AskContext {
            tool: self.tool.clone(),
            asking: self.asking.clone(),
            deadline: self.deadline.clone(),
            cancellation: self.cancellation.clone(),
        }
    }

    /// The asking side of a call of `tool`.
    pub fn new(
        tool: Arc<str>,
        asking: Option<Asking>,
        patterns: Arc<Vec<NetworkGrant>>,
        deadline: CallDeadline,
        cancellation: CancellationToken,
    ) -> Self {
        Self {
            tool,
            asking,
            patterns,
            deadline,
            cancellation,
            decided: HashMap::new(),
        }
    }
}

impl Asks {
    /// Makes these the asks of the call about to run.
    pub fn begin(&self, call: CallAsks) {
        *self.lock() = Some(call);
    }

    /// The `ask` pattern covering `scheme://host:port`, if any.
    pub fn pattern_for(&self, scheme: &str, host: &str, port: u16) -> Option<String> {
        let current = self.lock();
        let call = current.as_ref()?;
        let ip = host.parse::<IpAddr>().ok();
        call.patterns
            .iter()
            .find(|p| {
                p.allows(scheme, host, port) || ip.is_some_and(|ip| p.names_ip(scheme, ip, port))
            })
            .map(ToString::to_string)
    }

    /// Asks whether the tool may reach `scheme://host:port`, which the `ask`
    /// pattern `pattern` covers: `Ok` with a grant of exactly that
    /// destination when allowed, else why not (for the denial).
    pub async fn destination(
        &self,
        scheme: &str,
        host: &str,
        port: u16,
        pattern: &str,
        denials: &Denials,
    ) -> Result<NetworkGrant, String> {
        let destination = match host.parse::<IpAddr>() {
            Ok(IpAddr::V6(ip)) => format!("{scheme}://[{ip}]:{port}"),
            _ => format!("{scheme}://{host}:{port}"),
        };
        let grant: NetworkGrant = destination
            .parse()
            .map_err(|e| format!("cannot ask about {destination}: {e}"))?;
        let AskContext {
            tool,
            asking,
            deadline,
            cancellation,
        } = {
            let current = self.lock();
            let Some(call) = current.as_ref() else {
                return Err("no call is running".into());
            };
            match call.decided.get(&destination) {
                Some(true) => return Ok(grant),
                Some(false) => {
                    return Err(format!(
                        "the policy asks about it (ask {pattern}) and it was not allowed \
                         earlier in this call"
                    ));
                }
                None if call.decided.len() >= MAX_QUESTIONS => {
                    return Err(format!(
                        "the policy asks about it (ask {pattern}), but this call asked \
                         {MAX_QUESTIONS} questions already"
                    ));
                }
                None => {}
            }
            call.context()
        };
        let nobody = || {
            format!(
                "the policy asks about it (ask {pattern}), but nobody can be asked here \
                 (an MCP client without elicitation, or no terminal); grant it with \
                 --allow-host {destination}"
            )
        };
        let Some(asking) = asking else {
            self.decide(&destination, false);
            return Err(nobody());
        };
        let asked = {
            let _not_charged = deadline.pause(asking.max_wait());
            let subject = Subject::Host {
                destination: destination.clone(),
            };
            asking.ask(&tool, subject, &cancellation).await
        };
        let allowed = asked.outcome.allowed();
        self.decide(&destination, allowed);
        let by = asked.by.clone();
        let outcome = asked.outcome;
        denials.asked(asked);
        let reason = match outcome {
            _ if allowed => return Ok(grant),
            Outcome::Unavailable => return Err(nobody()),
            Outcome::NoAnswer => format!("no answer within {:?}", asking.max_wait()),
            Outcome::Cancelled => "the call was cancelled while asking".into(),
            _ => "it was refused".into(),
        };
        Err(format!(
            "the policy asks about it (ask {pattern}); {by} was asked: {reason}"
        ))
    }

    /// Asks about the folders the policy lists under `ask`, before the call
    /// starts (WASI folders are opened before the tool runs): those allowed,
    /// or `None` when a question went to the person with the call's answer
    /// (the call must not start without it).
    pub async fn folders(&self, grants: &[DirGrant], denials: &Denials) -> Option<Vec<DirGrant>> {
        if grants.is_empty() {
            return Some(Vec::new());
        }
        let Some(AskContext {
            tool,
            asking,
            deadline,
            cancellation,
        }) = self.lock().as_ref().map(CallAsks::context)
        else {
            return Some(Vec::new());
        };
        let mut allowed = Vec::new();
        let mut pending = false;
        for grant in grants {
            let attempt = format!("open the folder {}", grant.guest_path());
            let Some(asking) = &asking else {
                denials.record(
                    DenialKind::Folder,
                    attempt,
                    format!(
                        "the policy asks about it (ask {grant}), but nobody can be asked here \
                         (an MCP client without elicitation, or no terminal); grant it with \
                         --allow-dir {grant}"
                    ),
                );
                continue;
            };
            let asked = {
                let _not_charged = deadline.pause(asking.max_wait());
                let subject = Subject::Folder {
                    grant: grant.to_string(),
                };
                asking.ask(&tool, subject, &cancellation).await
            };
            if asked.outcome.allowed() {
                allowed.push(grant.clone());
            } else if asked.outcome == Outcome::Pending {
                pending = true;
            } else {
                denials.record(
                    DenialKind::Folder,
                    attempt,
                    format!(
                        "the policy asks about it (ask {grant}); {} was asked: {}",
                        asked.by,
                        asked.outcome.as_str()
                    ),
                );
            }
            denials.asked(asked);
        }
        (!pending).then_some(allowed)
    }

    fn decide(&self, destination: &str, allowed: bool) {
        if let Some(call) = self.lock().as_mut() {
            call.decided.insert(destination.to_string(), allowed);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<CallAsks>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
