//! Questions from a running call over the sessionless revision: a tool
//! asking for a destination under `ask`, or a tool's call of a tool that
//! needs approval. A running call cannot stop and be made again without
//! repeating what it did, so it is held where it paused, on the replica
//! running it, for as long as the question waits (`--ask-wait`); the
//! input-required result names the hold. The retry continues the same call:
//! on that replica directly, and from any other through the shared store
//! (the answer is left in the hold's mailbox, the holder picks it up and
//! leaves what the call did next in a mailbox the retrying replica opened).
//! When the holder is gone (stopped, or the question expired), the retry is
//! refused, saying the call did not finish and must be made again: nothing
//! the call did is repeated without the caller knowing.
//!
//! A running call's question decided by operators is not held for the
//! retry's answer: the call waits for the operator where it runs, and the
//! retry collects what it did (see [`referred`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{CallToolResponse, CallToolResult, InputRequiredResult};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};
use wasm_agent_sandbox::ask::{Question, Referral, Reply};
use wasm_agent_session::SessionStore;

use super::drain::InFlight;
use super::input_required::{name_of, reply_named};
use super::relay::poll_mail;
use super::state_keys::StateKeys;

pub(crate) mod referred;

/// Longest a retry waits for what a held call did next on another replica.
const MAX_RESUMED: Duration = Duration::from_secs(15 * 60);
/// Calls one caller (principal and tenant) may have held at once, on one
/// replica; a running call's question past it is not asked (its call goes
/// on without what it asked for).
pub(crate) const MAX_HOLDS_PER_CALLER: usize = 8;
/// How long a holder may take to pick up a relayed answer before it is
/// taken to be gone.
const CLAIM_WAIT: Duration = Duration::from_secs(3);

/// A running call's question, and where its answer goes.
pub(crate) struct Paused {
    pub question: Question,
    pub reply: oneshot::Sender<Reply>,
}

/// What a running call stopped for.
pub(crate) enum Stop {
    /// A question for the person with the call's answer.
    Question(Paused),
    /// A question decided elsewhere (the operators' console): the person is
    /// sent to its page, and the call waits for it where it runs.
    Page(Referral),
}

/// A call running as part of a round: its answer, or its questions.
/// Dropped before it ended (its hold expired, its request went away), the
/// call is cancelled: a call nobody waits for does not go on.
pub(crate) struct Running {
    pub task: tokio::task::JoinHandle<Result<CallToolResult, ErrorData>>,
    pub questions: mpsc::Receiver<Stop>,
    /// Its place among its caller's held calls, once it was held or let
    /// run (kept until it ends, whatever it asks next).
    pub place: Option<Counted>,
    /// Counted in flight while held, so a graceful stop waits for it.
    pub _in_flight: Option<InFlight>,
    pub _cancel_on_drop: tokio_util::sync::DropGuard,
}

/// What a running call did next.
pub(crate) enum Next {
    Ended(Result<CallToolResult, ErrorData>),
    Paused(Paused),
    Referred(Referral),
}

impl Running {
    /// Takes the call's place among `caller`'s held calls, unless it has
    /// one already: `false` when the caller holds as many as it may.
    fn take_place(&mut self, holds: &Arc<Holds>, caller: &str) -> bool {
        if self.place.is_none() {
            self.place = Counted::take(holds.clone(), caller);
        }
        self.place.is_some()
    }

    /// Cancels the call through `cancellation` (its own): it ends, and
    /// nothing it asks meanwhile is held or let run.
    pub async fn cancel(&mut self, cancellation: &tokio_util::sync::CancellationToken) -> Next {
        cancellation.cancel();
        loop {
            match self.next().await {
                Next::Paused(paused) => {
                    let _ = paused.reply.send(Reply::Unavailable);
                }
                Next::Referred(_) => {}
                ended => return ended,
            }
        }
    }

    pub async fn next(&mut self) -> Next {
        tokio::select! {
            biased;
            ended = &mut self.task => Next::Ended(ended.unwrap_or_else(|error| {
                Err(ErrorData::internal_error(format!("the call failed: {error}"), None))
            })),
            Some(stop) = self.questions.recv() => match stop {
                Stop::Question(paused) => Next::Paused(paused),
                Stop::Page(referral) => Next::Referred(referral),
            },
        }
    }
}

/// The answer to a held call's question, and where what it did next goes.
struct Resume {
    reply: Reply,
    respond: oneshot::Sender<Response>,
}

type Response = Result<CallToolResponse, ErrorData>;

/// How a held call's next step travels between replicas.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Relayed {
    Complete(CallToolResult),
    InputRequired(InputRequiredResult),
    Error(ErrorData),
}

