//! [`HttpProvider`]: sends requests in a provider's wire format over HTTPS,
//! streams answers, and retries rate limits and server errors with backoff.

use std::time::Duration;

use serde_json::Value;
use tracing::Instrument;

use super::sse::SseParser;
use super::wire::{Wire, WireError};
use super::{
    ChatRequest, ChatResponse, ModelSpec, Provider, ProviderError, ProviderKind, TextSink,
};
use crate::spans;

/// The largest answer read from a provider, streamed or not; a larger one is
/// refused (a broken or hostile server must not exhaust memory).
const MAX_ANSWER_BYTES: usize = 32 << 20;
/// The most of an error answer's body kept for its message.
const MAX_ERROR_BODY: usize = 64 << 10;

/// When and how often to retry a failed request.
#[derive(Clone, Copy, Debug)]
pub struct RetryPolicy {
    /// Retries after the first attempt (default 3).
    pub max_retries: u32,
    /// Delay before the first retry, doubled each time (default 500 ms).
    pub base_delay: Duration,
    /// Upper bound of any delay, including a server's `retry-after` (default 60 s).
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    fn delay(&self, attempt: u32, error: &ProviderError) -> Duration {
        let asked = match error {
            ProviderError::Status { retry_after, .. } => *retry_after,
            _ => None,
        };
        let backoff = self.base_delay.saturating_mul(2u32.saturating_pow(attempt));
        asked.unwrap_or(backoff).min(self.max_delay)
    }
}

/// A model behind an HTTP API.
pub struct HttpProvider {
    kind: ProviderKind,
    model: String,
    base_url: String,
    api_key: Option<String>,
    wire: Box<dyn Wire>,
    client: reqwest::Client,
    retry: RetryPolicy,
}

impl HttpProvider {
    /// A provider for `spec`, at `base_url` or the provider's default, with the
    /// API key from the provider's environment variable
    /// ([`ProviderKind::key_variable`]).
    pub fn new(spec: &ModelSpec, base_url: Option<&str>) -> Result<Self, ProviderError> {
        let (variable, _) = spec.kind.key_variable();
        let api_key = std::env::var(variable).ok().filter(|key| !key.is_empty());
        Self::with_key(spec, base_url, api_key)
    }

    /// A provider for `spec` with this API key (`None` only for providers
    /// that need none, such as Ollama).
    pub fn with_key(
        spec: &ModelSpec,
        base_url: Option<&str>,
        api_key: Option<String>,
    ) -> Result<Self, ProviderError> {
        let (variable, required) = spec.kind.key_variable();
        if required && api_key.is_none() {
            return Err(ProviderError::MissingKey {
                provider: spec.kind.prefix(),
                variable,
            });
        }
        let base_url = base_url
            .or(spec.kind.default_base_url())
            .ok_or(ProviderError::MissingBaseUrl {
                provider: spec.kind.prefix(),
            })?
            .trim_end_matches('/')
            .to_string();
        let wire = super::wire_for(spec.kind);
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(15))
            .timeout(Duration::from_secs(600))
            .user_agent(concat!("wasm-agent/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ProviderError::Transport {
                provider: spec.to_string(),
                url: base_url.clone(),
                reason: e.to_string(),
            })?;
        Ok(Self {
            kind: spec.kind,
            model: spec.model.clone(),
            base_url,
            api_key,
            wire,
            client,
            retry: RetryPolicy::default(),
        })
    }

    /// Sets the retry policy.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    async fn attempt(
        &self,
        request: &ChatRequest,
        stream: Option<TextSink<'_>>,
    ) -> Result<ChatResponse, ProviderError> {
        // The request may name a model; otherwise this provider's own.
        let model = match request.model.as_str() {
            "" => self.model.as_str(),
            named => named,
        };
        let url = self.wire.url(&self.base_url, model, stream.is_some());
        let mut builder =
            self.client
                .post(&url)
                .json(&self.wire.body(request, model, stream.is_some()));
        if let Some(key) = &self.api_key {
            for (name, value) in self.wire.auth_headers(key) {
                builder = builder.header(name, value);
            }
        }
        let transport = |e: reqwest::Error| ProviderError::Transport {
            provider: self.name(),
            url: url.clone(),
            reason: error_chain(&e),
        };
        let mut response = builder.send().await.map_err(transport)?;
        let status = response.status();
        if !status.is_success() {
            let retry_after = retry_after(response.headers());
            let body = read_capped(&mut response, MAX_ERROR_BODY)
                .await
                .unwrap_or_default();
            let body = String::from_utf8_lossy(&body);
            return Err(self.status_error(status.as_u16(), &body, retry_after));
        }
        let is_event_stream = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let malformed = |reason| ProviderError::Malformed {
            provider: self.name(),
            reason,
        };
        // Some OpenAI-compatible servers answer a streamed request with plain JSON.
        let too_large = || {
            malformed(WireError(format!(
                "the answer is larger than {} MiB",
                MAX_ANSWER_BYTES >> 20
            )))
        };
        let (Some(sink), true) = (stream, is_event_stream) else {
            let bytes = read_capped(&mut response, MAX_ANSWER_BYTES + 1)
                .await
                .map_err(transport)?;
            if bytes.len() > MAX_ANSWER_BYTES {
                return Err(too_large());
            }
            let body: Value = serde_json::from_slice(&bytes)
                .map_err(|e| malformed(WireError(format!("the answer is not JSON ({e})"))))?;
            let answer = self.wire.parse(&body).map_err(malformed)?;
            if let Some(sink) = stream
                && !answer.text.is_empty()
            {
                sink(&answer.text);
            }
            return Ok(answer);
        };
        let mut decoder = self.wire.decoder();
        let mut parser = SseParser::default();
        let mut received = 0usize;
        while let Some(chunk) = response.chunk().await.map_err(transport)? {
            received += chunk.len();
            if received > MAX_ANSWER_BYTES {
                return Err(too_large());
            }
            for event in parser.push(&chunk) {
                if let Some(text) = decoder
                    .event(&event.event, &event.data)
                    .map_err(malformed)?
                {
                    sink(&text);
                }
            }
        }
        if let Some(event) = parser.finish()
            && let Some(text) = decoder
                .event(&event.event, &event.data)
                .map_err(malformed)?
        {
            sink(&text);
        }
        decoder.finish().map_err(malformed)
    }

    fn status_error(
        &self,
        status: u16,
        body: &str,
        retry_after: Option<Duration>,
    ) -> ProviderError {
        let message = error_message(body);
        let hint = match status {
            401 | 403 => format!(" (check {})", self.kind.key_variable().0),
            404 => format!(
                " (check the model name {:?} and the base URL {})",
                self.model, self.base_url
            ),
            429 => " (rate limited; retried with backoff)".to_string(),
            _ => String::new(),
        };
        ProviderError::Status {
            provider: self.name(),
            status,
            message,
            hint,
            retry_after,
        }
    }
}

