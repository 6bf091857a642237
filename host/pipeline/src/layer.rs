//! A step of the pipeline ([`Layer`]) and the rest of the pipeline below it
//! ([`Next`]), as axum's `from_fn` middleware has them: a layer may answer
//! itself (a refusal, a cached result) or hand the call on, and sees what
//! comes back.

use std::sync::Arc;

use crate::call::{Called, ToolCall};

/// One step every call takes.
#[async_trait::async_trait]
pub trait Layer: Send + Sync + 'static {
    /// Whether the step has anything to do for `call` (a tool without a
    /// cache time, say); a layer that has not is skipped without a future
    /// of its own. The default: always.
    fn applies(&self, call: &ToolCall) -> bool {
        let _ = call;
        true
    }

    /// Handles `call`: answers it, or hands it to `next` and returns (or
    /// looks at) what that gives.
    async fn call(&self, call: &mut ToolCall, next: Next<'_>) -> Called;
}

/// The layers below the current one, and at the bottom the tool's target.
#[derive(Clone, Copy)]
pub struct Next<'a> {
    pub(crate) layers: &'a [Arc<dyn Layer>],
}

impl Next<'_> {
    /// Hands `call` to the next layer (or, after the last, runs it).
    pub async fn run(self, call: &mut ToolCall) -> Called {
        let mut layers = self.layers;
        while let Some((layer, rest)) = layers.split_first() {
            if layer.applies(call) {
                return layer.call(call, Next { layers: rest }).await;
            }
            layers = rest;
        }
        crate::run::run(call).await
    }
}
