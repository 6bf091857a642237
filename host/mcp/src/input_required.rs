//! Asking the person over the sessionless revision (2026-07-28) with multi
//! round-trip requests: a `tools/call` whose approval or `ask` folder needs
//! an answer stops before the call starts and is answered with an
//! input-required result (the questions as elicitation forms, and a sealed
//! `requestState`); the client asks its user and sends the same request
//! again with the answers and the state, to any replica.
//!
//! The state is authenticated with keys every replica shares (the first
//! seals, every one opens, so keys rotate without downtime), names the
//! principal, tenant, tool, component version and exact arguments it was
//! issued for, expires after the ask wait, and is honoured once: the shared
//! store marks it used. It carries the answers of earlier rounds, so a call
//! with an approval and a folder to ask about takes two rounds, never one
//! question twice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{
    InputRequest, InputRequests, InputRequiredResult, InputResponses, ProtocolVersion,
    RequestStateError, SealOptions,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use wasm_agent_sandbox::ask::{Asker, Asking, Question, Reply, SessionAnswers, SharedAnswers};
use wasm_agent_session::SessionStore;

use tokio::sync::{mpsc, oneshot};

use super::elicit;
use super::held::Paused;
use super::identity::Identity;
use super::state_keys::StateKeys;

/// What a request state was issued for: a retry must match all of it.
#[derive(Clone)]
pub(crate) struct Binding {
    pub principal: String,
    pub tenant: String,
    pub tool: String,
    /// The component version that would run.
    pub version: String,
    /// `sha256:HEX` of the exact arguments.
    pub arguments: String,
    /// The tool session the call runs in (empty: the one the state names).
    pub session: String,
    /// The handle of that session, when it was started for this call.
    pub handle: Option<String>,
}

impl Binding {
    /// The binding of a call of `tool` by `identity` on `version` with the
    /// arguments whose exact digest is `arguments`.
    pub fn new(identity: &Identity, tool: &str, version: String, arguments: String) -> Self {
        Self {
            principal: identity.principal.clone().unwrap_or_default(),
            tenant: identity.tenant.clone().unwrap_or_default(),
            tool: tool.to_string(),
            version,
            arguments,
            session: String::new(),
            handle: None,
        }
    }
}

/// The sealed part of a request state (readable by the client, never
/// changeable by it).
#[derive(Serialize, Deserialize)]
struct Sealed {
    /// The one-time mark the store keeps.
    once: String,
    principal: String,
    tenant: String,
    tool: String,
    version: String,
    arguments: String,
    /// Answers of earlier rounds: question, reply.
    answers: Vec<(String, String)>,
    /// This round's questions: input request key, question.
    asked: Vec<(String, String)>,
    /// The hold of the running call that asked them, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    held: Option<String>,
    /// The tool session the call runs in, and its handle when the session
    /// was started for the call (so the retry hands over the same one).
    #[serde(default)]
    session: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    handle: Option<String>,
    /// The pause of the script that asked them, if a script did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    script: Option<String>,
}

/// The request states of one server.
pub(crate) struct Rounds {
    keys: StateKeys,
    store: Arc<dyn SessionStore>,
    wait: Duration,
}

impl Rounds {
    pub fn new(keys: StateKeys, store: Arc<dyn SessionStore>, wait: Duration) -> Self {
        Self { keys, store, wait }
    }

