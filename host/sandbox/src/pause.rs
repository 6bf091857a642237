//! A script stopped for a person's answer that comes with a later request
//! (an MCP input-required result): what the entry point keeps, anywhere it
//! likes, to go on from there with the answer, on any replica, without
//! running again a call the script made before.
//!
//! The entry point sets [`ScriptPauses`] on the call's context
//! ([`CallContext::pausing`](crate::CallContext::pausing)). A script whose
//! call asks a question that the asker takes "with the answer"
//! ([`Reply::Later`](crate::ask::Reply::Later)) then stops: its pause is left
//! there and the call fails as waiting for the answer. The retry puts the
//! pause back ([`ScriptPauses::resume_with`]) with the answers: the calls
//! that waited are made again, those of the same batch that ended are not,
//! and the script goes on from its state.

use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};

/// Where a script stopped for an answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptPause {
    /// The interpreter's state.
    #[serde(with = "base64_bytes")]
    pub state: Vec<u8>,
    /// The calls that wait for the answer, made again on resume.
    pub waiting: Vec<PausedCall>,
    /// The calls of the same batch that ended, with their answers.
    pub answered: Vec<PausedAnswer>,
    /// What the script spent so far.
    pub spent: Spent,
}

/// A call a script made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PausedCall {
    /// The script's id of the call.
    pub id: u32,
    /// The tool.
    pub name: String,
    /// Its arguments, JSON text.
    pub arguments: String,
}

/// The answer of a call a script made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PausedAnswer {
    /// The script's id of the call.
    pub id: u32,
    /// The tool's text, or the error's kind and message.
    pub output: Result<String, (String, String)>,
}

/// What a script used of its budgets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spent {
    /// Milliseconds its segments ran.
    pub millis: u64,
    /// Fuel its segments used.
    pub fuel: u64,
    /// Tool calls it made.
    pub calls: u32,
}

/// A call's pause, as its script leaves it and its retry gives it back.
#[derive(Debug, Default)]
pub struct ScriptPauses {
    paused: Mutex<Option<ScriptPause>>,
    resume: Mutex<Option<ScriptPause>>,
    started: std::sync::atomic::AtomicBool,
}

impl ScriptPauses {
    /// Whether a script started (or went on) in the call: its calls may
    /// have run, so it must not start again from the beginning.
    pub fn started(&self) -> bool {
        self.started.load(std::sync::atomic::Ordering::Acquire)
    }

    pub(crate) fn start(&self) {
        self.started
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// The pause the script stopped at, if it did.
    pub fn take_paused(&self) -> Option<ScriptPause> {
        self.paused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Has the script go on from `pause` instead of starting.
    pub fn resume_with(&self, pause: ScriptPause) {
        *self.resume.lock().unwrap_or_else(PoisonError::into_inner) = Some(pause);
    }

    pub(crate) fn pause(&self, pause: ScriptPause) {
        *self.paused.lock().unwrap_or_else(PoisonError::into_inner) = Some(pause);
    }

    pub(crate) fn take_resume(&self) -> Option<ScriptPause> {
        self.resume
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

mod base64_bytes {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(deserializer)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(serde::de::Error::custom)
    }
}
