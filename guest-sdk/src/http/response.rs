//! A complete response: status, headers and the whole body in memory.

use serde::de::DeserializeOwned;

use super::HttpError;
use super::url::Url;

/// Longest body excerpt that [`Response::error_for_status`] puts in its
/// error, in characters.
const SNIPPET_CHARS: usize = 300;

/// A response, read to the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The URL that was requested, normalised (what error messages show).
    pub url: String,
    /// The HTTP status code.
    pub status: u16,
    /// The headers in the order received; names are lower-case.
    pub headers: Vec<(String, String)>,
    /// The body (empty for `HEAD`).
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of header `name` (compared case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// True for a 2xx status.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The media type of the body without parameters, lower-case (e.g.
    /// `text/html` for `text/html; charset=utf-8`), if the server sent one.
    pub fn content_type(&self) -> Option<String> {
        let value = self.header("content-type")?;
        let media_type = value.split(';').next().unwrap_or(value).trim();
        (!media_type.is_empty()).then(|| media_type.to_ascii_lowercase())
    }

    /// The response itself if its status is 2xx, otherwise
    /// [`HttpError::Status`] with the start of the body.
    pub fn error_for_status(self) -> Result<Self, HttpError> {
        if self.is_success() {
            return Ok(self);
        }
        let text = String::from_utf8_lossy(&self.body);
        let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut body_snippet: String = collapsed.chars().take(SNIPPET_CHARS).collect();
        if body_snippet.len() < collapsed.len() {
            body_snippet.push_str(" ...");
        }
        Err(HttpError::Status {
            url: self.url,
            status: self.status,
            body_snippet,
        })
    }

    /// The body as text, decoded by the `charset` of the `Content-Type`
    /// header: UTF-8 (the default) or ISO-8859-1/US-ASCII.
    ///
    /// Fails with [`HttpError::Decode`] on invalid UTF-8 or another charset;
    /// `String::from_utf8_lossy(&response.body)` never fails.
    pub fn text(&self) -> Result<String, HttpError> {
        let charset = self.header("content-type").and_then(charset_of);
        match charset.as_deref() {
            None | Some("utf-8" | "utf8") => String::from_utf8(self.body.clone())
                .map_err(|_| self.decode_error("the body is not valid UTF-8 text".to_owned())),
            Some("iso-8859-1" | "latin1" | "latin-1" | "us-ascii" | "ascii") => {
                Ok(self.body.iter().map(|&byte| char::from(byte)).collect())
            }
            Some(other) => Err(self.decode_error(format!("charset {other:?} is not supported"))),
        }
    }

    /// The body decoded as JSON into `T`.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, HttpError> {
        serde_json::from_slice(&self.body).map_err(|error| {
            self.decode_error(format!("the body is not the expected JSON: {error}"))
        })
    }

    /// Where a redirect (status 301, 302, 303, 307 or 308) points, as an
    /// absolute URL resolved against the requested one; `None` for any
    /// other response or a redirect without a `Location` header.
    ///
    /// Redirects are never followed automatically: the host does not follow
    /// them, and neither does the SDK. To follow one, request this URL; the
    /// host checks the new request against its policy like any other.
    pub fn redirect_location(&self) -> Option<String> {
        if !matches!(self.status, 301 | 302 | 303 | 307 | 308) {
            return None;
        }
        let location = self.header("location")?;
        Url::parse(&self.url).ok()?.resolve(location)
    }

    fn decode_error(&self, message: String) -> HttpError {
        HttpError::Decode {
            url: self.url.clone(),
            message,
        }
    }
}

/// The lower-case `charset` parameter of a `Content-Type` value.
fn charset_of(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|parameter| {
        let (name, value) = parameter.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| value.trim().trim_matches('"').to_ascii_lowercase())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: u16, headers: &[(&str, &str)], body: &[u8]) -> Response {
        Response {
            url: "https://example.com/docs/a".into(),
            status,
            headers: headers
                .iter()
                .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
                .collect(),
            body: body.to_vec(),
        }
    }

    #[test]
    fn headers_are_found_case_insensitively() {
        let response = response(200, &[("content-type", "Text/HTML; charset=UTF-8")], b"");
        assert_eq!(
            response.header("Content-Type"),
            Some("Text/HTML; charset=UTF-8")
        );
        assert_eq!(response.content_type().as_deref(), Some("text/html"));
        assert_eq!(response.header("x-missing"), None);
    }

    #[test]
    fn text_follows_the_charset() {
        let latin = response(
            200,
            &[("content-type", "text/plain; charset=\"ISO-8859-1\"")],
            b"caf\xe9",
        );
        assert_eq!(latin.text().unwrap(), "café");
        let utf8 = response(200, &[("content-type", "text/plain")], "café".as_bytes());
        assert_eq!(utf8.text().unwrap(), "café");
        let broken = response(200, &[], b"caf\xe9");
        assert!(matches!(broken.text(), Err(HttpError::Decode { .. })));
        let other = response(200, &[("content-type", "text/plain; charset=koi8-r")], b"x");
        assert!(
            other
                .text()
                .unwrap_err()
                .to_string()
                .contains("\"koi8-r\" is not supported")
        );
    }

    #[test]
    fn json_decodes_or_says_why_not() {
        let ok = response(200, &[], br#"{"a": [1, 2]}"#);
        assert_eq!(ok.json::<serde_json::Value>().unwrap()["a"][1], 2);
        let error = response(200, &[], b"<html>")
            .json::<serde_json::Value>()
            .unwrap_err();
        assert!(error.to_string().starts_with(
            "cannot read the response from https://example.com/docs/a: the body is not the expected JSON"
        ));
    }

    #[test]
    fn error_for_status_keeps_successes_and_quotes_failures() {
        assert!(response(204, &[], b"").error_for_status().is_ok());
        let error = response(503, &[], b"  down\n for\tmaintenance ")
            .error_for_status()
            .unwrap_err();
        assert_eq!(
            error,
            HttpError::Status {
                url: "https://example.com/docs/a".into(),
                status: 503,
                body_snippet: "down for maintenance".into()
            }
        );
        let long = "x".repeat(1000);
        let HttpError::Status { body_snippet, .. } = response(500, &[], long.as_bytes())
            .error_for_status()
            .unwrap_err()
        else {
            panic!("expected a status error");
        };
        assert_eq!(body_snippet.len(), SNIPPET_CHARS + 4);
    }

    #[test]
    fn redirect_location_resolves_only_for_redirects() {
        let moved = response(301, &[("location", "../b?x=1")], b"");
        assert_eq!(
            moved.redirect_location().as_deref(),
            Some("https://example.com/b?x=1")
        );
        let absolute = response(307, &[("Location", "http://other.org/")], b"");
        assert_eq!(
            absolute.redirect_location().as_deref(),
            Some("http://other.org/")
        );
        assert_eq!(
            response(200, &[("location", "/x")], b"").redirect_location(),
            None
        );
        assert_eq!(response(302, &[], b"").redirect_location(), None);
    }
}