    /// The round a request opens: the answers its state and responses carry
    /// (none for a first request). A state that is forged, altered, expired,
    /// used, or issued for another caller, tool, version or arguments is
    /// refused with what is wrong.
    pub async fn open(
        &self,
        state: Option<&str>,
        responses: Option<&InputResponses>,
        binding: &mut Binding,
    ) -> Result<Round, ErrorData> {
        let mut answers = HashMap::new();
        let Some(state) = state else {
            return Ok(Round::new(answers, self.wait, None, None));
        };
        let sealed: Sealed = self.keys.codec().open_json(state).map_err(|error| {
            refused(match error {
                RequestStateError::Expired => format!(
                    "it expired: an answer is taken within {} of the question; call the tool \
                     again",
                    humantime::format_duration(self.wait)
                ),
                RequestStateError::UnknownKeyId => "it was sealed with a key this server does \
                     not have (replicas need the same --request-state-keys)"
                    .into(),
                _ => "this server did not issue it, or it was changed".into(),
            })
        })?;
        check_binding(&sealed, binding)?;
        if binding.session.is_empty() {
            binding.session = sealed.session.clone();
            binding.handle = sealed.handle.clone();
        }
        // Marked for twice the wait, so replicas' clocks may disagree.
        match self.store.use_once(&sealed.once, 2 * self.wait).await {
            Ok(true) => {}
            Ok(false) => {
                return Err(refused(
                    "it was used already; each is good for one retry: call the tool again".into(),
                ));
            }
            Err(error) => {
                tracing::warn!(%error, "cannot mark a requestState used");
                return Err(ErrorData::internal_error(
                    "cannot check the requestState now: the session store does not answer",
                    None,
                ));
            }
        }
        for (question, reply) in &sealed.answers {
            answers.insert(question.clone(), reply_named(reply));
        }
        let mut held = None;
        for (key, question) in &sealed.asked {
            let reply = responses
                .and_then(|responses| responses.get(key))
                .map_or(Reply::NoAnswer, elicit::reply_of);
            answers.insert(question.clone(), reply);
            held = sealed.held.clone().map(|id| (id, reply));
        }
        Ok(Round::new(answers, self.wait, held, sealed.script))
    }

    /// The input-required result when the call stopped for questions the
    /// person must answer first; `None` when it ran (or was refused). A
    /// script that stopped for them goes on from its pause `script`. For an
    /// interpreter's call (a script), only the answers it has not used yet
    /// are carried, and the answer about the call itself (the script goes
    /// on as the call approved): the calls that used the others are not
    /// made again.
    pub fn input_required(
        &self,
        round: &Round,
        binding: &Binding,
        script: Option<String>,
        interpreter: bool,
    ) -> Option<InputRequiredResult> {
        let deferred = round.asker.deferred();
        if deferred.is_empty() {
            return None;
        }
        let answers = round.carried(binding, interpreter);
        let mut sealed = self.sealed(&deferred, answers, binding, None);
        sealed.1.script = script;
        Some(self.finish(sealed))
    }

    /// The input-required result of `question`, asked by a running call
    /// held as `held`.
    pub fn held(
        &self,
        question: &Question,
        answers: &[(String, String)],
        binding: &Binding,
        held: String,
    ) -> InputRequiredResult {
        let sealed = self.sealed(
            std::slice::from_ref(question),
            answers.to_vec(),
            binding,
            Some(held),
        );
        self.finish(sealed)
    }

    /// The requests for `questions`, and the state to seal with them.
    fn sealed(
        &self,
        questions: &[Question],
        answers: Vec<(String, String)>,
        binding: &Binding,
        held: Option<String>,
    ) -> (InputRequests, Sealed) {
        let mut requests = InputRequests::new();
        let mut asked = Vec::new();
        for (number, question) in questions.iter().enumerate() {
            let key = format!("wasm-agent-{}", number + 1);
            let form = elicit::form(question, &ProtocolVersion::V_2026_07_28);
            let request = json!({"method": "elicitation/create", "params": form});
            let request: InputRequest =
                serde_json::from_value(request).expect("an elicitation request");
            requests.insert(key.clone(), request);
            asked.push((key, question.key()));
        }
        let sealed = Sealed {
            once: uuid::Uuid::new_v4().simple().to_string(),
            principal: binding.principal.clone(),
            tenant: binding.tenant.clone(),
            tool: binding.tool.clone(),
            version: binding.version.clone(),
            arguments: binding.arguments.clone(),
            answers,
            asked,
            held,
            session: binding.session.clone(),
            handle: binding.handle.clone(),
            script: None,
        };
        (requests, sealed)
    }

