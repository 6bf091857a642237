//! Telling clients that the tool list changed, and requests that the
//! host's first tools are loaded.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{broadcast, watch};

#[cfg(doc)]
use super::server::{McpServer, McpServerBuilder};

/// Tells the clients of an [`McpServer`] that its tool list changed; cheap to
/// clone and hand to whatever adds or removes tools.
#[derive(Clone, Debug)]
pub struct ToolsChanged(pub(crate) broadcast::Sender<()>);

impl ToolsChanged {
    /// Sends `notifications/tools/list_changed` to every connected client.
    pub fn notify(&self) {
        // No receivers just means no client is connected.
        let _ = self.0.send(());
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<()> {
        self.0.subscribe()
    }
}

/// Tells an [`McpServer`] that its host's tools are loaded; see
/// [`McpServerBuilder::loading`].
pub struct ToolsLoading {
    pub(crate) done: watch::Sender<bool>,
    pub(crate) changed: ToolsChanged,
    pub(crate) listed_early: Arc<AtomicBool>,
}

impl ToolsLoading {
    /// The tools are loaded: waiting requests go on, and clients that were
    /// given a listing before are told the list changed.
    pub fn done(self) {}
}

impl Drop for ToolsLoading {
    fn drop(&mut self) {
        self.done.send_replace(true);
        if self.listed_early.load(Ordering::Acquire) {
            self.changed.notify();
        }
    }
}
