//! Fetch a URL and return what a reader would see: HTML reduced to text,
//! JSON and plain text as they are, cut to a size a model can take.

mod html;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use wasm_agent_guest::http::{self, HttpError, Method, Response};
use wasm_agent_guest::{Context, Output, Tool, ToolError};

/// Characters returned when the caller does not say.
const DEFAULT_MAX_CHARS: usize = 20_000;

/// Redirects followed before giving up; each one is a new request that the
/// host checks against its policy.
const MAX_REDIRECTS: usize = 5;

/// Characters of an error page quoted in the error.
const ERROR_SNIPPET_CHARS: usize = 300;

const ACCEPT: &str =
    "text/html,application/xhtml+xml,application/json;q=0.9,text/plain;q=0.9,*/*;q=0.5";

/// A URL to fetch.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FetchArgs {
    /// The absolute http:// or https:// URL.
    url: String,
    /// Most characters of text to return (default 20000); longer text is cut
    /// and the cut is noted.
    max_chars: Option<usize>,
}

/// How a body is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Html,
    Text,
    Binary,
}

fn classify(content_type: Option<&str>, body: &[u8]) -> Kind {
    match content_type {
        Some(media) if media.contains("html") => Kind::Html,
        Some(media)
            if media.starts_with("text/")
                || media.ends_with("json")
                || media.contains("xml")
                || media.contains("javascript")
                || media.contains("yaml")
                || media.contains("toml") =>
        {
            Kind::Text
        }
        Some(_) => Kind::Binary,
        None => {
            let start: Vec<u8> = body
                .iter()
                .skip_while(|byte| byte.is_ascii_whitespace())
                .take(14)
                .map(u8::to_ascii_lowercase)
                .collect();
            if start.starts_with(b"<!doctype html") || start.starts_with(b"<html") {
                Kind::Html
            } else if std::str::from_utf8(body).is_ok() {
                Kind::Text
            } else {
                Kind::Binary
            }
        }
    }
}

/// The body as text, decoded by its charset where possible and lossily
/// otherwise (a page with one bad byte is still worth reading).
fn body_text(response: &Response) -> String {
    response
        .text()
        .unwrap_or_else(|_| String::from_utf8_lossy(&response.body).into_owned())
}

/// The readable text of a response, or why there is none.
fn readable(response: &Response) -> Result<String, ToolError> {
    let content_type = response.content_type();
    match classify(content_type.as_deref(), &response.body) {
        Kind::Html => {
            let page = html::reduce(&body_text(response));
            let text = if page.text.is_empty() {
                "(the page has no readable text)".to_owned()
            } else {
                page.text
            };
            Ok(match page.title {
                Some(title) => format!("Title: {title}\n\n{text}"),
                None => text,
            })
        }
        Kind::Text => Ok(body_text(response)),
        Kind::Binary => Err(ToolError::failed(format!(
            "{} returned {} ({} bytes), which is not text; fetch shows only HTML, JSON \
             and other text",
            response.url,
            content_type.as_deref().unwrap_or("binary data"),
            response.body.len()
        ))),
    }
}

/// `text` cut to `max_chars` characters, with a note saying so.
fn truncate(text: String, max_chars: usize) -> (String, bool) {
    let total = text.chars().count();
    if total <= max_chars {
        return (text, false);
    }
    let mut cut: String = text.chars().take(max_chars).collect();
    cut.push_str(&format!(
        "\n\n[truncated: showing the first {max_chars} of {total} characters; \
         call again with a larger max_chars to see more]"
    ));
    (cut, true)
}

/// What the tool returns for a successful response.
fn render(response: &Response, max_chars: usize) -> Result<Output, ToolError> {
    let text = readable(response)?;
    let characters = text.chars().count();
    let (content, truncated) = truncate(text, max_chars);
    Output::text(content).with_json(
        "page",
        &json!({
            "url": response.url,
            "status": response.status,
            "content_type": response.content_type(),
            "characters": characters,
            "truncated": truncated,
        }),
    )
}

/// The error for a non-2xx response, quoting the page's text (not its
/// markup) so the model sees what the server said.
fn status_error(response: &Response) -> ToolError {
    let text = readable(response).unwrap_or_default();
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut body_snippet: String = collapsed.chars().take(ERROR_SNIPPET_CHARS).collect();
    if body_snippet.len() < collapsed.len() {
        body_snippet.push_str(" ...");
    }
    HttpError::Status {
        url: response.url.clone(),
        status: response.status,
        body_snippet,
    }
    .into()
}

