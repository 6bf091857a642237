//! Asking the person behind a call, never the model: whether a call that
//! needs approval may run, and whether a tool may use a capability its
//! policy lists under `ask`. The entry point says who can be asked (an
//! [`Asker`]: the MCP client's user through elicitation, the user at the
//! terminal under `wasm-agent run`); [`Asking`] wraps it for one session,
//! with a deadline on every question and the answers given "for this
//! session". Approvals of calls and questions about capabilities take this
//! one path.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::text;

/// How long a question waits for its answer by default; no answer denies.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(120);

/// What a question is about.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Subject {
    /// A call that needs approval: what the person is shown, and exactly
    /// what an answer covers. Two calls share an answer "for this session"
    /// only when `covers` is equal, whatever their summaries.
    Call {
        /// The arguments as shown: secrets redacted, control characters
        /// escaped; where too long to show in full, it says so, names what
        /// was cut and gives the digest of the exact arguments.
        summary: String,
        /// The component version that would run (`sha256:HEX`, or a remote
        /// tool's version).
        version: String,
        /// `sha256:HEX` of the exact arguments in canonical form (unredacted,
        /// keys sorted): what "allow for this session" is remembered for.
        arguments: String,
    },
    /// A network destination the policy lists under `ask`
    /// (`scheme://host:port`).
    Host {
        /// The destination asked for.
        destination: String,
    },
    /// A folder the policy lists under `ask` (`HOST:GUEST:ro|rw`).
    Folder {
        /// The folder grant asked for.
        grant: String,
    },
    /// A yes-or-no question a remote MCP server asks about a call of one of
    /// its tools (its own approval): its words, shown as its.
    Remote {
        /// What the server asks.
        message: String,
    },
}

/// One question for a person.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    /// The tool the question is about.
    pub tool: String,
    /// What it wants.
    pub subject: Subject,
    /// Whether "allow for this session" may be answered.
    pub offer_session: bool,
    /// Whether the call it is about has started: a tool asking for a
    /// destination, or a tool's own call of another tool. Its answer must
    /// reach the call where it waits; a question about a call that has not
    /// started (an approval, a folder) can be answered by making the call
    /// again with the answer.
    pub running: bool,
}

impl Question {
    /// The question as one line of text for a person (escaped).
    pub fn text(&self) -> String {
        let tool = text::one_line(&self.tool);
        match &self.subject {
            Subject::Call {
                summary, version, ..
            } => format!(
                "Allow the tool \"{tool}\" ({}) to run with {summary}?",
                short_version(version)
            ),
            Subject::Host { destination } => format!(
                "Allow the tool \"{tool}\" to connect to {}?",
                text::one_line(destination)
            ),
            Subject::Folder { grant } => {
                let (path, mode) = match grant.rsplit_once(':') {
                    Some((path, "rw")) => (path, "read and write"),
                    Some((path, _)) => (path, "read"),
                    None => (grant.as_str(), "read"),
                };
                let host = path.split_once(':').map_or(path, |(host, _)| host);
                format!(
                    "Allow the tool \"{tool}\" to {mode} the folder {}?",
                    text::one_line(host)
                )
            }
            Subject::Remote { message } => format!(
                "The MCP server \"{tool}\" asks: {}",
                text::one_line(message)
            ),
        }
    }
}

impl Question {
    /// What "allow for this session" covers, as the choice's title.
    pub fn session_choice(&self) -> &'static str {
        match self.subject {
            Subject::Call { .. } => "Allow these exact arguments for this session",
            Subject::Host { .. } => "Allow this destination for this session",
            Subject::Folder { .. } => "Allow this folder for this session",
            Subject::Remote { .. } => "Allow this for this session",
        }
    }
}

/// A version as a person reads it: `sha256:` and 12 hex digits, or a remote
/// tool's version as it is (escaped, cut at 60 characters).
fn short_version(version: &str) -> String {
    match version.strip_prefix("sha256:") {
        Some(hex) => format!("component sha256:{}", &hex[..hex.len().min(12)]),
        None => {
            let shown: String = text::one_line(version).chars().take(60).collect();
            format!("version {shown}")
        }
    }
}