    fn finish(&self, (requests, sealed): (InputRequests, Sealed)) -> InputRequiredResult {
        let state = self
            .keys
            .codec()
            .seal_json_with(&sealed, &SealOptions::new().ttl(self.wait))
            .expect("the state serializes");
        InputRequiredResult::new(Some(requests), Some(state))
    }
}

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
    fn new(
        answers: HashMap<String, Reply>,
        wait: Duration,
        held: Option<(String, Reply)>,
        script: Option<String>,
    ) -> Self {
        let asker = Arc::new(RoundAsker {
            answers: Mutex::new(answers.clone()),
            deferred: Mutex::default(),
            pauses: Mutex::default(),
        });
        Self {
            answers,
            asker,
            wait,
            held,
            script,
        }
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
}

impl RoundAsker {
    fn deferred(&self) -> Vec<Question> {
        self.deferred
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
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
        if question.running {
            // A running call cannot stop to be made again: it is held.
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
                reply,
            };
            if pauses.send(paused).await.is_err() {
                return Reply::Unavailable;
            }
            return replied.await.unwrap_or(Reply::NoAnswer);
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
}

/// A reply as a state or a relayed answer names it (`None`: not an answer).
pub(crate) fn name_of(reply: Reply) -> Option<&'static str> {
    match reply {
        Reply::Once | Reply::Session => Some("once"),
        Reply::Deny | Reply::Dismissed => Some("deny"),
        Reply::NoAnswer => Some("no_answer"),
        Reply::Unavailable | Reply::Later => None,
    }
}

/// The reply `name` stands for (anything unknown denies).
pub(crate) fn reply_named(name: &str) -> Reply {
    match name {
        "once" => Reply::Once,
        "no_answer" => Reply::NoAnswer,
        _ => Reply::Deny,
    }
}

/// The key of the question about the call `binding` names itself (its
/// approval).
fn top_level(binding: &Binding) -> String {
    Question {
        tool: binding.tool.clone(),
        subject: wasm_agent_sandbox::ask::Subject::Call {
            summary: String::new(),
            version: binding.version.clone(),
            arguments: binding.arguments.clone(),
        },
        offer_session: false,
        running: false,
    }
    .key()
}

fn check_binding(sealed: &Sealed, binding: &Binding) -> Result<(), ErrorData> {
    let wrong = if sealed.principal != binding.principal || sealed.tenant != binding.tenant {
        "it was issued to another caller"
    } else if sealed.tool != binding.tool || sealed.arguments != binding.arguments {
        "it was issued for another tool or other arguments: send it back with the request \
         that received it"
    } else if !binding.session.is_empty() && sealed.session != binding.session {
        "it was issued for a call in another tool session: send it back with the session the \
         request that received it named"
    } else if sealed.version != binding.version {
        "the tool's component changed since the question, and the answer was for the \
         version asked about: call the tool again"
    } else {
        return Ok(());
    };
    Err(refused(wrong.into()))
}

fn refused(why: String) -> ErrorData {
    ErrorData::invalid_params(
        format!("requestState refused: {why}"),
        Some(Value::String("request_state".into())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_agent_sandbox::ask::Subject;

    fn question(running: bool) -> Question {
        Question {
            tool: "t".into(),
            subject: Subject::Call {
                summary: "{}".into(),
                version: "sha256:00".into(),
                arguments: "sha256:11".into(),
            },
            offer_session: false,
            running,
        }
    }

    #[tokio::test]
    async fn an_answer_carried_by_the_request_is_used_once_and_never_by_a_running_call() {
        let answers = HashMap::from([(question(false).key(), Reply::Once)]);
        let round = Round::new(answers, Duration::from_secs(1), None, None);
        // The same question from the running call (a tool calling itself
        // with the same arguments) is not answered from the request.
        assert_eq!(round.asker.ask(&question(true)).await, Reply::Unavailable);
        assert_eq!(round.asker.ask(&question(false)).await, Reply::Once);
        // Asked again before the call starts: it goes to the person.
        assert_eq!(round.asker.ask(&question(false)).await, Reply::Later);
        assert_eq!(round.asker.deferred().len(), 1);
    }
}
