//! MCP over stdio: a thin loop of our own over rmcp's model types.
//!
//! rmcp's service loop hands every message through channels and tasks
//! (transport, service loop, handler, back); on the stdio path those hops
//! cost more than the sandboxed call. Here one task reads non-blocking
//! stdin and answers `initialize` and `ping` itself; a `tools/call` (or a
//! `tools/list`, which may wait for tools still loading) runs right there
//! until it is done, which is all most calls need, and gets a task of its
//! own only if it waits (or keeps running, see `run_here`). Whoever has a
//! response writes it. The messages are rmcp's types, so the wire format is
//! rmcp's.
//!
//! Over stdin/stdout that task has a thread of its own: a call, its answer
//! and the freeing of its instance then stay on one core, rather than moving
//! between the runtime's threads (for a Python tool, whose instance writes
//! some 1.5 MiB of memory, that cost a fifth more CPU a call).
//!
//! A client that opens with anything but `initialize` or `ping` speaks the
//! 2026-07-28 revision (no handshake, metadata on every request): the whole
//! connection is then handed to rmcp's service, which serves that revision.

use std::sync::Arc;

use futures::StreamExt;
use rmcp::model::{ErrorCode, ErrorData, RequestId, ServerJsonRpcMessage, ServerResult};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::runtime::Handle;
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::dispatch::{self, Answer, Dispatcher, Message, Notify};
use super::drain::SHUTDOWN_GRACE;
use super::elicit::SendMessage;
use super::run_here::run_here;
use super::server::{McpServer, ServeError};
use super::traced::Origin;

/// The longest message read from the client (a line of JSON).
pub const MAX_MESSAGE: usize = 16 << 20;

/// The client's side of the connection: stdin, or any byte stream.
pub(crate) type Reader = Box<dyn AsyncRead + Send + Unpin>;
/// Where the answers go: stdout, or any byte stream.
pub(crate) type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// Serves `server` on `reader`/`writer` (JSON lines) until the client closes
/// its end, or `stop` is cancelled and the calls in flight are done (or
/// their grace is over).
pub(crate) async fn serve(
    server: McpServer,
    reader: Reader,
    writer: Writer,
    stop: CancellationToken,
    calls: Handle,
) -> Result<(), ServeError> {
    let mut lines = FramedRead::new(reader, LinesCodec::new_with_max_length(MAX_MESSAGE));
    let out = Output::new(writer);
    let connection = Connection {
        requests: Dispatcher::new(server),
        notify: out.notifier(),
        out,
        tasks: TaskTracker::new(),
        calls,
    };
    let mut first = true;
    let (drain, stopping) = (connection.requests.server().drain(), stop.clone());
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
    // Nobody is left to read the results of calls still running: they are
    // cancelled, and end before the connection does (the timers and pipes
    // they set up here go with the connection's thread).
    connection.requests.close();
    connection.tasks.close();
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, connection.tasks.wait()).await;
    ended
}

