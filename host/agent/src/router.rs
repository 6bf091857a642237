//! Tool routers: pick the few tools relevant to a request so that a model is
//! not shown hundreds of them.

use std::sync::Arc;

use serde_json::Value;

use super::bm25::Bm25Index;
use crate::provider::{ChatRequest, Message, Provider, ProviderError, ToolDefinition, Usage};

/// What a router chose, and what it cost.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selection {
    /// Tool names, most relevant first.
    pub tools: Vec<String>,
    /// Tokens spent choosing.
    pub usage: Usage,
}

/// Why a router could not choose (the agent then offers every tool).
#[derive(Debug, thiserror::Error)]
pub enum RouterError {
    /// The router's model failed.
    #[error("router model failed: {0}")]
    Model(#[source] ProviderError),
    /// A custom router failed.
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync>),
}

/// Picks the tools relevant to a request.
#[async_trait::async_trait]
pub trait ToolRouter: Send + Sync + 'static {
    /// At most `max_tools` names from `tools`, most relevant first.
    async fn select(
        &self,
        input: &str,
        tools: &[ToolDefinition],
        max_tools: usize,
    ) -> Result<Selection, RouterError>;
}

/// How an agent routes: the router and its bounds.
#[derive(Clone)]
pub struct RouterSettings {
    /// The router.
    pub router: Arc<dyn ToolRouter>,
    /// Offer at most this many tools.
    pub max_tools: usize,
    /// Fewer picks than this means the router failed: offer every tool.
    pub min_tools: usize,
}

/// Ranks tools by BM25 over names and descriptions; no model call.
#[derive(Clone, Copy, Debug, Default)]
pub struct LexicalRouter;

#[async_trait::async_trait]
impl ToolRouter for LexicalRouter {
    async fn select(
        &self,
        input: &str,
        tools: &[ToolDefinition],
        max_tools: usize,
    ) -> Result<Selection, RouterError> {
        let index = Bm25Index::new(
            tools
                .iter()
                .map(|t| (t.name.as_str(), t.description.as_str())),
        );
        Ok(Selection {
            tools: index.rank(input, max_tools),
            usage: Usage::default(),
        })
    }
}

/// Asks a (cheap) model to pick tools from a compact index.
#[derive(Clone)]
pub struct ModelRouter {
    model: Arc<dyn Provider>,
}

impl ModelRouter {
    /// A router asking `model`.
    pub fn new(model: Arc<dyn Provider>) -> Self {
        Self { model }
    }
}

#[async_trait::async_trait]
impl ToolRouter for ModelRouter {
    async fn select(
        &self,
        input: &str,
        tools: &[ToolDefinition],
        max_tools: usize,
    ) -> Result<Selection, RouterError> {
        let index: String = tools
            .iter()
            .map(|t| format!("- {}: {}\n", t.name, first_line(&t.description, 160)))
            .collect();
        let prompt = format!(
            "Choose the tools needed to handle the request below. Answer with only a JSON \
             array of tool names, most relevant first, at most {max_tools}.\n\nTools:\n{index}\n\
             Request: {input}"
        );
        let request = ChatRequest {
            messages: vec![Message::User(prompt)],
            max_tokens: Some(512),
            ..ChatRequest::default()
        };
        let answer = self
            .model
            .chat(&request, None)
            .await
            .map_err(RouterError::Model)?;
        // An unreadable answer is an empty pick (the agent then offers every
        // tool), so the tokens it cost are still counted.
        let tools = parse_names(&answer.text).unwrap_or_else(|| {
            tracing::warn!(
                answer = first_line(&answer.text, 120),
                "router model did not answer with a JSON array of tool names"
            );
            Vec::new()
        });
        Ok(Selection {
            tools,
            usage: answer.usage,
        })
    }
}

/// The first JSON array of strings in `text` (models like to add prose or
/// code fences around it).
fn parse_names(text: &str) -> Option<Vec<String>> {
    let start = text.find('[')?;
    let end = text.rfind(']')?;
    let value: Value = serde_json::from_str(text.get(start..=end)?).ok()?;
    value
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect()
}

fn first_line(text: &str, max_chars: usize) -> String {
    text.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(max_chars)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_chatty_answers() {
        assert_eq!(
            parse_names("Sure:\n```json\n[\"get_weather\", \"calculate\"]\n```"),
            Some(vec!["get_weather".into(), "calculate".into()])
        );
        assert_eq!(parse_names("no idea"), None);
        assert_eq!(parse_names("[1, 2]"), None);
    }
}
