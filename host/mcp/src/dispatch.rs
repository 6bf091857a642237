//! One MCP client's messages, whichever transport carries them (a stdio
//! connection, an HTTP session): parsing, answering each request through the
//! [`McpServer`], and cancelling calls in flight.

use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CancelledNotificationParam, EmptyResult, ErrorCode, ErrorData,
    InitializeRequestParams, PaginatedRequestParams, ProgressNotification,
    ProgressNotificationParam, ProtocolVersion, RequestId, ServerJsonRpcMessage,
    ServerNotification, ServerResult,
};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::call::SendProgress;
use super::elicit::{ClientRequests, Elicitor, SendMessage};
use super::server::McpServer;
use super::traced::{self, Origin};

/// Most calls of one client in flight at once; more are refused.
const MAX_IN_FLIGHT: usize = 1024;
/// Most calls in flight in the whole server (every client); more are refused.
const MAX_SERVER_IN_FLIGHT: usize = 8192;
/// Most `tools/list` requests of one client waiting for tools still loading.
const MAX_LISTINGS: usize = 64;

/// One JSON-RPC message from the client, with its parameters left unparsed
/// until the method says what they are.
#[derive(Deserialize)]
pub(crate) struct Message<'a> {
    #[serde(default)]
    pub id: Option<RequestId>,
    #[serde(default, borrow)]
    pub method: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    /// A response's result (to a request of ours).
    #[serde(default, borrow)]
    result: Option<&'a RawValue>,
    /// A response's error.
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
}

impl<'a> Message<'a> {
    /// Parses one message from raw bytes (an HTTP body).
    pub fn parse_bytes(bytes: &'a [u8]) -> Result<Self, ErrorData> {
        let text = std::str::from_utf8(bytes)
            .map_err(|error| ErrorData::new(ErrorCode::PARSE_ERROR, error.to_string(), None))?;
        Self::parse(text)
    }

    /// Parses one message; a parse error is what JSON-RPC answers with.
    pub fn parse(text: &'a str) -> Result<Self, ErrorData> {
        // serde would take an array for the struct too.
        if !text.trim_start().starts_with('{') {
            return Err(ErrorData::new(
                ErrorCode::INVALID_REQUEST,
                "a message is one JSON-RPC object (batches are not supported)",
                None,
            ));
        }
        let message: Self = serde_json::from_str(text)
            .map_err(|error| ErrorData::new(ErrorCode::PARSE_ERROR, error.to_string(), None))?;
        if message.id.is_none() && message.method.is_none() {
            return Err(ErrorData::new(
                ErrorCode::INVALID_REQUEST,
                "a message needs a method (a request or notification) or an id (a response)",
                None,
            ));
        }
        Ok(message)
    }

    /// The parameters as JSON text (`{}` when there are none).
    pub fn params(&self) -> &'a str {
        self.params.map_or("{}", RawValue::get)
    }
}

/// A boxed, sendable future.
pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// How a request is answered.
pub(crate) enum Answer {
    /// At once.
    Now(Box<Result<ServerResult, ErrorData>>),
    /// By this future; `None` when the client cancelled the request, which
    /// then gets no response.
    Later(BoxFuture<Option<Result<ServerResult, ErrorData>>>),
}

/// Sends a notification to the client outside any request; whether the
/// client can still be reached.
pub(crate) type Notify = Arc<dyn Fn(ServerNotification) -> BoxFuture<bool> + Send + Sync>;

/// The requests of one client.
#[derive(Clone)]
pub(crate) struct Dispatcher {
    server: Arc<McpServer>,
    /// Each call in flight by request id: its number (ids can be reused
    /// once a call was cancelled) and its cancellation.
    in_flight: Arc<Mutex<HashMap<RequestId, (u64, CancellationToken)>>>,
    /// Numbers the calls.
    calls: Arc<std::sync::atomic::AtomicU64>,
    /// Listings being answered.
    listings: Arc<std::sync::atomic::AtomicUsize>,
    /// Cancelled once the client is gone.
    closed: CancellationToken,
    /// What the client declared, and our requests it has yet to answer.
    client: Arc<ClientRequests>,
}

