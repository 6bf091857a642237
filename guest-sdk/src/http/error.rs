//! Why a request failed, in words a model can act on, and how wasi:http
//! error codes map onto those reasons.

use std::fmt;

use wasip2::http::types::ErrorCode;

use crate::ToolError;

/// Why an HTTP request failed. The `Display` text is written for the model:
/// it names the URL and, where there is one, what would help.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HttpError {
    /// The host's network policy does not allow this destination (the host
    /// answered `HTTP-request-denied` or `destination-IP-prohibited`).
    Denied {
        /// The URL that was refused.
        url: String,
    },
    /// Connecting, or waiting for the response, took too long.
    Timeout {
        /// The URL that was requested.
        url: String,
    },
    /// The response body is larger than the request's
    /// [`max_body`](super::Request::max_body) or than the host allows.
    TooLarge {
        /// The URL that was requested.
        url: String,
    },
    /// The server answered with a status that is not 2xx (only produced by
    /// [`Response::error_for_status`](super::Response::error_for_status)).
    Status {
        /// The URL that was requested.
        url: String,
        /// The HTTP status code.
        status: u16,
        /// The start of the response body, whitespace collapsed, to show
        /// what the server said.
        body_snippet: String,
    },
    /// The URL cannot be requested: not absolute `http`/`https`, or
    /// malformed. The text names the URL and the problem.
    InvalidUrl(String),
    /// A header or body the caller gave cannot be sent (a malformed header,
    /// one the host forbids tools to set, a value that is not JSON).
    InvalidRequest(String),
    /// The response arrived but its body is not what the caller asked for
    /// (not UTF-8 text, not the expected JSON).
    Decode {
        /// The URL that was requested.
        url: String,
        /// What did not decode, and why.
        message: String,
    },
    /// Anything else between the guest and the server: DNS, TLS, a refused
    /// or broken connection, a protocol error.
    Transport {
        /// The URL that was requested.
        url: String,
        /// What went wrong.
        message: String,
    },
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Denied { url } => write!(
                f,
                "the host's policy does not allow a request to {url}; \
                 only destinations the operator granted can be reached"
            ),
            Self::Timeout { url } => write!(f, "the request to {url} timed out"),
            Self::TooLarge { url } => write!(
                f,
                "the response from {url} is larger than this tool or the host allows"
            ),
            Self::Status {
                url,
                status,
                body_snippet,
            } => {
                write!(f, "{url} answered with HTTP status {status}")?;
                if let Some(reason) = reason_phrase(*status) {
                    write!(f, " ({reason})")?;
                }
                if !body_snippet.is_empty() {
                    write!(f, ": {body_snippet}")?;
                }
                Ok(())
            }
            Self::InvalidUrl(message) => write!(f, "invalid URL {message}"),
            Self::InvalidRequest(message) => write!(f, "invalid request: {message}"),
            Self::Decode { url, message } => {
                write!(f, "cannot read the response from {url}: {message}")
            }
            Self::Transport { url, message } => {
                write!(f, "the request to {url} failed: {message}")
            }
        }
    }
}

impl std::error::Error for HttpError {}

impl From<HttpError> for ToolError {
    fn from(error: HttpError) -> Self {
        ToolError::failed(error.to_string())
    }
}

/// The standard reason phrase of the common status codes.
pub(crate) fn reason_phrase(status: u16) -> Option<&'static str> {
    Some(match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => return None,
    })
}

/// Maps a wasi:http error code, from `handle`, the response future or a
/// body stream, onto an [`HttpError`] for `url`.
pub(crate) fn from_error_code(url: &str, code: &ErrorCode) -> HttpError {
    let url = url.to_owned();
    let message = match code {
        ErrorCode::HttpRequestDenied | ErrorCode::DestinationIpProhibited => {
            return HttpError::Denied { url };
        }
        ErrorCode::DnsTimeout
        | ErrorCode::ConnectionTimeout
        | ErrorCode::ConnectionReadTimeout
        | ErrorCode::ConnectionWriteTimeout
        | ErrorCode::HttpResponseTimeout => return HttpError::Timeout { url },
        ErrorCode::HttpResponseBodySize(_) => return HttpError::TooLarge { url },
        ErrorCode::HttpRequestUriInvalid | ErrorCode::HttpRequestUriTooLong => {
            return HttpError::InvalidUrl(format!("{url:?}: the host cannot request it"));
        }
        ErrorCode::DnsError(payload) => match &payload.rcode {
            Some(rcode) => format!("the host name could not be resolved ({rcode})"),
            None => "the host name could not be resolved".to_owned(),
        },
        ErrorCode::DestinationNotFound => "the host name could not be resolved".to_owned(),
        ErrorCode::DestinationUnavailable | ErrorCode::DestinationIpUnroutable => {
            "the server cannot be reached".to_owned()
        }
        ErrorCode::ConnectionRefused => "the server refused the connection".to_owned(),
        ErrorCode::ConnectionTerminated => "the connection was closed early".to_owned(),
        ErrorCode::ConnectionLimitReached => "too many open connections".to_owned(),
        ErrorCode::TlsProtocolError => "TLS handshake failed".to_owned(),
        ErrorCode::TlsCertificateError => "the server's TLS certificate is not valid".to_owned(),
        ErrorCode::TlsAlertReceived(payload) => match &payload.alert_message {
            Some(alert) => format!("the server sent a TLS alert: {alert}"),
            None => "the server sent a TLS alert".to_owned(),
        },
        ErrorCode::HttpRequestBodySize(_) => {
            "the request body does not match its Content-Length".to_owned()
        }
        ErrorCode::HttpRequestMethodInvalid => "the host rejected the method".to_owned(),
        ErrorCode::HttpRequestHeaderSectionSize(_) | ErrorCode::HttpRequestHeaderSize(_) => {
            "the request headers are too large".to_owned()
        }
        ErrorCode::HttpResponseIncomplete => "the response ended early".to_owned(),
        ErrorCode::HttpResponseHeaderSectionSize(_) | ErrorCode::HttpResponseHeaderSize(_) => {
            "the response headers are too large".to_owned()
        }
        ErrorCode::HttpResponseTransferCoding(_) | ErrorCode::HttpResponseContentCoding(_) => {
            "the response uses an encoding the host cannot decode".to_owned()
        }
        ErrorCode::HttpProtocolError => "HTTP protocol error".to_owned(),
        ErrorCode::LoopDetected => "a request loop was detected".to_owned(),
        ErrorCode::InternalError(Some(detail)) => detail.clone(),
        other => format!("{other:?}"),
    };
    HttpError::Transport { url, message }
}

