//! The operators' desk: the questions of tools answered by operators
//! (`[calls.TOOL] answered_by = "operators"`), kept in the shared store so
//! that the console of any replica lists and answers them, and the answer
//! brought back to the call where it waits. The person behind the call is
//! told where the question is being decided (URL-mode elicitation).

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use wasm_agent_sandbox::ask::{
    Asker, Asking, OPERATORS, OperatorDesk, Question, Reply, SessionAnswers,
};
use wasm_agent_session::SessionStore;

/// Where a waiting question's details are kept (its mailbox holds them).
pub const QUESTION_PREFIX: &str = "console-question:";
/// Where its answer is left for the replica that waits.
const ANSWER_PREFIX: &str = "console-answer:";
/// How often the waiting replica looks for the answer.
const POLL: Duration = Duration::from_millis(200);
/// Most questions the approvals page lists.
pub const MAX_LISTED: usize = 200;

/// A question waiting for an operator, as the console shows it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Pending {
    /// Its id (in its page's address).
    pub id: String,
    /// The tool it is about.
    pub tool: String,
    /// The question, as the person would have read it.
    pub text: String,
    /// Who made the call.
    pub caller: String,
    /// Whether "allow for the session" may be answered.
    pub offer_session: bool,
    /// When it was asked (RFC 3339).
    pub asked: String,
}

/// An operator's answer, as left for the waiting replica.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Answer {
    /// `allow_once`, `allow_for_session` or `deny`.
    pub answer: String,
    /// Who answered.
    pub operator: String,
}

/// The desk: the shared store questions go through, and how long they wait.
#[derive(Clone)]
pub struct Desk {
    store: Arc<dyn SessionStore>,
    wait: Duration,
    offer_session: bool,
    /// The console's address as the person's client should open it.
    base: Arc<OnceLock<String>>,
}

impl std::fmt::Debug for Desk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Desk").field("wait", &self.wait).finish()
    }
}

impl Desk {
    /// Questions through `store` (shared by replicas), each waiting at most
    /// `wait`; "allow for the session" offered when `offer_session`.
    pub fn new(store: Arc<dyn SessionStore>, wait: Duration, offer_session: bool) -> Self {
        Self {
            store,
            wait,
            offer_session,
            base: Arc::default(),
        }
    }

    /// The console's public address (`http://host:port`), for the links
    /// the person is sent; set once, when the listener is bound.
    pub fn set_base(&self, base: impl Into<String>) {
        let _ = self.base.set(base.into().trim_end_matches('/').to_string());
    }

    /// The page of question `id`.
    pub fn page_of(&self, id: &str) -> String {
        let base = self.base.get().map(String::as_str).unwrap_or("");
        format!("{base}{}/approvals/{id}", crate::PREFIX)
    }

    /// The questions waiting, oldest first.
    pub(crate) async fn waiting(&self) -> Result<Vec<Pending>, String> {
        let open = self
            .store
            .mailboxes(QUESTION_PREFIX, MAX_LISTED)
            .await
            .map_err(|e| e.to_string())?;
        let mut pending: Vec<Pending> = open
            .into_iter()
            .filter_map(|(_, details)| serde_json::from_str(&details?).ok())
            .collect();
        pending.sort_by(|a, b| a.asked.cmp(&b.asked));
        Ok(pending)
    }

    /// Question `id`, if it still waits.
    pub(crate) async fn question(&self, id: &str) -> Option<Pending> {
        let address = format!("{QUESTION_PREFIX}{id}");
        let open = self.store.mailboxes(&address, 1).await.ok()?;
        let (found, details) = open.into_iter().next()?;
        (found == address)
            .then(|| serde_json::from_str(&details?).ok())
            .flatten()
    }

