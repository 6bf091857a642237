//! The round one request opens: the answers it carries, and who the
//! call's questions go to (the person with the call's answer, or the call
//! held where it paused).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use wasm_agent_sandbox::ask::{
    Asker, Asking, Question, Referral, Reply, SessionAnswers, SharedAnswers,
};

use super::super::held::Paused;
use super::{Binding, Shows, name_of, top_level};

/// The answers one request carries, and the questions its call stopped for.
pub(crate) struct Round {
    answers: HashMap<String, Reply>,
    asker: Arc<RoundAsker>,
    wait: Duration,
    /// The hold whose question this request answers, and the answer.
    held: Option<(String, Reply)>,
    /// The pause of the script this request goes on with.
    script: Option<String>,
}

impl Round {
    pub(super) fn new(
        answers: HashMap<String, Reply>,
        wait: Duration,
        held: Option<(String, Reply)>,
        script: Option<String>,
        shows: Shows,
    ) -> Self {
        let asker = Arc::new(RoundAsker {
            answers: Mutex::new(answers.clone()),
            deferred: Mutex::default(),
            pauses: Mutex::default(),
            shows,
        });
        Self {
            answers,
            asker,
            wait,
            held,
            script,
        }
    }

    /// The questions the call stopped for, to go to the person.
    pub(super) fn deferred(&self) -> Vec<Question> {
        self.asker.deferred()
    }

    /// The pause of the script this request goes on with, if any.
    pub fn script(&self) -> Option<&str> {
        self.script.as_deref()
    }

    /// The answers a state carries to the retry: all of them, or, for an
    /// interpreter's call (a script, which goes on rather than starting
    /// again), those it has not used and the one about the call itself.
    pub fn carried(&self, binding: &Binding, interpreter: bool) -> Vec<(String, String)> {
        match interpreter {
            true => self.unused_answers_and(&top_level(binding)),
            false => self.answers(),
        }
    }

    /// The answers the call has not used (yet), and the one to question
    /// `kept` whether used or not, as a state carries them.
    fn unused_answers_and(&self, kept: &str) -> Vec<(String, String)> {
        let unused = self
            .asker
            .answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let kept = self.answers.get_key_value(kept);
        unused
            .iter()
            .filter(|(question, _)| kept.is_none_or(|(key, _)| key != *question))
            .chain(kept)
            .filter_map(|(question, reply)| Some((question.clone(), name_of(*reply)?.into())))
            .collect()
    }

    /// The held call this request answers the question of, and the answer.
    pub fn held(&self) -> Option<&(String, Reply)> {
        self.held.as_ref()
    }

    /// Questions of the call once it runs go to `pauses` (the call is held
    /// while the person is asked).
    pub fn pause_with(&self, pauses: mpsc::Sender<Paused>) {
        *self
            .asker
            .pauses
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(pauses);
    }

    /// The answers given so far, as a state carries them.
    pub fn answers(&self) -> Vec<(String, String)> {
        self.answers
            .iter()
            .filter_map(|(question, reply)| Some((question.clone(), name_of(*reply)?.into())))
            .collect()
    }

    /// Who the call's questions go to: the answers carried, else the person
    /// with the call's answer. "Allow for this session" is offered (when
    /// the server offers it) only in a tool session the caller named or was
    /// handed, and is kept in `shared` for every replica.
    pub fn asking(&self, shared: Option<Arc<dyn SharedAnswers>>) -> Asking {
        let answers = SessionAnswers::new(self.wait, shared.is_some());
        let answers = match shared {
            Some(shared) => answers.shared(shared),
            None => answers,
        };
        Asking::new(self.asker.clone(), Arc::new(answers))
    }
}

/// Answers from the request, else defers the question to the person.
struct RoundAsker {
    /// Answers to questions asked before the call starts; each is used once.
    answers: Mutex<HashMap<String, Reply>>,
    deferred: Mutex<Vec<Question>>,
    /// Where a running call's questions go.
    pauses: Mutex<Option<mpsc::Sender<Paused>>>,
    shows: Shows,
}

