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
//! it only yields ([`run_here`](crate::run_here::run_here)), on the runtime
//! that runs calls once it waits (`session`).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use rmcp::model::RequestId;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio::runtime::Handle;
use tokio_util::task::TaskTracker;

use super::body::{Body, json, plain, read_body};
use super::dispatch::{self, Answer, Dispatcher, Message};
use super::identity::Identity;
use super::records::Records;
use super::relay::Relay;
use super::server::McpServer;
use super::traced::Origin;
use super::wire::{
    header_mismatch, refuse_post, session_not_found, too_many_sessions, unknown_version,
};
use session::{Busy, Session};

mod session;

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

impl Sessions {
    pub fn new(
        server: McpServer,
        rmcp: StreamableHttpService<McpServer, LocalSessionManager>,
        max_sessions: usize,
        max_tenant_sessions: usize,
        max_body: usize,
        idle: Duration,
    ) -> Self {
        let calls = server.shared().calls.serve_here();
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
            calls,
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
