//! Asking the client's user through MCP elicitation (`elicitation/create`,
//! form mode): whether a call that needs approval may run, or whether a tool
//! may use a capability its policy lists under `ask`. Only a client that
//! declared the elicitation capability is asked; the question goes on the
//! stream of the request it is about (stdout, or that POST's event stream),
//! and the answer comes back as a JSON-RPC response with our id: here, or,
//! over HTTP, to another replica, which relays it ([`Relay`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use rmcp::model::{InitializeRequestParams, NumberOrString, ProtocolVersion, RequestId};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use wasm_agent_sandbox::ask::{Asker, Question, Referral, Reply};

use super::relay::Relay;

/// Sends one message to the client on the stream of the request being
/// answered; whether it could be sent.
pub(crate) type SendMessage = Arc<dyn Fn(Value) -> bool + Send + Sync>;

/// The client's answer to one of our requests: its result, or its error.
type Response = Result<Value, Value>;

/// Most of our requests one client may have unanswered (each call asks one
/// question at a time, and a session's questions take turns).
const MAX_PENDING: usize = 64;

/// What the client declared in `initialize`, and our requests it has yet
/// to answer.
#[derive(Default)]
pub(crate) struct ClientRequests {
    /// The revision spoken, when the client can answer form elicitations.
    elicitation: OnceLock<Option<ProtocolVersion>>,
    /// Whether the client can send its user to a page (URL-mode
    /// elicitation, 2025-11-25 and later).
    url: OnceLock<bool>,
    pending: Mutex<HashMap<String, oneshot::Sender<Response>>>,
    /// Where answers that reach another replica are left for us.
    relay: OnceLock<Arc<Relay>>,
}

impl ClientRequests {
    /// Notes what the client declared (`version` is the revision agreed).
    pub fn initialized(&self, request: &InitializeRequestParams, version: &ProtocolVersion) {
        let form = request
            .capabilities
            .elicitation
            .as_ref()
            // An empty capability (2025-06-18) means forms.
            .is_some_and(|e| e.form.is_some() || e.url.is_none());
        let _ = self.elicitation.set(form.then(|| version.clone()));
        let url = request
            .capabilities
            .elicitation
            .as_ref()
            .is_some_and(|e| e.url.is_some());
        let _ = self
            .url
            .set(url && version.as_str() >= ProtocolVersion::V_2025_11_25.as_str());
    }

    /// Whether the client's user can be sent to a page (URL mode).
    pub fn can_point(&self) -> bool {
        self.url.get().copied().unwrap_or(false)
    }

    /// Answers to our requests that reach another replica come through
    /// `relay`, and responses to other replicas' requests go to it.
    pub fn relay_through(&self, relay: Relay) {
        let _ = self.relay.set(Arc::new(relay));
    }

    /// Where this client's answers and cancellations that reach another
    /// replica go, if anywhere.
    pub fn relay(&self) -> Option<Arc<Relay>> {
        self.relay.get().cloned()
    }

    /// Whether the client's user can be asked.
    pub fn can_elicit(&self) -> bool {
        self.elicitation.get().is_some_and(Option::is_some)
    }

    /// A response from the client: to one of our requests if it is
    /// pending here, else relayed to the replica that asked.
    pub fn answered(&self, id: &RequestId, response: Response) {
        let key = match id {
            NumberOrString::String(text) => text.to_string(),
            NumberOrString::Number(n) => n.to_string(),
        };
        let waiting = self.lock().remove(&key);
        match (waiting, self.relay.get()) {
            (Some(waiting), _) => {
                let _ = waiting.send(response);
            }
            (None, Some(relay)) if key.starts_with(ID_PREFIX) => {
                let response = match response {
                    Ok(result) => json!({"result": result}),
                    Err(error) => json!({"error": error}),
                };
                relay.deliver(&key, response);
            }
            (None, _) => {}
        }
    }