    /// Leaves `answer` for question `id`: `false` if it no longer waits or
    /// was answered already (the first answer counts).
    pub(crate) async fn answer(&self, id: &str, answer: &Answer) -> Result<bool, String> {
        let text = serde_json::to_string(answer).map_err(|e| e.to_string())?;
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
    fn asking(&self, caller: &str, person: Option<&Asking>) -> Asking {
        let asker = Arc::new(DeskAsker {
            desk: self.clone(),
            caller: caller.to_string(),
            person: person.map(|p| p.asker().clone()),
        });
        match person {
            Some(person) => person.to(asker),
            None => Asking::new(
                asker,
                Arc::new(SessionAnswers::new(self.wait, self.offer_session)),
            ),
        }
    }
}

/// Asks the operators one call's questions.
struct DeskAsker {
    desk: Desk,
    caller: String,
    /// Who would have been asked: told where the question is decided.
    person: Option<Arc<dyn Asker>>,
}

#[async_trait::async_trait]
impl Asker for DeskAsker {
    async fn ask(&self, question: &Question) -> Reply {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let pending = Pending {
            id: id.clone(),
            tool: question.tool.clone(),
            text: question.text(),
            caller: self.caller.clone(),
            offer_session: question.offer_session,
            asked: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
        };
        let store = &self.desk.store;
        let (asked_at, answer_at) = (
            format!("{QUESTION_PREFIX}{id}"),
            format!("{ANSWER_PREFIX}{id}"),
        );
        let posted = async {
            store.open_mailbox(&answer_at, self.desk.wait).await?;
            store.open_mailbox(&asked_at, self.desk.wait).await?;
            let details = serde_json::to_string(&pending).unwrap_or_default();
            store.deliver(&asked_at, &details).await
        };
        if let Err(error) = posted.await {
            tracing::warn!(%error, "cannot put a question on the operators' desk");
            return Reply::Unavailable;
        }
        let _withdrawn = Withdraw {
            store: store.clone(),
            addresses: [asked_at, answer_at.clone()],
        };
        let url = self.desk.page_of(&id);
        if let Some(person) = self.person.clone() {
            let (id, url, wait) = (id.clone(), url.clone(), self.desk.wait);
            let message = format!(
                "An operator decides this: {} Follow its progress at the operators' console.",
                question.text()
            );
            // Told, not waited for: the answer comes from the console.
            tokio::spawn(async move {
                let _ = tokio::time::timeout(wait, person.point_to(&id, &url, &message)).await;
            });
        }
        tracing::info!(question = %id, tool = %question.tool, "a question waits for an operator at {url}");
        let reply = loop {
            match store.collect_mail(&answer_at).await {
                Ok(Some(text)) => break reply_of(&text),
                Ok(None) => {}
                Err(error) => tracing::debug!(%error, "cannot look for an operator's answer"),
            }
            tokio::time::sleep(POLL).await;
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

/// An operator's answer as a reply; anything unexpected denies.
fn reply_of(text: &str) -> Reply {
    match serde_json::from_str::<Answer>(text).map(|a| a.answer) {
        Ok(answer) if answer == "allow_once" => Reply::Once,
        Ok(answer) if answer == "allow_for_session" => Reply::Session,
        _ => Reply::Deny,
    }
}

/// Takes a question off the desk when its wait ends, however it ends.
struct Withdraw {
    store: Arc<dyn SessionStore>,
    addresses: [String; 2],
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        let (store, addresses) = (self.store.clone(), self.addresses.clone());
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
mod tests {
    use super::*;
    use wasm_agent_sandbox::ask::Subject;
    use wasm_agent_session::InMemorySessionStore;

    fn question() -> Question {
        Question {
            tool: "drop_table".into(),
            subject: Subject::Call {
                summary: r#"{"table":"users"}"#.into(),
                version: "sha256:00".into(),
                arguments: "sha256:11".into(),
            },
            offer_session: false,
            running: false,
        }
    }

    #[tokio::test]
    async fn a_question_waits_on_the_desk_until_an_operator_answers_it_once() {
        let store: Arc<dyn SessionStore> = Arc::new(InMemorySessionStore::default());
        let desk = Desk::new(store, Duration::from_secs(30), false);
        let asking = desk.asking("alice (acme)", None);
        let asked = {
            let asker = asking.asker().clone();
            tokio::spawn(async move { asker.ask(&question()).await })
        };
        let pending = loop {
            let waiting = desk.waiting().await.unwrap();
            if let Some(first) = waiting.into_iter().next() {
                break first;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(pending.tool, "drop_table");
        assert_eq!(pending.caller, "alice (acme)");
        assert!(pending.text.contains(r#"{"table":"users"}"#));
        assert_eq!(desk.question(&pending.id).await.unwrap().id, pending.id);
        assert!(desk.question("unknown").await.is_none());
        let answer = |a: &str| Answer {
            answer: a.into(),
            operator: "olga".into(),
        };
        assert!(
            desk.answer(&pending.id, &answer("allow_once"))
                .await
                .unwrap()
        );
        assert!(
            !desk.answer(&pending.id, &answer("deny")).await.unwrap(),
            "the first counts"
        );
        assert_eq!(asked.await.unwrap(), Reply::Once);
        assert!(desk.waiting().await.unwrap().is_empty());
    }

    #[test]
    fn anything_but_an_allow_denies() {
        assert_eq!(
            reply_of(r#"{"answer":"allow_once","operator":"o"}"#),
            Reply::Once
        );
        assert_eq!(
            reply_of(r#"{"answer":"allow_for_session","operator":"o"}"#),
            Reply::Session
        );
        assert_eq!(reply_of(r#"{"answer":"yes","operator":"o"}"#), Reply::Deny);
        assert_eq!(reply_of("not json"), Reply::Deny);
    }
}
