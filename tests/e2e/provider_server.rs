//! A scripted model provider on 127.0.0.1: it records every request and
//! answers from a script in the real wire formats of OpenAI Chat Completions,
//! Anthropic Messages and Gemini (shapes taken from the providers' documented
//! examples), as JSON or as server-sent events sent in small chunks.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// 200 with a JSON body.
    Json(Value),
    /// 200 `text/event-stream`: `(event name, data)` pairs.
    Sse(Vec<(Option<&'static str>, String)>),
    /// An error status with a JSON body and maybe `retry-after`.
    Error {
        status: u16,
        retry_after: Option<&'static str>,
        body: Value,
    },
}

type Handler = dyn Fn(&Recorded, usize) -> Reply + Send + Sync;

/// The running server.
pub struct ProviderServer {
    addr: SocketAddr,
    recorded: Arc<Mutex<Vec<Recorded>>>,
}

impl ProviderServer {
    /// Answers requests with `script` in order; past its end, 500.
    pub async fn start(script: Vec<Reply>) -> Self {
        Self::with(move |_, index| {
            script.get(index).cloned().unwrap_or(Reply::Error {
                status: 500,
                retry_after: None,
                body: json!({"error": {"message": "the test script has no more answers"}}),
            })
        })
        .await
    }

    /// Answers each request with `handler(request, index)`.
    pub async fn with(handler: impl Fn(&Recorded, usize) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let recorded = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let log = recorded.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (log, handler) = (log.clone(), handler.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                        let (log, handler) = (log.clone(), handler.clone());
                        async move { Ok::<_, Infallible>(answer(request, &log, &*handler).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { addr, recorded }
    }

    /// Base URL for OpenAI-style providers (`/v1` included).
    pub fn openai_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Base URL for Anthropic and Gemini (paths added by the provider).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.recorded.lock().unwrap().clone()
    }
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

async fn answer(
    request: Request<hyper::body::Incoming>,
    log: &Mutex<Vec<Recorded>>,
    handler: &Handler,
) -> Response<Body> {
    let path = request.uri().to_string();
    let headers = request
        .headers()
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_string()))
        .collect();
    let bytes = request.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let recorded = Recorded {
        path,
        headers,
        body,
    };
    let index = {
        let mut log = log.lock().unwrap();
        log.push(recorded.clone());
        log.len() - 1
    };
    match handler(&recorded, index) {
        Reply::Json(value) => Response::builder()
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(value.to_string())).boxed())
            .unwrap(),
        Reply::Error {
            status,
            retry_after,
            body,
        } => {
            let mut response = Response::builder()
                .status(status)
                .header("content-type", "application/json");
            if let Some(seconds) = retry_after {
                response = response.header("retry-after", seconds);
            }
            response
                .body(Full::new(Bytes::from(body.to_string())).boxed())
                .unwrap()
        }
        Reply::Sse(events) => {
            let text: String = events
                .iter()
                .map(|(event, data)| match event {
                    Some(event) => format!("event: {event}\ndata: {data}\n\n"),
                    None => format!("data: {data}\n\n"),
                })
                .collect();
            // Small chunks, as a real server flushes them, split anywhere.
            let chunks: Vec<Result<Frame<Bytes>, Infallible>> = text
                .as_bytes()
                .chunks(23)
                .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
                .collect();
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(BodyExt::boxed(StreamBody::new(futures::stream::iter(
                    chunks,
                ))))
                .unwrap()
        }
    }
}

/// A tool call in a script: id, name, arguments text.
pub type Call<'a> = (&'a str, &'a str, &'a str);

/// OpenAI Chat Completions answers.
pub mod openai {
    use super::*;

    fn usage() -> Value {
        json!({"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99})
    }

    pub fn tool_calls(calls: &[Call]) -> Reply {
        let calls: Vec<Value> = calls
            .iter()
            .map(|(id, name, arguments)| {
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
            })
            .collect();
        Reply::Json(json!({
            "id": "chatcmpl-abc123", "object": "chat.completion", "created": 1699896916,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
                "tool_calls": calls}, "logprobs": null, "finish_reason": "tool_calls"}],
            "usage": usage()
        }))
    }

    pub fn text(text: &str) -> Reply {
        Reply::Json(json!({
            "id": "chatcmpl-abc124", "object": "chat.completion", "created": 1699896917,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                "logprobs": null, "finish_reason": "stop"}],
            "usage": usage()
        }))
    }

    fn chunk(delta: Value, finish: Option<&str>) -> (Option<&'static str>, String) {
        let value = json!({"id": "chatcmpl-123", "object": "chat.completion.chunk",
            "created": 1694268190, "model": "gpt-4o-mini", "system_fingerprint": "fp_44709d6fcb",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]});
        (None, value.to_string())
    }

    fn end() -> Vec<(Option<&'static str>, String)> {
        vec![
            (
                None,
                json!({"id": "chatcmpl-123", "object": "chat.completion.chunk", "choices": [],
                    "usage": usage()})
                .to_string(),
            ),
            (None, "[DONE]".to_string()),
        ]
    }

    pub fn stream_text(pieces: &[&str]) -> Reply {
        let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
        events.extend(pieces.iter().map(|p| chunk(json!({"content": p}), None)));
        events.push(chunk(json!({}), Some("stop")));
        events.extend(end());
        Reply::Sse(events)
    }

    /// Each call's arguments arrive in three fragments, calls interleaved.
    pub fn stream_tool_calls(calls: &[Call]) -> Reply {
        let mut events = vec![chunk(json!({"role": "assistant", "content": null}), None)];
        for (index, (id, name, _)) in calls.iter().enumerate() {
            events.push(chunk(
                json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                    "function": {"name": name, "arguments": ""}}]}),
                None,
            ));
        }
        for part in 0..3 {
            for (index, (_, _, arguments)) in calls.iter().enumerate() {
                events.push(chunk(
                    json!({"tool_calls": [{"index": index,
                        "function": {"arguments": third(arguments, part)}}]}),
                    None,
                ));
            }
        }
        events.push(chunk(json!({}), Some("tool_calls")));
        events.extend(end());
        Reply::Sse(events)
    }
}

