//! `host.log`: a tool's log lines, escaped, cut and capped, into the host's
//! `tracing` under target `wasm_agent::tool`.

use crate::bindings::imported::Level;
use crate::runtime::imports::CallId;

/// Longest log line kept; longer ones are cut.
const MAX_LOG_LINE: usize = 8 * 1024;
/// Log lines one call may write before further ones are dropped.
const MAX_LOG_LINES: u32 = 1000;

/// The log of one call.
pub struct ToolLog {
    call: CallId,
    lines: u32,
}

impl ToolLog {
    /// A log for `call`.
    pub fn new(call: CallId) -> Self {
        Self { call, lines: 0 }
    }

    /// Writes one line (the first [`MAX_LOG_LINES`] of the call).
    pub fn write(&mut self, level: Level, message: String) {
        self.lines = self.lines.saturating_add(1);
        let (tool, call_id) = (&*self.call.tool, &*self.call.call_id);
        if self.lines > MAX_LOG_LINES {
            if self.lines == MAX_LOG_LINES + 1 {
                tracing::warn!(
                    tool,
                    call_id,
                    "tool logged more than {MAX_LOG_LINES} lines; dropping the rest"
                );
            }
            return;
        }
        // Redacted before the cut, so that no secret is cut out of its
        // shape and logged in part (the redaction's input is bounded too).
        let message = shorten(message, MAX_LOG_LINE * 4);
        let message = shorten(crate::text::tool_line(&message), MAX_LOG_LINE);
        match level {
            Level::Trace => tracing::trace!(target: "wasm_agent::tool", tool, call_id, "{message}"),
            Level::Debug => tracing::debug!(target: "wasm_agent::tool", tool, call_id, "{message}"),
            Level::Info => tracing::info!(target: "wasm_agent::tool", tool, call_id, "{message}"),
            Level::Warn => tracing::warn!(target: "wasm_agent::tool", tool, call_id, "{message}"),
            Level::Error => tracing::error!(target: "wasm_agent::tool", tool, call_id, "{message}"),
        }
    }
}

/// Cuts `text` to at most `max` bytes (on a character boundary), marked.
pub fn shorten(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str(" [...]");
    }
    text
}