impl Dispatcher {
    /// The requests of the client `server` handles.
    pub fn new(server: McpServer) -> Self {
        Self {
            server: Arc::new(server),
            in_flight: Arc::default(),
            calls: Arc::default(),
            listings: Arc::default(),
            closed: CancellationToken::new(),
            client: Arc::default(),
        }
    }

    /// A response from the client (a message with an id and no method) to
    /// one of our requests.
    pub fn responded(&self, message: &Message<'_>) {
        let Some(id) = &message.id else { return };
        let parsed = |raw: Option<&RawValue>| {
            raw.and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
        };
        let response = match parsed(message.error) {
            Some(error) => Err(error),
            None => Ok(parsed(message.result).unwrap_or(Value::Null)),
        };
        self.client.answered(id, response);
    }

    /// Answers to this client's questions may come through another
    /// replica (see [`Relay`](super::relay::Relay)).
    pub fn relay_through(&self, relay: super::relay::Relay) {
        self.client.relay_through(relay);
    }

    /// What the client declared in the `initialize` it sent to the replica
    /// that opened its session.
    pub fn restore(&self, initialize: &Value) {
        if let Ok(request) = serde_json::from_value::<InitializeRequestParams>(initialize.clone()) {
            let version = negotiate(&request.protocol_version);
            self.client.initialized(&request, &version);
        }
    }

    /// Whether the client's user can be asked or sent to a page (it
    /// declared elicitation, form or URL mode).
    pub fn can_elicit(&self) -> bool {
        self.client.can_elicit() || self.client.can_point()
    }

    /// The client's handler.
    pub fn server(&self) -> &McpServer {
        &self.server
    }

