//! Streamable HTTP sessions of our own, for the revisions with a handshake:
//! `initialize` opens a session (`Mcp-Session-Id`), each POSTed request is
//! answered with one JSON body (an event stream only when a call asked for
//! progress or may ask the client's user), a GET opens the stream that
//! carries tool-list changes, and
//! DELETE ends the session. Requests without a session that do not open one
//! (the sessionless 2026-07-28 revision) go to rmcp's service.
//!
//! rmcp's own sessions pass every request through a session worker, the
//! service loop and a handler task; here the connection's task runs the call
//! and writes the response, as stdio does: on its connection's thread while
//! it only yields ([`run_here`]), on the runtime that runs calls once it
//! waits.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use rmcp::model::{RequestId, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio::runtime::Handle;
use tokio::sync::mpsc;
use tokio_util::task::TaskTracker;

use super::body::{Body, json, plain, read_body};
use super::dispatch::{self, Answer, Dispatcher, Message, Notify};
use super::elicit::SendMessage;
use super::identity::Identity;
use super::records::Records;
use super::relay::Relay;
use super::run_here::run_here;
use super::server::McpServer;
use super::traced::Origin;
use super::wire::{
    accepted, accepts, event, event_stream, header_mismatch, refuse_post, session_not_found,
    too_many_sessions, unknown_version,
};

/// The session header.
const SESSION_ID: &str = "mcp-session-id";
/// Messages queued on one event stream; past this a slow reader loses the
/// notifications (never a response).
const STREAM_QUEUE: usize = 64;
/// How much longer than a question's wait its mailbox stays open.
const RELAY_MARGIN: Duration = Duration::from_secs(10);
/// Longest a client may take to send a request's body.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// The HTTP sessions of one server.
pub(crate) struct Sessions {
    /// The built handler; each session gets one of its own from it.
    server: McpServer,
    open: Mutex<HashMap<Arc<str>, Arc<Session>>>,
    max_sessions: usize,
    /// Sessions one tenant may hold open.
    max_tenant_sessions: usize,
    max_body: usize,
    /// A session with no request and no open stream for this long is closed.
    idle: Duration,
    /// Serves the sessionless revision.
    rmcp: StreamableHttpService<McpServer, LocalSessionManager>,
    /// Sessions' records in the session store, shared by replicas.
    records: Records,
    /// Calls that outlive their first polls, and event streams being fed.
    tasks: TaskTracker,
    /// The runtime those tasks, and rmcp's, run on (not a connection's).
    calls: Handle,
    started: Instant,
    /// Set once the server stops: no session opens or listens any more.
    closing: std::sync::atomic::AtomicBool,
}

/// One client's session.
struct Session {
    /// Who opened it: requests of anyone else find no such session.
    identity: Identity,
    requests: Dispatcher,
    /// The open GET stream, if any.
    listener: Mutex<Option<mpsc::Sender<Bytes>>>,
    /// Requests being answered, and when the last one ended (ms since
    /// `clock`, the server's start).
    busy: AtomicUsize,
    last_seen: AtomicU64,
    clock: Instant,
}

impl Sessions {
    pub fn new(
        server: McpServer,
        rmcp: StreamableHttpService<McpServer, LocalSessionManager>,
        max_sessions: usize,
        max_tenant_sessions: usize,
        max_body: usize,
        idle: Duration,
    ) -> Self {
        Self {
            records: Records::new(server.host()),
            server,
            open: Mutex::default(),
            max_sessions,
            max_tenant_sessions,
            max_body,
            idle,
            rmcp,
            tasks: TaskTracker::new(),
            calls: Handle::current(),
            started: Instant::now(),
            closing: Default::default(),
        }
    }

    /// Answers one request of `identity` that passed the [`Gate`](super::gate::Gate).
    pub async fn handle(
        &self,
        mut request: Request<Incoming>,
        identity: Identity,
    ) -> Response<Body> {
        let session = match request.headers().get(SESSION_ID).map(HeaderValue::to_str) {
            None => None,
            Some(Err(_)) => Some(None),
            Some(Ok(id)) => Some(match self.find(id, &identity) {
                Some(busy) => Some(busy),
                None => self.take_up(id, &identity).await,
            }),
        };
        // Checked once for every request (rmcp checks the ones it serves).
        if let Some(refusal) = unknown_version(request.headers()) {
            return refusal;
        }
        match (request.method().clone(), session) {
            (_, Some(None)) => session_not_found(),
            (Method::POST, session) => self.post(request, session.flatten(), identity).await,
            (Method::GET, Some(Some(busy))) if self.is_closing() => {
                drop(busy);
                plain(StatusCode::SERVICE_UNAVAILABLE, "the server is stopping")
            }
            (Method::GET, Some(Some(busy))) => Session::listen(busy, request.headers()),
            (Method::DELETE, Some(Some(busy))) => self.close(busy).await,
            (Method::GET | Method::DELETE, None) => {
                request.extensions_mut().insert(identity);
                self.to_rmcp(request).await
            }
            _ => {
                let mut response =
                    plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed on /mcp");
                response
                    .headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
                response
            }
        }
    }

