//! A running call whose question operators decide on the console, over the
//! sessionless revision. The request ends with the question's page (the
//! call's own answer is not known yet); the call waits for the operator
//! where it runs and goes on to its end, or to its next question, whether or
//! not anyone comes back for it. What it did next is kept in the shared
//! store for the ask wait, and every retry of the call reads it there, on
//! any replica (reading it changes nothing, so a retry whose response is lost
//! can be sent again). A retry that comes before waits a while and is sent
//! to the page again; one that comes after the replica running the call
//! stopped is told so.
//!
//! Nothing here can cancel a call an operator decided: the call ends by its
//! own limits, never because nobody came back for its result.

use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use wasm_agent_session::Backoff;

use super::{Continue, Holds, Relayed, Response, Running, unavailable};

/// Longest a retry waits for the call before its person is sent to the page
/// again: well under clients' and proxies' request timeouts.
const RETRY_WAIT: Duration = Duration::from_secs(20);
/// How often the replica running the call says it still does: a quarter of
/// the ask wait, within these bounds; each word counts four times as long.
const ALIVE_EVERY: (Duration, Duration) = (Duration::from_millis(250), Duration::from_secs(5));
/// The first pause between two looks for what the call did (then longer,
/// up to [`MAX_POLL`]).
const POLL: Duration = Duration::from_millis(100);
const MAX_POLL: Duration = Duration::from_secs(1);

/// How the call ended, as the replica running it says (sealed).
#[derive(serde::Serialize, serde::Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Ended {
    /// What it did was kept.
    Kept,
    /// What it did could not be kept (the store refused it).
    Lost,
}

impl Holds {
    /// Lets `running` go on here while its question is decided elsewhere;
    /// `next` makes what it does next into a response, which is kept for
    /// [`collect`](Self::collect). The call's id; `Err` gives the call back
    /// when `caller` holds as many calls as it may, or when the store does
    /// not take the word that it runs (then it is waited for in the
    /// request).
    pub async fn let_run(
        self: &Arc<Self>,
        caller: &str,
        mut running: Running,
        next: Continue,
    ) -> Result<String, Running> {
        if !running.take_place(self, caller) {
            return Err(running);
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        let (alive, result) = (alive_address(&id), result_address(&id));
        let (every, alive_for) = self.alive_timing();
        if let Err(error) = self.store.open_mailbox(&alive, alive_for).await {
            tracing::warn!(%error, "cannot say a call runs on: its request waits for it");
            return Err(running);
        }
        // As long as the states in what it did next are good for.
        let kept_for = self.wait;
        let holds = self.clone();
        tokio::spawn(async move {
            let store = &holds.store;
            let went_on = next(running);
            tokio::pin!(went_on);
            let response = loop {
                tokio::select! {
                    response = &mut went_on => break response,
                    () = tokio::time::sleep(every) => {
                        if let Err(error) = store.open_mailbox(&alive, alive_for).await {
                            tracing::debug!(%error, "cannot say a call still runs");
                        }
                    }
                }
            };
            let text = holds.seal(&result, &Relayed::from(response), kept_for);
            let kept = async {
                store.open_mailbox(&result, kept_for).await?;
                store.deliver(&result, &text).await
            };
            let ended = match kept.await {
                Ok(true) => Ended::Kept,
                Ok(false) => Ended::Lost,
                Err(error) => {
                    tracing::warn!(%error, "cannot keep what a call did for its retry");
                    Ended::Lost
                }
            };
            // The word that it runs becomes the word of how it ended.
            let word = holds.seal(&alive, &ended, kept_for);
            let said = async {
                store.open_mailbox(&alive, kept_for).await?;
                store.deliver(&alive, &word).await
            };
            if let Err(error) = said.await {
                tracing::debug!(%error, "cannot say a call ended");
            }
        });
        Ok(id)
    }

    /// What call `id` (let run by [`let_run`](Self::let_run), here or on
    /// another replica) did next; `None` when it still runs after a while,
    /// or `cancelled` fires first (its person is then sent to the page
    /// again). A call whose replica stopped before it ended is refused,
    /// saying so.
    pub async fn collect(
        &self,
        id: &str,
        cancelled: &CancellationToken,
    ) -> Result<Option<Response>, ErrorData> {
        let (alive, result) = (alive_address(id), result_address(id));
        let started = tokio::time::Instant::now();
        let mut waits = Backoff::new(POLL, MAX_POLL);
        loop {
            if let Some(response) = self.kept(&result).await? {
                return Ok(Some(response));
            }
            match self.store.mailbox(&alive).await.map_err(unavailable)? {
                // It runs.
                Some(None) => {}
                // It ended between the two looks, or what it did was lost.
                Some(Some(word)) => {
                    return match self.kept(&result).await? {
                        Some(response) => Ok(Some(response)),
                        None if self.open(&alive, &word) == Some(Ended::Kept) => Err(expired()),
                        None => Err(lost()),
                    };
                }
                None => return Err(stopped(self.alive_timing().1)),
            }
            if started.elapsed() >= RETRY_WAIT.min(self.wait) {
                return Ok(None);
            }
            tokio::select! {
                () = tokio::time::sleep(waits.next_wait()) => {}
                () = cancelled.cancelled() => return Ok(None),
            }
        }
    }

    /// The response kept at `address`, if there is one (read, not taken).
    async fn kept(&self, address: &str) -> Result<Option<Response>, ErrorData> {
        let mail = self
            .store
            .mailbox(address)
            .await
            .map_err(unavailable)?
            .flatten();
        Ok(mail.map(|mail| match self.open::<Relayed>(address, &mail) {
            Some(relayed) => relayed.into(),
            None => Err(ErrorData::internal_error(
                "what the call did was not kept by this deployment (its seal does not open): \
                 it is not given",
                None,
            )),
        }))
    }

    /// How often a running call is said to run, and for how long each word
    /// counts (see [`ALIVE_EVERY`]).
    fn alive_timing(&self) -> (Duration, Duration) {
        let every = (self.wait / 4).clamp(ALIVE_EVERY.0, ALIVE_EVERY.1);
        (every, every * 4)
    }
}

fn alive_address(id: &str) -> String {
    format!("referred-runs:{id}")
}

fn result_address(id: &str) -> String {
    format!("referred-next:{id}")
}

fn expired() -> ErrorData {
    ErrorData::invalid_params(
        "requestState refused: the call ended longer ago than what it did is kept (the ask \
         wait); call the tool again if it should run again",
        Some(json!("request_state")),
    )
}

fn lost() -> ErrorData {
    ErrorData::internal_error(
        "the call ended, but what it did could not be kept for its retry (the session store \
         refused it): it is not known here how it ended; nothing is repeated: call the tool \
         again if it should run",
        Some(json!("call_lost")),
    )
}

fn stopped(alive_for: Duration) -> ErrorData {
    ErrorData::internal_error(
        format!(
            "the call stopped before it ended: the replica running it has not said it runs for \
             {} (it stopped, or cannot reach the session store), so what it did cannot be \
             given and it may not have finished; what it did before is not undone, and nothing \
             is repeated: call the tool again if it should run",
            humantime::format_duration(alive_for)
        ),
        Some(json!("call_stopped")),
    )
}

#[cfg(test)]
mod tests;
