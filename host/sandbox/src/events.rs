//! The event bus: tool started/finished events and events tools emit.

use serde::Serialize;
use tokio::sync::broadcast;

use crate::result::ErrorKind;

/// Something that happened during a tool call.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolEvent {
    /// A call began.
    Started {
        /// The call's id.
        call_id: String,
        /// The tool's public name.
        tool: String,
        /// The run the call belongs to.
        run_id: String,
        /// The session the call belongs to.
        session_id: String,
    },
    /// A call ended.
    Finished {
        /// The call's id.
        call_id: String,
        /// The tool's public name.
        tool: String,
        /// Wall-clock time of the call.
        duration_ms: f64,
        /// Why it failed, if it did.
        error: Option<ErrorKind>,
    },
    /// A tool published an event with `host.emit`.
    Emitted {
        /// The emitting call's id.
        call_id: String,
        /// The emitting tool's public name.
        tool: String,
        /// The event name the tool chose.
        name: String,
        /// The event's JSON payload.
        payload: serde_json::Value,
    },
}

/// A broadcast channel of [`ToolEvent`]s; subscribers that lag lose the oldest.
#[derive(Clone, Debug)]
pub struct EventBus {
    sender: broadcast::Sender<ToolEvent>,
}

impl EventBus {
    /// A bus keeping up to `capacity` undelivered events per subscriber.
    pub fn new(capacity: usize) -> Self {
        Self {
            sender: broadcast::channel(capacity.max(1)).0,
        }
    }

    /// Receives every event published from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<ToolEvent> {
        self.sender.subscribe()
    }

    /// Publishes an event (dropped when nobody listens).
    pub fn publish(&self, event: ToolEvent) {
        let _ = self.sender.send(event);
    }

    /// Builds and publishes an event only when someone listens.
    pub fn publish_with(&self, event: impl FnOnce() -> ToolEvent) {
        if self.sender.receiver_count() > 0 {
            self.publish(event());
        }
    }
}

impl Default for EventBus {
    fn default() -> Self {
        Self::new(1024)
    }
}