/// Anthropic Messages answers.
pub mod anthropic {
    use super::*;

    pub fn tool_uses(text: &str, calls: &[Call]) -> Reply {
        let mut content = vec![json!({"type": "text", "text": text})];
        content.extend(calls.iter().map(|(id, name, arguments)| {
            json!({"type": "tool_use", "id": id, "name": name,
                "input": serde_json::from_str::<Value>(arguments).unwrap()})
        }));
        Reply::Json(json!({
            "id": "msg_01Aq9w938a90dw8q", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": content, "stop_reason": "tool_use",
            "stop_sequence": null, "usage": {"input_tokens": 472, "output_tokens": 89}
        }))
    }

    pub fn text(text: &str) -> Reply {
        Reply::Json(json!({
            "id": "msg_01Aq9w938a90dw8r", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 600, "output_tokens": 40}
        }))
    }

    fn event(name: &'static str, data: Value) -> (Option<&'static str>, String) {
        (Some(name), data.to_string())
    }

    fn start() -> (Option<&'static str>, String) {
        event(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                "role": "assistant", "content": [], "model": "claude-sonnet-4-5",
                "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 25, "output_tokens": 1}}}),
        )
    }

    fn finish(stop_reason: &str) -> Vec<(Option<&'static str>, String)> {
        vec![
            event(
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": stop_reason,
                    "stop_sequence": null}, "usage": {"output_tokens": 15}}),
            ),
            event("message_stop", json!({"type": "message_stop"})),
        ]
    }

    pub fn stream_text(pieces: &[&str]) -> Reply {
        let mut events = vec![
            start(),
            event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": ""}}),
            ),
            event("ping", json!({"type": "ping"})),
        ];
        events.extend(pieces.iter().map(|p| {
            event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": p}}),
            )
        }));
        events.push(event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ));
        events.extend(finish("end_turn"));
        Reply::Sse(events)
    }

    pub fn stream_tool_uses(calls: &[Call]) -> Reply {
        let mut events = vec![start()];
        for (index, (id, name, arguments)) in calls.iter().enumerate() {
            events.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
            ));
            for part in 0..3 {
                events.push(event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": third(arguments, part)}}),
                ));
            }
            events.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
        }
        events.extend(finish("tool_use"));
        Reply::Sse(events)
    }
}

/// Gemini answers.
pub mod gemini {
    use super::*;

    fn usage() -> Value {
        json!({"promptTokenCount": 70, "candidatesTokenCount": 20, "totalTokenCount": 90})
    }

    fn response(parts: Vec<Value>, finish: Option<&str>) -> Value {
        let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        if let Some(finish) = finish {
            candidate["finishReason"] = json!(finish);
        }
        json!({"candidates": [candidate], "usageMetadata": usage(), "modelVersion": "gemini-2.5-flash"})
    }

    /// Gemini calls carry no ids; the names and arguments only.
    pub fn function_calls(calls: &[(&str, &str)]) -> Reply {
        let parts = calls
            .iter()
            .map(|(name, arguments)| {
                json!({"functionCall": {"name": name,
                    "args": serde_json::from_str::<Value>(arguments).unwrap()}})
            })
            .collect();
        Reply::Json(response(parts, Some("STOP")))
    }

    pub fn text(text: &str) -> Reply {
        Reply::Json(response(vec![json!({"text": text})], Some("STOP")))
    }

    pub fn stream_text(pieces: &[&str]) -> Reply {
        let last = pieces.len().saturating_sub(1);
        Reply::Sse(
            pieces
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let finish = (i == last).then_some("STOP");
                    (None, response(vec![json!({"text": p})], finish).to_string())
                })
                .collect(),
        )
    }

    pub fn stream_function_calls(calls: &[(&str, &str)]) -> Reply {
        Reply::Sse(
            calls
                .iter()
                .map(|(name, arguments)| {
                    let part = json!({"functionCall": {"name": name,
                        "args": serde_json::from_str::<Value>(arguments).unwrap()}});
                    (None, response(vec![part], None).to_string())
                })
                .chain([(None, response(vec![], Some("STOP")).to_string())])
                .collect(),
        )
    }
}

/// The `part`-th of three pieces of `text` (char boundaries respected).
fn third(text: &str, part: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(3);
    chars.iter().skip(part * size).take(size).collect()
}
