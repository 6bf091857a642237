//! A `tools/call`, whichever transport and revision it came on: the lookup,
//! who its questions go to, the pipeline, and its result as MCP content (or,
//! over the sessionless revision, the questions the person must answer
//! first).

use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, InputResponses,
    ProgressNotificationParam, ProgressToken,
};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use wasm_agent_pipeline::{CallEvents, Called, PipelineCaller, Progress, ToolCall, question};
use wasm_agent_sandbox::ask::{Asking, Referral, Reply, SharedAnswers};
use wasm_agent_sandbox::budget::RequestBudget;
use wasm_agent_sandbox::context::CallContext;
use wasm_agent_sandbox::pause::ScriptPauses;
use wasm_agent_sandbox::result::ErrorKind;

use super::answers::StoredAnswers;
use super::cached;
use super::content;
use super::handles;
use super::held::{Continue, Next, Paused, Running};
use super::identity::Identity;
use super::input_required::{Binding, GoesOn, Ongoing, Round, Shows};
use super::server::{McpServer, Shared};

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
        shows: Shows,
    },
}

/// Whose call it is: its tool session, who asks, and who its questions go to.
pub(crate) struct ClientCall<'a> {
    /// Empty for a retry that runs in the session its request state names.
    pub(crate) session_id: &'a str,
    pub(crate) identity: &'a Identity,
    pub(crate) ask: Ask,
    /// The handle of a session started for this call, handed over with its
    /// result (sessionless callers).
    pub(crate) handle: Option<String>,
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
            handle: None,
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
            handle,
        } = call;
        // In flight from here, so a graceful stop waits for it, even while
        // it waits for tools still loading.
        let Some(in_flight) = self.shared().drain.begin_call() else {
            return Err(ErrorData::internal_error(
                "the server is shutting down; call again once it is back",
                None,
            ));
        };
        self.tools_loaded().await;
        let name = request.name.to_string();
        let who = identity.who();
        let Some(tool) = self.shared().offered(&name, &who) else {
            let unknown = self.shared().not_offered(&name, &who);
            return Err(ErrorData::invalid_params(unknown.message, None));
        };
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        // Known now, of the version the call runs on.
        let interpreter = self
            .host()
            .is_interpreter(self.shared().host_name(&name, &who));
        // What a request state is bound to, worked out only for a round.
        let mut binding = Binding::new(identity, &name, String::new(), String::new());
        binding.session = session_id.to_string();
        binding.handle = handle;
        let (asking, round) = match ask {
            Ask::Nobody => (None, None),
            Ask::Now(asking) => (Some(asking), None),
            Ask::WithTheAnswer {
                state,
                responses,
                shows,
            } => {
                binding.version = tool.target.version().unwrap_or_default();
                binding.arguments = question::exact(&arguments);
                let round = self
                    .shared()
                    .rounds
                    .open(state.as_deref(), responses.as_ref(), &mut binding, shows)
                    .await?;
                if binding.session.is_empty() {
                    // A state that named no session: one of its own.
                    binding.session = format!("mcp-{}", uuid::Uuid::new_v4());
                }
                match round.goes_on() {
                    Some(GoesOn::Held(held, reply)) => {
                        let resumed = self.shared().holds.resume(held, *reply).await;
                        return Ok(handed_over(resumed?, &binding));
                    }
                    Some(GoesOn::Ongoing(ongoing)) => {
                        let collected = self.shared().holds.collect(&ongoing.call, &cancellation);
                        let response = match collected.await? {
                            Some(response) => response?,
                            // Still waiting: the person is sent to the page again.
                            None => self
                                .shared()
                                .rounds
                                .ongoing(ongoing.clone(), &binding)
                                .into(),
                        };
                        return Ok(handed_over(response, &binding));
                    }
                    None => {}
                }
                // "For this session" only in a session that outlives the call.
                let named = ["named:", "handle:"]
                    .iter()
                    .any(|kind| binding.session.starts_with(kind));
                let shared: Option<Arc<dyn SharedAnswers>> = (self.shared().offer_session && named)
                    .then(|| {
                        StoredAnswers::new(
                            self.host().session_store().clone(),
                            identity,
                            &binding.session,
                        ) as Arc<dyn SharedAnswers>
                    });
                (Some(round.asking(shared)), Some(round))
            }
        };
        let caller = PipelineCaller::new(
            self.shared().pipeline.clone(),
            self.shared().callable.clone(),
            request_id.clone(),
        );
        let (calls, runs) = self.shared().request_budget;
        let mut context = CallContext::new()
            .session(binding.session.clone())
            .tool_caller(Arc::new(caller))
            .budget(RequestBudget::new(calls, runs));
        context.user_id = identity.principal.clone();
        context.tenant_id = identity.tenant.clone();
        context.credentials = Some(identity.credentials.clone());
        if let Some(asking) = asking {
            context = context.asking(asking);
        }
        let Some(round) = round else {
            context.cancellation = cancellation;
            let mut call = ToolCall::new(tool, request_id, arguments, context);
            if let Some((token, send)) = progress {
                call = call.events(Arc::new(ProgressTo { token, send }));
            }
            let called = self.shared().pipeline.call(call).await;
            return answer_of(called, &name).map(|answer| handed_over(answer.into(), &binding));
        };
        // A script may stop for the answer, and the retry goes on with it.
        let script_pauses = Arc::new(ScriptPauses::default());
        if let Some(id) = round.script() {
            let pause = self.shared().paused.take(id, &binding).await?;
            script_pauses.resume_with(pause);
        }
        context = context.pausing(script_pauses.clone());
        // A call that may be held outlives this request: it has its own
        // cancellation, which the request's reaches until it is held.
        let call_cancellation = CancellationToken::new();
        context.cancellation = call_cancellation.clone();
        let mut call = ToolCall::new(tool, request_id, arguments, context);
        if let Some((token, send)) = progress {
            call = call.events(Arc::new(ProgressTo { token, send }));
        }
        let (pauses, questions) = mpsc::channel(1);
        round.pause_with(pauses);
        let shared = self.shared_arc();
        let tool_name = name.clone();
        let running = async move {
            let called = shared.pipeline.call(call).await;
            answer_of(called, &tool_name)
        };
        let task = self.shared().calls.spawn(running);
        let mut running = Running {
            task,
            questions,
            place: None,
            _in_flight: Some(in_flight),
            _cancel_on_drop: call_cancellation.clone().drop_guard(),
        };
        let next = tokio::select! {
            biased;
            () = cancellation.cancelled() => running.cancel(&call_cancellation).await,
            next = running.next() => next,
        };
        // A request cancelled as its call stopped for a question: the call
        // is cancelled, not held.
        let next = match next {
            Next::Paused(_) | Next::Referred(_) if cancellation.is_cancelled() => {
                if let Next::Paused(paused) = next {
                    let _ = paused.reply.send(Reply::Unavailable);
                }
                running.cancel(&call_cancellation).await
            }
            next => next,
        };
        let go_on = GoOn {
            shared: self.shared_arc(),
            binding: binding.clone(),
            interpreter: interpreter || round.script().is_some(),
            round: Arc::new(round),
            script_pauses,
            name,
        };
        let response = match next {
            Next::Ended(answer) => go_on.ended(answer).await,
            Next::Paused(paused) => go_on.hold(running, paused).await,
            Next::Referred(referral) => go_on.let_run(running, referral).await,
        };
        response.map(|response| handed_over(response, &binding))
    }
}

