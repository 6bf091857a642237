//! The operators' desk: the questions of tools answered by operators
//! (`[calls.TOOL] answered_by = "operators"`), kept in the shared store so
//! that the console of any replica lists and answers them, and the answer
//! brought back to the call where it waits. The person behind the call is
//! told where the question is being decided (URL-mode elicitation).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use wasm_agent_mcp::StateKeys;
use wasm_agent_sandbox::ask::{
    Asker, Asking, OPERATORS, OperatorDesk, Question, Referral, Referred, Reply, SessionAnswers,
};
use wasm_agent_sandbox::text::one_line;
use wasm_agent_session::{Backoff, SessionStore};

/// Where a waiting question's details are kept (its mailbox holds them).
pub const QUESTION_PREFIX: &str = "console-question:";
/// Where its answer is left for the replica that waits.
const ANSWER_PREFIX: &str = "console-answer:";
/// How often the waiting replica first looks for the answer (then less
/// often, up to [`MAX_POLL`]).
const POLL: Duration = Duration::from_millis(200);
/// The longest between two looks.
const MAX_POLL: Duration = Duration::from_secs(1);
/// Longest a call made again (its person was sent to the question's page)
/// waits for the answer before the person is sent there again: well under
/// clients' and proxies' request timeouts.
const RETRY_WAIT: Duration = Duration::from_secs(20);
/// How often the replica that asked a question referred with the call's
/// answer looks whether it still waits (it keeps the caller's place).
const PLACE_CHECK: Duration = Duration::from_secs(5);
/// Most questions the approvals page lists.
pub const MAX_LISTED: usize = 200;
/// Most questions one caller may have waiting on one replica; more are not
/// asked (their calls are refused as having nobody to ask).
pub const MAX_PER_CALLER: usize = 8;
/// Most questions waiting on one replica in all.
pub const MAX_WAITING: usize = 256;
/// What question details and answers are sealed for (with the replicas'
/// request-state keys), so a store writer can neither forge an answer nor
/// change what operators read.
const QUESTION_SEAL: &str = "wasm-agent console question v1";
const ANSWER_SEAL: &str = "wasm-agent console answer v1";

/// A question waiting for an operator, as the console shows it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Pending {
    /// Its id (in its page's address): the time asked, then random.
    pub id: String,
    /// The tool it is about.
    pub tool: String,
    /// The question, as the person would have read it.
    pub text: String,
    /// Who made the call (escaped).
    pub principal: Option<String>,
    /// Their tenant (escaped).
    pub tenant: Option<String>,
    /// What "allow for the session" covers, when it may be answered.
    pub session_choice: Option<String>,
    /// When it was asked (RFC 3339).
    pub asked: String,
    /// The SHA-256 of exactly what was asked (tool, version, arguments or
    /// destination): what an answer covers.
    pub key: String,
}

impl Pending {
    /// Who made the call, as a page shows it.
    pub fn caller(&self) -> String {
        crate::calls::caller(
            self.principal.as_deref().unwrap_or(""),
            self.tenant.as_deref().unwrap_or(""),
        )
    }
}

/// An operator's answer, as left (sealed) for the waiting replica.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Answer {
    /// `allow_once`, `allow_for_session` or `deny`.
    pub answer: String,
    /// Who answered.
    pub operator: String,
    /// The [`Pending::key`] of the question answered.
    pub key: String,
}

/// The desk: the shared store questions go through, and how long they wait.
#[derive(Clone)]
pub struct Desk {
    store: Arc<dyn SessionStore>,
    keys: StateKeys,
    wait: Duration,
    /// The console's address as the person's client should open it.
    base: Arc<OnceLock<String>>,
    /// Questions waiting on this replica, by caller.
    waiting_here: Arc<Mutex<HashMap<String, usize>>>,
    /// How long a call made again waits for the answer (see [`RETRY_WAIT`]).
    retry_wait: Duration,
}

impl std::fmt::Debug for Desk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Desk").field("wait", &self.wait).finish()
    }
}

impl Desk {
    /// Questions through `store` (shared by replicas), each waiting at most
    /// `wait` (for a call with no session of its own; else its session's
    /// wait), sealed with `keys` (the replicas' shared request-state keys).
    /// "Allow for the session" is offered where the caller's session offers it.
    pub fn new(store: Arc<dyn SessionStore>, keys: StateKeys, wait: Duration) -> Self {
        Self {
            store,
            keys,
            wait,
            base: Arc::default(),
            waiting_here: Arc::default(),
            retry_wait: RETRY_WAIT.min(wait),
        }
    }

