//! How a guest run ended, as the error kind that explains it: a deadline or
//! cancellation, fuel, memory, host resources, a stack overflow, a denied
//! capability, or a crash with the guest's last words.

use std::time::Duration;

use wasmtime::component::ResourceTableError;
use wasmtime::{Store, Trap};

use crate::bindings::types;
use crate::result::{CallError, ErrorKind};
use crate::runtime::FIELD_SIZE_LIMIT;
use crate::runtime::denials;
use crate::runtime::output::Captured;
use crate::runtime::session_state::{StateFull, StoreFailed};
use crate::runtime::store::CallState;
use wasm_agent_policy::Policy;

/// Why the epoch callback stopped a guest.
#[derive(Debug, thiserror::Error)]
pub(in crate::runtime) enum Interrupted {
    #[error("the call's deadline passed")]
    Deadline,
    #[error("the call was cancelled")]
    Cancelled,
}

pub(in crate::runtime) fn cancelled() -> CallError {
    CallError::new(
        ErrorKind::Cancelled,
        "the call was cancelled before it finished",
    )
}

/// A call that stopped before it started because a question about it went
/// to the person with the call's answer.
pub(in crate::runtime) fn awaits_answer(tool: &str) -> CallError {
    CallError::new(
        ErrorKind::Denied,
        format!(
            "the call to {tool:?} waits for the user's answer about a folder; it runs when it \
             is made again with that answer"
        ),
    )
}

pub(in crate::runtime) fn timed_out(timeout: Duration) -> CallError {
    CallError::new(
        ErrorKind::Timeout,
        format!(
            "the tool did not finish within its time limit of {} (timeout)",
            humantime::format_duration(timeout)
        ),
    )
}

fn find<T: std::error::Error + Send + Sync + 'static>(error: &wasmtime::Error) -> Option<&T> {
    error
        .downcast_ref::<T>()
        .or_else(|| error.chain().find_map(|e| e.downcast_ref::<T>()))
}

/// Turns a failed guest run into the error kind that explains it.
pub(in crate::runtime) fn classify(
    error: &wasmtime::Error,
    store: &Store<CallState>,
    policy: &Policy,
    stderr: &Captured,
) -> CallError {
    if let Some(interrupted) = find::<Interrupted>(error) {
        return match interrupted {
            Interrupted::Deadline => timed_out(policy.timeout),
            Interrupted::Cancelled => cancelled(),
        };
    }
    if let Some(StoreFailed(failure)) = find::<StoreFailed>(error) {
        return CallError::new(
            ErrorKind::StoreUnavailable,
            format!(
                "the session store is unavailable, so the tool's state could not be used: {failure}"
            ),
        );
    }
    if let Some(StateFull(refused)) = find::<StateFull>(error) {
        return CallError::new(
            ErrorKind::CapabilityDenied,
            format!("the tool's write to its session state was refused: {refused}"),
        );
    }
    let trap = find::<Trap>(error);
    if trap == Some(&Trap::OutOfFuel) {
        let budget = policy.fuel.map(|f| f.to_string()).unwrap_or_default();
        return CallError::new(
            ErrorKind::OutOfFuel,
            format!("the tool used up its fuel budget of {budget} instructions (fuel)"),
        );
    }
    if trap == Some(&Trap::Interrupt) {
        return timed_out(policy.timeout);
    }
    if let Some(asked) = store.data().limiter.refused_growth() {
        return memory_limit(asked, policy);
    }
    if let Some(ResourceTableError::Full) = find::<ResourceTableError>(error) {
        let limit = store.data().table.max_capacity();
        let share = if (limit as u64) < u64::from(policy.max_resources) {
            " (its share of the host's open files: lower --max-concurrency or raise the open-file limit for more)"
        } else {
            ""
        };
        return CallError::new(
            ErrorKind::CapabilityDenied,
            format!(
                "the tool tried to hold more than {limit} host resources at once (open files, \
                 sockets, streams, HTTP headers and requests), the limit of its policy \
                 (max_resources){share}"
            ),
        );
    }
    if header_limit(error) {
        return CallError::new(
            ErrorKind::CapabilityDenied,
            format!(
                "the tool built a set of HTTP headers larger than {} KiB, the host's limit for one \
                 set (request or response headers)",
                FIELD_SIZE_LIMIT / 1024
            ),
        );
    }
    if trap == Some(&Trap::StackOverflow) {
        return CallError::new(
            ErrorKind::StackOverflow,
            "the tool overflowed its call stack (too deep recursion)",
        );
    }
    let said = last_words(&stderr.kept)
        .map(|line| format!("; it printed: {line}"))
        .unwrap_or_default();
    let what = match trap {
        Some(trap) => trap.to_string(),
        // A host function's own error, under wasmtime's backtrace context.
        None => error
            .chain()
            .last()
            .map(|cause| cause.to_string())
            .unwrap_or_default()
            .lines()
            .next()
            .unwrap_or_default()
            .to_string(),
    };
    CallError::new(ErrorKind::Trap, format!("the tool crashed: {what}{said}"))
}

