//! MCP over stdio: a thin loop of our own over rmcp's model types.
//!
//! rmcp's service loop hands every message through channels and tasks
//! (transport, service loop, handler, back); on the stdio path those hops
//! cost more than the sandboxed call. Here one task reads non-blocking
//! stdin and answers `initialize` and `ping` itself; a `tools/call` (or a
//! `tools/list`, which may wait for tools still loading) runs its first poll
//! right there, which is all most calls need, and gets a task of its own
//! only if it waits. Whoever has a response writes it. The messages are
//! rmcp's types, so the wire format is rmcp's.
//!
//! A client that opens with anything but `initialize` or `ping` speaks the
//! 2026-07-28 revision (no handshake, metadata on every request): the whole
//! connection is then handed to rmcp's service, which serves that revision.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use rmcp::model::{
    CallToolRequestParams, CancelledNotificationParam, EmptyResult, ErrorCode, ErrorData,
    InitializeRequestParams, PaginatedRequestParams, ProgressNotification, ProtocolVersion,
    RequestId, ServerJsonRpcMessage, ServerNotification, ServerResult,
};
use rmcp::transport::io::{StdioReader, StdioWriter};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::drain::SHUTDOWN_GRACE;
use super::server::{McpServer, SendProgress, ServeError};
use rmcp::ServerHandler;

/// The longest message read from the client (a line of JSON).
pub const MAX_MESSAGE: usize = 16 << 20;
/// Most requests of one client in flight at once; more are refused.
const MAX_IN_FLIGHT: usize = 4096;

/// One JSON-RPC message from the client, with its parameters left unparsed
/// until the method says what they are.
#[derive(Deserialize)]
struct Incoming<'a> {
    #[serde(default)]
    id: Option<RequestId>,
    #[serde(default, borrow)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
}

/// Serves `server` on stdin/stdout until the client closes stdin, or `stop`
/// is cancelled and the calls in flight are done (or their grace is over).
pub(crate) async fn serve(server: McpServer, stop: CancellationToken) -> Result<(), ServeError> {
    let (reader, writer) = rmcp::transport::stdio_pipes();
    let mut lines = FramedRead::new(reader, LinesCodec::new_with_max_length(MAX_MESSAGE));
    let connection = Connection {
        server: Arc::new(server),
        out: Output::new(writer),
        in_flight: Arc::default(),
        closed: CancellationToken::new(),
        tasks: TaskTracker::new(),
    };
    let mut first = true;
    let (drain, stopping) = (connection.server.drain(), stop.clone());
    let draining = async move {
        stopping.cancelled().await;
        drain.stop(SHUTDOWN_GRACE).await;
    };
    tokio::pin!(draining);
    let ended = loop {
        let line = tokio::select! {
            line = lines.next() => line,
            () = &mut draining => {
                // The calls are done; let their tasks send the results.
                connection.tasks.close();
                let _ = tokio::time::timeout(SHUTDOWN_GRACE, connection.tasks.wait()).await;
                break Ok(());
            }
        };
        match line {
            None => break Ok(()),
            Some(Ok(line)) => {
                if first && !opens_with_handshake(&line) {
                    return hand_over(connection, line, lines, stop).await;
                }
                first = false;
                connection.dispatch(&line).await;
            }
            Some(Err(LinesCodecError::MaxLineLengthExceeded)) => {
                first = false;
                // The codec skips the rest of the line; the stream, though,
                // ends after any error unless it starts afresh.
                let parts = lines.into_parts();
                lines = FramedRead::new(parts.io, parts.codec);
                lines.read_buffer_mut().extend_from_slice(&parts.read_buf);
                let error = ErrorData::new(
                    ErrorCode::PARSE_ERROR,
                    format!("message longer than the {MAX_MESSAGE} bytes a line may hold"),
                    None,
                );
                connection.out.parse_error(error).await;
            }
            Some(Err(LinesCodecError::Io(error))) => break Err(ServeError::Io(error)),
        }
    };
    // Nobody is left to read the results of calls still running.
    connection.closed.cancel();
    ended
}

/// Whether a connection's first message is the `initialize` handshake (or a
/// `ping`, which may come before it).
fn opens_with_handshake(line: &str) -> bool {
    match serde_json::from_str::<Incoming>(line) {
        Ok(message) => matches!(message.method.as_deref(), Some("initialize" | "ping")),
        // Answered as an error by our loop.
        Err(_) => true,
    }
}