/// A person's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Allowed, for this call only.
    Once,
    /// Allowed for the rest of the session (only when it was offered).
    Session,
    /// Refused.
    Deny,
    /// Dismissed without a choice (the client's "cancel").
    Dismissed,
    /// Nobody can be asked here (a client without elicitation, no terminal).
    Unavailable,
    /// The person was asked and gave no answer.
    NoAnswer,
    /// The question goes to the person with the call's answer (an MCP
    /// input-required result): the call stops here, before it starts, and
    /// is made again with the answer.
    Later,
}

/// Someone who can answer questions about calls: the MCP client's user
/// (elicitation), the user at the terminal, an embedder's own UI.
#[async_trait::async_trait]
pub trait Asker: Send + Sync + 'static {
    /// Asks `question` and waits for the answer (the caller bounds the wait).
    async fn ask(&self, question: &Question) -> Reply;

    /// Who answers, for the audit trail (`the MCP client's user`).
    fn who(&self) -> String;

    /// Tells the person that a question about their call is answered
    /// elsewhere (the operators' console page), when they can be told (an
    /// MCP client that declared URL-mode elicitation). Returns once they
    /// were told, or could not be. Whatever they reply is not an answer.
    async fn point_to(&self, referral: &Referral) {
        let _ = referral;
    }

    /// Sends the person to `referral`'s page with the call's answer (an
    /// MCP input-required result) when they are asked that way (a question
    /// about a call that has not started): the call stops before it starts
    /// and is made again, bringing the referral back (see
    /// [`referred`](Self::referred)). The id of the page the person is sent
    /// to for this question (an earlier one's, if the same question was
    /// referred already); `None`: not asked that way (then see
    /// [`point_to`](Self::point_to)).
    fn refer_later(&self, referral: &Referral) -> Option<String> {
        let _ = referral;
        None
    }

    /// What the call made again brings back about `question`, decided
    /// elsewhere ([`refer_later`](Self::refer_later)); taken once.
    fn referred(&self, question: &Question) -> Option<Referred> {
        let _ = question;
        None
    }

    /// `question` was decided elsewhere with `reply`: should the call stop
    /// again before it runs, the reply goes with it, so the question is not
    /// asked again.
    fn decided_elsewhere(&self, question: &Question, reply: Reply) {
        let _ = (question, reply);
    }

    /// The question `id` that [`point_to`](Self::point_to) named was answered.
    fn answered_elsewhere(&self, id: &str) {
        let _ = id;
    }
}

/// What a call made again brings back about a question decided elsewhere.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Referred {
    /// It waited there, under this id, when the call stopped.
    Waiting(String),
    /// It was decided, in an earlier round of the same call.
    Decided(Reply),
}

/// A question decided elsewhere, and where the person can follow it.
#[derive(Clone, Debug)]
pub struct Referral {
    /// The question.
    pub question: Question,
    /// Its id where it is decided.
    pub id: String,
    /// The page where it is decided.
    pub url: String,
    /// What the person is told (one line, escaped).
    pub message: String,
}

/// Who answers for an [`OperatorDesk`] (its askers' [`Asker::who`]), as
/// audit records and refusals name them.
pub const OPERATORS: &str = "an operator (console)";

/// Where the questions of a tool whose settings name the operators go
/// (`[calls.TOOL] answered_by = "operators"`): the operator console. The
/// person behind the call is only told where it is being decided.
pub trait OperatorDesk: Send + Sync + 'static {
    /// Who the questions of a call made by `principal` of `tenant` go to;
    /// `person` is who they would have gone to (told where the question is
    /// answered, when it can be), its session's answers kept.
    fn asking(
        &self,
        principal: Option<&str>,
        tenant: Option<&str>,
        person: Option<&Asking>,
    ) -> Asking;
}

/// How a question ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Allowed for this call.
    AllowedOnce,
    /// Allowed for the session.
    AllowedForSession,
    /// Allowed earlier for the session; not asked again.
    Remembered,
    /// Refused (or dismissed).
    Denied,
    /// No answer within the wait.
    NoAnswer,
    /// Nobody could be asked.
    Unavailable,
    /// The call was cancelled while waiting.
    Cancelled,
    /// The question went to the person with the call's answer; the call
    /// stopped before it started, to be made again with the answer.
    Pending,
}

