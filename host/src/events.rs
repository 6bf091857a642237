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
        call_id: String,
        tool: String,
        run_id: String,
        session_id: String,
    },
    /// A call ended.
    Finished {
        call_id: String,
        tool: String,
        duration_ms: f64,
        error: Option<ErrorKind>,
    },
    /// A tool published an event with `host.emit`.
    Emitted {
        call_id: String,
        tool: String,
        name: String,
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