/// Whether a connection's first message is the `initialize` handshake (or a
/// `ping`, which may come before it).
fn opens_with_handshake(line: &str) -> bool {
    match Message::parse(line) {
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
    lines: FramedRead<Reader, LinesCodec>,
    stop: CancellationToken,
) -> Result<(), ServeError> {
    let parts = lines.into_parts();
    let mut replay = first.into_bytes();
    replay.push(b'\n');
    replay.extend_from_slice(&parts.read_buf);
    let reader = std::io::Cursor::new(replay).chain(parts.io);
    // Nothing was written yet, so the writer is still there to take.
    let writer = connection.out.take_writer().await.ok_or_else(|| {
        ServeError::Io(std::io::Error::other("the writer was taken over already"))
    })?;
    let server = connection.requests.server().session();
    let calls = connection.calls.clone();
    drop(connection);
    // rmcp runs each request in a task of its own: on the runtime for calls,
    // which long calls may keep busy without holding up this connection.
    joined(
        calls
            .spawn(server.serve_transport((reader, writer), stop))
            .await,
    )
}

/// What a task serving a connection ended with: its panic goes on here, and
/// a task cancelled by its runtime shutting down served to the end.
fn joined(
    result: Result<Result<(), ServeError>, tokio::task::JoinError>,
) -> Result<(), ServeError> {
    match result {
        Ok(served) => served,
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(_) => Ok(()),
    }
}

/// What one stdio connection shares among its tasks.
#[derive(Clone)]
struct Connection {
    requests: Dispatcher,
    out: Output,
    notify: Notify,
    /// The tasks of requests that waited, to let them answer before a stop.
    tasks: TaskTracker,
    /// The runtime those tasks run on.
    calls: Handle,
}

impl Connection {
    async fn dispatch(&self, line: &str) {
        let message = match Message::parse(line) {
            Ok(message) => message,
            Err(error) => return self.out.parse_error(error).await,
        };
        let Some(method) = message.method.as_deref() else {
            // A response to a request of ours (a question to the user).
            return self.requests.responded(&message);
        };
        let Some(id) = message.id.clone() else {
            return self
                .requests
                .notified(method, message.params(), &self.notify);
        };
        let outbound = || self.out.message_sender();
        match self.requests.answer(
            id.clone(),
            method,
            message.params(),
            outbound,
            Origin::STDIO,
        ) {
            Answer::Now(answer) => self.out.respond(id, *answer).await,
            Answer::Later(answer) => {
                let out = self.out.clone();
                let mut call = Box::pin(async move {
                    if let Some(answer) = answer.await {
                        out.respond(id, answer).await;
                    }
                });
                // Most calls finish here, without a wake-up of another
                // thread; a call gets its own task only when it waits.
                if run_here(call.as_mut()).is_pending() {
                    self.tasks.spawn_on(call, &self.calls);
                }
            }
        }
    }
}

/// Stdout, shared by the tasks that answer.
#[derive(Clone)]
struct Output {
    writer: Arc<tokio::sync::Mutex<Option<Writer>>>,
    broken: Arc<std::sync::atomic::AtomicBool>,
}

impl Output {
    fn new(writer: Writer) -> Self {
        Self {
            writer: Arc::new(tokio::sync::Mutex::new(Some(writer))),
            broken: Arc::default(),
        }
    }

    async fn respond(&self, id: RequestId, result: Result<ServerResult, ErrorData>) {
        self.send(&dispatch::response(id, result)).await;
    }

    /// An error about a message whose id could not be read.
    async fn parse_error(&self, error: ErrorData) {
        self.send(&dispatch::unidentified_error(error)).await;
    }

    /// Notifications outside any request, on stdout too.
    fn notifier(&self) -> Notify {
        let out = self.clone();
        Arc::new(move |notification| {
            out.send_detached(ServerJsonRpcMessage::notification(notification));
            let reachable = !out.is_broken();
            Box::pin(std::future::ready(reachable))
        })
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

    /// Messages about one request (progress, questions to the user), on
    /// stdout too.
    fn message_sender(&self) -> SendMessage {
        let out = self.clone();
        Arc::new(move |message| {
            out.send_detached(message);
            !out.is_broken()
        })
    }

    /// Sends `message` from a task of its own, so a caller that is dropped
    /// (a connection's forwarding of tool changes ends) never cuts a line off
    /// half-written.
    fn send_detached(&self, message: impl serde::Serialize + Send + Sync + 'static) {
        let out = self.clone();
        tokio::spawn(async move { out.send(&message).await });
    }

    /// The writer itself, for rmcp to take over.
    async fn take_writer(&self) -> Option<Writer> {
        self.writer.lock().await.take()
    }
}

async fn write_line(writer: &mut (impl AsyncWrite + Unpin), line: &[u8]) -> std::io::Result<()> {
    writer.write_all(line).await?;
    writer.flush().await
}

impl McpServer {
    /// Serves one client over stdin/stdout until it disconnects.
    pub async fn serve_stdio(self) -> Result<(), ServeError> {
        self.serve_stdio_until(CancellationToken::new()).await
    }

    /// Serves one client over stdin/stdout until it disconnects or `stop`
    /// is cancelled; then new calls are refused, and calls in flight get
    /// [`SHUTDOWN_GRACE`] to finish and send their results.
    ///
    /// The connection runs on a thread of its own, which reads stdin, runs
    /// each call (all most calls need), writes the answer and then frees the
    /// call's instance: one core, whose caches still hold the instance's
    /// pages. A call that waits, or runs on past a tick or two, goes on in a
    /// task of the current runtime.
    pub async fn serve_stdio_until(self, stop: CancellationToken) -> Result<(), ServeError> {
        let calls = self.shared().calls.serve_here();
        let (sender, served) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("wasm-agent-stdio".into())
            .spawn(move || {
                let serving = std::panic::AssertUnwindSafe(|| {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(ServeError::Io)?;
                    let served = runtime.block_on(async move {
                        let (reader, writer) = rmcp::transport::stdio_pipes();
                        serve(self, Box::new(reader), Box::new(writer), stop, calls).await
                    });
                    // A read of stdin may still block a thread of the
                    // runtime (where stdin is not a pipe): not waited for.
                    runtime.shutdown_background();
                    served
                });
                let _ = sender.send(std::panic::catch_unwind(serving));
            })
            .map_err(ServeError::Io)?;
        match served.await {
            Ok(Ok(served)) => served,
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            // The thread ended without a word: only if the process is ending.
            Err(_) => Ok(()),
        }
    }

    /// Serves one client speaking JSON lines on `reader`/`writer` (a pipe,
    /// a socket, an in-memory stream), as [`serve_stdio_until`] does on
    /// stdin/stdout.
    ///
    /// [`serve_stdio_until`]: Self::serve_stdio_until
    pub async fn serve_lines(
        self,
        reader: impl tokio::io::AsyncRead + Send + Unpin + 'static,
        writer: impl tokio::io::AsyncWrite + Send + Unpin + 'static,
        stop: CancellationToken,
    ) -> Result<(), ServeError> {
        let calls = self.shared().calls.serve_here();
        let serving = serve(self, Box::new(reader), Box::new(writer), stop, calls);
        joined(tokio::spawn(serving).await)
    }
}
