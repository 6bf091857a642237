//! A running call whose question operators decide on the console, over the
//! sessionless revision. The request ends with the question's page (the
//! call's own answer is not known yet); the call waits for the operator
//! where it runs and goes on to its end, or to its next question, whether or
//! not anyone comes back for it. What it did next is kept in the shared
//! store, and the retry takes it on any replica. A retry that comes before
//! waits a while and is sent to the page again; one that comes after the
//! replica running the call stopped is told the call did not finish.
//!
//! Nothing here can cancel a call an operator decided: the call ends by its
//! own limits, never because nobody came back for its result.

use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData;
use serde_json::json;

use super::{Continue, Counted, Holds, Relayed, Response, Running, unavailable};

/// Longest a retry waits for the call before its person is sent to the page
/// again: well under clients' and proxies' request timeouts.
const RETRY_WAIT: Duration = Duration::from_secs(20);
/// How often the replica running the call says it still does.
const ALIVE_EVERY: Duration = Duration::from_secs(5);
/// How long a retry takes the call to run after the last word of it.
const ALIVE_FOR: Duration = Duration::from_secs(20);
/// How long what the call did is kept after it ended, beyond the ask wait
/// (every request state that can collect it expires within that wait).
const KEPT_PAST_WAIT: Duration = Duration::from_secs(60);
/// The first pause between two looks for what the call did (then longer).
const POLL: Duration = Duration::from_millis(100);
const MAX_POLL: Duration = Duration::from_secs(1);
/// The word that the call ended.
const ENDED: &str = "ended";

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
        running: Running,
        next: Continue,
    ) -> Result<String, Running> {
        let Some(counted) = Counted::take(self.clone(), caller) else {
            return Err(running);
        };
        let id = uuid::Uuid::new_v4().simple().to_string();
        let (alive, result) = (alive_address(&id), result_address(&id));
        let (every, alive_for) = self.alive_timing();
        if let Err(error) = self.store.open_mailbox(&alive, alive_for).await {
            tracing::warn!(%error, "cannot say a call runs on: its request waits for it");
            return Err(running);
        }
        let kept_for = self.wait + KEPT_PAST_WAIT;
        let holds = self.clone();
        tokio::spawn(async move {
            let store = &holds.store;
            let _counted = counted;
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
            match kept.await {
                Ok(true) => {}
                Ok(false) => tracing::warn!("cannot keep what a call did for its retry"),
                Err(error) => tracing::warn!(%error, "cannot keep what a call did for its retry"),
            }
            // The word that it runs becomes the word that it ended.
            let ended = async {
                store.open_mailbox(&alive, kept_for).await?;
                store.deliver(&alive, ENDED).await
            };
            if let Err(error) = ended.await {
                tracing::debug!(%error, "cannot say a call ended");
            }
        });
        Ok(id)
    }

    /// What call `id` (let run by [`let_run`](Self::let_run), here or on
    /// another replica) did next, taken once; `None` when it still runs
    /// after a while (its person is then sent to the page again). A call
    /// whose replica stopped before it ended is refused, saying so.
    pub async fn collect(&self, id: &str) -> Result<Option<Response>, ErrorData> {
        let (alive, result) = (alive_address(id), result_address(id));
        let started = tokio::time::Instant::now();
        let mut poll = POLL;
        loop {
            if let Some(mail) = self.taken(&result).await? {
                return Ok(Some(mail));
            }
            let word = self.store.mailboxes(&alive, 1).await.map_err(unavailable)?;
            let word = word.into_iter().find(|(address, _)| *address == alive);
            if !matches!(word, Some((_, None))) {
                // It ended (between the two looks, or its result was taken),
                // or its replica stopped.
                return match self.taken(&result).await? {
                    Some(mail) => Ok(Some(mail)),
                    None if word.is_some() => Err(taken_already()),
                    None => Err(stopped(self.alive_timing().1)),
                };
            }
            if started.elapsed() >= RETRY_WAIT.min(self.wait) {
                return Ok(None);
            }
            tokio::time::sleep(poll).await;
            poll = (poll * 3 / 2).min(MAX_POLL);
        }
    }

    /// The response left at `address`, if one was.
    async fn taken(&self, address: &str) -> Result<Option<Response>, ErrorData> {
        let mail = self
            .store
            .collect_mail(address)
            .await
            .map_err(unavailable)?;
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
    /// counts: at most [`ALIVE_EVERY`] and [`ALIVE_FOR`], shorter for a
    /// short ask wait.
    fn alive_timing(&self) -> (Duration, Duration) {
        let every = ALIVE_EVERY.min(self.wait / 4);
        (every, ALIVE_FOR.min(every * 4))
    }
}

fn alive_address(id: &str) -> String {
    format!("referred-runs:{id}")
}

fn result_address(id: &str) -> String {
    format!("referred-next:{id}")
}

fn taken_already() -> ErrorData {
    ErrorData::invalid_params(
        "requestState refused: the call ended and what it did was given to an earlier retry \
         (it is given once); call the tool again if it should run again",
        Some(json!("request_state")),
    )
}

fn stopped(alive_for: Duration) -> ErrorData {
    ErrorData::internal_error(
        format!(
            "the call stopped before it ended: the replica running it has not said it runs for \
             {} (it stopped, or cannot reach the session store), so it did not finish; what it \
             did before is not undone, and nothing is repeated: call the tool again if it \
             should run",
            humantime::format_duration(alive_for)
        ),
        Some(json!("call_stopped")),
    )
}

#[cfg(test)]
mod tests;
