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
use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{
    InputRequest, InputRequests, InputRequiredResult, InputResponses, ProtocolVersion,
    RequestStateError, SealOptions,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use wasm_agent_sandbox::ask::{Question, Referral, Referred, Reply};
use wasm_agent_session::SessionStore;

mod round;

pub(crate) use round::{GoesOn, Round};

use super::elicit;
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
    /// Questions decided elsewhere: those whose pages the person was sent
    /// to (the client's reply to a page is no answer: only where it is
    /// decided counts), and those already decided there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    elsewhere: Vec<Elsewhere>,
    /// The hold of the running call that asked them, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    held: Option<String>,
    /// The call let run while operators decide its question, if one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ongoing: Option<Ongoing>,
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

/// What the client of a request can show its user, as its capabilities
/// declare: elicitation forms (questions it answers), and URL-mode
/// elicitation (pages where a question is decided elsewhere).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Shows {
    pub forms: bool,
    pub pages: bool,
}

/// A call let run while operators decide its question: its id, and the
/// page its person is sent to (again, until the call has gone on).
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct Ongoing {
    pub call: String,
    pub page: String,
    pub url: String,
    pub message: String,
}

impl Ongoing {
    /// Call `call`, whose question is decided at `referral`'s page.
    pub fn new(call: String, referral: &Referral) -> Self {
        Self {
            call,
            page: referral.id.clone(),
            url: referral.url.clone(),
            message: referral.message.clone(),
        }
    }
}

