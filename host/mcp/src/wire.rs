//! The wire details of streamable HTTP: the header checks of a request,
//! and the bodies of an answer (one JSON body, or an event stream).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Frame;
use rmcp::model::ProtocolVersion;
use tokio::sync::mpsc;

use super::body::{Body, plain};
use super::dispatch::Message;

/// An open event stream sends a comment this often, so proxies keep it.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The refusal of a POST whose headers the transport does not allow.
pub(crate) fn refuse_post(headers: &HeaderMap) -> Option<Response<Body>> {
    if !accepts(headers, "application/json") || !accepts(headers, "text/event-stream") {
        return Some(plain(
            StatusCode::NOT_ACCEPTABLE,
            "not acceptable: accept both application/json and text/event-stream",
        ));
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return Some(plain(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported media type: send application/json",
        ));
    }
    None
}

/// The refusal of an `MCP-Protocol-Version` header naming no known version.
pub(crate) fn unknown_version(headers: &HeaderMap) -> Option<Response<Body>> {
    let version = headers.get("mcp-protocol-version")?;
    let known = version.to_str().ok().is_some_and(|version| {
        ProtocolVersion::KNOWN_VERSIONS
            .iter()
            .any(|known| known.as_str() == version)
    });
    (!known).then(|| {
        plain(
            StatusCode::BAD_REQUEST,
            &format!(
                "bad request: unsupported MCP-Protocol-Version {:?}",
                String::from_utf8_lossy(version.as_bytes())
            ),
        )
    })
}

/// The refusal of a message its headers contradict: `Mcp-Method`, or the
/// protocol version of an `initialize`.
pub(crate) fn header_mismatch(
    headers: &HeaderMap,
    message: &Message<'_>,
) -> Option<Response<Body>> {
    let method = message.method.as_deref();
    if let Some(named) = headers.get("mcp-method")
        && Some(named.as_bytes()) != method.map(str::as_bytes)
    {
        return Some(plain(
            StatusCode::BAD_REQUEST,
            "bad request: the Mcp-Method header does not match the message",
        ));
    }
    if method == Some("initialize")
        && let Some(version) = headers.get("mcp-protocol-version")
    {
        let requested = serde_json::from_str::<serde_json::Value>(message.params())
            .ok()
            .and_then(|params| params["protocolVersion"].as_str().map(str::to_owned));
        if requested.as_deref().map(str::as_bytes) != Some(version.as_bytes()) {
            return Some(plain(
                StatusCode::BAD_REQUEST,
                "bad request: the MCP-Protocol-Version header does not match initialize",
            ));
        }
    }
    None
}

/// Whether the `Accept` headers take `media` (a zero quality refuses it).
pub(crate) fn accepts(headers: &HeaderMap, media: &str) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|range| {
            let mut parts = range.split(';').map(str::trim);
            let essence = parts.next().unwrap_or_default();
            let refused = parts.any(|p| {
                p.strip_prefix("q=")
                    .is_some_and(|q| q.parse::<f32>().is_ok_and(|q| q <= 0.0))
            });
            !refused
                && (essence.eq_ignore_ascii_case(media)
                    || essence == "*/*"
                    || essence.eq_ignore_ascii_case(&format!(
                        "{}/*",
                        media.split('/').next().unwrap_or_default()
                    )))
        })
}

pub(crate) fn accepted() -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::new()).boxed());
    *response.status_mut() = StatusCode::ACCEPTED;
    response
}

/// One server-sent event carrying `message`.
pub(crate) fn event(message: &impl serde::Serialize) -> Bytes {
    let mut event = b"event: message\ndata: ".to_vec();
    // serde_json writes no newlines, so the data is one line.
    if serde_json::to_writer(&mut event, message).is_err() {
        return Bytes::new();
    }
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}

/// An event stream of what `receiver` gets; `guard` is held while it is open.
pub(crate) fn event_stream(
    receiver: mpsc::Receiver<Bytes>,
    guard: Option<Box<dyn Send + Sync>>,
) -> Response<Body> {
    let body = EventStream {
        receiver,
        keep_alive: Box::pin(tokio::time::sleep(KEEP_ALIVE)),
        _guard: guard,
    };
    let mut response = Response::new(BodyExt::boxed(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// An event-stream body: the events sent to it, and a keep-alive comment
/// when none came for a while; it ends when every sender is gone.
struct EventStream {
    receiver: mpsc::Receiver<Bytes>,
    keep_alive: Pin<Box<tokio::time::Sleep>>,
    _guard: Option<Box<dyn Send + Sync>>,
}

impl hyper::body::Body for EventStream {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        match this.receiver.poll_recv(cx) {
            Poll::Ready(Some(event)) => {
                let next = tokio::time::Instant::now() + KEEP_ALIVE;
                this.keep_alive.as_mut().reset(next);
                Poll::Ready(Some(Ok(Frame::data(event))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.keep_alive.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    let next = tokio::time::Instant::now() + KEEP_ALIVE;
                    this.keep_alive.as_mut().reset(next);
                    Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(
                        b": keep-alive\n\n",
                    )))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

/// A session id this server does not know (any more).
pub(crate) fn session_not_found() -> Response<Body> {
    plain(
        StatusCode::NOT_FOUND,
        "not found: no such MCP session (it ended or expired); initialize a new one",
    )
}

/// Every session place is taken.
pub(crate) fn too_many_sessions() -> Response<Body> {
    plain(
        StatusCode::SERVICE_UNAVAILABLE,
        "too many open MCP sessions; close one (DELETE) or try again later",
    )
}
