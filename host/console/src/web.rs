//! HTTP for the console's pages: responses with the headers every page
//! carries (a strict Content-Security-Policy, no framing, no caching, no
//! referrer beyond the console), cookies, forms and query strings read within bounds.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{HeaderMap, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use serde::de::DeserializeOwned;
use wasm_agent_mcp::PageBody;

/// Nothing but the console's own files: no inline script or style, no
/// other origin, no framing, forms only to itself.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
     base-uri 'none'";

/// Largest form body accepted.
pub(crate) const MAX_FORM: usize = 16 * 1024;

/// A response of `body` with `content_type` and the console's headers.
pub(crate) fn respond(
    status: StatusCode,
    content_type: &'static str,
    body: Bytes,
) -> Response<PageBody> {
    let mut response = Response::new(Full::new(body).boxed());
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    secure(headers);
    response
}

/// The headers every console response carries.
pub(crate) fn secure(headers: &mut HeaderMap) {
    let fixed = [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "same-origin"),
        (header::CACHE_CONTROL, "no-store"),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers.insert(
        header::HeaderName::from_static("cross-origin-opener-policy"),
        HeaderValue::from_static("same-origin"),
    );
}

/// The 403 for a request another site's page made: a `Sec-Fetch-Site`
/// other than `same-origin` or `none` (another port of the same host is
/// the same *site*, and would carry the cookie), or a form whose `Origin`
/// is not the console's own (a page needs no script to post a form).
pub(crate) fn cross_site<B>(request: &http::Request<B>) -> Option<Response<PageBody>> {
    let headers = request.headers();
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = header("sec-fetch-site")
        && site != "same-origin"
        && site != "none"
    {
        return Some(text(
            StatusCode::FORBIDDEN,
            &format!("forbidden: the console answers only its own pages (Sec-Fetch-Site: {site})"),
        ));
    }
    if request.method() == http::Method::POST {
        let host = header("host").unwrap_or("");
        let own = header("origin")
            .and_then(|origin| origin.split_once("://"))
            .is_some_and(|(_, authority)| !host.is_empty() && authority.eq_ignore_ascii_case(host));
        if !own {
            return Some(text(
                StatusCode::FORBIDDEN,
                "forbidden: a console form must come from the console's own page (its Origin)",
            ));
        }
    }
    None
}

/// An HTML page.
pub(crate) fn html(status: StatusCode, page: String) -> Response<PageBody> {
    respond(status, "text/html; charset=utf-8", Bytes::from(page))
}

/// A plain-text answer (refusals, errors).
pub(crate) fn text(status: StatusCode, message: &str) -> Response<PageBody> {
    respond(
        status,
        "text/plain; charset=utf-8",
        Bytes::from(format!("{message}\n")),
    )
}

/// A redirect (303: the next request is a GET) to `location`.
pub(crate) fn see_other(location: &str) -> Response<PageBody> {
    let mut response = respond(
        StatusCode::SEE_OTHER,
        "text/plain; charset=utf-8",
        Bytes::new(),
    );
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

/// Sets cookie `name` for the console's path with `attributes`
/// (HttpOnly, SameSite=Strict, and Secure over HTTPS), for `max_age`
/// seconds (0 removes it).
pub(crate) fn set_cookie(
    response: &mut Response<PageBody>,
    (name, value): (&str, &str),
    attributes: &str,
    max_age: u64,
) {
    let cookie = format!(
        "{name}={value}; Path={}; {attributes}; Max-Age={max_age}",
        crate::PREFIX
    );
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
}

/// The value of cookie `name` in a request's headers.
pub(crate) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|line| line.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// A query string read as `T` (missing fields default), or why not.
pub(crate) fn query<T: DeserializeOwned + Default>(query: Option<&str>) -> Result<T, String> {
    match query {
        None | Some("") => Ok(T::default()),
        Some(query) => serde_urlencoded::from_str(query).map_err(|e| e.to_string()),
    }
}

/// A form body (`application/x-www-form-urlencoded`, at most [`MAX_FORM`]
/// bytes) as text, or the response refusing it.
pub(crate) async fn form_text(body: Incoming) -> Result<String, Response<PageBody>> {
    let bytes = Limited::new(body, MAX_FORM)
        .collect()
        .await
        .map_err(|_| {
            text(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("the form is over the {MAX_FORM}-byte limit"),
            )
        })?
        .to_bytes();
    String::from_utf8(bytes.to_vec())
        .map_err(|_| text(StatusCode::BAD_REQUEST, "bad form: not UTF-8"))
}

/// A form's text read as `T`, or why not.
pub(crate) fn parse_form<T: DeserializeOwned>(form: &str) -> Result<T, String> {
    serde_urlencoded::from_str(form).map_err(|e| format!("bad form: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_found_by_exact_name() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("wa_console_form=f; wa_console=abc.def"),
        );
        assert_eq!(cookie(&headers, "wa_console"), Some("abc.def"));
        assert_eq!(cookie(&headers, "wa_console_form"), Some("f"));
        assert_eq!(cookie(&headers, "wa"), None);
    }

    #[test]
    fn only_the_consoles_own_pages_may_ask() {
        let request = |method: &str, headers: &[(&str, &str)]| {
            let mut builder = http::Request::builder()
                .method(method)
                .uri("/console/logout");
            for (name, value) in headers {
                builder = builder.header(*name, *value);
            }
            builder.body(()).unwrap()
        };
        let own = [
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
        ];
        assert!(cross_site(&request("POST", &own)).is_none());
        let other_port = [
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:3000"),
        ];
        assert!(cross_site(&request("POST", &other_port)).is_some());
        assert!(cross_site(&request("POST", &[("host", "127.0.0.1:8080")])).is_some());
        let sibling = [("host", "127.0.0.1:8080"), ("sec-fetch-site", "same-site")];
        assert!(cross_site(&request("GET", &sibling)).is_some());
        let typed = [("host", "127.0.0.1:8080"), ("sec-fetch-site", "none")];
        assert!(cross_site(&request("GET", &typed)).is_none());
    }

    #[test]
    fn every_response_carries_the_policy() {
        let response = text(StatusCode::OK, "x");
        let csp = response.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap();
        assert!(csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"));
        assert!(!csp.contains("unsafe"));
        assert_eq!(response.headers()[header::CACHE_CONTROL], "no-store");
    }
}
