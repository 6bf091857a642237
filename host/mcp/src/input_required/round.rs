//! The round one request opens: the answers it carries, and who the
//! call's questions go to (the person with the call's answer, the page
//! where someone else decides it, or the call held where it paused).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use wasm_agent_sandbox::ask::{
    Asker, Asking, Question, Referral, Referred, Reply, SessionAnswers, SharedAnswers,
};

use super::super::held::{Paused, Stop};
use super::{Binding, Ongoing, Shows, name_of, top_level};

/// The answers one request carries, and the questions its call stopped for.
pub(crate) struct Round {
    answers: HashMap<String, Reply>,
    asker: Arc<RoundAsker>,
    wait: Duration,
    /// The call this request goes on with, if any.
    goes_on: Option<GoesOn>,
    /// The pause of the script this request goes on with.
    script: Option<String>,
}

impl Round {
    pub(super) fn new(
        answers: HashMap<String, Reply>,
        wait: Duration,
        goes_on: Option<GoesOn>,
        script: Option<String>,
        shows: Shows,
        referred: HashMap<String, Referred>,
    ) -> Self {
        let asker = Arc::new(RoundAsker {
            answers: Mutex::new(answers.clone()),
            deferred: Mutex::default(),
            referrals: Mutex::default(),
            referred: Mutex::new(referred),
            settled: Mutex::default(),
            pauses: Mutex::default(),
            shows,
        });
        Self {
            answers,
            asker,
            wait,
            goes_on,
            script,
        }
    }

    /// The questions the call stopped for, to go to the person.
    pub(super) fn deferred(&self) -> Vec<Question> {
        self.asker.deferred()
    }

    /// The pages the person is sent to, where questions the call stopped
    /// for are decided.
    pub(super) fn referrals(&self) -> Vec<Referral> {
        self.asker
            .referrals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The questions decided elsewhere whose replies go with the call's
    /// answer: those this request brought and did not use, and those
    /// decided during it (for an interpreter's call, which goes on rather
    /// than starting again, only the one about the call itself).
    pub(super) fn decided(&self, binding: &Binding, interpreter: bool) -> Vec<(String, Reply)> {
        let unused = self
            .asker
            .referred
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(|(question, referred)| match referred {
                Referred::Decided(reply) => Some((question.clone(), *reply)),
                Referred::Waiting(_) => None,
            })
            .collect::<Vec<_>>();
        let itself = top_level(binding);
        let settled = self
            .asker
            .settled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(question, _)| !interpreter || **question == itself)
            .map(|(question, reply)| (question.clone(), *reply))
            .collect::<Vec<_>>();
        unused.into_iter().chain(settled).collect()
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

    /// The call already running that this request goes on with, if any.
    pub fn goes_on(&self) -> Option<&GoesOn> {
        self.goes_on.as_ref()
    }

    /// What the call stops for once it runs goes to `pauses`: its questions
    /// for the person (held while asked), and the pages of those decided
    /// elsewhere.
    pub fn pause_with(&self, pauses: mpsc::Sender<Stop>) {
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

/// A call already running that a request goes on with.
pub(crate) enum GoesOn {
    /// Held where it asked the person: the hold, and the person's answer.
    Held(String, Reply),
    /// Let run while operators decide its question.
    Ongoing(Ongoing),
}

/// Answers from the request, else defers the question to the person.
struct RoundAsker {
    /// Answers to questions asked before the call starts; each is used once.
    answers: Mutex<HashMap<String, Reply>>,
    deferred: Mutex<Vec<Question>>,
    /// Questions decided elsewhere, whose pages the person is sent to.
    referrals: Mutex<Vec<Referral>>,
    /// Questions decided elsewhere that the request brings back, by
    /// question; each taken once.
    referred: Mutex<HashMap<String, Referred>>,
    /// Questions decided elsewhere during this request, and their replies.
    settled: Mutex<HashMap<String, Reply>>,
    /// Where a running call's questions go.
    pauses: Mutex<Option<mpsc::Sender<Stop>>>,
    shows: Shows,
}

impl RoundAsker {
    fn deferred(&self) -> Vec<Question> {
        self.deferred
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Holds the running call at `question` until the retry brings the
    /// client's reply.
    async fn hold(&self, question: &Question) -> Reply {
        let (reply, replied) = oneshot::channel();
        let paused = Paused {
            question: question.clone(),
            reply,
        };
        if !self.stop(Stop::Question(paused)).await {
            return Reply::Unavailable;
        }
        replied.await.unwrap_or(Reply::NoAnswer)
    }

    /// Tells whoever runs the call that it stopped for `stop`: `false` when
    /// nobody can be told.
    async fn stop(&self, stop: Stop) -> bool {
        let pauses = self
            .pauses
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match pauses {
            Some(pauses) => pauses.send(stop).await.is_ok(),
            None => false,
        }
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
            return self.hold(question).await;
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

    /// A running call's question decided elsewhere: the person is sent to
    /// its page with the response, and the call waits for it where it runs
    /// (it cannot stop to be made again).
    async fn point_to(&self, referral: &Referral) {
        if self.shows.pages && referral.question.running {
            self.stop(Stop::Page(referral.clone())).await;
        }
    }

    /// A question about a call that has not started: the person is sent
    /// to its page with the call's answer (one page per question). A
    /// running call's question is not (see [`point_to`](Self::point_to)).
    fn refer_later(&self, referral: &Referral) -> Option<String> {
        if !self.shows.pages || referral.question.running {
            return None;
        }
        let mut referrals = self
            .referrals
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let key = referral.question.key();
        if let Some(earlier) = referrals.iter().find(|r| r.question.key() == key) {
            return Some(earlier.id.clone());
        }
        referrals.push(referral.clone());
        Some(referral.id.clone())
    }

    fn referred(&self, question: &Question) -> Option<Referred> {
        if question.running {
            return None;
        }
        self.referred
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&question.key())
    }

    fn decided_elsewhere(&self, question: &Question, reply: Reply) {
        if !question.running {
            self.settled
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(question.key(), reply);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{question, referral};
    use super::*;

    fn round_of(answers: HashMap<String, Reply>, forms: bool, pages: bool) -> Round {
        let shows = Shows { forms, pages };
        let wait = Duration::from_secs(1);
        Round::new(answers, wait, None, None, shows, HashMap::new())
    }

    #[tokio::test]
    async fn an_answer_carried_by_the_request_is_used_once_and_never_by_a_running_call() {
        let answers = HashMap::from([(question(false).key(), Reply::Once)]);
        let round = round_of(answers, true, false);
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
        let round = round_of(HashMap::new(), false, true);
        assert_eq!(round.asker.ask(&question(false)).await, Reply::Unavailable);
        assert_eq!(round.asker.ask(&question(true)).await, Reply::Unavailable);
        // Sent to the page of a question about a call not started yet, once.
        assert_eq!(round.asker.refer_later(&referral()).as_deref(), Some("q1"));
        let again = Referral {
            id: "q2".into(),
            ..referral()
        };
        assert_eq!(round.asker.refer_later(&again).as_deref(), Some("q1"));
        assert_eq!(round.referrals().len(), 1);
        // Not for a running call's question, nor by a client of forms only.
        let running = Referral {
            question: question(true),
            ..referral()
        };
        assert_eq!(round.asker.refer_later(&running), None);
        let forms = round_of(HashMap::new(), true, false);
        assert_eq!(forms.asker.refer_later(&referral()), None);
    }
}
