//! Answers that come back to another replica than the one that asked: a
//! client's response to our question (an elicitation) is a POST of its
//! own, which a round-robin balancer may send anywhere. The replica that
//! asked opens a mailbox in the shared store for it; the replica the
//! response reaches delivers it there; the asking replica polls its mailbox
//! while the question is open (the first answer counts, and nobody can
//! leave mail no question waits for). A `notifications/cancelled` for a
//! call running on another replica travels the same way: a call that runs
//! for more than a second watches a mailbox for it.
//!
//! Polling the store, rather than PostgreSQL `LISTEN/NOTIFY` or Redis
//! pub/sub, works with every store (SQLite files shared by processes too),
//! holds no connection open, survives a database restart, and costs one
//! indexed query per open question every half second at most: next to a
//! person's answer, the delay is noise.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use wasm_agent_session::{Backoff, SessionStore};

use super::identity::Identity;

/// Largest response relayed (an elicitation result is a few hundred bytes).
pub(crate) const MAX_RELAYED: usize = 64 * 1024;
/// The first wait between looks at a mailbox; it grows up to [`MAX_POLL`].
const FIRST_POLL: Duration = Duration::from_millis(25);
const MAX_POLL: Duration = Duration::from_millis(250);

/// A call watches for a cancellation left by another replica once it has
/// run this long (most calls are over by then, and open no mailbox).
const WATCH_AFTER: Duration = Duration::from_secs(1);
/// How often a running call looks for one.
const WATCH_EVERY: Duration = Duration::from_secs(1);
/// Longest a call's cancellation mailbox stays open.
const WATCH_FOR: Duration = Duration::from_secs(6 * 3600);
/// How long a replica that gets a cancellation for a call it does not run
/// keeps trying to leave it for the one that does (which opens its mailbox
/// after [`WATCH_AFTER`]).
const CANCEL_TRIES_FOR: Duration = Duration::from_millis(1600);

/// Cancellations one session may have on their way to other replicas at
/// once; more are dropped.
const MAX_CANCELS: usize = 8;

/// The mailboxes of one client's session, in the shared store.
pub(crate) struct Relay {
    store: Arc<dyn SessionStore>,
    /// Cancellations on their way.
    cancelling: Arc<std::sync::atomic::AtomicUsize>,
    /// Whose session: every address starts with it.
    prefix: String,
    /// How long a mailbox stays open at most.
    ttl: Duration,
}

impl Relay {
    /// The mailboxes of session `session` of `identity`.
    pub fn new(
        store: Arc<dyn SessionStore>,
        identity: &Identity,
        session: &str,
        ttl: Duration,
    ) -> Self {
        let prefix = json!([
            identity.tenant.as_deref().unwrap_or_default(),
            identity.principal.as_deref().unwrap_or_default(),
            session
        ])
        .to_string();
        Self {
            store,
            prefix,
            ttl,
            cancelling: Arc::default(),
        }
    }

    fn address(&self, request: &str) -> String {
        format!("answer:{}:{request}", self.prefix)
    }

    fn cancel_address(&self, request: &str) -> String {
        format!("cancel:{}:{request}", self.prefix)
    }

    /// Resolves when another replica left a cancellation of the client's
    /// request `request` (a call running here); watched from its second
    /// second on.
    pub async fn cancelled_elsewhere(self: Arc<Self>, request: String) {
        tokio::time::sleep(WATCH_AFTER).await;
        let address = self.cancel_address(&request);
        if let Err(error) = self.store.open_mailbox(&address, WATCH_FOR).await {
            tracing::debug!(%error, "cannot watch for a cancellation from another replica");
            return std::future::pending().await;
        }
        let _close = Closing(self.clone(), address.clone());
        loop {
            tokio::time::sleep(WATCH_EVERY).await;
            if let Ok(Some(_)) = self.store.collect_mail(&address).await {
                return;
            }
        }
    }

