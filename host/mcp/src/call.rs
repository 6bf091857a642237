//! A `tools/call`, whichever transport and revision it came on: the lookup,
//! who its questions go to, the pipeline, and its result as MCP content (or,
//! over the sessionless revision, the questions the person must answer
//! first).

use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, InputResponses, ProgressNotificationParam,
    ProgressToken,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use wasm_agent_pipeline::{CallEvents, PipelineCaller, Progress, ToolCall, ToolSet, question};
use wasm_agent_sandbox::ask::Asking;
use wasm_agent_sandbox::budget::RequestBudget;
use wasm_agent_sandbox::context::CallContext;
use wasm_agent_sandbox::result::ErrorKind;

use super::cached;
use super::content;
use super::identity::Identity;
use super::input_required::Binding;
use super::server::McpServer;

/// Who a call's questions go to.
pub(crate) enum Ask {
    /// Nobody: the client cannot be asked.
    Nobody,
    /// The client's user, now, on the request's stream (elicitation).
    Now(Asking),
    /// The client's user, with the call's answer (input required); the
    /// retry brings the state and the answers.
    WithTheAnswer {
        state: Option<String>,
        responses: Option<InputResponses>,
    },
}

/// Whose call it is: its tool session, who asks, and who its questions go to.
pub(crate) struct ClientCall<'a> {
    pub(crate) session_id: &'a str,
    pub(crate) identity: &'a Identity,
    pub(crate) ask: Ask,
}

pub(crate) type SendProgress = Arc<dyn Fn(ProgressNotificationParam) + Send + Sync>;

impl McpServer {
    /// A `tools/call` in this connection's tool session, for its identity.
    pub(crate) async fn call_tool_request(
        &self,
        request: CallToolRequestParams,
        request_id: String,
        cancellation: CancellationToken,
        progress: Option<(ProgressToken, SendProgress)>,
        asking: Option<Asking>,
    ) -> Result<CallToolResponse, ErrorData> {
        let call = ClientCall {
            session_id: &self.session_id,
            identity: &self.identity,
            ask: asking.map_or(Ask::Nobody, Ask::Now),
        };
        self.call_tool_as(request, request_id, cancellation, progress, call)
            .await
    }

    /// A `tools/call` in tool session `call.session_id`, for
    /// `call.identity`. Progress goes to `progress` when the client asked.
    pub(crate) async fn call_tool_as(
        &self,
        request: CallToolRequestParams,
        request_id: String,
        cancellation: CancellationToken,
        progress: Option<(ProgressToken, SendProgress)>,
        call: ClientCall<'_>,
    ) -> Result<CallToolResponse, ErrorData> {
        let ClientCall {
            session_id,
            identity,
            ask,
        } = call;
        // In flight from here, so a graceful stop waits for it, even while
        // it waits for tools still loading.
        let Some(_in_flight) = self.shared().drain.begin_call() else {
            return Err(ErrorData::internal_error(
                "the server is shutting down; call again once it is back",
                None,
            ));
        };
        self.tools_loaded().await;
        let name = request.name.as_ref();
        let Some(tool) = self.shared().tools.tool(name) else {
            let unknown = self.shared().tools.unknown(name);
            return Err(ErrorData::invalid_params(unknown.message, None));
        };
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let version = tool.target.version().unwrap_or_default();
        let exact = question::exact(&arguments);
        let binding = Binding {
            identity,
            tool: name,
            version: &version,
            arguments: &exact,
        };
        let (asking, round) = match ask {
            Ask::Nobody => (None, None),
            Ask::Now(asking) => (Some(asking), None),
            Ask::WithTheAnswer { state, responses } => {
                let round = self
                    .shared()
                    .rounds
                    .open(state.as_deref(), responses.as_ref(), &binding)
                    .await?;
                (Some(round.asking()), Some(round))
            }
        };
        let caller = PipelineCaller::new(
            self.shared().pipeline.clone(),
            self.shared().callable.clone(),
            request_id.clone(),
        );
        let (calls, runs) = self.shared().request_budget;
        let mut context = CallContext::new()
            .session(session_id.to_string())
            .tool_caller(Arc::new(caller))
            .budget(RequestBudget::new(calls, runs));
        context.user_id = identity.principal.clone();
        context.tenant_id = identity.tenant.clone();
        context.cancellation = cancellation;
        if let Some(asking) = asking {
            context = context.asking(asking);
        }
        let mut call = ToolCall::new(tool, request_id, arguments, context);
        if let Some((token, send)) = progress {
            call = call.events(Arc::new(ProgressTo { token, send }));
        }
        let called = self.shared().pipeline.call(call).await;
        if let Some(round) = round
            && let Some(input) = self.shared().rounds.input_required(&round, &binding)
        {
            return Ok(input.into());
        }
        if called.error_kind() == Some(ErrorKind::UnknownTool) {
            // Removed between the lookup and the call.
            let message = called.result.err().map(|e| e.message).unwrap_or_default();
            return Err(ErrorData::invalid_params(message, None));
        }
        let cached = called.cached;
        let mut answer = content::call_result(&called.into_result(name));
        if cached {
            cached::mark_cached(&mut answer);
        }
        Ok(answer.into())
    }
}

/// A call's progress as `notifications/progress` with the client's token.
struct ProgressTo {
    token: ProgressToken,
    send: SendProgress,
}

impl CallEvents for ProgressTo {
    fn progress(&self, progress: Progress) {
        let mut update = ProgressNotificationParam::new(self.token.clone(), progress.progress);
        if let Some(total) = progress.total {
            update = update.with_total(total);
        }
        if let Some(message) = progress.message {
            update = update.with_message(message);
        }
        (self.send)(update);
    }
}