/// `response` with the handle of the session its call ran in, when that
/// session was started for it (a result; not a question).
fn handed_over(mut response: CallToolResponse, binding: &Binding) -> CallToolResponse {
    if let (Some(handle), CallToolResponse::Complete(result)) = (&binding.handle, &mut response) {
        handles::hand_over(result, handle);
    }
    response
}

/// What becomes of a call of a round: its result, the questions it stopped
/// for (a script's kept pause named with them), or, for a running call,
/// held where it paused (or let run while operators decide its question)
/// and, after its answer, any of these again.
#[derive(Clone)]
struct GoOn {
    shared: Arc<Shared>,
    binding: Binding,
    round: Arc<Round>,
    /// Where a script leaves its pause.
    script_pauses: Arc<ScriptPauses>,
    /// The tool's name as the client called it.
    name: String,
    /// Whether the tool is an interpreter's (its calls are scripts).
    interpreter: bool,
}

impl GoOn {
    /// The response of the call once it ended: the questions it stopped
    /// for, if it did (a script's pause kept for the retry), else `answer`.
    async fn ended(
        &self,
        answer: Result<CallToolResult, ErrorData>,
    ) -> Result<CallToolResponse, ErrorData> {
        let script = match self.script_pauses.take_paused() {
            Some(pause) => match self.shared.paused.keep(&pause, &self.binding).await {
                Ok(id) => Some(id),
                Err(error) => return Ok(refused(&self.name, error).into()),
            },
            // A script that ran and kept no pause (it was cancelled) must
            // not start again under the answers given: its answer stands.
            None if self.script_pauses.started() => return answer.map(Into::into),
            None => None,
        };
        let rounds = &self.shared.rounds;
        match rounds.input_required(&self.round, &self.binding, script, self.interpreter) {
            Some(input) => Ok(input.into()),
            None => answer.map(Into::into),
        }
    }

