//! Which object keys name secrets.

/// Key parts that mark a secret wherever they appear in a key (compared
/// without case and without `-`, `_`, `.` and spaces).
const SECRET_PARTS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "passcode",
    "secret",
    "token",
    "apikey",
    "authorization",
    "credential",
    "privatekey",
    "cookie",
    "accesskey",
    "sessionid",
    "signature",
];

/// Words that mark a secret when a key has them as a whole word (`auth` in
/// `x-auth` or `authHeader`, never in `author`; `pass` in `db_pass`, never in
/// `bypass`).
const SECRET_WORDS: &[&str] = &[
    "pwd", "pw", "pass", "auth", "bearer", "jwt", "otp", "totp", "session", "sig",
];

/// Endings of a key written in one word (`DBPASS`, `rootpw`).
const SECRET_ENDINGS: &[&str] = &["dbpass", "pwd", "rootpw", "userpass", "adminpass"];

/// Whether values under `key` are secrets: it contains a secret part
/// (`password`, `token`, `api_key`, `credentials`, ...) or has a secret
/// word (`pwd`, `pass`, `auth`, `bearer`, `jwt`, `otp`, `session`).
pub fn secret_key(key: &str) -> bool {
    let squeezed: String = key
        .chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect();
    if SECRET_PARTS.iter().any(|part| squeezed.contains(part))
        || SECRET_ENDINGS.iter().any(|end| squeezed.ends_with(end))
    {
        return true;
    }
    words(key)
        .iter()
        .any(|word| SECRET_WORDS.contains(&word.as_str()))
}

/// The words of a key, lowercased: split at anything not a letter or digit
/// and where a lowercase letter or digit meets an uppercase one (`authToken`).
fn words(key: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut previous_lower = false;
    for c in key.chars() {
        if !c.is_alphanumeric() {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}
