//! The only part of the module that talks to the host: one request through
//! `wasi:http/outgoing-handler`, its body written and the response read to
//! the end.

use std::time::Duration;

use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    self as wasi, Fields, FutureIncomingResponse, HeaderError, IncomingResponse, OutgoingBody,
    OutgoingRequest, RequestOptions,
};
use wasip2::io::streams::{InputStream, StreamError};

use super::error::{from_body_error, from_error_code};
use super::url::{Scheme, Url};
use super::{HttpError, Method, Response};

/// Bytes asked for per read of the response body.
const READ_CHUNK: u64 = 64 * 1024;

/// Most bytes `blocking-write-and-flush` accepts in one call (wasi:io).
const WRITE_CHUNK: usize = 4096;

/// A request whose URL and headers have been checked.
pub(super) struct Prepared {
    pub(super) method: Method,
    pub(super) url: Url,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: Option<Vec<u8>>,
    pub(super) timeout: Option<Duration>,
    pub(super) max_body: usize,
}

pub(super) fn send(request: Prepared) -> Result<Response, HttpError> {
    let url = request.url.to_string();
    let transport = |message: &str| HttpError::Transport {
        url: url.clone(),
        message: message.to_owned(),
    };

    let headers = Fields::new();
    for (name, value) in &request.headers {
        headers
            .append(name, value.as_bytes())
            .map_err(|error| header_refused(name, &error))?;
    }
    let outgoing = OutgoingRequest::new(headers);
    let method = match request.method {
        Method::Get => wasi::Method::Get,
        Method::Post => wasi::Method::Post,
        Method::Put => wasi::Method::Put,
        Method::Patch => wasi::Method::Patch,
        Method::Delete => wasi::Method::Delete,
        Method::Head => wasi::Method::Head,
    };
    let scheme = match request.url.scheme {
        Scheme::Http => wasi::Scheme::Http,
        Scheme::Https => wasi::Scheme::Https,
    };
    outgoing
        .set_method(&method)
        .map_err(|()| transport("the host rejected the method"))?;
    outgoing
        .set_scheme(Some(&scheme))
        .map_err(|()| transport("the host rejected the scheme"))?;
    outgoing
        .set_authority(Some(&request.url.authority))
        .map_err(|()| HttpError::InvalidUrl(format!("{url:?}: the host rejected its host")))?;
    outgoing
        .set_path_with_query(Some(&request.url.path_and_query))
        .map_err(|()| HttpError::InvalidUrl(format!("{url:?}: the host rejected its path")))?;

    // The body resource must be taken before `handle` consumes the request;
    // it is written afterwards, while the host is already sending, so a body
    // larger than the host's buffer cannot block.
    let outgoing_body = match request.body {
        Some(bytes) => {
            let body = outgoing
                .body()
                .map_err(|()| transport("the request body could not be opened"))?;
            Some((body, bytes))
        }
        None => None,
    };
    let options = request.timeout.map(timeouts).transpose().map_err(|()| {
        HttpError::InvalidRequest("the host does not accept request timeouts".to_owned())
    })?;

    let future =
        outgoing_handler::handle(outgoing, options).map_err(|code| from_error_code(&url, &code))?;
    if let Some((body, bytes)) = outgoing_body {
        write_body(&url, body, &bytes)?;
    }
    let response = wait_for(&url, &future)?;
    read_response(url, &response, request.max_body)
}

fn header_refused(name: &str, error: &HeaderError) -> HttpError {
    HttpError::InvalidRequest(match error {
        HeaderError::Forbidden => format!("the host does not let tools set the header {name:?}"),
        HeaderError::InvalidSyntax => format!("the host rejected the header {name:?} as malformed"),
        HeaderError::Immutable => format!("the header {name:?} can no longer be changed"),
    })
}

fn timeouts(timeout: Duration) -> Result<RequestOptions, ()> {
    let nanos = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
    let options = RequestOptions::new();
    options.set_connect_timeout(Some(nanos))?;
    options.set_first_byte_timeout(Some(nanos))?;
    options.set_between_bytes_timeout(Some(nanos))?;
    Ok(options)
}

fn write_body(url: &str, body: OutgoingBody, bytes: &[u8]) -> Result<(), HttpError> {
    let write_failed = |error: StreamError| match error {
        StreamError::LastOperationFailed(error) => match wasi::http_error_code(&error) {
            Some(code) => from_error_code(url, &code),
            None => HttpError::Transport {
                url: url.to_owned(),
                message: format!(
                    "sending the request body failed: {}",
                    error.to_debug_string()
                ),
            },
        },
        StreamError::Closed => HttpError::Transport {
            url: url.to_owned(),
            message: "the server closed the connection while the request body was sent".into(),
        },
    };
    {
        let stream = body.write().map_err(|()| HttpError::Transport {
            url: url.to_owned(),
            message: "the request body could not be written".into(),
        })?;
        for chunk in bytes.chunks(WRITE_CHUNK) {
            stream
                .blocking_write_and_flush(chunk)
                .map_err(write_failed)?;
        }
        // The stream must be dropped before the body is finished.
    }
    OutgoingBody::finish(body, None).map_err(|code| from_error_code(url, &code))
}

fn wait_for(url: &str, future: &FutureIncomingResponse) -> Result<IncomingResponse, HttpError> {
    loop {
        match future.get() {
            None => future.subscribe().block(),
            Some(Ok(Ok(response))) => return Ok(response),
            Some(Ok(Err(code))) => return Err(from_error_code(url, &code)),
            Some(Err(())) => {
                return Err(HttpError::Transport {
                    url: url.to_owned(),
                    message: "the response was already taken".into(),
                });
            }
        }
    }
}

fn read_response(
    url: String,
    response: &IncomingResponse,
    max_body: usize,
) -> Result<Response, HttpError> {
    let status = response.status();
    let headers: Vec<(String, String)> = response
        .headers()
        .entries()
        .into_iter()
        .map(|(name, value)| (name, String::from_utf8_lossy(&value).into_owned()))
        .collect();
    // A declared length over the limit fails before a byte is read.
    let declared = headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<u64>().ok());
    if declared.is_some_and(|length| length > max_body as u64) {
        return Err(HttpError::TooLarge { url });
    }

    let incoming = response.consume().map_err(|()| HttpError::Transport {
        url: url.clone(),
        message: "the response body was already taken".into(),
    })?;
    let body = {
        let stream = incoming.stream().map_err(|()| HttpError::Transport {
            url: url.clone(),
            message: "the response body could not be opened".into(),
        })?;
        read_to_end(&url, &stream, max_body)?
        // The stream is dropped here, before the body resource it belongs to.
    };
    drop(incoming);
    Ok(Response {
        url,
        status,
        headers,
        body,
    })
}

fn read_to_end(url: &str, stream: &InputStream, max_body: usize) -> Result<Vec<u8>, HttpError> {
    let mut body = Vec::new();
    loop {
        match stream.blocking_read(READ_CHUNK) {
            Ok(chunk) => {
                if body.len() + chunk.len() > max_body {
                    return Err(HttpError::TooLarge {
                        url: url.to_owned(),
                    });
                }
                body.extend_from_slice(&chunk);
            }
            Err(StreamError::Closed) => return Ok(body),
            Err(StreamError::LastOperationFailed(error)) => {
                let code = wasi::http_error_code(&error);
                return Err(from_body_error(
                    url,
                    code.as_ref(),
                    &error.to_debug_string(),
                ));
            }
        }
    }
}