    /// Ends every session (the server is stopping): their streams close,
    /// and no session opens or listens any more.
    pub fn close_all(&self) {
        self.closing.store(true, Ordering::Release);
        let sessions: Vec<_> = self.lock().drain().map(|(_, s)| s).collect();
        for session in sessions {
            session.end();
        }
    }

    /// Closes the sessions idle for longer than their limit, checking every
    /// tenth of it, for as long as the server runs.
    pub async fn expire_idle(self: Arc<Self>) {
        let mut every = tokio::time::interval((self.idle / 10).max(Duration::from_millis(50)));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            let idle_ms = u64::try_from(self.idle.as_millis()).unwrap_or(u64::MAX);
            let idle_since = self.now().saturating_sub(idle_ms);
            let expired: Vec<_> = {
                let mut open = self.lock();
                let expired: Vec<_> = open
                    .iter()
                    .filter(|(_, s)| s.idle_since(idle_since))
                    .map(|(id, _)| id.clone())
                    .collect();
                expired
                    .into_iter()
                    .filter_map(|id| open.remove(&id).map(|session| (id, session)))
                    .collect()
            };
            // Expired for every replica: its record goes too.
            for (id, session) in expired {
                session.end();
                self.records.ended(&session.identity, &id).await;
            }
        }
    }

    /// The calls and streams still running.
    pub fn tasks(&self) -> &TaskTracker {
        &self.tasks
    }

    /// The session `id` of `identity`, busy with this request from here on,
    /// so it cannot expire under it. A session id alone grants nothing. A
    /// request whose token grants other scopes or claims than the one the
    /// session was opened or last taken up with finds none: the session is
    /// taken up again, as another replica would, under the new grants.
    fn find(&self, id: &str, identity: &Identity) -> Option<Busy> {
        let mut open = self.lock();
        let session = open.get(id).filter(|s| s.identity == *identity)?;
        if !session.identity.same_grants(identity) {
            open.remove(id);
            return None;
        }
        Some(Busy::new(session))
    }

    fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    async fn close(&self, busy: Busy) -> Response<Body> {
        let mut id = None;
        self.lock().retain(|key, open| {
            let this = Arc::ptr_eq(open, &busy.0);
            if this {
                id = Some(key.clone());
            }
            !this
        });
        busy.0.end();
        if let Some(id) = id {
            self.records.ended(&busy.0.identity, &id).await;
        }
        plain(StatusCode::OK, "session ended")
    }

    /// Serves here a session `identity` opened on another replica (or on
    /// this one before it restarted), if the store has its record.
    async fn take_up(&self, id: &str, identity: &Identity) -> Option<Busy> {
        if self.is_closing() {
            return None;
        }
        let initialize = self.records.opened_by(identity, id).await?;
        let requests = self.dispatcher(id, identity);
        // What the client declared (whether it can be asked, its revision).
        requests.restore(&initialize);
        let session = Arc::new(Session::new(
            identity.clone(),
            requests,
            self.now(),
            self.started,
        ));
        // The client sent `initialized` to the replica that opened it.
        session
            .requests
            .notified("notifications/initialized", "{}", &session.notifier());
        let mut open = self.lock();
        if self.no_room(&open, identity).is_some() {
            return None;
        }
        // Two requests taking it up at once end up in one session.
        let session = open.entry(id.into()).or_insert(session).clone();
        Some(Busy::new(&session))
    }

    async fn post(
        &self,
        request: Request<Incoming>,
        session: Option<Busy>,
        identity: Identity,
    ) -> Response<Body> {
        if let Some(refusal) = refuse_post(request.headers()) {
            return refusal;
        }
        let (parts, body) = request.into_parts();
        let body = match read_body(body, self.max_body, BODY_TIMEOUT).await {
            Ok(body) => body,
            Err(refusal) => return *refusal,
        };
        let message = match Message::parse_bytes(&body) {
            Ok(message) => message,
            Err(error) => {
                let mut response = json(&dispatch::unidentified_error(error));
                *response.status_mut() = StatusCode::BAD_REQUEST;
                return response;
            }
        };
        if let Some(refusal) = header_mismatch(&parts.headers, &message) {
            return refusal;
        }
        match session {
            Some(busy) => {
                Session::post(busy, &message, (&self.tasks, &self.calls), &parts.headers).await
            }
            None if message.method.as_deref() == Some("initialize") && message.id.is_some() => {
                self.open(&message, identity, &parts.headers).await
            }
            None => {
                drop(message);
                let mut request = Request::from_parts(parts, Full::new(body));
                request.extensions_mut().insert(identity);
                self.to_rmcp(request).await
            }
        }
    }

    /// Hands `request` to rmcp's service on the runtime that runs calls, so
    /// the tasks it starts (a call among them) never hold up the thread of
    /// a connection.
    async fn to_rmcp<B>(&self, request: Request<B>) -> Response<Body>
    where
        B: hyper::body::Body + Send + 'static,
        B::Data: Send,
        B::Error: std::fmt::Display,
    {
        let rmcp = self.rmcp.clone();
        let answered = self
            .tasks
            .spawn_on(async move { rmcp.handle(request).await }, &self.calls);
        match answered.await {
            Ok(response) => response,
            Err(ended) if ended.is_panic() => plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal error: the request's handler failed",
            ),
            Err(_) => plain(StatusCode::SERVICE_UNAVAILABLE, "the server is stopping"),
        }
    }

    /// Answers `initialize`, opening a session for the client.
    async fn open(
        &self,
        message: &Message<'_>,
        identity: Identity,
        headers: &HeaderMap,
    ) -> Response<Body> {
        if self.is_closing() {
            return plain(StatusCode::SERVICE_UNAVAILABLE, "the server is stopping");
        }
        if let Some(refusal) = self.no_room(&self.lock(), &identity) {
            return refusal;
        }
        let session_id: Arc<str> = uuid::Uuid::new_v4().simple().to_string().into();
        let requests = self.dispatcher(&session_id, &identity);
        let id = message.id.clone().unwrap_or(RequestId::Number(0));
        let Answer::Now(answer) = requests.answer(
            id.clone(),
            "initialize",
            message.params(),
            || unreachable!("initialize reports no progress"),
            Origin::http(headers),
        ) else {
            unreachable!("initialize is answered at once")
        };
        let opened = answer.is_ok();
        let mut response = json(&dispatch::response(id, *answer));
        if opened {
            // Recorded before the client learns the id, so any replica
            // can serve its next request.
            if let Err(error) = self
                .records
                .opened(&identity, &session_id, message.params())
                .await
            {
                tracing::warn!(%error, "cannot record a new MCP session");
                return plain(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "cannot open a session now: the session store does not answer",
                );
            }
            let session = Arc::new(Session::new(identity, requests, self.now(), self.started));
            let mut open = self.lock();
            if let Some(refusal) = self.no_room(&open, &session.identity) {
                return refusal;
            }
            let header = HeaderValue::from_str(&session_id).expect("hex is a valid header");
            response.headers_mut().insert(SESSION_ID, header);
            open.insert(session_id, session);
        }
        response
    }

    /// Why `identity` may not open one more session, if it may not: the
    /// server holds all it may, or its tenant does.
    fn no_room(
        &self,
        open: &HashMap<Arc<str>, Arc<Session>>,
        identity: &Identity,
    ) -> Option<Response<Body>> {
        if open.len() >= self.max_sessions {
            return Some(too_many_sessions());
        }
        let tenant = identity.tenant.as_deref()?;
        let held = open
            .values()
            .filter(|s| s.identity.tenant.as_deref() == Some(tenant))
            .count();
        (held >= self.max_tenant_sessions).then(|| {
            let mut refusal = plain(
                StatusCode::TOO_MANY_REQUESTS,
                &format!(
                    "tenant {tenant:?} holds {held} open MCP sessions, as many as one tenant may \
                     (--max-tenant-sessions); close one (DELETE) or try again later"
                ),
            );
            refusal
                .headers_mut()
                .insert("retry-after", HeaderValue::from_static("5"));
            refusal
        })
    }

    /// The requests of session `id` of `identity` on this replica; answers
    /// to its questions may come through any replica.
    fn dispatcher(&self, id: &str, identity: &Identity) -> Dispatcher {
        let requests = Dispatcher::new(self.server.for_client(id, identity.clone()));
        requests.relay_through(Relay::new(
            self.server.host().session_store().clone(),
            identity,
            id,
            self.server.shared().ask_wait + RELAY_MARGIN,
        ));
        requests
    }

    fn now(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Arc<Session>>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Session {
    fn new(identity: Identity, requests: Dispatcher, now: u64, clock: Instant) -> Self {
        Self {
            identity,
            requests,
            listener: Mutex::default(),
            busy: AtomicUsize::new(0),
            last_seen: AtomicU64::new(now),
            clock,
        }
    }

    /// The session is over: its calls are cancelled, its stream ends.
    fn end(&self) {
        self.requests.close();
        self.listener
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    async fn post(
        busy: Busy,
        message: &Message<'_>,
        (tasks, calls): (&TaskTracker, &Handle),
        headers: &HeaderMap,
    ) -> Response<Body> {
        let this = &busy.0;
        if this.requests.is_closed() {
            // Ended while the body came in.
            return session_not_found();
        }
        let Some(method) = message.method.as_deref() else {
            // A response to a request of ours (a question to the user):
            // relayed to the replica that asked, if that is another.
            this.requests.responded(message);
            return accepted();
        };
        let Some(id) = message.id.clone() else {
            this.requests
                .notified(method, message.params(), &this.notifier());
            return accepted();
        };
        let mut stream = None;
        let outbound = || {
            let (sender, receiver) = mpsc::channel(STREAM_QUEUE);
            stream = Some((sender.clone(), receiver));
            message_sender(sender)
        };
        let answer = this.requests.answer(
            id.clone(),
            method,
            message.params(),
            outbound,
            Origin::http(headers),
        );
        match (answer, stream) {
            (Answer::Now(answer), _) => json(&dispatch::response(id, *answer)),
            (Answer::Later(answer), None) => {
                let mut answer = answer;
                // Most calls finish in their first polls: answer on this
                // connection's thread. One that waits runs on a task of its
                // own, so a client that disconnects does not cancel it (the
                // spec says it must not); it cancels with a notification.
                let answer = match run_here(answer.as_mut()) {
                    Poll::Ready(answer) => answer,
                    Poll::Pending => tasks.spawn_on(answer, calls).await.ok().flatten(),
                };
                match answer {
                    Some(answer) => json(&dispatch::response(id, answer)),
                    // Cancelled: no response, so an event stream with none.
                    None => event_stream(mpsc::channel(1).1, None),
                }
            }
            (Answer::Later(answer), Some((sender, receiver))) => {
                tasks.spawn_on(
                    async move {
                        let _busy = busy;
                        if let Some(answer) = answer.await {
                            let _ = sender.send(event(&dispatch::response(id, answer))).await;
                        }
                    },
                    calls,
                );
                event_stream(receiver, None)
            }
        }
    }

    /// Opens the GET stream that carries tool-list changes; the session is
    /// busy (never idle) while it is open.
    fn listen(busy: Busy, headers: &HeaderMap) -> Response<Body> {
        if !accepts(headers, "text/event-stream") {
            return plain(
                StatusCode::NOT_ACCEPTABLE,
                "not acceptable: the stream is text/event-stream; accept it",
            );
        }
        let mut listener = busy
            .0
            .listener
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if listener.as_ref().is_some_and(|open| !open.is_closed()) {
            return plain(
                StatusCode::CONFLICT,
                "conflict: this session's stream is open already",
            );
        }
        let (sender, receiver) = mpsc::channel(STREAM_QUEUE);
        *listener = Some(sender);
        drop(listener);
        event_stream(receiver, Some(Box::new(busy)))
    }

    /// Sends notifications outside any request on the GET stream, while the
    /// session lives; without an open stream they are dropped.
    fn notifier(self: &Arc<Self>) -> Notify {
        let session: Weak<Self> = Arc::downgrade(self);
        Arc::new(move |notification| {
            let session = session.clone();
            Box::pin(async move {
                let Some(session) = session.upgrade() else {
                    return false;
                };
                let listener = session
                    .listener
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                if let Some(listener) = listener {
                    let message = ServerJsonRpcMessage::notification(notification);
                    let _ = listener.try_send(event(&message));
                }
                true
            })
        })
    }

    /// Whether nothing happened in this session since `since`.
    fn idle_since(&self, since: u64) -> bool {
        self.busy.load(Ordering::Acquire) == 0 && self.last_seen.load(Ordering::Acquire) < since
    }
}

/// A request of a session being answered, or its open stream.
struct Busy(Arc<Session>);

impl Busy {
    fn new(session: &Arc<Session>) -> Self {
        session.busy.fetch_add(1, Ordering::AcqRel);
        Self(session.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let now = self.0.clock.elapsed().as_millis() as u64;
        self.0.last_seen.fetch_max(now, Ordering::AcqRel);
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Messages about a call (progress, questions to the user) on its own
/// event stream.
fn message_sender(sender: mpsc::Sender<Bytes>) -> SendMessage {
    Arc::new(move |message| sender.try_send(event(&message)).is_ok())
}