    /// Sends request `method` through `send` and waits for the answer;
    /// `None` when it could not be sent or the client went away. Dropping
    /// the future withdraws the request (the client is told it was
    /// cancelled).
    async fn request(&self, send: &SendMessage, method: &str, params: Value) -> Option<Response> {
        // Unique across replicas: the answer may reach any of them.
        let id = format!("{ID_PREFIX}{}", uuid::Uuid::new_v4().simple());
        let (answer, answered) = oneshot::channel();
        {
            let mut pending = self.lock();
            if pending.len() >= MAX_PENDING {
                return None;
            }
            pending.insert(id.clone(), answer);
        }
        let relay = self.relay.get().cloned();
        let mut withdraw = Withdraw {
            requests: self,
            send,
            id: Some(id.clone()),
            relay: relay.clone(),
        };
        if let Some(relay) = &relay {
            relay.expect(&id).await;
        }
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if !send(message) {
            return None;
        }
        let response = match &relay {
            None => answered.await.ok(),
            Some(relay) => tokio::select! {
                answer = answered => answer.ok(),
                mail = relay.answer(&id) => Some(match mail {
                    Value::Object(mut mail) if mail.contains_key("error") => {
                        Err(mail.remove("error").unwrap_or_default())
                    }
                    mail => Ok(mail.get("result").cloned().unwrap_or_default()),
                }),
            },
        };
        self.lock().remove(&id);
        if let Some(relay) = &relay {
            relay.forget(&id);
        }
        withdraw.id = None;
        response
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<Response>>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The ids of our requests (a uuid follows).
const ID_PREFIX: &str = "wasm-agent-";

/// Withdraws a request that was not answered when dropped.
struct Withdraw<'a> {
    requests: &'a ClientRequests,
    send: &'a SendMessage,
    id: Option<String>,
    relay: Option<Arc<Relay>>,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        if let Some(relay) = &self.relay {
            relay.forget(&id);
        }
        if self.requests.lock().remove(&id).is_some() {
            (self.send)(json!({
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": id, "reason": "no answer in time, or the call ended"},
            }));
        }
    }
}

/// Asks the user of one client, on the stream of one request.
pub(crate) struct Elicitor {
    pub(crate) requests: Arc<ClientRequests>,
    pub(crate) send: SendMessage,
}

/// The values of the form's one field.
const ALLOW_ONCE: &str = "allow_once";
const ALLOW_SESSION: &str = "allow_session";
const DENY: &str = "deny";

#[async_trait::async_trait]
impl Asker for Elicitor {
    async fn ask(&self, question: &Question) -> Reply {
        let Some(Some(version)) = self.requests.elicitation.get() else {
            return Reply::Unavailable;
        };
        let params = form(question, version);
        match self
            .requests
            .request(&self.send, "elicitation/create", params)
            .await
        {
            None | Some(Err(_)) => Reply::Unavailable,
            Some(Ok(result)) => reply_of(&result),
        }
    }

    fn who(&self) -> String {
        "the MCP client's user (elicitation)".into()
    }

    async fn point_to(&self, referral: &Referral) {
        if !self.requests.can_point() {
            return;
        }
        let params = pointer(referral);
        // Whether the user agreed to open it does not matter: the answer
        // comes from the page.
        let _ = self
            .requests
            .request(&self.send, "elicitation/create", params)
            .await;
    }

    fn answered_elsewhere(&self, id: &str) {
        if self.requests.can_point() {
            (self.send)(json!({
                "jsonrpc": "2.0",
                "method": "notifications/elicitation/complete",
                "params": {"elicitationId": id},
            }));
        }
    }
}

/// The URL-mode `elicitation/create` parameters that send the person to
/// where `referral` is decided.
pub(crate) fn pointer(referral: &Referral) -> Value {
    page(&referral.id, &referral.url, &referral.message)
}

/// The URL-mode `elicitation/create` parameters sending the person to page
/// `url` (elicitation `id`), telling them `message`.
pub(crate) fn page(id: &str, url: &str, message: &str) -> Value {
    json!({"mode": "url", "message": message, "url": url, "elicitationId": id})
}