    /// Passes the client's cancellation of request `request`, which does not
    /// run here, to the replica running it, if one does.
    pub fn cancel(self: &Arc<Self>, request: &str) {
        use std::sync::atomic::Ordering;
        if self.cancelling.fetch_add(1, Ordering::AcqRel) >= MAX_CANCELS {
            self.cancelling.fetch_sub(1, Ordering::AcqRel);
            tracing::info!(
                "a cancellation was dropped: {MAX_CANCELS} of this session's are on their way \
                 to other replicas already"
            );
            return;
        }
        let (relay, address) = (self.clone(), self.cancel_address(request));
        tokio::spawn(async move {
            let _counted = CountedOut(relay.cancelling.clone());
            let deadline = tokio::time::Instant::now() + CANCEL_TRIES_FOR;
            loop {
                match relay.store.deliver(&address, "cancel").await {
                    Ok(true) => return,
                    Ok(false) if tokio::time::Instant::now() < deadline => {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    Ok(false) => return,
                    Err(error) => {
                        tracing::debug!(%error, "cannot pass a cancellation on");
                        return;
                    }
                }
            }
        });
    }

    /// Opens the mailbox for the answer to our request `id`; whether it opened.
    pub async fn expect(&self, id: &str) -> bool {
        match self.store.open_mailbox(&self.address(id), self.ttl).await {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!(%error, "cannot open a mailbox: an answer that reaches another replica is lost");
                false
            }
        }
    }

    /// The answer to our request `id` once another replica delivered it.
    pub async fn answer(&self, id: &str) -> Value {
        let address = self.address(id);
        loop {
            let mail = poll_mail(&*self.store, &address, self.ttl).await;
            if let Some(answer) = mail.and_then(|mail| serde_json::from_str(&mail).ok()) {
                return answer;
            }
        }
    }

    /// Closes the mailbox of request `id` (answered here, or given up).
    pub fn forget(self: &Arc<Self>, id: &str) {
        let (relay, address) = (self.clone(), self.address(id));
        tokio::spawn(async move {
            let _ = relay.store.close_mailbox(&address).await;
        });
    }

    /// Hands the client's response to request `id` (a JSON-RPC `result` or
    /// `error` object, as `{"result": ..}` / `{"error": ..}`) to the replica
    /// waiting for it, if one is.
    pub fn deliver(self: &Arc<Self>, id: &str, response: Value) {
        let text = response.to_string();
        if text.len() > MAX_RELAYED {
            tracing::debug!(
                bytes = text.len(),
                "a response too large to relay is dropped"
            );
            return;
        }
        let (relay, address) = (self.clone(), self.address(id));
        tokio::spawn(async move {
            match relay.store.deliver(&address, &text).await {
                Ok(true) => tracing::debug!("an answer was relayed to the replica that asked"),
                Ok(false) => tracing::debug!("a response to no open question is dropped"),
                Err(error) => tracing::warn!(%error, "cannot relay an answer"),
            }
        });
    }
}

/// Closes a mailbox when dropped.
struct Closing(Arc<Relay>, String);

impl Drop for Closing {
    fn drop(&mut self) {
        let (relay, address) = (self.0.clone(), std::mem::take(&mut self.1));
        tokio::spawn(async move {
            let _ = relay.store.close_mailbox(&address).await;
        });
    }
}

/// Counts one cancellation out when dropped.
struct CountedOut(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for CountedOut {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// The mail at `address`, looking every so often (25 ms, growing by half up
/// to 250 ms) for at most `wait`.
pub(crate) async fn poll_mail(
    store: &dyn SessionStore,
    address: &str,
    wait: Duration,
) -> Option<String> {
    let deadline = tokio::time::Instant::now() + wait;
    let mut waits = Backoff::new(FIRST_POLL, MAX_POLL);
    loop {
        match store.collect_mail(address).await {
            Ok(Some(mail)) => return Some(mail),
            Ok(None) => {}
            Err(error) => tracing::debug!(%error, "cannot read a mailbox"),
        }
        let every = waits.next_wait();
        if tokio::time::Instant::now() + every > deadline {
            return None;
        }
        tokio::time::sleep(every).await;
    }
}
