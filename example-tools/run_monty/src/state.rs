//! A paused script as it leaves the instance: Monty's dump of the paused
//! run, what the script printed so far, the tools it may call, and what it
//! waits for. The host keeps it opaque (and bounds its size).

use serde::{Deserialize, Serialize};

/// Everything a fresh instance needs to go on with a script.
#[derive(Serialize, Deserialize)]
pub struct State {
    /// `monty::dump` of the paused run.
    pub run: Vec<u8>,
    /// What the script printed so far.
    pub printed: Printed,
    /// The tools the script may call.
    pub tools: Vec<Callable>,
    /// Once set, each call is answered before the script goes on (the
    /// script used a tool's result without `await`).
    pub sync: bool,
    /// What the run waits for.
    pub waiting: Waiting,
}

/// What the paused run waits for.
#[derive(Clone, Copy, Serialize, Deserialize)]
pub enum Waiting {
    /// The results of its pending futures.
    Futures,
    /// The value of the one call it stopped at.
    Call,
}

/// A tool the script may call.
#[derive(Clone, Serialize, Deserialize)]
pub struct Callable {
    /// Its name.
    pub name: String,
    /// The one property a lone positional argument stands for, when the
    /// tool has exactly one required property.
    pub positional: Option<String>,
}

/// Printed output, kept up to [`Printed::KEPT`] bytes.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct Printed {
    pub kept: String,
    /// Bytes printed past the cap.
    pub dropped: usize,
}

impl Printed {
    /// Bytes of printed output kept.
    pub const KEPT: usize = 32 * 1024;

    pub fn push(&mut self, text: &str) {
        let room = Self::KEPT.saturating_sub(self.kept.len());
        if text.len() <= room {
            self.kept.push_str(text);
            return;
        }
        let mut cut = room;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        self.kept.push_str(&text[..cut]);
        self.dropped += text.len() - cut;
    }
}

impl State {
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("a state serializes")
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        postcard::from_bytes(bytes).map_err(|e| format!("the script's state does not load: {e}"))
    }
}
