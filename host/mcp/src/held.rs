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

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{CallToolResponse, CallToolResult, InputRequiredResult};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};
use wasm_agent_sandbox::ask::{Question, Reply};
use wasm_agent_session::SessionStore;

use super::drain::InFlight;

/// Longest a retry waits for what a held call did next on another replica.
const MAX_RESUMED: Duration = Duration::from_secs(15 * 60);
/// How long a holder may take to pick up a relayed answer before it is
/// taken to be gone.
const CLAIM_WAIT: Duration = Duration::from_secs(3);
/// Looks at a mailbox this often at most.
const MAX_POLL: Duration = Duration::from_millis(250);

/// A running call's question, and where its answer goes.
pub(crate) struct Paused {
    pub question: Question,
    pub reply: oneshot::Sender<Reply>,
}

/// A call running as part of a round: its answer, or its questions.
pub(crate) struct Running {
    pub task: tokio::task::JoinHandle<Result<CallToolResult, ErrorData>>,
    pub questions: mpsc::Receiver<Paused>,
    /// Counted in flight while held, so a graceful stop waits for it.
    pub _in_flight: Option<InFlight>,
}

/// What a running call did next.
pub(crate) enum Next {
    Ended(Result<CallToolResult, ErrorData>),
    Paused(Paused),
}

impl Running {
    pub async fn next(&mut self) -> Next {
        tokio::select! {
            biased;
            ended = &mut self.task => Next::Ended(ended.unwrap_or_else(|error| {
                Err(ErrorData::internal_error(format!("the call failed: {error}"), None))
            })),
            Some(paused) = self.questions.recv() => Next::Paused(paused),
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

/// Makes the result of a held call's next step: its answer, or the
/// input-required result of its next question (holding it again).
pub(crate) type Continue =
    Arc<dyn Fn(Running) -> futures::future::BoxFuture<'static, Response> + Send + Sync>;

/// The calls this replica holds, by hold id.
pub(crate) struct Holds {
    local: Mutex<HashMap<String, mpsc::Sender<Resume>>>,
    store: Arc<dyn SessionStore>,
    wait: Duration,
}

impl Holds {
    pub fn new(store: Arc<dyn SessionStore>, wait: Duration) -> Self {
        Self {
            local: Mutex::default(),
            store,
            wait,
        }
    }

    /// Holds `running`, paused at `paused`, until the answer comes (here or
    /// relayed) or the question's wait passes; `next` makes what the call
    /// does after the answer into a response. The hold's id.
    pub async fn hold(
        self: &Arc<Self>,
        running: Running,
        paused: Paused,
        next: Continue,
    ) -> String {
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
        tokio::spawn(
            self.clone()
                .keep(id.clone(), running, paused, resumed, next),
        );
        id
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
        let next = next_address(id);
        self.store
            .open_mailbox(&next, MAX_RESUMED)
            .await
            .map_err(unavailable)?;
        let delivered = self
            .store
            .deliver(&answer_address(id), reply_name(reply))
            .await
            .map_err(unavailable)?;
        if !delivered {
            let _ = self.store.close_mailbox(&next).await;
            return Err(expired());
        }
        // A live holder picks the answer up within a poll or two; one that
        // has not by then is gone, and the answer is taken back (atomically:
        // either it took it, or it never will).
        let mut mail = poll(&*self.store, &next, CLAIM_WAIT).await;
        if mail.is_none() {
            if let Ok(Some(_)) = self.store.collect_mail(&answer_address(id)).await {
                let _ = self.store.close_mailbox(&next).await;
                return Err(expired());
            }
            mail = poll(&*self.store, &next, MAX_RESUMED).await;
        }
        let _ = self.store.close_mailbox(&next).await;
        match mail.and_then(|mail| serde_json::from_str::<Relayed>(&mail).ok()) {
            Some(Relayed::Complete(result)) => Ok(result.into()),
            Some(Relayed::InputRequired(input)) => Ok(input.into()),
            Some(Relayed::Error(error)) => Err(error),
            None => Err(ErrorData::internal_error(
                "the replica holding the call did not say how it went on; its result is in \
                 its audit record",
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
        let relayed = poll(&*self.store, &address, self.wait);
        let resume = tokio::select! {
            resume = resumed.recv() => resume.map(|r| (r.reply, Some(r.respond))),
            mail = relayed => mail.map(|mail| (reply_named(&mail), None)),
        };
        self.lock().remove(&id);
        let _ = self.store.close_mailbox(&answer_address(&id)).await;
        // Unanswered: the question's own wait denies it, and the call goes
        // on without it; its result is in its audit record only.
        let Some((reply, respond)) = resume else {
            return;
        };
        let _ = paused.reply.send(reply);
        let response = next(running).await;
        match respond {
            Some(respond) => {
                let _ = respond.send(response);
            }
            None => {
                let relayed = match response {
                    Ok(CallToolResponse::InputRequired(input)) => Relayed::InputRequired(input),
                    Ok(CallToolResponse::Complete(result)) => Relayed::Complete(result),
                    Ok(_) => Relayed::Error(ErrorData::internal_error("unexpected result", None)),
                    Err(error) => Relayed::Error(error),
                };
                let text = serde_json::to_string(&relayed).unwrap_or_default();
                if let Err(error) = self.store.deliver(&next_address(&id), &text).await {
                    tracing::warn!(%error, "cannot relay what a held call did next");
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, mpsc::Sender<Resume>>> {
        self.local.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The mail at `address`, looking every so often for at most `wait`.
async fn poll(store: &dyn SessionStore, address: &str, wait: Duration) -> Option<String> {
    let deadline = tokio::time::Instant::now() + wait;
    let mut every = Duration::from_millis(25);
    loop {
        match store.collect_mail(address).await {
            Ok(Some(mail)) => return Some(mail),
            Ok(None) => {}
            Err(error) => tracing::debug!(%error, "cannot read a mailbox"),
        }
        if tokio::time::Instant::now() + every > deadline {
            return None;
        }
        tokio::time::sleep(every).await;
        every = (every * 2).min(MAX_POLL);
    }
}

fn answer_address(id: &str) -> String {
    format!("held-answer:{id}")
}

fn next_address(id: &str) -> String {
    format!("held-next:{id}")
}

fn reply_name(reply: Reply) -> &'static str {
    match reply {
        Reply::Once | Reply::Session => "once",
        Reply::NoAnswer => "no_answer",
        _ => "deny",
    }
}

fn reply_named(name: &str) -> Reply {
    match name {
        "once" => Reply::Once,
        "no_answer" => Reply::NoAnswer,
        _ => Reply::Deny,
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
    ErrorData::internal_error(format!("cannot pass the answer on now: {error}"), None)
}