    /// The client is gone: its calls in flight are cancelled.
    pub fn close(&self) {
        self.closed.cancel();
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// The answer to request `id`, which came in from `origin`. `outbound`
    /// makes the channel to the client for messages about the request (its
    /// progress, our questions to the user); it is called only for a call
    /// that asked for progress or whose user can be asked.
    pub fn answer(
        &self,
        id: RequestId,
        method: &str,
        params: &str,
        outbound: impl FnOnce() -> SendMessage,
        origin: Origin<'_>,
    ) -> Answer {
        let span = traced::request(method, &id, params, origin);
        if span.is_disabled() {
            return self.answer_in_span(id, method, params, outbound);
        }
        let answer = span.in_scope(|| self.answer_in_span(id, method, params, outbound));
        match answer {
            Answer::Now(answer) => {
                traced::finish(&span, &answer);
                Answer::Now(answer)
            }
            Answer::Later(answer) => Answer::Later(Box::pin(async move {
                let answer = answer.instrument(span.clone()).await;
                if let Some(answer) = &answer {
                    traced::finish(&span, answer);
                }
                answer
            })),
        }
    }

    fn answer_in_span(
        &self,
        id: RequestId,
        method: &str,
        params: &str,
        outbound: impl FnOnce() -> SendMessage,
    ) -> Answer {
        Answer::Now(Box::new(match method {
            "initialize" => parse::<InitializeRequestParams>(params).map(|request| {
                let mut info = self.server.get_info();
                info.protocol_version = negotiate(&request.protocol_version);
                self.client.initialized(&request, &info.protocol_version);
                ServerResult::InitializeResult(info)
            }),
            "ping" => Ok(ServerResult::EmptyResult(EmptyResult {})),
            "tools/list" => match parse::<Option<PaginatedRequestParams>>(params) {
                Ok(request) => return self.list_tools(request.and_then(|r| r.cursor)),
                Err(error) => Err(error),
            },
            "tools/call" => match parse::<CallToolRequestParams>(params) {
                Ok(request) => return self.start_call(id, request, outbound),
                Err(error) => Err(error),
            },
            _ => Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("this server has no method {:?}", shorten(method)),
                None,
            )),
        }))
    }

    /// A listing (it may wait for tools still loading).
    fn list_tools(&self, cursor: Option<String>) -> Answer {
        use std::sync::atomic::Ordering;
        if self.listings.fetch_add(1, Ordering::AcqRel) >= MAX_LISTINGS {
            self.listings.fetch_sub(1, Ordering::AcqRel);
            return Answer::Now(Box::new(Err(ErrorData::new(
                ErrorCode::INTERNAL_ERROR,
                format!("{MAX_LISTINGS} listings of this client are waiting already"),
                None,
            ))));
        }
        let (server, closed) = (self.server.clone(), self.closed.clone());
        let listing = Listing(self.listings.clone());
        Answer::Later(Box::pin(async move {
            let _listing = listing;
            tokio::select! {
                // Nobody is left to read it.
                () = closed.cancelled() => None,
                listed = server.list_tools_request(cursor.as_deref(), &server.identity) => {
                    Some(listed.map(ServerResult::ListToolsResult))
                }
            }
        }))
    }

    /// A call, as the future that runs it.
    fn start_call(
        &self,
        id: RequestId,
        request: CallToolRequestParams,
        outbound: impl FnOnce() -> SendMessage,
    ) -> Answer {
        let cancellation = self.closed.child_token();
        let number = {
            let mut in_flight = self.lock_in_flight();
            let refusal = if in_flight.contains_key(&id) {
                Some(ErrorData::new(
                    ErrorCode::INVALID_REQUEST,
                    format!("request id {id} is in flight already; give each request its own id"),
                    None,
                ))
            } else if in_flight.len() >= MAX_IN_FLIGHT {
                Some(ErrorData::new(
                    ErrorCode::INTERNAL_ERROR,
                    format!(
                        "{MAX_IN_FLIGHT} calls of this client are in flight already; wait for some"
                    ),
                    None,
                ))
            } else if self.server.drain().in_flight() >= MAX_SERVER_IN_FLIGHT {
                Some(ErrorData::new(
                    ErrorCode::INTERNAL_ERROR,
                    format!(
                        "the server has {MAX_SERVER_IN_FLIGHT} calls in flight; try again shortly"
                    ),
                    None,
                ))
            } else {
                None
            };
            if let Some(refusal) = refusal {
                return Answer::Now(Box::new(Err(refusal)));
            }
            let number = self
                .calls
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            in_flight.insert(id.clone(), (number, cancellation.clone()));
            number
        };
        let token = request
            .meta
            .as_ref()
            .and_then(|meta| meta.get_progress_token());
        // A channel to the client (over HTTP, an event stream instead of one
        // JSON body) only for a call that reports progress or may ask.
        let may_ask = self.can_elicit() && self.server.may_ask(&request.name);
        let send = (token.is_some() || may_ask).then(outbound);
        let progress = token.zip(send.clone()).map(|(token, send)| {
            let progress: SendProgress = Arc::new(move |update| {
                send(progress_value(update));
            });
            (token, progress)
        });
        let asking = send.filter(|_| may_ask).map(|send| {
            let elicitor = Elicitor {
                requests: self.client.clone(),
                send,
            };
            self.server.asking(Arc::new(elicitor))
        });
        let dispatcher = self.clone();
        Answer::Later(Box::pin(async move {
            // Boxed on its own: the call's future is about 10 KB, and inline
            // this future would be as large, copied whole on the way to its
            // box, where now only its arguments are.
            let mut call = Box::pin(dispatcher.server.call_tool_request(
                request,
                id.to_string(),
                cancellation,
                progress,
                asking,
            ));
            let result = match dispatcher.client.relay() {
                None => call.await,
                Some(relay) => {
                    tokio::select! {
                        biased;
                        result = &mut call => result,
                        () = relay.cancelled_elsewhere(id.to_string()) => {
                            // As if the client's notification came here.
                            let call_token = dispatcher.lock_in_flight().remove(&id);
                            if let Some((_, token)) = call_token {
                                token.cancel();
                            }
                            call.await
                        }
                    }
                }
            };
            // Gone from the map (or another call's by now) if the client
            // cancelled this one.
            let cancelled_by_client = {
                let mut in_flight = dispatcher.lock_in_flight();
                match in_flight.get(&id) {
                    Some((n, _)) if *n == number => in_flight.remove(&id).is_none(),
                    _ => true,
                }
            };
            (!cancelled_by_client).then(|| result.map(ServerResult::from))
        }))
    }

    /// Handles a notification from the client; `notify` reaches the client
    /// for tool-list changes.
    pub fn notified(&self, method: &str, params: &str, notify: &Notify) {
        match method {
            "notifications/initialized" => {
                let notify = notify.clone();
                self.server.forward_tool_changes_once(move || {
                    notify(ServerNotification::ToolListChangedNotification(
                        Default::default(),
                    ))
                });
            }
            "notifications/cancelled" => {
                let Ok(cancelled) = parse::<CancelledNotificationParam>(params) else {
                    return;
                };
                let Some(id) = cancelled.request_id else {
                    return;
                };
                // Removed, so the call knows the client gave it up.
                let call = self.lock_in_flight().remove(&id);
                match (call, self.client.relay()) {
                    (Some((_, call)), _) => call.cancel(),
                    // Running on another replica, perhaps.
                    (None, Some(relay)) => relay.cancel(&id.to_string()),
                    (None, None) => {}
                }
            }
            _ => {}
        }
    }

    fn lock_in_flight(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<RequestId, (u64, CancellationToken)>> {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// One listing being answered; counted out when dropped.
struct Listing(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Listing {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// The `notifications/progress` message carrying `update`.
pub(crate) fn progress_message(update: ProgressNotificationParam) -> ServerJsonRpcMessage {
    ServerJsonRpcMessage::notification(ServerNotification::ProgressNotification(
        ProgressNotification::new(update),
    ))
}

/// A `notifications/progress` message as JSON.
fn progress_value(update: ProgressNotificationParam) -> Value {
    serde_json::to_value(progress_message(update)).unwrap_or(Value::Null)
}

/// The response message to request `id`, in the shape of the revisions
/// with a handshake, the only ones a dispatcher speaks (2026-07-28 goes to
/// rmcp's service): no `resultType`, and tool output only as an object.
pub(crate) fn response(
    id: RequestId,
    result: Result<ServerResult, ErrorData>,
) -> ServerJsonRpcMessage {
    match result {
        Ok(mut result) => {
            result.strip_result_type_for_legacy_peer();
            result.strip_non_object_output_for_legacy_peer();
            ServerJsonRpcMessage::response(result, id)
        }
        Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
    }
}

/// An error about a message whose id could not be read: JSON-RPC wants
/// `"id": null` there, which rmcp's type leaves out.
pub(crate) fn unidentified_error(error: ErrorData) -> serde_json::Value {
    serde_json::json!({ "jsonrpc": "2.0", "id": null, "error": error })
}

/// The version to speak: the client's when it has a handshake and is known,
/// else the newest that has one.
fn negotiate(requested: &ProtocolVersion) -> ProtocolVersion {
    if requested.has_initialize() && ProtocolVersion::KNOWN_VERSIONS.contains(requested) {
        requested.clone()
    } else {
        ProtocolVersion::LATEST_WITH_INITIALIZE
    }
}

fn parse<'a, T: Deserialize<'a>>(params: &'a str) -> Result<T, ErrorData> {
    serde_json::from_str(params).map_err(|error| ErrorData::invalid_params(error.to_string(), None))
}

fn shorten(text: &str) -> String {
    text.chars().take(64).collect()
}