/// GETs `url`, following up to [`MAX_REDIRECTS`] redirects.
fn get_following_redirects(url: &str) -> Result<Response, ToolError> {
    let mut next = url.to_owned();
    for _ in 0..=MAX_REDIRECTS {
        let response = http::Request::new(Method::Get, &next)
            .header("accept", ACCEPT)
            .send()?;
        match response.redirect_location() {
            Some(location) => next = location,
            None => return Ok(response),
        }
    }
    Err(ToolError::failed(format!(
        "{url} redirected more than {MAX_REDIRECTS} times; giving up at {next}"
    )))
}

fn fetch(args: FetchArgs, _: &Context) -> Result<Output, ToolError> {
    let max_chars = args.max_chars.unwrap_or(DEFAULT_MAX_CHARS);
    if max_chars == 0 {
        return Err(ToolError::invalid_arguments("max_chars must be at least 1"));
    }
    let response = get_following_redirects(&args.url)?;
    if !response.is_success() {
        return Err(status_error(&response));
    }
    render(&response, max_chars)
}

wasm_agent_guest::export_tools![
    Tool::new(
        "fetch",
        "Fetch a web page or API URL with GET and return its content as text: HTML is \
         reduced to readable text (no scripts, styles or navigation), JSON and plain text \
         are returned as they are. Redirects are followed. Long content is cut to \
         max_chars.",
        fetch
    )
    .read_only()
    .open_world(),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: u16, content_type: Option<&str>, body: &str) -> Response {
        Response {
            url: "https://example.com/page".into(),
            status,
            headers: content_type
                .map(|value| vec![("content-type".to_owned(), value.to_owned())])
                .unwrap_or_default(),
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn html_is_reduced_and_titled() {
        let page = response(
            200,
            Some("text/html; charset=utf-8"),
            "<html><head><title>Doc</title></head><body><h2>Intro</h2><p>Hi &amp; bye</p></body></html>",
        );
        let output = render(&page, 1000).unwrap();
        assert_eq!(output.content(), "Title: Doc\n\n## Intro\n\nHi & bye");
        let meta: serde_json::Value = serde_json::from_slice(&output.artifacts()[0].data).unwrap();
        assert_eq!(meta["content_type"], "text/html");
        assert_eq!(meta["truncated"], false);
    }

    #[test]
    fn json_and_text_pass_through() {
        let body = "{\"a\": \"<b>not html</b>\"}";
        let output = render(&response(200, Some("application/json"), body), 1000).unwrap();
        assert_eq!(output.content(), body);
        let output = render(&response(200, Some("application/ld+json"), body), 1000).unwrap();
        assert_eq!(output.content(), body);
        let output = render(&response(200, None, "plain  text"), 1000).unwrap();
        assert_eq!(output.content(), "plain  text");
    }

    #[test]
    fn untyped_html_is_sniffed_and_binary_refused() {
        let output = render(&response(200, None, "\n<!DOCTYPE HTML><p>x</p>"), 100).unwrap();
        assert_eq!(output.content(), "x");
        let error = render(&response(200, Some("image/png"), "\u{89}PNG"), 100).unwrap_err();
        assert_eq!(
            error.message(),
            "https://example.com/page returned image/png (5 bytes), which is not text; \
             fetch shows only HTML, JSON and other text"
        );
        let mut binary = response(200, None, "");
        binary.body = vec![0xff, 0xfe, 0x00];
        assert!(render(&binary, 100).is_err());
    }

    #[test]
    fn long_text_is_cut_with_a_note() {
        let output = render(&response(200, Some("text/plain"), "héllo world"), 5).unwrap();
        assert_eq!(
            output.content(),
            "héllo\n\n[truncated: showing the first 5 of 11 characters; \
             call again with a larger max_chars to see more]"
        );
        let meta: serde_json::Value = serde_json::from_slice(&output.artifacts()[0].data).unwrap();
        assert_eq!(meta["truncated"], true);
        assert_eq!(meta["characters"], 11);
    }

    #[test]
    fn error_pages_quote_their_text() {
        let page = response(
            404,
            Some("text/html"),
            "<html><head><style>x{}</style></head><body><h1>Not here</h1></body></html>",
        );
        assert_eq!(
            status_error(&page).message(),
            "https://example.com/page answered with HTTP status 404 (Not Found): # Not here"
        );
    }

    #[test]
    fn zero_max_chars_is_an_argument_error() {
        let args = FetchArgs {
            url: "https://example.com/".into(),
            max_chars: Some(0),
        };
        assert!(matches!(
            fetch(args, &Context::default()),
            Err(ToolError::InvalidArguments(_))
        ));
    }
}