impl RoundAsker {
    fn deferred(&self) -> Vec<Question> {
        self.deferred
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Holds the call at `question` (or the page it is decided at) until
    /// the retry brings the client's reply.
    async fn hold(&self, question: &Question, referral: Option<&Referral>) -> Reply {
        let pauses = self
            .pauses
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let Some(pauses) = pauses else {
            return Reply::Unavailable;
        };
        let (reply, replied) = oneshot::channel();
        let paused = Paused {
            question: question.clone(),
            referral: referral.cloned(),
            reply,
        };
        if pauses.send(paused).await.is_err() {
            return Reply::Unavailable;
        }
        replied.await.unwrap_or(Reply::NoAnswer)
    }
}

#[async_trait::async_trait]
impl Asker for RoundAsker {
    async fn ask(&self, question: &Question) -> Reply {
        // A running call's questions are never answered from the request
        // (its own call of the same tool with the same arguments asks anew).
        if !question.running {
            let carried = self
                .answers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&question.key());
            if let Some(reply) = carried {
                return reply;
            }
        }
        if !self.shows.forms {
            // A client that only opens pages cannot answer a form.
            return Reply::Unavailable;
        }
        if question.running {
            // A running call cannot stop to be made again: it is held.
            return self.hold(question, None).await;
        }
        // One form per question, however many calls ask it (a script's
        // gathered identical calls): one answer, one call, the others asked
        // again.
        let mut deferred = self.deferred.lock().unwrap_or_else(PoisonError::into_inner);
        if !deferred.iter().any(|asked| asked.key() == question.key()) {
            deferred.push(question.clone());
        }
        Reply::Later
    }

    fn who(&self) -> String {
        "the MCP client's user (input required)".into()
    }

    /// The call is held, whether it started or not (it waits for the
    /// decision made elsewhere, not for the person), and the person is sent
    /// to the page with the call's answer; the retry goes on waiting.
    async fn point_to(&self, referral: &Referral) {
        if self.shows.pages {
            let _ = self.hold(&referral.question, Some(referral)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{question, referral};
    use super::*;

    #[tokio::test]
    async fn an_answer_carried_by_the_request_is_used_once_and_never_by_a_running_call() {
        let answers = HashMap::from([(question(false).key(), Reply::Once)]);
        let shows = Shows {
            forms: true,
            pages: false,
        };
        let round = Round::new(answers, Duration::from_secs(1), None, None, shows);
        // The same question from the running call (a tool calling itself
        // with the same arguments) is not answered from the request.
        assert_eq!(round.asker.ask(&question(true)).await, Reply::Unavailable);
        assert_eq!(round.asker.ask(&question(false)).await, Reply::Once);
        // Asked again before the call starts: it goes to the person.
        assert_eq!(round.asker.ask(&question(false)).await, Reply::Later);
        assert_eq!(round.asker.deferred().len(), 1);
    }

    #[tokio::test]
    async fn a_client_of_pages_is_sent_to_one_and_asked_no_form() {
        let pages = Shows {
            forms: false,
            pages: true,
        };
        let round = Round::new(HashMap::new(), Duration::from_secs(1), None, None, pages);
        assert_eq!(round.asker.ask(&question(false)).await, Reply::Unavailable);
        assert_eq!(round.asker.ask(&question(true)).await, Reply::Unavailable);
        // Sent to a page, the call is held there until the retry.
        let (pauses, mut paused) = mpsc::channel(1);
        round.pause_with(pauses);
        let asker = round.asker.clone();
        let told = tokio::spawn(async move { asker.point_to(&referral()).await });
        let held = paused.recv().await.expect("held");
        assert_eq!(held.referral.as_ref().map(|r| r.id.as_str()), Some("q1"));
        let _ = held.reply.send(Reply::Once);
        told.await.unwrap();
        // A client that opens no pages is not held for one.
        let forms = Round::new(
            HashMap::new(),
            Duration::from_secs(1),
            None,
            None,
            Shows {
                forms: true,
                pages: false,
            },
        );
        let (pauses, mut paused) = mpsc::channel(1);
        forms.pause_with(pauses);
        forms.asker.point_to(&referral()).await;
        assert!(paused.try_recv().is_err());
    }
}
