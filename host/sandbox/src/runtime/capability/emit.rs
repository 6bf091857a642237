//! `host.emit`: a tool's events onto the host's event bus, each payload
//! bounded and the call's total capped (events wait in the bus for slow
//! subscribers, so they are host memory the tool causes).

use crate::events::{EventBus, ToolEvent};
use crate::runtime::imports::CallId;
use crate::runtime::log::shorten;

/// Events one call may emit before further ones are dropped.
const MAX_EVENTS: u32 = 1000;
/// Largest event payload.
const MAX_EVENT_PAYLOAD: usize = 64 * 1024;
/// Event payload bytes one call may publish in all.
const MAX_EVENT_BYTES: usize = 1024 * 1024;

/// The events of one call.
pub struct Emitter {
    bus: EventBus,
    call: CallId,
    sent: u32,
    bytes: usize,
}

impl Emitter {
    /// Publishes `call`'s events on `bus`.
    pub fn new(bus: EventBus, call: CallId) -> Self {
        Self {
            bus,
            call,
            sent: 0,
            bytes: 0,
        }
    }

    /// Publishes one event (JSON payload); past the caps, drops it.
    pub fn emit(&mut self, name: String, payload: String) -> wasmtime::Result<()> {
        self.sent = self.sent.saturating_add(1);
        if self.sent > MAX_EVENTS {
            return Ok(());
        }
        if payload.len() > MAX_EVENT_PAYLOAD {
            wasmtime::bail!(
                "emit: the payload of {name:?} is {} bytes, more than the {MAX_EVENT_PAYLOAD} allowed",
                payload.len()
            );
        }
        self.bytes = self.bytes.saturating_add(payload.len());
        if self.bytes > MAX_EVENT_BYTES {
            if self.bytes - payload.len() <= MAX_EVENT_BYTES {
                tracing::warn!(tool = %self.call.tool, call_id = %self.call.call_id, "tool emitted more than {MAX_EVENT_BYTES} bytes of events; dropping the rest");
            }
            return Ok(());
        }
        let payload = serde_json::from_str(&payload)
            .map_err(|_| wasmtime::format_err!("emit: the payload of {name:?} is not JSON text"))?;
        self.bus.publish(ToolEvent::Emitted {
            call_id: self.call.call_id.to_string(),
            tool: self.call.tool.to_string(),
            name: shorten(name, 256),
            payload,
        });
        Ok(())
    }
}
