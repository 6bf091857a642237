//! Tool sessions for the sessionless revision (2026-07-28): state that
//! lasts across calls travels in a handle the server mints and the caller
//! passes back as an ordinary argument, `_session`, which the listing adds
//! to every tool that keeps something between calls (session state, a kept
//! notebook instance). A handle is sealed with the request-state keys and
//! bound to its caller: another principal's handle, or one made up, is
//! refused.

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, MetaObject, SealOptions, Tool};
use serde_json::{Value, json};

use super::identity::Identity;
use super::state_keys::StateKeys;

/// The argument that carries a session handle.
pub const SESSION_ARGUMENT: &str = "_session";

/// Mints and checks session handles: a session id sealed with the
/// request-state keys, bound to the caller (its principal and tenant are
/// authenticated with it, not carried).
pub(crate) struct SessionHandles {
    keys: StateKeys,
}

impl SessionHandles {
    pub fn new(keys: StateKeys) -> Self {
        Self { keys }
    }

    /// A new session of `identity`: its tool session id and its handle.
    pub fn mint(&self, identity: &Identity) -> (String, String) {
        let session = uuid::Uuid::new_v4().simple().to_string();
        let caller = caller(identity);
        let options = SealOptions::new().associated_data(caller.as_bytes());
        let handle = self.keys.codec().seal_with(session.as_bytes(), &options);
        (session_id(&session), handle)
    }

    /// The tool session `handle` names, if it was given to `identity`.
    pub fn open(&self, handle: &Value, identity: &Identity) -> Result<String, ErrorData> {
        let refused = |why: &str| {
            ErrorData::invalid_params(
                format!("{SESSION_ARGUMENT} refused: {why}; leave it out to start a new session"),
                None,
            )
        };
        let Some(text) = handle.as_str() else {
            return Err(refused(
                "a session handle is a string from an earlier result",
            ));
        };
        let caller = caller(identity);
        let session = self
            .keys
            .codec()
            .open_with(text, caller.as_bytes())
            .ok()
            .and_then(|session| String::from_utf8(session).ok())
            .ok_or_else(|| {
                refused("it is not a handle this server gave this caller (or it was changed)")
            })?;
        Ok(session_id(&session))
    }
}

/// Who a handle is for, as the bytes it is bound to.
fn caller(identity: &Identity) -> String {
    json!([
        identity.principal.as_deref().unwrap_or_default(),
        identity.tenant.as_deref().unwrap_or_default()
    ])
    .to_string()
}

fn session_id(session: &str) -> String {
    format!("handle:{session}")
}

/// `tool` as a sessionless client sees it: with the optional `_session`
/// argument, unless its schema has one of its own.
pub(crate) fn with_session_argument(mut tool: Tool) -> Tool {
    let mut schema: JsonObject = (*tool.input_schema).clone();
    let properties = schema
        .entry("properties")
        .or_insert_with(|| Value::Object(Default::default()));
    let Some(properties) = properties.as_object_mut() else {
        return tool;
    };
    if properties.contains_key(SESSION_ARGUMENT) {
        return tool;
    }
    properties.insert(
        SESSION_ARGUMENT.into(),
        json!({
            "type": "string",
            "description": "The session handle an earlier result of this tool gave: continue \
                in that session (what it keeps between calls). Leave it out to start a new one.",
        }),
    );
    tool.input_schema = std::sync::Arc::new(schema);
    tool
}

/// `result` with the handle of the session it ran in, for the next call.
pub(crate) fn hand_over(result: &mut CallToolResult, handle: &str) {
    result.content.push(ContentBlock::text(format!(
        "To continue in this session, pass \"{SESSION_ARGUMENT}\": \"{handle}\" in the next call."
    )));
    let meta = result
        .meta
        .get_or_insert_with(|| MetaObject(Default::default()));
    meta.0.insert(
        super::handler::SESSION_META.into(),
        Value::String(handle.into()),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(principal: &str) -> Identity {
        Identity::from_tokens(principal.into(), Some("acme".into()))
    }

    #[test]
    fn handles_name_their_caller_and_cannot_be_made_up() {
        let handles = SessionHandles::new(StateKeys::random());
        let (session, handle) = handles.mint(&identity("alice"));
        assert_eq!(
            handles.open(&json!(handle), &identity("alice")).unwrap(),
            session
        );
        let theirs = handles.open(&json!(handle), &identity("bob")).unwrap_err();
        assert!(theirs.message.contains("gave this caller"), "{theirs:?}");
        assert!(handle.len() < 120, "{handle}");
        let mut changed = handle.clone();
        let last = changed.pop();
        changed.push(if last == Some('A') { 'B' } else { 'A' });
        for bad in [json!(changed), json!("made-up"), json!(42)] {
            assert!(handles.open(&bad, &identity("alice")).is_err(), "{bad}");
        }
        let other = SessionHandles::new(StateKeys::random());
        assert!(other.open(&json!(handle), &identity("alice")).is_err());
    }
}