    /// The console's public address (`http://host:port`), for the links
    /// the person is sent; set once, when the listener is bound.
    pub fn set_base(&self, base: impl Into<String>) {
        let _ = self.base.set(base.into().trim_end_matches('/').to_string());
    }

    /// The page of question `id`, if the console's address is known.
    pub fn page_of(&self, id: &str) -> Option<String> {
        let base = self.base.get()?;
        Some(format!("{base}{}/approvals/{id}", crate::PREFIX))
    }

    /// The questions waiting, oldest first (at most [`MAX_LISTED`]), and
    /// whether there are more.
    pub(crate) async fn waiting(&self) -> Result<(Vec<Pending>, bool), String> {
        let open = self
            .store
            .mailboxes(QUESTION_PREFIX, MAX_LISTED + 1)
            .await
            .map_err(|e| e.to_string())?;
        let more = open.len() > MAX_LISTED;
        let pending = open
            .into_iter()
            .take(MAX_LISTED)
            .filter_map(|(address, details)| self.opened(&address, &details?))
            .collect();
        Ok((pending, more))
    }

    /// Question `id`, if it still waits.
    pub(crate) async fn question(&self, id: &str) -> Option<Pending> {
        let address = format!("{QUESTION_PREFIX}{id}");
        let details = self.store.mailbox(&address).await.ok()??;
        self.opened(&address, &details?)
    }

    /// Whether question `id` still waits (an error when the store cannot say).
    async fn still_waits(&self, id: &str) -> Result<bool, String> {
        let address = format!("{QUESTION_PREFIX}{id}");
        let open = self
            .store
            .mailbox(&address)
            .await
            .map_err(|e| e.to_string())?;
        Ok(open.is_some())
    }

    /// A question's sealed details, if they are this deployment's and for
    /// the address they were found at.
    fn opened(&self, address: &str, sealed: &str) -> Option<Pending> {
        let pending: Pending = self
            .keys
            .open(&format!("{QUESTION_SEAL}\0{address}"), sealed)?;
        (format!("{QUESTION_PREFIX}{}", pending.id) == address).then_some(pending)
    }

    /// The page the person behind the call of question `id` is sent to.
    fn referral(&self, question: &Question, id: &str) -> Option<Referral> {
        Some(Referral {
            question: question.clone(),
            id: id.to_string(),
            url: self.page_of(id)?,
            message: format!(
                "An operator decides this: {} Follow its progress at the operators' console.",
                question.text()
            ),
        })
    }

    /// The operator's answer to question `id` (whose digest is `key`), if
    /// one was left; anything forged or for another question denies.
    async fn answer_to(&self, id: &str, key: &str) -> Option<Reply> {
        let address = format!("{ANSWER_PREFIX}{id}");
        match self.store.collect_mail(&address).await {
            Ok(Some(sealed)) => {
                let seal = format!("{ANSWER_SEAL}\0{id}");
                let answer: Option<Answer> = self.keys.open(&seal, &sealed);
                Some(reply_of(answer.as_ref(), key))
            }
            Ok(None) => None,
            Err(error) => {
                tracing::debug!(%error, "cannot look for an operator's answer");
                None
            }
        }
    }

    /// Keeps `place` (a caller's among the questions waiting here) while
    /// question `id`, asked with the call's answer, still waits.
    fn keep_place(&self, place: Place, id: String) {
        let desk = self.clone();
        tokio::spawn(async move {
            let _place = place;
            let started = tokio::time::Instant::now();
            while started.elapsed() < desk.wait {
                tokio::time::sleep(PLACE_CHECK).await;
                if let Ok(false) = desk.still_waits(&id).await {
                    break;
                }
            }
        });
    }

    /// Leaves `answer` for question `id`: `false` if it no longer waits or
    /// was answered already (the first answer counts).
    pub(crate) async fn answer(&self, id: &str, answer: &Answer) -> Result<bool, String> {
        let text = self
            .keys
            .seal(&format!("{ANSWER_SEAL}\0{id}"), answer, self.wait);
        let delivered = self
            .store
            .deliver(&format!("{ANSWER_PREFIX}{id}"), &text)
            .await
            .map_err(|e| e.to_string())?;
        if delivered {
            let _ = self
                .store
                .close_mailbox(&format!("{QUESTION_PREFIX}{id}"))
                .await;
        }
        Ok(delivered)
    }
}