/// A question decided elsewhere, as a state carries it.
#[derive(Serialize, Deserialize)]
struct Elsewhere {
    question: String,
    /// Its id where it waits, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    /// Its reply, once decided (as [`name_of`] names it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reply: Option<String>,
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
        shows: Shows,
    ) -> Result<Round, ErrorData> {
        let mut answers = HashMap::new();
        let Some(state) = state else {
            return Ok(Round::new(
                answers,
                self.wait,
                None,
                None,
                shows,
                HashMap::new(),
            ));
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
        // Marked for twice the wait, so replicas' clocks may disagree. A
        // state naming a call let run only reads what the call did: it may
        // be sent again (should a retry's response be lost).
        let once = match sealed.ongoing {
            Some(_) => Ok(true),
            None => self.store.use_once(&sealed.once, 2 * self.wait).await,
        };
        match once {
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
        // What the client replies to a page answers nothing.
        let mut goes_on = sealed.ongoing.map(GoesOn::Ongoing);
        for (key, question) in &sealed.asked {
            let reply = responses
                .and_then(|responses| responses.get(key))
                .map_or(Reply::NoAnswer, elicit::reply_of);
            answers.insert(question.clone(), reply);
            if let Some(id) = &sealed.held {
                goes_on = Some(GoesOn::Held(id.clone(), reply));
            }
        }
        let referred = sealed
            .elsewhere
            .into_iter()
            .filter_map(|elsewhere| {
                let referred = match (elsewhere.reply, elsewhere.id) {
                    (Some(reply), _) => Referred::Decided(reply_named(&reply)),
                    (None, Some(id)) => Referred::Waiting(id),
                    (None, None) => return None,
                };
                Some((elsewhere.question, referred))
            })
            .collect();
        Ok(Round::new(
            answers,
            self.wait,
            goes_on,
            sealed.script,
            shows,
            referred,
        ))
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
        let (deferred, referrals) = (round.deferred(), round.referrals());
        if deferred.is_empty() && referrals.is_empty() {
            return None;
        }
        let answers = round.carried(binding, interpreter);
        let (mut requests, mut sealed) = self.sealed(&deferred, answers, binding, None);
        for (question, reply) in round.decided(binding, interpreter) {
            if let Some(reply) = name_of(reply) {
                sealed.elsewhere.push(Elsewhere {
                    question,
                    id: None,
                    reply: Some(reply.into()),
                });
            }
        }
        for (number, referral) in referrals.iter().enumerate() {
            let request =
                json!({"method": "elicitation/create", "params": elicit::pointer(referral)});
            let request: InputRequest =
                serde_json::from_value(request).expect("a URL-mode elicitation request");
            requests.insert(format!("wasm-agent-page-{}", number + 1), request);
            sealed.elsewhere.push(Elsewhere {
                question: referral.question.key(),
                id: Some(referral.id.clone()),
                reply: None,
            });
        }
        sealed.script = script;
        Some(self.finish((requests, sealed)))
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

    /// The input-required result of a running call let run as
    /// `ongoing.call` while operators decide its question: the person is
    /// sent to the question's page, and the retry collects what it did.
    pub fn ongoing(&self, ongoing: Ongoing, binding: &Binding) -> InputRequiredResult {
        let (mut requests, mut sealed) = self.sealed(&[], Vec::new(), binding, None);
        let page = elicit::page(&ongoing.page, &ongoing.url, &ongoing.message);
        let request = json!({"method": "elicitation/create", "params": page});
        let request: InputRequest =
            serde_json::from_value(request).expect("a URL-mode elicitation request");
        requests.insert("wasm-agent-page-1".into(), request);
        sealed.ongoing = Some(ongoing);
        self.finish((requests, sealed))
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
            elsewhere: Vec::new(),
            held,
            ongoing: None,
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
    } else if sealed.version != binding.version && sealed.held.is_none() && sealed.ongoing.is_none()
    {
        // (A call held or let run goes on with the version it started on.)
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
    use wasm_agent_sandbox::ask::{Referral, Subject};

    pub(super) fn question(running: bool) -> Question {
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

    pub(super) fn referral() -> Referral {
        Referral {
            question: question(false),
            id: "q1".into(),
            url: "http://127.0.0.1:1/console/approvals/q1".into(),
            message: "An operator decides this".into(),
        }
    }

    #[tokio::test]
    async fn a_page_goes_out_with_the_answer_and_the_reply_to_it_is_no_answer() {
        let store = Arc::new(wasm_agent_session::InMemorySessionStore::default());
        let rounds = Rounds::new(StateKeys::random(), store, Duration::from_secs(30));
        let mut binding = Binding {
            principal: "alice".into(),
            tenant: "acme".into(),
            tool: "t".into(),
            version: "sha256:00".into(),
            arguments: "sha256:11".into(),
            session: String::new(),
            handle: None,
        };
        let shows = Shows {
            forms: true,
            pages: true,
        };
        let first = rounds.open(None, None, &mut binding, shows).await.unwrap();
        let asker = first.asking(None).asker().clone();
        assert_eq!(asker.refer_later(&referral()).as_deref(), Some("q1"));
        let sent = rounds
            .input_required(&first, &binding, None, false)
            .unwrap();
        let sent = serde_json::to_value(&sent).unwrap();
        let requests = sent["inputRequests"].as_object().unwrap();
        let (key, request) = requests.iter().next().unwrap();
        assert_eq!(request["params"]["mode"], "url");
        assert_eq!(request["params"]["elicitationId"], "q1");
        assert_eq!(request["params"]["url"], referral().url);
        // The client claims an approval: no answer is recorded; the retry
        // brings the question's id where it is decided, for that question only.
        let claimed = InputResponses::from([(
            key.clone(),
            json!({"action": "accept", "content": {"decision": "allow_once"}}),
        )]);
        let state = sent["requestState"].as_str().unwrap();
        let retry = rounds
            .open(Some(state), Some(&claimed), &mut binding, shows)
            .await
            .unwrap();
        assert!(retry.answers().is_empty(), "{:?}", retry.answers());
        let asker = retry.asking(None).asker().clone();
        assert_eq!(asker.referred(&question(true)), None);
        assert_eq!(
            asker.referred(&question(false)),
            Some(Referred::Waiting("q1".into()))
        );
        assert_eq!(asker.referred(&question(false)), None, "taken once");
        assert_eq!(
            asker.ask(&question(false)).await,
            Reply::Later,
            "not approved"
        );
        // Decided there while the call stopped again for another question:
        // the reply goes with the next answer, so it is not asked again.
        asker.decided_elsewhere(&question(false), Reply::Once);
        let other = Referral {
            question: Question {
                tool: "other".into(),
                ..question(false)
            },
            id: "q2".into(),
            ..referral()
        };
        assert_eq!(asker.refer_later(&other).as_deref(), Some("q2"));
        let sent = rounds
            .input_required(&retry, &binding, None, false)
            .unwrap();
        let sent = serde_json::to_value(&sent).unwrap();
        let state = sent["requestState"].as_str().unwrap();
        let third = rounds
            .open(Some(state), None, &mut binding, shows)
            .await
            .unwrap();
        let asker = third.asking(None).asker().clone();
        assert_eq!(
            asker.referred(&question(false)),
            Some(Referred::Decided(Reply::Once))
        );
        assert_eq!(
            asker.referred(&other.question),
            Some(Referred::Waiting("q2".into()))
        );
    }
}
