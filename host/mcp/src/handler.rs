//! rmcp's `ServerHandler` for [`McpServer`]: server info, `tools/list`,
//! `tools/call` (with the sessionless revision's identity and named tool
//! session), and tool-list notifications.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, SubscriptionFilter,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use tracing::Instrument;

use super::call::{Ask, ClientCall, SendProgress};
use super::handles::{self, SESSION_ARGUMENT};
use super::identity::Identity;
use super::input_required::Shows;
use super::server::McpServer;
use super::traced::{self, Origin};

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("wasm-agent", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Each tool runs in its own WebAssembly sandbox with only the files, \
                 hosts and environment its policy grants, under time and memory limits. \
                 A failed call comes back as an error result naming the limit or \
                 capability involved.",
            )
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let cursor = request.and_then(|r| r.cursor);
        let identity = self.identity_of(&context);
        let mut listing = self.list_tools_request(cursor.as_deref(), identity).await?;
        // State across calls travels in a handle passed as an argument.
        listing.tools = std::mem::take(&mut listing.tools)
            .into_iter()
            .map(|tool| match self.host().keeps_state(&tool.name) {
                true => handles::with_session_argument(tool),
                false => tool,
            })
            .collect();
        Ok(listing)
    }

    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let progress = context.meta.get_progress_token().map(|token| {
            let peer = context.peer.clone();
            let send: SendProgress = Arc::new(move |update| {
                let peer = peer.clone();
                tokio::spawn(async move {
                    if let Err(error) = peer.notify_progress(update).await {
                        tracing::debug!(%error, "cannot send progress");
                    }
                });
            });
            (token, send)
        });
        let request_id = context.id.to_string();
        // This handler serves the sessionless revision: who is calling comes
        // with each request (the gate put it there), and so does the tool
        // session, if the client names one.
        let identity = self.identity_of(&context).clone();
        let named = request
            .meta
            .as_ref()
            .and_then(|meta| meta.get(SESSION_META))
            .or_else(|| context.meta.get(SESSION_META));
        let named = named_session(named)?;
        // The tool session: the handle passed (a tool that keeps state), the
        // name in `_meta`, or a new one whose handle comes with the result.
        // Only a tool offered to clients may keep state for them (in code
        // mode, `run_code` is its interpreter; the others are not offered).
        let who = identity.who();
        let keeps_state = self.shared().offered(&request.name, &who).is_some()
            && self
                .host()
                .keeps_state(self.shared().host_name(&request.name, &who));
        let passed = match keeps_state {
            true => request
                .arguments
                .as_mut()
                .and_then(|arguments| arguments.remove(SESSION_ARGUMENT)),
            false => None,
        };
        let sessions = &self.shared().handles;
        // A retry runs in the session of the request it retries (its state
        // says which), unless it names one.
        let retrying = request.request_state.is_some();
        let (session_id, minted) = match (passed, named) {
            (Some(handle), _) => (sessions.open(&handle, &identity)?, None),
            (None, Some(name)) => (format!("named:{name}"), None),
            (None, None) if retrying => (String::new(), None),
            (None, None) if keeps_state => {
                let (session, handle) = sessions.mint(&identity);
                (session, Some(handle))
            }
            (None, None) => (self.session_id.clone(), None),
        };
        let cancellation = context.ct.child_token();
        let headers = context
            .extensions
            .get::<http::request::Parts>()
            .map(|parts| &parts.headers);
        let span = traced::tool_call(
            &request.name,
            &request_id,
            request.meta.as_ref().map(|meta| &meta.0.0),
            headers.map_or(Origin::STDIO, Origin::http),
        );
        // The sessionless revision asks with the call's answer (input
        // required), when the client can show a form or open a page; a
        // request state is checked whatever the client declares.
        let state = request.request_state.take();
        let responses = request.input_responses.take();
        let shows = context
            .client_capabilities()
            .map(|c| shown_by(&c))
            .unwrap_or_default();
        let ask = if state.is_some() || shows.forms || shows.pages {
            Ask::WithTheAnswer {
                state,
                responses,
                // A retry from a client that declares nothing is taken to
                // show what it was sent before.
                shows: match shows {
                    Shows {
                        forms: false,
                        pages: false,
                    } => Shows {
                        forms: true,
                        pages: true,
                    },
                    shows => shows,
                },
            }
        } else {
            Ask::Nobody
        };
        let answer = self
            .call_tool_as(
                request,
                request_id,
                cancellation,
                progress,
                ClientCall {
                    session_id: &session_id,
                    identity: &identity,
                    ask,
                    handle: minted,
                },
            )
            .instrument(span.clone())
            .await;
        traced::finish_call(&span, &answer);
        answer
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let peer = context.peer;
        self.forward_tool_changes_once(move || {
            let peer = peer.clone();
            async move { peer.notify_tool_list_changed().await.is_ok() }
        });
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed;
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        // The subscriber's own view: its identity comes with the request.
        let identity = self.identity_of(context.request_context()).clone();
        let forward = self.forward_tool_changes(&identity, || async {
            context.sink().notify_tool_list_changed().await.is_ok()
        });
        tokio::select! {
            _ = context.cancelled() => {}
            _ = forward => {}
        }
        Ok(())
    }
}

impl McpServer {
    /// Who sent the request of `context`: the sessionless revision's
    /// identity comes with each request (the gate put it there); other
    /// transports have the connection's.
    fn identity_of<'a>(&'a self, context: &'a RequestContext<RoleServer>) -> &'a Identity {
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Identity>())
            .unwrap_or(&self.identity)
    }
}

/// What a client's capabilities say it shows: elicitation forms (an empty
/// elicitation capability means forms) and URL-mode pages.
fn shown_by(capabilities: &rmcp::model::ClientCapabilities) -> Shows {
    let elicitation = capabilities.elicitation.as_ref();
    Shows {
        forms: elicitation.is_some_and(|e| e.form.is_some() || e.url.is_none()),
        pages: elicitation.is_some_and(|e| e.url.is_some()),
    }
}

/// The `_meta` key that names a tool session in sessionless requests.
pub const SESSION_META: &str = "io.wasm-agent/session";
/// Longest session name a client may give.
const MAX_SESSION_NAME: usize = 128;

/// The tool session a sessionless `tools/call` names in `_meta` (its state
/// is the caller's own: the owner is part of every key), if it names one.
fn named_session(value: Option<&Value>) -> Result<Option<String>, ErrorData> {
    let Some(value) = value else {
        return Ok(None);
    };
    match value.as_str() {
        Some(name) if !name.is_empty() && name.len() <= MAX_SESSION_NAME => {
            Ok(Some(name.to_string()))
        }
        _ => Err(ErrorData::invalid_params(
            format!("_meta[\"{SESSION_META}\"] must be a string of 1-{MAX_SESSION_NAME} bytes"),
            None,
        )),
    }
}