impl OperatorDesk for Desk {
    fn asking(
        &self,
        principal: Option<&str>,
        tenant: Option<&str>,
        person: Option<&Asking>,
    ) -> Asking {
        let asker = Arc::new(DeskAsker {
            desk: self.clone(),
            principal: principal.map(|p| one_line(p).into_owned()),
            tenant: tenant.map(|t| one_line(t).into_owned()),
            person: person.map(|p| p.asker().clone()),
        });
        match person {
            Some(person) => person.to(asker),
            // No session to remember an answer in: allow once, or deny.
            None => Asking::new(asker, Arc::new(SessionAnswers::new(self.wait, false))),
        }
    }
}

/// Asks the operators one call's questions.
struct DeskAsker {
    desk: Desk,
    principal: Option<String>,
    tenant: Option<String>,
    /// Who would have been asked: told where the question is decided.
    person: Option<Arc<dyn Asker>>,
}

impl DeskAsker {
    /// Takes a place among the caller's waiting questions, if one is free.
    fn place(&self) -> Option<Place> {
        let caller = format!("{:?}", (self.principal.as_deref(), self.tenant.as_deref()));
        let mut waiting = self
            .desk
            .waiting_here
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let total: usize = waiting.values().sum();
        let mine = waiting.entry(caller.clone()).or_default();
        if *mine >= MAX_PER_CALLER || total >= MAX_WAITING {
            return None;
        }
        *mine += 1;
        Some(Place {
            waiting: self.desk.waiting_here.clone(),
            caller,
        })
    }
}

/// A caller's place among the questions waiting here, given back when dropped.
struct Place {
    waiting: Arc<Mutex<HashMap<String, usize>>>,
    caller: String,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = waiting.get_mut(&self.caller) {
            *count -= 1;
            if *count == 0 {
                waiting.remove(&self.caller);
            }
        }
    }
}

#[async_trait::async_trait]
impl Asker for DeskAsker {
    async fn ask(&self, question: &Question) -> Reply {
        // The call made again after its person was sent to the page.
        if let Some(person) = &self.person {
            match person.referred(question) {
                Some(Referred::Waiting(id)) => {
                    return self.collect(question, &id, person.as_ref()).await;
                }
                Some(Referred::Decided(reply)) => {
                    person.decided_elsewhere(question, reply);
                    return reply;
                }
                None => {}
            }
        }
        let Some(place) = self.place() else {
            tracing::warn!(
                "a caller has {MAX_PER_CALLER} questions waiting for operators here (or this \
                 replica {MAX_WAITING}); this one is not asked"
            );
            return Reply::Unavailable;
        };
        let Some((id, key, mut withdrawn)) = self.post(question).await else {
            return Reply::Unavailable;
        };
        let referral = self.desk.referral(question, &id);
        let sent_to = match (&self.person, &referral) {
            (Some(person), Some(referral)) => person.refer_later(referral),
            _ => None,
        };
        if let Some(sent_to) = sent_to {
            if sent_to == id {
                // Sent with the call's answer: the question stays on the
                // desk (until answered or expired), and the caller's place
                // with it.
                withdrawn.addresses = Default::default();
                self.desk.keep_place(place, id);
            }
            // Else the same question was referred already in this call:
            // this one is withdrawn, and the person sent to that one.
            return Reply::Later;
        }
        let _place = place;
        if let (Some(person), Some(referral)) = (self.person.clone(), referral) {
            let wait = self.desk.wait;
            // Told, not waited for: the answer comes from the console.
            withdrawn.telling = Some(tokio::spawn(async move {
                let _ = tokio::time::timeout(wait, person.point_to(&referral)).await;
            }));
        }
        let mut waits = Backoff::new(POLL, MAX_POLL);
        let reply = loop {
            if let Some(reply) = self.desk.answer_to(&id, &key).await {
                break reply;
            }
            tokio::time::sleep(waits.next_wait()).await;
        };
        if let Some(person) = &self.person {
            person.answered_elsewhere(&id);
        }
        reply
    }

