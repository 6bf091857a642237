//! Outgoing HTTP requests (cargo feature `http`), blocking and simple.
//!
//! ```no_run
//! use wasm_agent_guest::ToolError;
//! use wasm_agent_guest::http;
//!
//! fn page(url: &str) -> Result<String, ToolError> {
//!     Ok(http::get(url)?.error_for_status()?.text()?)
//! }
//! ```
//!
//! Requests go through `wasi:http/outgoing-handler`, so the host decides
//! which destinations a tool may reach: a request it does not allow fails
//! with [`HttpError::Denied`]. The host may also cap the size of a response
//! body ([`HttpError::TooLarge`]), as does the SDK itself
//! ([`Request::max_body`], default [`DEFAULT_MAX_BODY`]).
//!
//! **Redirects are not followed**, neither by the host nor by the SDK: a 3xx
//! response is returned as is. To follow it, request
//! [`Response::redirect_location`]; the host checks that request again.
//!
//! Only the response's headers reach the tool, never headers the host adds
//! to the request on its way out (such as credentials).
//!
//! These functions call into the host, so they only work inside a
//! component; in a native build (unit tests) sending aborts.

mod error;
mod response;
mod transport;
mod url;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::Serialize;

pub use error::HttpError;
pub use response::Response;
pub use url::encode_component;

/// The largest response body a request accepts unless
/// [`Request::max_body`] says otherwise: 10 MiB.
pub const DEFAULT_MAX_BODY: usize = 10 * 1024 * 1024;

/// The `User-Agent` sent when the caller sets none.
const DEFAULT_USER_AGENT: &str = concat!("wasm-agent-guest/", env!("CARGO_PKG_VERSION"));

/// An HTTP request method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// `GET`: read a resource.
    Get,
    /// `POST`: submit data.
    Post,
    /// `PUT`: replace a resource.
    Put,
    /// `PATCH`: change part of a resource.
    Patch,
    /// `DELETE`: remove a resource.
    Delete,
    /// `HEAD`: like `GET`, without the body.
    Head,
}

impl Method {
    /// The method's name as sent, e.g. `"GET"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
            Self::Put => "PUT",
            Self::Patch => "PATCH",
            Self::Delete => "DELETE",
            Self::Head => "HEAD",
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Method {
    type Err = HttpError;

    /// Parses a method name, ignoring case (`"get"`, `"POST"`).
    fn from_str(name: &str) -> Result<Self, HttpError> {
        [
            Self::Get,
            Self::Post,
            Self::Put,
            Self::Patch,
            Self::Delete,
            Self::Head,
        ]
        .into_iter()
        .find(|method| method.as_str().eq_ignore_ascii_case(name))
        .ok_or_else(|| {
            HttpError::InvalidRequest(format!(
                "unsupported method {name:?}; use GET, POST, PUT, PATCH, DELETE or HEAD"
            ))
        })
    }
}

/// A request under construction; [`send`](Self::send) performs it.
///
/// ```no_run
/// use std::time::Duration;
/// use wasm_agent_guest::http::{Method, Request};
///
/// # fn run() -> Result<(), wasm_agent_guest::http::HttpError> {
/// let response = Request::new(Method::Put, "https://api.example.com/items/7")
///     .header("content-type", "text/plain")
///     .body("seven")
///     .timeout(Duration::from_secs(10))
///     .send()?
///     .error_for_status()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    method: Method,
    url: String,
    headers: Vec<(String, String)>,
    body: Option<Vec<u8>>,
    timeout: Option<Duration>,
    max_body: usize,
}

impl Request {
    /// A request for `url` (absolute `http://` or `https://`; checked when
    /// sent) with no headers, no body, the host's timeouts and a body limit
    /// of [`DEFAULT_MAX_BODY`].
    pub fn new(method: Method, url: impl Into<String>) -> Self {
        Self {
            method,
            url: url.into(),
            headers: Vec::new(),
            body: None,
            timeout: None,
            max_body: DEFAULT_MAX_BODY,
        }
    }

    /// Adds a header; calling it twice with the same name sends both values.
    ///
    /// `User-Agent` defaults to `wasm-agent-guest/<version>` and
    /// `Content-Length` is set from the body. The host forbids some headers
    /// (e.g. `Host`, `Connection`); using one fails the request with
    /// [`HttpError::InvalidRequest`].
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the request body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// Sets how long to wait for the connection, then for the first byte of
    /// the response, then between further bytes (each limit is `timeout`).
    /// The host's own limits and the call's deadline still apply.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the largest response body accepted, in bytes; a larger one fails
    /// with [`HttpError::TooLarge`] without being read to the end.
    pub fn max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// Sends the request and reads the whole response.
    ///
    /// A non-2xx status is not an error here; see
    /// [`Response::error_for_status`].
    pub fn send(self) -> Result<Response, HttpError> {
        let url = url::Url::parse(&self.url)?;
        let headers = self.headers_to_send()?;
        transport::send(transport::Prepared {
            method: self.method,
            url,
            headers,
            body: self.body,
            timeout: self.timeout,
            max_body: self.max_body,
        })
    }

