//! A server's questions to the person behind the run (elicitation, or the
//! input a 2026-07-28 server requires before a call goes on): asked through
//! the run's [`Asking`] (the terminal under `wasm-agent run`) as what they
//! are, a server's words, and answered only when the form is one a yes or
//! no can fill: a choice with an "allow" value (wasm-agent's own approval
//! form), a single yes/no field, or no field at all. Any other form is
//! declined without asking: a terminal prompt cannot fill it.

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use wasm_agent_sandbox::ask::{Asking, Outcome, Subject};

/// Values of a choice that mean "allow", best first.
const ALLOWING: [&str; 5] = ["allow_once", "allow", "accept", "yes", "approve"];

/// The person's answer to `request` from server `server`.
pub(crate) async fn answer(
    asking: &Asking,
    server: &str,
    request: ElicitRequestParams,
) -> ElicitResult {
    let ElicitRequestParams::FormElicitationParams {
        message,
        requested_schema,
        ..
    } = request
    else {
        return ElicitResult::new(ElicitationAction::Decline);
    };
    let schema = serde_json::to_value(&requested_schema).unwrap_or(Value::Null);
    let Some(yes) = yes_content(&schema) else {
        tracing::info!(
            server,
            "a question whose form a yes or no cannot fill was declined"
        );
        return ElicitResult::new(ElicitationAction::Decline);
    };
    let subject = Subject::Remote { message };
    let asked = asking.ask(server, subject, &CancellationToken::new()).await;
    match asked.outcome {
        outcome if outcome.allowed() => {
            ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(yes))
        }
        Outcome::Denied => ElicitResult::new(ElicitationAction::Decline),
        _ => ElicitResult::new(ElicitationAction::Cancel),
    }
}

/// What "yes" fills `schema`'s form with, if a yes can fill it.
fn yes_content(schema: &Value) -> Option<Map<String, Value>> {
    let properties = schema.get("properties").and_then(Value::as_object);
    let Some(properties) = properties.filter(|p| !p.is_empty()) else {
        return Some(Map::new());
    };
    let [(name, field)] = properties.iter().collect::<Vec<_>>()[..] else {
        return None;
    };
    if field.get("type").and_then(Value::as_str) == Some("boolean") {
        return Some(Map::from_iter([(name.clone(), json!(true))]));
    }
    let choices: Vec<&str> = match (field.get("oneOf"), field.get("enum")) {
        (Some(Value::Array(options)), _) => options
            .iter()
            .filter_map(|o| o.get("const").and_then(Value::as_str))
            .collect(),
        (_, Some(Value::Array(values))) => values.iter().filter_map(Value::as_str).collect(),
        _ => return None,
    };
    let allow = ALLOWING.iter().find(|value| choices.contains(value))?;
    Some(Map::from_iter([(name.clone(), json!(allow))]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_forms_a_yes_can_fill_are_answered() {
        let ours = json!({"type": "object", "properties": {"decision": {"type": "string",
            "oneOf": [{"const": "allow_once"}, {"const": "allow_session"}, {"const": "deny"}]}}});
        assert_eq!(yes_content(&ours).unwrap()["decision"], "allow_once");
        let older =
            json!({"properties": {"decision": {"type": "string", "enum": ["deny", "allow_once"]}}});
        assert_eq!(yes_content(&older).unwrap()["decision"], "allow_once");
        let confirm = json!({"properties": {"ok": {"type": "boolean"}}});
        assert_eq!(yes_content(&confirm).unwrap()["ok"], true);
        assert_eq!(yes_content(&json!({"type": "object"})).unwrap().len(), 0);
        let name = json!({"properties": {"name": {"type": "string"}}});
        assert!(yes_content(&name).is_none());
        let two = json!({"properties": {"a": {"type": "boolean"}, "b": {"type": "boolean"}}});
        assert!(yes_content(&two).is_none());
        let no_allow = json!({"properties": {"color": {"enum": ["red", "blue"]}}});
        assert!(yes_content(&no_allow).is_none());
    }
}