    fn who(&self) -> String {
        OPERATORS.into()
    }
}

impl DeskAsker {
    /// Puts `question` on the desk (sealed, for every replica's console):
    /// its id, the digest of exactly what it asks, and what takes it off
    /// again. `None` when the shared store does not take it.
    async fn post(&self, question: &Question) -> Option<(String, String, Withdraw)> {
        let now = SystemTime::now();
        let millis = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
        // Oldest first wherever listed: the time comes first.
        let id = format!("{millis:013}{}", uuid::Uuid::new_v4().simple());
        let key = hex::encode(Sha256::digest(question.key()));
        let pending = Pending {
            id: id.clone(),
            tool: one_line(&question.tool).into_owned(),
            text: question.text(),
            principal: self.principal.clone(),
            tenant: self.tenant.clone(),
            session_choice: question
                .offer_session
                .then(|| question.session_choice().to_string()),
            asked: humantime::format_rfc3339_seconds(now).to_string(),
            key: key.clone(),
        };
        let store = &self.desk.store;
        let (asked_at, answer_at) = (
            format!("{QUESTION_PREFIX}{id}"),
            format!("{ANSWER_PREFIX}{id}"),
        );
        let details = self.desk.keys.seal(
            &format!("{QUESTION_SEAL}\0{asked_at}"),
            &pending,
            self.desk.wait,
        );
        let posted = async {
            store.open_mailbox(&answer_at, self.desk.wait).await?;
            store.open_mailbox(&asked_at, self.desk.wait).await?;
            store.deliver(&asked_at, &details).await
        };
        if let Err(error) = posted.await {
            tracing::warn!(%error, "cannot put a question on the operators' desk");
            return None;
        }
        tracing::info!(question = %id, tool = %question.tool, "a question waits for an operator");
        let withdrawn = Withdraw {
            store: store.clone(),
            addresses: [asked_at, answer_at],
            telling: None,
        };
        Some((id, key, withdrawn))
    }

    /// The answer to question `id`, asked when the call was first made
    /// (its person sent to the page): waited for a while, then the person
    /// is sent there again (the call stops again); once the question no
    /// longer waits unanswered, there is no answer.
    async fn collect(&self, question: &Question, id: &str, person: &dyn Asker) -> Reply {
        let key = hex::encode(Sha256::digest(question.key()));
        let started = tokio::time::Instant::now();
        let mut waits = Backoff::new(POLL, MAX_POLL);
        let reply = loop {
            if let Some(reply) = self.desk.answer_to(id, &key).await {
                break reply;
            }
            // A store that does not answer is asked again, not taken to
            // mean the question is gone.
            if let Ok(false) = self.desk.still_waits(id).await {
                // Answered between the two looks, or gone unanswered.
                let last = self.desk.answer_to(id, &key).await;
                break last.unwrap_or(Reply::NoAnswer);
            }
            if started.elapsed() >= self.desk.retry_wait
                && let Some(referral) = self.desk.referral(question, id)
                && person.refer_later(&referral).is_some()
            {
                return Reply::Later;
            }
            tokio::time::sleep(waits.next_wait()).await;
        };
        // Should the call stop again (for another question), this reply
        // goes with it.
        person.decided_elsewhere(question, reply);
        reply
    }
}

/// An operator's answer (opened from its seal) as the reply to the question
/// of `key`; anything unexpected, forged or for another question denies.
fn reply_of(answer: Option<&Answer>, key: &str) -> Reply {
    match answer {
        Some(answer) if answer.key == key && answer.answer == "allow_once" => Reply::Once,
        Some(answer) if answer.key == key && answer.answer == "allow_for_session" => Reply::Session,
        _ => Reply::Deny,
    }
}

/// Takes a question off the desk when its wait ends, however it ends, and
/// stops telling the person about it.
struct Withdraw {
    store: Arc<dyn SessionStore>,
    addresses: [String; 2],
    telling: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        if let Some(telling) = self.telling.take() {
            telling.abort();
        }
        let (store, addresses) = (self.store.clone(), self.addresses.clone());
        if addresses.iter().all(String::is_empty) {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                for address in addresses {
                    let _ = store.close_mailbox(&address).await;
                }
            });
        }
    }
}

#[cfg(test)]
mod tests;