    /// The caller's headers, checked, plus the defaults they did not set.
    fn headers_to_send(&self) -> Result<Vec<(String, String)>, HttpError> {
        for (name, value) in &self.headers {
            check_header(name, value)?;
        }
        let has = |wanted: &str| {
            self.headers
                .iter()
                .any(|(name, _)| name.eq_ignore_ascii_case(wanted))
        };
        let mut headers = self.headers.clone();
        if !has("user-agent") {
            headers.push(("user-agent".into(), DEFAULT_USER_AGENT.into()));
        }
        if let Some(body) = &self.body
            && !has("content-length")
        {
            headers.push(("content-length".into(), body.len().to_string()));
        }
        Ok(headers)
    }
}

/// Checks that a header can be sent at all: the name is an HTTP token and
/// the value holds no line breaks or other control characters (so it cannot
/// smuggle in a second header).
fn check_header(name: &str, value: &str) -> Result<(), HttpError> {
    let token = |byte: u8| byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte);
    if name.is_empty() || !name.bytes().all(token) {
        return Err(HttpError::InvalidRequest(format!(
            "{name:?} is not a valid header name"
        )));
    }
    if value.chars().any(|c| c.is_control() && c != '\t') {
        return Err(HttpError::InvalidRequest(format!(
            "the value of header {name:?} contains control characters"
        )));
    }
    Ok(())
}

/// `GET url`, with the defaults of [`Request::new`].
pub fn get(url: &str) -> Result<Response, HttpError> {
    Request::new(Method::Get, url).send()
}

/// `POST url` with `body` serialised as JSON (`Content-Type:
/// application/json`).
pub fn post_json<T: Serialize + ?Sized>(url: &str, body: &T) -> Result<Response, HttpError> {
    let json = serde_json::to_vec(body).map_err(|error| {
        HttpError::InvalidRequest(format!("the body cannot be represented as JSON: {error}"))
    })?;
    Request::new(Method::Post, url)
        .header("content-type", "application/json")
        .body(json)
        .send()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_parse_ignoring_case() {
        assert_eq!("get".parse::<Method>().unwrap(), Method::Get);
        assert_eq!("PATCH".parse::<Method>().unwrap(), Method::Patch);
        assert_eq!(Method::Delete.to_string(), "DELETE");
        let error = "TRACE".parse::<Method>().unwrap_err();
        assert!(error.to_string().contains("unsupported method \"TRACE\""));
    }

    #[test]
    fn defaults_are_added_unless_set() {
        let request = Request::new(Method::Post, "http://h/").body("abc");
        let headers = request.headers_to_send().unwrap();
        assert_eq!(
            headers,
            vec![
                ("user-agent".to_owned(), DEFAULT_USER_AGENT.to_owned()),
                ("content-length".to_owned(), "3".to_owned()),
            ]
        );
        let request = Request::new(Method::Get, "http://h/").header("User-Agent", "me/1");
        assert_eq!(
            request.headers_to_send().unwrap(),
            vec![("User-Agent".to_owned(), "me/1".to_owned())]
        );
    }

    #[test]
    fn malformed_headers_are_refused() {
        for (name, value) in [
            ("", "x"),
            ("bad name", "x"),
            ("x:y", "x"),
            ("naïve", "x"),
            ("x-ok", "a\r\nx-injected: 1"),
            ("x-ok", "a\0b"),
        ] {
            let request = Request::new(Method::Get, "http://h/").header(name, value);
            assert!(
                matches!(request.headers_to_send(), Err(HttpError::InvalidRequest(_))),
                "{name:?}: {value:?}"
            );
        }
        let request = Request::new(Method::Get, "http://h/").header("x-tab", "a\tb");
        assert!(request.headers_to_send().is_ok());
    }

    #[test]
    fn invalid_urls_fail_before_anything_is_sent() {
        let error = get("ftp://example.com/").unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid URL \"ftp://example.com/\": only http and https URLs are supported"
        );
    }

    #[test]
    fn unserialisable_json_bodies_are_refused() {
        let mut map = std::collections::HashMap::new();
        map.insert((1, 2), 3);
        let error = post_json("http://h/", &map).unwrap_err();
        assert!(matches!(error, HttpError::InvalidRequest(_)));
    }
}