#[async_trait::async_trait]
impl Provider for HttpProvider {
    fn name(&self) -> String {
        format!("{}:{}", self.kind, self.model)
    }

    async fn chat(
        &self,
        request: &ChatRequest,
        stream: Option<TextSink<'_>>,
    ) -> Result<ChatResponse, ProviderError> {
        // Once text has been shown, a retry would show it again: fail instead.
        let shown = std::sync::atomic::AtomicBool::new(false);
        let tracked = stream.map(|sink| {
            let shown = &shown;
            move |text: &str| {
                shown.store(true, std::sync::atomic::Ordering::Relaxed);
                sink(text);
            }
        });
        let tracked = tracked.as_ref().map(|f| f as &(dyn Fn(&str) + Send + Sync));
        let span = spans::chat(self.kind, &self.model, &self.base_url);
        let outcome = self
            .attempts(request, tracked, &shown)
            .instrument(span.clone())
            .await;
        match &outcome {
            Ok(response) => spans::answered(&span, response),
            Err(error) => spans::chat_failed(&span, error.kind(), &error.to_string()),
        }
        outcome
    }
}

impl HttpProvider {
    /// The request, retried while it may be.
    async fn attempts(
        &self,
        request: &ChatRequest,
        tracked: Option<TextSink<'_>>,
        shown: &std::sync::atomic::AtomicBool,
    ) -> Result<ChatResponse, ProviderError> {
        let mut attempt = 0;
        loop {
            match self.attempt(request, tracked).await {
                Err(error)
                    if error.is_retryable()
                        && attempt < self.retry.max_retries
                        && !shown.load(std::sync::atomic::Ordering::Relaxed) =>
                {
                    let delay = self.retry.delay(attempt, &error);
                    tracing::warn!(%error, retry_in = ?delay, "model request failed; retrying");
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                outcome => return outcome,
            }
        }
    }
}

/// The provider's own error message, from the JSON shapes all three use
/// (`{"error": {"message": ...}}`), else the start of the body.
fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("message"))
            .or_else(|| v.get("error"))
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    match message {
        Some(message) => message,
        None if body.trim().is_empty() => "no details given".into(),
        None => body.trim().chars().take(300).collect(),
    }
}

/// `retry-after` in seconds (the form rate limiters send).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    let seconds: f64 = value.trim().parse().ok()?;
    if seconds.is_nan() {
        return None;
    }
    // A huge value is clamped later by `max_delay`; it must not panic here.
    Duration::try_from_secs_f64(seconds.min(86_400.0)).ok()
}

/// Reads a body up to `cap` bytes (more is left unread).
async fn read_capped(response: &mut reqwest::Response, cap: usize) -> reqwest::Result<Vec<u8>> {
    let mut body = Vec::new();
    while body.len() < cap
        && let Some(chunk) = response.chunk().await?
    {
        let room = cap - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
    }
    Ok(body)
}

/// The error and its causes on one line (reqwest hides the useful part in
/// the source chain).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_from_each_shape() {
        let openai =
            r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#;
        assert_eq!(error_message(openai), "Incorrect API key provided");
        let anthropic =
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(error_message(anthropic), "Overloaded");
        assert_eq!(error_message(""), "no details given");
        assert_eq!(error_message("Bad Gateway"), "Bad Gateway");
    }

    #[test]
    fn backoff_doubles_and_honours_retry_after() {
        let policy = RetryPolicy::default();
        let error = |retry_after| ProviderError::Status {
            provider: "p".into(),
            status: 429,
            message: String::new(),
            hint: String::new(),
            retry_after,
        };
        assert_eq!(policy.delay(0, &error(None)), Duration::from_millis(500));
        assert_eq!(policy.delay(2, &error(None)), Duration::from_secs(2));
        assert_eq!(
            policy.delay(0, &error(Some(Duration::from_secs(7)))),
            Duration::from_secs(7)
        );
        assert_eq!(
            policy.delay(0, &error(Some(Duration::from_secs(3600)))),
            Duration::from_secs(60)
        );
        let mut headers = reqwest::header::HeaderMap::new();
        for (value, expected) in [
            ("2", Some(2.0)),
            ("1e300", Some(86_400.0)),
            ("-1", None),
            ("NaN", None),
            ("soon", None),
        ] {
            headers.insert(reqwest::header::RETRY_AFTER, value.parse().unwrap());
            assert_eq!(
                retry_after(&headers).map(|d| d.as_secs_f64()),
                expected,
                "{value}"
            );
        }
    }
}