impl From<Response> for Relayed {
    fn from(response: Response) -> Self {
        match response {
            Ok(CallToolResponse::InputRequired(input)) => Relayed::InputRequired(input),
            Ok(CallToolResponse::Complete(result)) => Relayed::Complete(result),
            Ok(_) => Relayed::Error(ErrorData::internal_error("unexpected result", None)),
            Err(error) => Relayed::Error(error),
        }
    }
}

impl From<Relayed> for Response {
    fn from(relayed: Relayed) -> Self {
        match relayed {
            Relayed::Complete(result) => Ok(result.into()),
            Relayed::InputRequired(input) => Ok(input.into()),
            Relayed::Error(error) => Err(error),
        }
    }
}

/// What mail between replicas is sealed for (with the replicas' request-
/// state keys, and the mailbox's address), so that a store writer can
/// neither answer a held call's question nor forge what a call did.
const RELAY_SEAL: &str = "wasm-agent relayed call v1";

/// Makes the result of a held call's next step: its answer, or the
/// input-required result of its next question (holding it again).
pub(crate) type Continue =
    Arc<dyn Fn(Running) -> futures::future::BoxFuture<'static, Response> + Send + Sync>;

/// The calls this replica holds, by hold id.
pub(crate) struct Holds {
    local: Mutex<HashMap<String, mpsc::Sender<Resume>>>,
    /// Holds by caller, within [`MAX_HOLDS_PER_CALLER`].
    callers: Mutex<HashMap<String, usize>>,
    store: Arc<dyn SessionStore>,
    keys: StateKeys,
    wait: Duration,
}

impl Holds {
    /// Holds whose mail goes through `store`, sealed with `keys`, each
    /// question waiting at most `wait`.
    pub fn new(store: Arc<dyn SessionStore>, keys: StateKeys, wait: Duration) -> Self {
        Self {
            local: Mutex::default(),
            callers: Mutex::default(),
            store,
            keys,
            wait,
        }
    }

    /// `value` sealed as mail for `address`, good for `ttl`.
    fn seal<T: Serialize>(&self, address: &str, value: &T, ttl: Duration) -> String {
        self.keys
            .seal(&format!("{RELAY_SEAL}\0{address}"), value, ttl)
    }

    /// What mail `text` found at `address` carries, if this deployment
    /// sealed it for that address.
    fn open<T: serde::de::DeserializeOwned>(&self, address: &str, text: &str) -> Option<T> {
        self.keys.open(&format!("{RELAY_SEAL}\0{address}"), text)
    }

    /// The reply mail `text` at `address` carries; anything forged denies.
    fn reply_in(&self, address: &str, text: &str) -> Reply {
        let name: Option<String> = self.open(address, text);
        name.map_or(Reply::Deny, |name| reply_named(&name))
    }

