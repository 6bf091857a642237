//! Scripts stopped for the person's answer over the sessionless revision:
//! a script whose tool call needs an answer leaves its pause (its state, the
//! calls that wait, the answers of those made, what it spent) in the shared
//! store, and the input-required result names it in the sealed
//! `requestState`. The retry, on any replica and after a restart, takes the
//! pause (once: it is deleted when taken) and the script goes on from the
//! call it stopped at; no call before it runs again.
//!
//! A kept pause is authenticated (an HMAC with the request-state keys, not
//! encrypted: the store's readers see it) and bound to its id and the
//! caller, tool, component version and exact arguments the state was
//! issued for: one altered or swapped in the store, or taken up by another
//! caller or for another script, is refused. It expires with the question.
//! Each caller may have [`MAX_PAUSES_PER_CALLER`] kept by one replica at
//! once (counted by that replica), each at most [`MAX_KEPT_PAUSE`] bytes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::ErrorData;
use rmcp::model::{RequestStateCodec, RequestStateError, SealOptions};
use wasm_agent_sandbox::pause::ScriptPause;
use wasm_agent_sandbox::result::{CallError, ErrorKind};
use wasm_agent_session::SessionStore;

use super::input_required::Binding;

/// Paused scripts one caller may have kept by one replica at once.
pub(crate) const MAX_PAUSES_PER_CALLER: usize = 8;
/// The largest pause kept, sealed (the state, at most 1 MiB, and the
/// answers of the calls made beside the one waiting).
pub(crate) const MAX_KEPT_PAUSE: usize = 4 * 1024 * 1024;

/// The pauses of one server's scripts.
pub(crate) struct PausedScripts {
    codec: RequestStateCodec,
    store: Arc<dyn SessionStore>,
    wait: Duration,
    /// The pauses this replica kept, by caller, with when each expires.
    kept: Mutex<HashMap<String, Vec<(String, Instant)>>>,
}

impl PausedScripts {
    pub fn new(codec: RequestStateCodec, store: Arc<dyn SessionStore>, wait: Duration) -> Self {
        Self {
            codec,
            store,
            wait,
            kept: Mutex::default(),
        }
    }

    /// Keeps `pause` of the script `binding` names until its question's
    /// wait passes; its id. A caller with as many pauses as it may, or a
    /// pause too large, is refused (the call's error).
    pub async fn keep(&self, pause: &ScriptPause, binding: &Binding) -> Result<String, CallError> {
        let caller = caller(binding);
        let id = uuid::Uuid::new_v4().simple().to_string();
        {
            let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
            let now = Instant::now();
            kept.retain(|_, pauses| {
                pauses.retain(|(_, expires)| *expires > now);
                !pauses.is_empty()
            });
            let mine = kept.entry(caller).or_default();
            if mine.len() >= MAX_PAUSES_PER_CALLER {
                return Err(CallError::new(
                    ErrorKind::RateLimited,
                    format!(
                        "{MAX_PAUSES_PER_CALLER} scripts of this caller already wait for \
                         answers; answer them, or let them expire, before another pauses"
                    ),
                ));
            }
            mine.push((id.clone(), now + self.wait));
        }
        let size = pause.state.len()
            + pause
                .answered
                .iter()
                .map(|answer| match &answer.output {
                    Ok(text) => text.len(),
                    Err((kind, message)) => kind.len() + message.len(),
                })
                .sum::<usize>();
        if size > MAX_KEPT_PAUSE / 2 {
            self.forget(binding, &id);
            return Err(too_large(size));
        }
        let associated = associated(binding, &id);
        let options = SealOptions::new()
            .ttl(self.wait)
            .associated_data(&associated);
        let sealed = self.codec.seal_json_with(pause, &options).map_err(|e| {
            CallError::new(ErrorKind::Failed, format!("cannot keep the script: {e}"))
        })?;
        if sealed.len() > MAX_KEPT_PAUSE {
            self.forget(binding, &id);
            return Err(too_large(sealed.len()));
        }
        let address = address(&id);
        let kept = async {
            self.store.open_mailbox(&address, self.wait).await?;
            self.store.deliver(&address, &sealed).await
        };
        match kept.await {
            Ok(true) => Ok(id),
            Ok(false) | Err(_) => {
                self.forget(binding, &id);
                Err(CallError::new(
                    ErrorKind::StoreUnavailable,
                    "the script stopped for the user's answer, but its pause cannot be kept now: \
                     the session store does not answer",
                ))
            }
        }
    }

    /// Takes the pause `id` of the script `binding` names, once.
    pub async fn take(&self, id: &str, binding: &Binding) -> Result<ScriptPause, ErrorData> {
        self.forget(binding, id);
        let sealed = match self.store.collect_mail(&address(id)).await {
            Ok(Some(sealed)) => sealed,
            Ok(None) => {
                return Err(ErrorData::invalid_params(
                    "requestState refused: the script it continues is gone (it went on \
                     already, or its question expired): call the tool again",
                    None,
                ));
            }
            Err(error) => {
                tracing::warn!(%error, "cannot take a paused script from the store");
                return Err(ErrorData::internal_error(
                    "cannot continue the script now: the session store does not answer",
                    None,
                ));
            }
        };
        self.codec
            .open_json_with(&sealed, &associated(binding, id))
            .map_err(|error| {
                let why = match error {
                    RequestStateError::Expired => {
                        "the kept script expired with its question: \
                         call the tool again"
                    }
                    _ => {
                        "the kept script does not belong to this request (changed, or \
                         issued to another caller or call)"
                    }
                };
                ErrorData::invalid_params(format!("requestState refused: {why}"), None)
            })
    }

    fn forget(&self, binding: &Binding, id: &str) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(pauses) = kept.get_mut(&caller(binding)) {
            pauses.retain(|(kept, _)| kept != id);
        }
    }
}

fn caller(binding: &Binding) -> String {
    format!("{}\0{}", binding.tenant, binding.principal)
}

fn address(id: &str) -> String {
    format!("script-pause/{id}")
}

fn too_large(size: usize) -> CallError {
    CallError::new(
        ErrorKind::OutputTooLarge,
        format!(
            "the script's pause is {size} bytes (its state and the answers of the calls made \
             beside the one waiting); at most {MAX_KEPT_PAUSE} are kept while the person is \
             asked"
        ),
    )
}

/// What a pause is bound to: which pause, who, which tool and version,
/// which arguments (each field's length first, so none runs into the next).
fn associated(binding: &Binding, id: &str) -> Vec<u8> {
    let mut bytes = Vec::new();
    for field in [
        id,
        &binding.principal,
        &binding.tenant,
        &binding.tool,
        &binding.version,
        &binding.arguments,
    ] {
        bytes.extend_from_slice(&(field.len() as u64).to_be_bytes());
        bytes.extend_from_slice(field.as_bytes());
    }
    bytes
}