impl Outcome {
    /// Whether the capability or call is allowed.
    pub fn allowed(self) -> bool {
        matches!(
            self,
            Outcome::AllowedOnce | Outcome::AllowedForSession | Outcome::Remembered
        )
    }

    /// Its name in the audit trail.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::AllowedOnce => "allowed_once",
            Outcome::AllowedForSession => "allowed_for_session",
            Outcome::Remembered => "allowed_earlier_in_session",
            Outcome::Denied => "denied",
            Outcome::NoAnswer => "no_answer",
            Outcome::Unavailable => "nobody_to_ask",
            Outcome::Cancelled => "cancelled",
            Outcome::Pending => "asked_with_the_answer",
        }
    }
}

/// A question and its answer, for the audit trail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Asked {
    /// What was asked.
    pub question: Question,
    /// How it ended.
    pub outcome: Outcome,
    /// Who answered (or would have).
    pub by: String,
}

/// Where a session's "allow for this session" answers are kept beyond one
/// process (the shared session store), so that every replica serving the
/// session knows them.
#[async_trait::async_trait]
pub trait SharedAnswers: Send + Sync + 'static {
    /// Whether the answer under `key` ([`Question::key`]) allowed it for the
    /// session.
    async fn is_allowed(&self, key: &str) -> bool;
    /// Keeps that the person allowed `key` for the session.
    async fn allow(&self, key: &str);
}

impl Question {
    /// What an answer "for this session" is remembered under: the tool and
    /// exactly what was asked (never the words shown).
    pub fn key(&self) -> String {
        answer_key(&self.tool, &self.subject)
    }
}

fn answer_key(tool: &str, subject: &Subject) -> String {
    let quoted = |text: &str| format!("{text:?}");
    let parts = match subject {
        Subject::Call {
            version, arguments, ..
        } => ["call", tool, version, arguments].map(quoted).join(","),
        Subject::Host { destination } => ["host", tool, destination].map(quoted).join(","),
        Subject::Folder { grant } => ["folder", tool, grant].map(quoted).join(","),
        Subject::Remote { message } => ["remote", tool, message].map(quoted).join(","),
    };
    format!("[{parts}]")
}

/// The questions of one session (an MCP session, an agent run): how long
/// each waits, whether "allow for this session" is offered, and the answers
/// given for the session. Shared by the [`Asking`]s of its calls.
pub struct SessionAnswers {
    wait: Duration,
    offer_session: bool,
    remembered: Mutex<HashSet<(String, Subject)>>,
    /// Where the answers are kept for every replica, if anywhere.
    shared: Option<Arc<dyn SharedAnswers>>,
    /// One question at a time: a person answers them in turn.
    turn: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for SessionAnswers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionAnswers")
            .field("wait", &self.wait)
            .field("offer_session", &self.offer_session)
            .finish_non_exhaustive()
    }
}

impl Default for SessionAnswers {
    fn default() -> Self {
        Self::new(DEFAULT_WAIT, false)
    }
}

impl SessionAnswers {
    /// Questions that wait at most `wait` (no answer by then denies), with
    /// "allow for this session" offered when `offer_session`.
    pub fn new(wait: Duration, offer_session: bool) -> Self {
        Self {
            wait,
            offer_session,
            remembered: Mutex::default(),
            shared: None,
            turn: tokio::sync::Mutex::new(()),
        }
    }

    /// The longest a question waits.
    pub fn max_wait(&self) -> Duration {
        self.wait
    }

    /// Keeps the answers given for the session in `shared` too, and finds
    /// those given on other replicas there.
    pub fn shared(mut self, shared: Arc<dyn SharedAnswers>) -> Self {
        self.shared = Some(shared);
        self
    }

    /// Whether `key` was allowed for the session, here or on another replica.
    async fn allowed_for_session(&self, key: &(String, Subject)) -> bool {
        if self.remembered().contains(key) {
            return true;
        }
        let Some(shared) = &self.shared else {
            return false;
        };
        let allowed = shared.is_allowed(&answer_key(&key.0, &key.1)).await;
        if allowed {
            self.remembered().insert(key.clone());
        }
        allowed
    }

