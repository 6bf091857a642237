//! The operators' step: the questions of a tool whose settings name the
//! operators (`answered_by = "operators"`) go to the operators' desk (the
//! console) instead of the person behind the call, who is only told where
//! it is decided. Without a desk, such a call has nobody to ask.

use std::sync::Arc;

use wasm_agent_sandbox::ask::OperatorDesk;

use crate::call::{AnsweredBy, Called, ToolCall};
use crate::layer::{Layer, Next};

/// Sends a call's questions to the operators where its tool says so.
pub(crate) struct Operators {
    pub(crate) desk: Option<Arc<dyn OperatorDesk>>,
}

#[async_trait::async_trait]
impl Layer for Operators {
    fn applies(&self, call: &ToolCall) -> bool {
        call.tool.settings.answered_by == AnsweredBy::Operators
    }

    async fn call(&self, call: &mut ToolCall, next: Next<'_>) -> Called {
        if let Some(desk) = &self.desk {
            let context = &call.context;
            let asking = desk.asking(
                context.user_id.as_deref(),
                context.tenant_id.as_deref(),
                context.asker(),
            );
            call.context.set_asking(Some(asking));
        } else {
            // Nobody may answer in the person's place, and nobody else can.
            call.context.set_asking(None);
        }
        next.run(call).await
    }
}
