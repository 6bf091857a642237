//! The registry token flow (Docker's "token authentication"): a 401 names a
//! realm; the host asks the realm for a token scoped to one repository,
//! sending the credentials only to a realm the address rules allow (https,
//! or http to loopback), and reading its answer under a cap.

use reqwest::header::{HeaderMap, WWW_AUTHENTICATE};
use serde::Deserialize;
use url::Url;

use super::rules::{Refusal, Rules};
use super::{ReadError, read_capped};
use crate::credentials::Credentials;

/// The largest token answer read.
const MAX_TOKEN_ANSWER: u64 = 64 << 10;

/// What a 401 asks for.
#[derive(Debug, PartialEq)]
pub(crate) enum Challenge {
    /// A token from `realm`.
    Bearer {
        realm: String,
        service: Option<String>,
    },
    /// HTTP Basic credentials.
    Basic,
    /// Nothing the host speaks.
    None,
}

/// The challenge in a 401's `WWW-Authenticate` headers.
pub(crate) fn challenge(headers: &HeaderMap) -> Challenge {
    let mut found = Challenge::None;
    for value in headers.get_all(WWW_AUTHENTICATE) {
        let Ok(text) = value.to_str() else { continue };
        for parsed in http_auth::parser::ChallengeParser::new(text).flatten() {
            if parsed.scheme.eq_ignore_ascii_case("bearer") {
                let param = |name: &str| {
                    parsed
                        .params
                        .iter()
                        .find(|(k, _)| k.eq_ignore_ascii_case(name))
                        .map(|(_, v)| v.to_unescaped())
                };
                if let Some(realm) = param("realm") {
                    return Challenge::Bearer {
                        realm,
                        service: param("service"),
                    };
                }
            } else if parsed.scheme.eq_ignore_ascii_case("basic") {
                found = Challenge::Basic;
            }
        }
    }
    found
}

/// Why no token was had.
#[derive(Debug)]
pub(crate) enum TokenError {
    /// The realm is not a URL the rules allow.
    Refused(Refusal),
    /// The realm refused the credentials.
    Denied(String),
    /// The realm could not be reached or answered nonsense.
    Failed(String),
}

#[derive(Deserialize)]
struct Answer {
    token: Option<String>,
    access_token: Option<String>,
}

/// A token for `scope` from `realm`.
pub(crate) async fn fetch(
    http: &reqwest::Client,
    rules: &Rules,
    realm: &str,
    service: Option<&str>,
    scope: &str,
    credentials: &Credentials,
) -> Result<String, TokenError> {
    let mut url: Url = realm.parse().map_err(|e| {
        TokenError::Refused(Refusal(format!(
            "the token realm {}: {e}",
            wasm_agent_redact::url(realm)
        )))
    })?;
    rules
        .check_url(&url)
        .map_err(|r| TokenError::Refused(Refusal(format!("the token realm: {r}"))))?;
    {
        let mut query = url.query_pairs_mut();
        query.append_pair("scope", scope);
        if let Some(service) = service {
            query.append_pair("service", service);
        }
    }
    let mut request = http.get(url);
    if let Credentials::Basic { username, password } = credentials {
        request = request.basic_auth(username, Some(password));
    }
    let response = request
        .send()
        .await
        .map_err(|e| TokenError::Failed(super::describe(&e)))?;
    let status = response.status();
    let body = read_capped(response, MAX_TOKEN_ANSWER)
        .await
        .map_err(|e| match e {
            ReadError::TooLarge(size) => TokenError::Failed(format!(
                "the token answer is over {MAX_TOKEN_ANSWER} bytes ({size} so far)"
            )),
            ReadError::Broken(e) => TokenError::Failed(super::describe(&e)),
        })?;
    if status == 401 || status == 403 {
        return Err(TokenError::Denied(super::excerpt(status, &body)));
    }
    if !status.is_success() {
        return Err(TokenError::Failed(super::excerpt(status, &body)));
    }
    let answer: Answer = serde_json::from_slice(&body)
        .map_err(|e| TokenError::Failed(format!("the token answer is not JSON: {e}")))?;
    answer
        .token
        .or(answer.access_token)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| TokenError::Failed("the token answer holds no token".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for v in values {
            map.append(WWW_AUTHENTICATE, HeaderValue::from_str(v).unwrap());
        }
        map
    }

    #[test]
    fn challenges_are_read_as_registries_send_them() {
        assert_eq!(
            challenge(&headers(&[
                r#"Bearer realm="https://auth.example/token",service="registry.example""#
            ])),
            Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("registry.example".into())
            }
        );
        assert_eq!(
            challenge(&headers(&[r#"Basic realm="Registry Realm""#])),
            Challenge::Basic
        );
        assert_eq!(challenge(&headers(&["Negotiate"])), Challenge::None);
        assert_eq!(challenge(&headers(&[])), Challenge::None);
    }
}