    fn remembered(&self) -> std::sync::MutexGuard<'_, HashSet<(String, Subject)>> {
        self.remembered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Set once a question of a call was taken "with the answer" (its reply
/// comes with a later request).
pub type Deferred = Arc<std::sync::atomic::AtomicBool>;

/// Who a call's questions go to ([`Asker`]), within its session's answers.
#[derive(Clone)]
pub struct Asking {
    asker: Arc<dyn Asker>,
    session: Arc<SessionAnswers>,
    /// Whether its questions come from a call that has started.
    running: bool,
    /// Told when a question is taken with the answer.
    deferred: Option<Deferred>,
}

impl std::fmt::Debug for Asking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Asking")
            .field("who", &self.asker.who())
            .field("session", &self.session)
            .field("running", &self.running)
            .finish()
    }
}

impl Asking {
    /// Questions for `asker` within `session`.
    pub fn new(asker: Arc<dyn Asker>, session: Arc<SessionAnswers>) -> Self {
        Self {
            asker,
            session,
            running: false,
            deferred: None,
        }
    }

    /// The same person, for the questions of a call a paused script makes:
    /// asked as before a call starts (the script can stop and go on later),
    /// with the flag that tells whether one was taken with the answer.
    pub fn deferring(&self) -> (Self, Deferred) {
        let flag = Deferred::default();
        let asking = Self {
            running: false,
            deferred: Some(flag.clone()),
            ..self.clone()
        };
        (asking, flag)
    }

    /// The same person, for questions of work a running call does (a tool
    /// calling a tool, a delegated run): their answers must reach it where
    /// it waits.
    pub fn within_running_call(&self) -> Self {
        Self {
            running: true,
            ..self.clone()
        }
    }

    /// The longest a question waits.
    pub fn max_wait(&self) -> Duration {
        self.session.wait
    }

    /// The same session's questions, asked of `asker` instead.
    pub fn to(&self, asker: Arc<dyn Asker>) -> Self {
        Self {
            asker,
            ..self.clone()
        }
    }

    /// Who its questions go to.
    pub fn asker(&self) -> &Arc<dyn Asker> {
        &self.asker
    }

    /// Who answers.
    pub fn who(&self) -> String {
        self.asker.who()
    }