/// The `elicitation/create` parameters for `question`: its text and one
/// choice, titled where the revision allows (2025-11-25 and later).
pub(crate) fn form(question: &Question, version: &ProtocolVersion) -> Value {
    let mut choices = vec![(ALLOW_ONCE, "Allow once")];
    if question.offer_session {
        // Says what it covers: these exact arguments, this destination.
        choices.push((ALLOW_SESSION, question.session_choice()));
    }
    choices.push((DENY, "Deny"));
    let mut decision = json!({
        "type": "string",
        "title": "Decision",
        "description": "Only you can answer this; the model cannot.",
        "default": DENY,
    });
    if version.as_str() >= ProtocolVersion::V_2025_11_25.as_str() {
        decision["oneOf"] = choices
            .iter()
            .map(|(value, title)| json!({"const": value, "title": title}))
            .collect();
    } else {
        decision["enum"] = choices.iter().map(|(value, _)| json!(value)).collect();
        decision["enumNames"] = choices.iter().map(|(_, title)| json!(title)).collect();
    }
    json!({
        "message": question.text(),
        "requestedSchema": {
            "type": "object",
            "properties": {"decision": decision},
            "required": ["decision"],
        },
    })
}

/// The user's reply in an `ElicitResult`; anything unexpected denies.
pub(crate) fn reply_of(result: &Value) -> Reply {
    match result.get("action").and_then(Value::as_str) {
        Some("accept") => match result.pointer("/content/decision").and_then(Value::as_str) {
            Some(ALLOW_ONCE) => Reply::Once,
            Some(ALLOW_SESSION) => Reply::Session,
            _ => Reply::Deny,
        },
        Some("cancel") => Reply::Dismissed,
        _ => Reply::Deny,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_agent_sandbox::ask::Subject;

    fn question(offer_session: bool) -> Question {
        Question {
            tool: "drop_table".into(),
            subject: Subject::Call {
                summary: r#"{"table":"users"}"#.into(),
                version: "sha256:00".into(),
                arguments: "sha256:11".into(),
            },
            offer_session,
            running: false,
        }
    }

    #[test]
    fn forms_offer_the_session_only_when_enabled_and_title_choices_where_allowed() {
        let new = form(&question(true), &ProtocolVersion::V_2025_11_25);
        let choices = &new["requestedSchema"]["properties"]["decision"]["oneOf"];
        assert_eq!(choices.as_array().unwrap().len(), 3, "{new}");
        assert_eq!(
            choices[1]["title"], "Allow these exact arguments for this session",
            "{new}"
        );
        assert!(new["message"].as_str().unwrap().contains("drop_table"));
        let old = form(&question(false), &ProtocolVersion::V_2025_06_18);
        let decision = &old["requestedSchema"]["properties"]["decision"];
        assert_eq!(decision["enum"], json!([ALLOW_ONCE, DENY]));
        assert!(decision.get("oneOf").is_none());
    }

    #[test]
    fn replies_deny_unless_clearly_allowed() {
        let accept =
            |decision: &str| json!({"action": "accept", "content": {"decision": decision}});
        assert_eq!(reply_of(&accept(ALLOW_ONCE)), Reply::Once);
        assert_eq!(reply_of(&accept(ALLOW_SESSION)), Reply::Session);
        assert_eq!(reply_of(&accept("yes please")), Reply::Deny);
        assert_eq!(reply_of(&json!({"action": "decline"})), Reply::Deny);
        assert_eq!(reply_of(&json!({"action": "cancel"})), Reply::Dismissed);
        assert_eq!(reply_of(&json!({"action": "accept"})), Reply::Deny);
    }

    #[tokio::test]
    async fn unanswered_requests_are_withdrawn() {
        let requests = ClientRequests::default();
        let sent = Arc::new(Mutex::new(Vec::<Value>::new()));
        let log = sent.clone();
        let send: SendMessage = Arc::new(move |message| {
            log.lock().unwrap().push(message);
            true
        });
        let asking = requests.request(&send, "elicitation/create", json!({}));
        let timed_out = tokio::time::timeout(std::time::Duration::from_millis(20), asking).await;
        assert!(timed_out.is_err());
        assert!(requests.lock().is_empty());
        let sent = sent.lock().unwrap();
        assert_eq!(sent[0]["method"], "elicitation/create");
        assert_eq!(sent[1]["method"], "notifications/cancelled");
        assert_eq!(sent[1]["params"]["requestId"], sent[0]["id"]);
    }
}