/// Whether wasi:http refused to grow a set of headers past
/// [`FIELD_SIZE_LIMIT`] (its error type is private, so it is known by its
/// message; `header_floods_hit_the_resource_limit` pins it).
fn header_limit(error: &wasmtime::Error) -> bool {
    error.chain().any(|e| {
        let text = e.to_string();
        text == "total size of fields exceeds limit" || text == "too many fields in the field map"
    })
}

/// The error for a call that ended after its memory could not grow to `asked` bytes.
pub(in crate::runtime) fn memory_limit(asked: usize, policy: &Policy) -> CallError {
    CallError::new(
        ErrorKind::MemoryLimit,
        format!(
            "the tool tried to use {} MiB of memory, more than the {} its policy allows (memory)",
            asked.div_ceil(1 << 20),
            policy.memory
        ),
    )
}

/// The error for a call that failed after the sandbox refused something.
pub(in crate::runtime) fn denied_error(denied: &denials::Denial) -> CallError {
    CallError::new(
        ErrorKind::CapabilityDenied,
        format!("the tool tried {}: {}", denied.attempt, denied.reason),
    )
}

/// A tool's own error, with credentials by shape redacted from its message
/// (it reaches the caller, the model, the terminal and the logs).
pub(in crate::runtime) fn tool_error(error: types::ToolError) -> CallError {
    let (kind, message) = match error {
        types::ToolError::InvalidArguments(m) => (ErrorKind::InvalidArguments, m),
        types::ToolError::Failed(m) => (ErrorKind::Failed, m),
        types::ToolError::UnknownTool(m) => (ErrorKind::UnknownTool, m),
    };
    match wasm_agent_redact::text(&message) {
        std::borrow::Cow::Borrowed(_) => CallError::new(kind, message),
        std::borrow::Cow::Owned(redacted) => CallError::new(kind, redacted),
    }
}

/// The last thing a crashing guest said on stderr: for a Rust panic, the
/// "panicked at" line and its message, without the backtrace hint.
pub(in crate::runtime) fn last_words(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("note: run with `RUST_BACKTRACE"))
        .collect();
    let start = lines
        .iter()
        .rposition(|l| l.contains("panicked at"))
        .unwrap_or(lines.len().checked_sub(1)?);
    let words: String = lines[start..].join(" ").chars().take(4096).collect();
    // Redacted before the cut, so that no secret is logged in part.
    Some(crate::text::tool_line(&words).chars().take(300).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_words_keep_the_panic_message() {
        let stderr = b"\nthread '<unnamed>' panicked at src/lib.rs:5:9:\nboom\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            last_words(stderr).unwrap(),
            "thread '<unnamed>' panicked at src/lib.rs:5:9: boom"
        );
        assert_eq!(last_words(b"one\ntwo\n").unwrap(), "two");
        assert_eq!(last_words(b""), None);
    }
}