    /// Asks whether `tool` may have `subject`, unless it was allowed for the
    /// session already; stops waiting when `cancellation` fires.
    pub async fn ask(
        &self,
        tool: &str,
        subject: Subject,
        cancellation: &CancellationToken,
    ) -> Asked {
        let session = &*self.session;
        let key = (tool.to_string(), subject);
        let question = Question {
            tool: key.0.clone(),
            running: self.running || matches!(key.1, Subject::Host { .. }),
            subject: key.1.clone(),
            offer_session: session.offer_session,
        };
        let by = self.asker.who();
        if session.allowed_for_session(&key).await {
            return Asked {
                question,
                outcome: Outcome::Remembered,
                by,
            };
        }
        let answered = async {
            let _turn = session.turn.lock().await;
            // Allowed for the session while this one waited its turn.
            if session.remembered().contains(&key) {
                return Some(Reply::Session);
            }
            tokio::time::timeout(session.wait, self.asker.ask(&question))
                .await
                .ok()
        };
        let outcome = tokio::select! {
            // A cancelled call is never allowed, however fast the answer.
            biased;
            () = cancellation.cancelled() => Outcome::Cancelled,
            reply = answered => match reply {
                Some(Reply::Once) => Outcome::AllowedOnce,
                Some(Reply::Session) if session.offer_session => {
                    if let Some(shared) = &session.shared {
                        shared.allow(&answer_key(&key.0, &key.1)).await;
                    }
                    session.remembered().insert(key);
                    Outcome::AllowedForSession
                }
                // Never offered: taken as once.
                Some(Reply::Session) => Outcome::AllowedOnce,
                Some(Reply::Deny | Reply::Dismissed) => Outcome::Denied,
                Some(Reply::Unavailable) => Outcome::Unavailable,
                None | Some(Reply::NoAnswer) => Outcome::NoAnswer,
                Some(Reply::Later) => Outcome::Pending,
            },
        };
        if outcome == Outcome::Pending
            && let Some(flag) = &self.deferred
        {
            flag.store(true, std::sync::atomic::Ordering::Release);
        }
        Asked {
            question,
            outcome,
            by,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Scripted {
        reply: Reply,
        asked: AtomicUsize,
        delay: Duration,
    }

    #[async_trait::async_trait]
    impl Asker for Scripted {
        async fn ask(&self, _: &Question) -> Reply {
            self.asked.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(self.delay).await;
            self.reply
        }
        fn who(&self) -> String {
            "the test".into()
        }
    }

    fn scripted(reply: Reply, delay: Duration) -> Arc<Scripted> {
        Arc::new(Scripted {
            reply,
            asked: AtomicUsize::new(0),
            delay,
        })
    }

    fn host(destination: &str) -> Subject {
        Subject::Host {
            destination: destination.into(),
        }
    }

    #[tokio::test]
    async fn session_answers_are_remembered_only_when_offered() {
        let live = CancellationToken::new();
        let asker = scripted(Reply::Session, Duration::ZERO);
        let asking = Asking::new(
            asker.clone(),
            Arc::new(SessionAnswers::new(DEFAULT_WAIT, true)),
        );
        let first = asking.ask("fetch", host("http://a:80"), &live).await;
        assert_eq!(first.outcome, Outcome::AllowedForSession);
        let again = asking.ask("fetch", host("http://a:80"), &live).await;
        assert_eq!(again.outcome, Outcome::Remembered);
        let other = asking.ask("other", host("http://a:80"), &live).await;
        assert_eq!(other.outcome, Outcome::AllowedForSession);
        assert_eq!(asker.asked.load(Ordering::SeqCst), 2);

        let not_offered = Asking::new(scripted(Reply::Session, Duration::ZERO), Arc::default());
        let once = not_offered.ask("fetch", host("http://a:80"), &live).await;
        assert_eq!(once.outcome, Outcome::AllowedOnce);
        let asked_again = not_offered.ask("fetch", host("http://a:80"), &live).await;
        assert_eq!(asked_again.outcome, Outcome::AllowedOnce);
    }

    #[tokio::test]
    async fn no_answer_in_time_and_cancellation_deny() {
        let live = CancellationToken::new();
        let session = Arc::new(SessionAnswers::new(Duration::from_millis(50), false));
        let slow = Asking::new(scripted(Reply::Once, Duration::from_secs(60)), session);
        let late = slow.ask("fetch", host("http://a:80"), &live).await;
        assert_eq!(late.outcome, Outcome::NoAnswer);
        assert!(!late.outcome.allowed());
        let cancelled = CancellationToken::new();
        cancelled.cancel();
        let quick = Asking::new(scripted(Reply::Once, Duration::ZERO), Arc::default());
        let gone = quick.ask("fetch", host("http://a:80"), &cancelled).await;
        assert_eq!(gone.outcome, Outcome::Cancelled);
        let refused = Asking::new(scripted(Reply::Dismissed, Duration::ZERO), Arc::default());
        let dismissed = refused.ask("fetch", host("http://a:80"), &live).await;
        assert_eq!(dismissed.outcome, Outcome::Denied);
    }

    #[test]
    fn questions_read_as_sentences() {
        let question = |subject| Question {
            tool: "t\nx".into(),
            subject,
            offer_session: false,
            running: false,
        };
        let folder = question(Subject::Folder {
            grant: "/home/me/docs:/docs:rw".into(),
        });
        assert_eq!(
            folder.text(),
            "Allow the tool \"t\\nx\" to read and write the folder /home/me/docs?"
        );
        assert_eq!(
            question(host("https://api.github.com:443")).text(),
            "Allow the tool \"t\\nx\" to connect to https://api.github.com:443?"
        );
        let call = question(Subject::Call {
            summary: "{\"a\":1}".into(),
            version: format!("sha256:{}", "ab".repeat(32)),
            arguments: "sha256:00".into(),
        });
        assert_eq!(
            call.text(),
            "Allow the tool \"t\\nx\" (component sha256:abababababab) to run with {\"a\":1}?"
        );
        assert_eq!(
            call.session_choice(),
            "Allow these exact arguments for this session"
        );
    }
}