/// Maps a failed read of the response body. `code` is what wasi:http says
/// about the stream error, `detail` the error's debug text.
///
/// The wording matters: wasmtime-wasi-http (48) keeps body errors in its own
/// error type, which its `http-error-code` does not recognise, so a body cut
/// off by the host's size cap arrives with no code and only says so in its
/// text ("HTTP response body size exceeds limit").
pub(crate) fn from_body_error(url: &str, code: Option<&ErrorCode>, detail: &str) -> HttpError {
    if let Some(code) = code {
        return from_error_code(url, code);
    }
    let lower = detail.to_ascii_lowercase();
    if [
        "too large",
        "too-large",
        "body size",
        "body-size",
        "bodysize",
        "exceed",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
    {
        return HttpError::TooLarge {
            url: url.to_owned(),
        };
    }
    HttpError::Transport {
        url: url.to_owned(),
        message: format!("reading the response body failed: {detail}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasip2::http::types::DnsErrorPayload;

    const URL: &str = "https://example.com/x";

    #[test]
    fn policy_refusals_are_denied() {
        for code in [
            ErrorCode::HttpRequestDenied,
            ErrorCode::DestinationIpProhibited,
        ] {
            let error = from_error_code(URL, &code);
            assert_eq!(error, HttpError::Denied { url: URL.into() });
        }
        assert_eq!(
            from_error_code(URL, &ErrorCode::HttpRequestDenied).to_string(),
            "the host's policy does not allow a request to https://example.com/x; \
             only destinations the operator granted can be reached"
        );
    }

    #[test]
    fn timeouts_and_sizes_keep_their_kind() {
        for code in [
            ErrorCode::ConnectionTimeout,
            ErrorCode::ConnectionReadTimeout,
            ErrorCode::HttpResponseTimeout,
            ErrorCode::DnsTimeout,
        ] {
            assert_eq!(
                from_error_code(URL, &code),
                HttpError::Timeout { url: URL.into() }
            );
        }
        let code = ErrorCode::HttpResponseBodySize(Some(5));
        assert_eq!(
            from_error_code(URL, &code),
            HttpError::TooLarge { url: URL.into() }
        );
    }

    #[test]
    fn everything_else_is_transport() {
        let error = from_error_code(
            URL,
            &ErrorCode::DnsError(DnsErrorPayload {
                rcode: Some("NXDOMAIN".into()),
                info_code: None,
            }),
        );
        assert_eq!(
            error.to_string(),
            "the request to https://example.com/x failed: \
             the host name could not be resolved (NXDOMAIN)"
        );
        let error = from_error_code(URL, &ErrorCode::InternalError(Some("boom".into())));
        assert_eq!(
            error,
            HttpError::Transport {
                url: URL.into(),
                message: "boom".into()
            }
        );
    }

    #[test]
    fn body_errors_are_too_large_when_they_say_so() {
        let code = ErrorCode::HttpResponseBodySize(None);
        assert_eq!(
            from_body_error(URL, Some(&code), ""),
            HttpError::TooLarge { url: URL.into() }
        );
        assert_eq!(
            from_body_error(URL, None, "response body exceeds the limit of 1024 bytes"),
            HttpError::TooLarge { url: URL.into() }
        );
        assert_eq!(
            from_body_error(URL, None, "HttpResponseBodySize(Some(1024))"),
            HttpError::TooLarge { url: URL.into() }
        );
        assert_eq!(
            from_body_error(URL, None, "connection reset"),
            HttpError::Transport {
                url: URL.into(),
                message: "reading the response body failed: connection reset".into()
            }
        );
    }

    #[test]
    fn status_errors_show_reason_and_body() {
        let error = HttpError::Status {
            url: URL.into(),
            status: 404,
            body_snippet: "no such page".into(),
        };
        assert_eq!(
            error.to_string(),
            "https://example.com/x answered with HTTP status 404 (Not Found): no such page"
        );
        assert_eq!(
            ToolError::from(error.clone()),
            ToolError::failed(error.to_string())
        );
        let error = HttpError::Status {
            url: URL.into(),
            status: 299,
            body_snippet: String::new(),
        };
        assert_eq!(
            error.to_string(),
            "https://example.com/x answered with HTTP status 299"
        );
    }
}