/// Serves the rest of the connection, its first message included, through
/// rmcp's service.
async fn hand_over(
    connection: Connection,
    first: String,
    lines: FramedRead<StdioReader, LinesCodec>,
    stop: CancellationToken,
) -> Result<(), ServeError> {
    let parts = lines.into_parts();
    let mut replay = first.into_bytes();
    replay.push(b'\n');
    replay.extend_from_slice(&parts.read_buf);
    let reader = std::io::Cursor::new(replay).chain(parts.io);
    // Nothing was written yet, so the writer is still there to take.
    let writer =
        connection.out.take_writer().await.ok_or_else(|| {
            ServeError::Io(std::io::Error::other("stdout was taken over already"))
        })?;
    let server = connection.server.session();
    drop(connection.server);
    server.serve_rmcp((reader, writer), stop).await
}

/// How a request is answered.
enum Answer {
    /// At once.
    Now(Box<Result<ServerResult, ErrorData>>),
    /// By this future, which does the work and sends the response.
    Call(Pin<Box<dyn Future<Output = ()> + Send>>),
}

/// What one stdio connection shares among its tasks.
#[derive(Clone)]
struct Connection {
    server: Arc<McpServer>,
    out: Output,
    /// Cancellation of each call in flight, by request id.
    in_flight: Arc<Mutex<HashMap<RequestId, CancellationToken>>>,
    /// Cancelled once the connection is over.
    closed: CancellationToken,
    /// The tasks of requests that waited, to let them answer before a stop.
    tasks: TaskTracker,
}

impl Connection {
    async fn dispatch(&self, line: &str) {
        let message = match serde_json::from_str::<Incoming>(line) {
            Ok(message) => message,
            Err(error) => {
                let error = ErrorData::new(ErrorCode::PARSE_ERROR, error.to_string(), None);
                return self.out.parse_error(error).await;
            }
        };
        let Some(method) = message.method else {
            // A response to a request of ours: none is sent yet.
            return;
        };
        let params = message.params.map_or("{}", RawValue::get);
        match message.id {
            None => self.notified(&method, params),
            Some(id) => match self.answer(id.clone(), &method, params) {
                Answer::Now(answer) => self.out.respond(id, *answer).await,
                Answer::Call(mut call) => {
                    // Most calls finish in their first poll: run that here,
                    // saving a wake-up of another thread, and give the call
                    // its own task only when it waits.
                    if futures::poll!(call.as_mut()).is_pending() {
                        self.tasks.spawn(call);
                    }
                }
            },
        }
    }