    /// Holds the call paused at `paused`: the input-required result of its
    /// question. A caller holding as many calls as it may is not asked: the
    /// call goes on without what it asked for.
    fn hold(
        self,
        running: Running,
        paused: Paused,
    ) -> BoxFuture<'static, Result<CallToolResponse, ErrorData>> {
        Box::pin(async move {
            if paused.reply.is_closed() {
                // Its asker gave up waiting: nothing to hold it for.
                return self.after(running).await;
            }
            let question = paused.question.clone();
            let (caller, next) = self.continued();
            match self.shared.holds.hold(&caller, running, paused, next).await {
                Ok(held) => Ok(self
                    .shared
                    .rounds
                    .held(
                        &question,
                        &self.round.carried(&self.binding, self.interpreter),
                        &self.binding,
                        held,
                    )
                    .into()),
                Err((running, paused)) => {
                    let _ = paused.reply.send(Reply::Unavailable);
                    self.after(running).await
                }
            }
        })
    }

    /// Lets the call run on while operators decide its question, sending
    /// the person to its page: the retry collects what it did. A caller
    /// with as many calls held as it may waits in the request.
    fn let_run(
        self,
        running: Running,
        referral: Referral,
    ) -> BoxFuture<'static, Result<CallToolResponse, ErrorData>> {
        Box::pin(async move {
            let (caller, next) = self.continued();
            match self.shared.holds.let_run(&caller, running, next).await {
                Ok(call) => {
                    let ongoing = Ongoing::new(call, &referral);
                    Ok(self.shared.rounds.ongoing(ongoing, &self.binding).into())
                }
                Err(running) => self.after(running).await,
            }
        })
    }

    /// Who the call's holds count against, and how it goes on once its
    /// question is answered.
    fn continued(&self) -> (String, Continue) {
        let caller = format!("{}\0{}", self.binding.tenant, self.binding.principal);
        let then = self.clone();
        (caller, Arc::new(move |running| then.clone().after(running)))
    }

    /// What the call did once answered, as the retry's response.
    fn after(
        self,
        mut running: Running,
    ) -> BoxFuture<'static, Result<CallToolResponse, ErrorData>> {
        Box::pin(async move {
            match running.next().await {
                Next::Ended(answer) => self.ended(answer).await,
                Next::Paused(paused) => self.hold(running, paused).await,
                Next::Referred(referral) => self.let_run(running, referral).await,
            }
        })
    }
}

/// The result of a call of `name` refused with `error`.
fn refused(name: &str, error: wasm_agent_sandbox::result::CallError) -> CallToolResult {
    let called = Called::new(Err(error), String::new());
    content::call_result(&called.into_result(name))
}

/// A finished call as its MCP result.
fn answer_of(called: Called, name: &str) -> Result<CallToolResult, ErrorData> {
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
    Ok(answer)
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
