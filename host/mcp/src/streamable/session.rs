//! One client's session over streamable HTTP: its requests (each POSTed
//! call run on the connection's thread while it only yields, on the
//! runtime that runs calls once it waits), its GET stream and whether it
//! is busy or idle.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::Poll;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};
use rmcp::model::ServerJsonRpcMessage;
use tokio::runtime::Handle;
use tokio::sync::mpsc;
use tokio_util::task::TaskTracker;

use super::STREAM_QUEUE;
use crate::body::{Body, json, plain};
use crate::dispatch::{self, Answer, Dispatcher, Message, Notify};
use crate::elicit::SendMessage;
use crate::identity::Identity;
use crate::run_here::run_here;
use crate::traced::Origin;
use crate::wire::{accepted, accepts, event, event_stream, session_not_found};

/// One client's session.
pub(super) struct Session {
    /// Who opened it: requests of anyone else find no such session.
    pub(super) identity: Identity,
    pub(super) requests: Dispatcher,
    /// The open GET stream, if any.
    listener: Mutex<Option<mpsc::Sender<Bytes>>>,
    /// Requests being answered, and when the last one ended (ms since
    /// `clock`, the server's start).
    busy: AtomicUsize,
    last_seen: AtomicU64,
    clock: Instant,
}

impl Session {
    pub(super) fn new(identity: Identity, requests: Dispatcher, now: u64, clock: Instant) -> Self {
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
    pub(super) fn end(&self) {
        self.requests.close();
        self.listener
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    pub(super) async fn post(
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
    pub(super) fn listen(busy: Busy, headers: &HeaderMap) -> Response<Body> {
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
    pub(super) fn notifier(self: &Arc<Self>) -> Notify {
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
    pub(super) fn idle_since(&self, since: u64) -> bool {
        self.busy.load(Ordering::Acquire) == 0 && self.last_seen.load(Ordering::Acquire) < since
    }
}

/// A request of a session being answered, or its open stream.
pub(super) struct Busy(pub(super) Arc<Session>);

impl Busy {
    pub(super) fn new(session: &Arc<Session>) -> Self {
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