    /// The answer to a request.
    fn answer(&self, id: RequestId, method: &str, params: &str) -> Answer {
        Answer::Now(Box::new(match method {
            "initialize" => parse::<InitializeRequestParams>(params).map(|request| {
                let mut info = self.server.get_info();
                info.protocol_version = negotiate(&request.protocol_version);
                ServerResult::InitializeResult(info)
            }),
            "ping" => Ok(ServerResult::EmptyResult(EmptyResult {})),
            "tools/list" => match parse::<Option<PaginatedRequestParams>>(params) {
                Ok(request) => return self.list_tools(id, request.and_then(|r| r.cursor)),
                Err(error) => Err(error),
            },
            "tools/call" => match parse::<CallToolRequestParams>(params) {
                Ok(request) => return self.start_call(id, request),
                Err(error) => Err(error),
            },
            _ => Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("this server has no method {:?}", shorten(method)),
                None,
            )),
        }))
    }

    /// A listing, as the future that sends it (it may wait for tools still
    /// loading).
    fn list_tools(&self, id: RequestId, cursor: Option<String>) -> Answer {
        let connection = self.clone();
        Answer::Call(Box::pin(async move {
            let listed = connection
                .server
                .list_tools_request(cursor.as_deref())
                .await;
            let result = listed.map(ServerResult::ListToolsResult);
            connection.out.respond(id, result).await;
        }))
    }

    /// A call, as the future that runs it and sends the response.
    fn start_call(&self, id: RequestId, request: CallToolRequestParams) -> Answer {
        let cancellation = self.closed.child_token();
        {
            let mut in_flight = self
                .in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if in_flight.len() >= MAX_IN_FLIGHT {
                return Answer::Now(Box::new(Err(ErrorData::new(
                    ErrorCode::INTERNAL_ERROR,
                    format!("{MAX_IN_FLIGHT} requests are in flight already; wait for some"),
                    None,
                ))));
            }
            in_flight.insert(id.clone(), cancellation.clone());
        }
        let progress = request
            .meta
            .as_ref()
            .and_then(|meta| meta.get_progress_token())
            .map(|token| (token, self.out.progress_sender()));
        let connection = self.clone();
        let call = Box::pin(async move {
            let result = connection
                .server
                .call_tool_request(request, id.to_string(), cancellation, progress)
                .await;
            let cancelled_by_client = connection
                .in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id)
                .is_none();
            // A call the client cancelled gets no response.
            if !cancelled_by_client {
                let result = result.map(ServerResult::from);
                connection.out.respond(id, result).await;
            }
        });
        Answer::Call(call)
    }

    fn notified(&self, method: &str, params: &str) {
        match method {
            "notifications/initialized" => {
                let out = self.out.clone();
                self.server.forward_tool_changes_once(move || {
                    let out = out.clone();
                    async move {
                        let changed =
                            ServerNotification::ToolListChangedNotification(Default::default());
                        out.send(&ServerJsonRpcMessage::notification(changed)).await;
                        !out.is_broken()
                    }
                });
            }
            "notifications/cancelled" => {
                let Ok(cancelled) = parse::<CancelledNotificationParam>(params) else {
                    return;
                };
                // Removed, so the call knows the client gave it up.
                let call = cancelled.request_id.and_then(|id| {
                    let mut in_flight = self
                        .in_flight
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner);
                    in_flight.remove(&id)
                });
                if let Some(call) = call {
                    call.cancel();
                }
            }
            _ => {}
        }
    }
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

/// Stdout, shared by the tasks that answer.
#[derive(Clone)]
struct Output {
    writer: Arc<tokio::sync::Mutex<Option<StdioWriter>>>,
    broken: Arc<std::sync::atomic::AtomicBool>,
}

impl Output {
    fn new(writer: StdioWriter) -> Self {
        Self {
            writer: Arc::new(tokio::sync::Mutex::new(Some(writer))),
            broken: Arc::default(),
        }
    }

    async fn respond(&self, id: RequestId, result: Result<ServerResult, ErrorData>) {
        let message = match result {
            Ok(result) => ServerJsonRpcMessage::response(result, id),
            Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
        };
        self.send(&message).await;
    }

    /// An error about a message whose id could not be read: JSON-RPC wants
    /// `"id": null` there, which rmcp's type leaves out.
    async fn parse_error(&self, error: ErrorData) {
        let message = serde_json::json!({ "jsonrpc": "2.0", "id": null, "error": error });
        self.send(&message).await;
    }

    /// Writes one message as a line; once a write fails, later ones are
    /// dropped (the client is gone).
    async fn send(&self, message: &impl serde::Serialize) {
        let mut line = match serde_json::to_vec(message) {
            Ok(line) => line,
            Err(error) => {
                tracing::error!(%error, "cannot serialise an MCP message");
                return;
            }
        };
        line.push(b'\n');
        let mut writer = self.writer.lock().await;
        let Some(writer) = writer.as_mut().filter(|_| !self.is_broken()) else {
            return;
        };
        if let Err(error) = write_line(writer, &line).await {
            tracing::debug!(%error, "cannot write to stdout");
            self.broken
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn is_broken(&self) -> bool {
        self.broken.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn progress_sender(&self) -> SendProgress {
        let out = self.clone();
        Arc::new(move |update| {
            let out = out.clone();
            Box::pin(async move {
                let progress =
                    ServerNotification::ProgressNotification(ProgressNotification::new(update));
                out.send(&ServerJsonRpcMessage::notification(progress))
                    .await;
            })
        })
    }

    /// The writer itself, for rmcp to take over.
    async fn take_writer(&self) -> Option<StdioWriter> {
        self.writer.lock().await.take()
    }
}

async fn write_line(writer: &mut (impl AsyncWrite + Unpin), line: &[u8]) -> std::io::Result<()> {
    writer.write_all(line).await?;
    writer.flush().await
}