    /// Holds `running`, paused at `paused`, until the answer comes (here or
    /// relayed) or the question's wait passes; `next` makes what the call
    /// does after the answer into a response. The hold's id; `Err` gives the
    /// call back when `caller` holds as many calls as it may.
    pub async fn hold(
        self: &Arc<Self>,
        caller: &str,
        running: Running,
        paused: Paused,
        next: Continue,
    ) -> Result<String, (Running, Paused)> {
        let mut running = running;
        if !running.take_place(self, caller) {
            return Err((running, paused));
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        let (resumes, resumed) = mpsc::channel(1);
        self.lock().insert(id.clone(), resumes);
        if let Err(error) = self
            .store
            .open_mailbox(&answer_address(&id), self.wait)
            .await
        {
            tracing::warn!(%error, "cannot open a held call's mailbox: only a retry here can answer it");
        }
        let kept = self
            .clone()
            .keep(id.clone(), running, paused, resumed, next);
        tokio::spawn(kept);
        Ok(id)
    }

    /// The answer of a held call's question reached this replica: the call
    /// goes on, and its next step is the response. A hold no replica has
    /// any more is refused, saying the call must be made again.
    pub async fn resume(&self, id: &str, reply: Reply) -> Response {
        let here = self.lock().get(id).cloned();
        if let Some(resumes) = here {
            let (respond, response) = oneshot::channel();
            if resumes.send(Resume { reply, respond }).await.is_ok()
                && let Ok(response) = response.await
            {
                return response;
            }
            return Err(expired());
        }
        let (next, taken) = (next_address(id), taken_address(id));
        for address in [&next, &taken] {
            self.store
                .open_mailbox(address, MAX_RESUMED)
                .await
                .map_err(unavailable)?;
        }
        let close = || async {
            let _ = self.store.close_mailbox(&next).await;
            let _ = self.store.close_mailbox(&taken).await;
        };
        let answer_at = answer_address(id);
        let answer = self.seal(&answer_at, &name_of(reply).unwrap_or("deny"), self.wait);
        let delivered = self
            .store
            .deliver(&answer_at, &answer)
            .await
            .map_err(unavailable)?;
        if !delivered {
            close().await;
            return Err(expired());
        }
        // A live holder says it took the answer within a poll or two. One
        // that has not is gone, unless its word is late: the answer is taken
        // back, atomically (either it is still there, and the holder never
        // sees it, or the holder took it and the call goes on).
        let took = poll_mail(&*self.store, &taken, CLAIM_WAIT).await.is_some();
        if !took && let Ok(Some(_)) = self.store.collect_mail(&answer_address(id)).await {
            close().await;
            return Err(expired());
        }
        let mail = poll_mail(&*self.store, &next, MAX_RESUMED).await;
        close().await;
        let relayed = mail.and_then(|mail| self.open::<Relayed>(&next, &mail));
        match relayed {
            Some(relayed) => relayed.into(),
            None => Err(ErrorData::internal_error(
                format!(
                    "the replica holding the call took the answer but did not say how the call \
                     went on within {} (it may have stopped)",
                    humantime::format_duration(MAX_RESUMED)
                ),
                None,
            )),
        }
    }

    /// Keeps a held call until its answer comes, then lets it go on.
    async fn keep(
        self: Arc<Self>,
        id: String,
        running: Running,
        paused: Paused,
        mut resumed: mpsc::Receiver<Resume>,
        next: Continue,
    ) {
        let address = answer_address(&id);
        // Given up a little before the question's own wait runs out (it
        // started first), so the call never goes on without its answer.
        let wait = self.wait.mul_f64(0.9);
        let relayed = poll_mail(&*self.store, &address, wait);
        let resume = tokio::select! {
            resume = resumed.recv() => resume.map(|r| (r.reply, Some(r.respond))),
            mail = relayed => mail.map(|mail| (self.reply_in(&address, &mail), None)),
        };
        self.lock().remove(&id);
        // One last look: an answer delivered as the wait ran out is taken;
        // otherwise the mailbox is left to expire (an answer delivered into
        // it later is taken back by its sender, which then says "expired").
        let resume = match resume {
            Some(resume) => Some(resume),
            None => match self.store.collect_mail(&address).await {
                Ok(Some(mail)) => Some((self.reply_in(&address, &mail), None)),
                _ => None,
            },
        };
        // Unanswered in time: the call is cancelled (before its question is
        // let go), so that a retry told it expired is told the truth.
        let Some((reply, respond)) = resume else {
            drop(running);
            drop(paused);
            return;
        };
        let _ = self.store.close_mailbox(&address).await;
        if respond.is_none()
            && let Err(error) = self.store.deliver(&taken_address(&id), "taken").await
        {
            tracing::debug!(%error, "cannot say a relayed answer was taken");
        }
        let _ = paused.reply.send(reply);
        let response = next(running).await;
        match respond {
            Some(respond) => {
                let _ = respond.send(response);
            }
            None => {
                let next = next_address(&id);
                let text = self.seal(&next, &Relayed::from(response), MAX_RESUMED);
                if let Err(error) = self.store.deliver(&next, &text).await {
                    tracing::warn!(%error, "cannot relay what a held call did next");
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, mpsc::Sender<Resume>>> {
        self.local.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

// Mailbox addresses carry the version of what they hold (sealed since
// version 2): a replica of another version finds no mailbox and says the
// question expired, rather than misreading the mail.
fn answer_address(id: &str) -> String {
    format!("held-answer2:{id}")
}

fn next_address(id: &str) -> String {
    format!("held-next2:{id}")
}

fn taken_address(id: &str) -> String {
    format!("held-taken2:{id}")
}

/// One call held (or let run) counted against its caller, until dropped.
pub(crate) struct Counted(Arc<Holds>, String);

impl Counted {
    fn take(holds: Arc<Holds>, caller: &str) -> Option<Self> {
        let mut callers = holds.callers.lock().unwrap_or_else(PoisonError::into_inner);
        let held = callers.entry(caller.to_string()).or_default();
        if *held >= MAX_HOLDS_PER_CALLER {
            return None;
        }
        *held += 1;
        drop(callers);
        Some(Self(holds, caller.to_string()))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut callers = self
            .0
            .callers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = callers.get_mut(&self.1) {
            *held -= 1;
            if *held == 0 {
                callers.remove(&self.1);
            }
        }
    }
}

fn expired() -> ErrorData {
    ErrorData::invalid_params(
        "requestState refused: the question expired: the call that asked it is no longer held \
         (its replica stopped, or the answer came too late), so it did not finish; what it did \
         before asking is not undone, and nothing is repeated: call the tool again if it should \
         run",
        Some(json!("request_state")),
    )
}

fn unavailable(error: wasm_agent_session::SessionError) -> ErrorData {
    tracing::warn!(%error, "cannot pass a held call's answer on");
    ErrorData::internal_error(
        "cannot pass the answer on now: the session store does not answer",
        None,
    )
}
