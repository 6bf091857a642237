//! What a cached result is filed under.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Identifies a tool call for caching: the tool, the component version that
/// runs it, its arguments in canonical form, and the tenant and principal it
/// ran for.
///
/// The tenant and the principal are part of the key so that no caller is
/// ever served a result computed for another (tools see `user_id`, so a
/// result may depend on it); `None` (no tenant, no principal) is a separate
/// space too. A tool whose results the operator declares shared is filed
/// with no principal (`cache_shared`), never across tenants.
/// The component version (its content digest) is part of it so that a
/// changed component never answers with its predecessor's results.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey {
    tool: String,
    component: String,
    arguments: String,
    tenant: Option<String>,
    principal: Option<String>,
}

impl CacheKey {
    /// The key for calling `tool` of `component` (a version such as
    /// `sha256:HEX`) with `arguments` on behalf of `principal` of `tenant`.
    ///
    /// Arguments are written as compact JSON with object keys sorted at every
    /// depth, so key order and whitespace do not matter. Numbers keep the form
    /// serde_json gives them: `1` and `1.0` are different keys, since a tool
    /// may treat them differently.
    pub fn new(
        tool: &str,
        component: &str,
        arguments: &Value,
        tenant: Option<&str>,
        principal: Option<&str>,
    ) -> Self {
        Self {
            tool: tool.to_owned(),
            component: component.to_owned(),
            arguments: canonical(arguments),
            tenant: tenant.map(str::to_owned),
            principal: principal.map(str::to_owned),
        }
    }

    /// The tenant the result belongs to.
    pub fn tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    /// The principal the result belongs to (`None` also for shared results).
    pub fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }

    /// The component version.
    pub fn component(&self) -> &str {
        &self.component
    }

    /// The tool's name.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// The key as bytes, every part length-prefixed: two different keys
    /// never share an encoding, whatever their parts contain.
    pub fn encoded(&self) -> Vec<u8> {
        let parts = [
            Some(self.tool.as_str()),
            Some(self.component.as_str()),
            Some(self.arguments.as_str()),
            self.tenant.as_deref(),
            self.principal.as_deref(),
        ];
        let mut out = b"wasm-agent result key v2".to_vec();
        for part in parts {
            match part {
                None => out.push(0),
                Some(text) => {
                    out.push(1);
                    out.extend_from_slice(&(text.len() as u64).to_le_bytes());
                    out.extend_from_slice(text.as_bytes());
                }
            }
        }
        out
    }

    /// SHA-256 of [`encoded`](Self::encoded) in hex: a fixed-length name for
    /// stores elsewhere. Such stores keep the encoded key beside the value
    /// and compare it on reading, so even a hash collision is only a miss.
    pub fn digest(&self) -> String {
        hex::encode(Sha256::digest(self.encoded()))
    }

    /// The canonical arguments (for tests of the canonical form).
    #[cfg(test)]
    pub(crate) fn arguments(&self) -> &str {
        &self.arguments
    }
}

/// `value` as compact JSON with object keys sorted at every depth: equal for
/// arguments that differ only in key order or whitespace. Numbers keep the
/// form serde_json gives them (`1` and `1.0` differ).
pub fn canonical(value: &Value) -> String {
    sorted(value).to_string()
}

/// A copy of `value` with object keys inserted in sorted order. Without
/// serde_json's `preserve_order` feature maps are sorted anyway; with it they
/// keep insertion order, which this makes sorted as well.
fn sorted(value: &Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.clone(), sorted(v)))
                    .collect(),
            )
        }
        scalar => scalar.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(arguments: Value) -> CacheKey {
        CacheKey::new("t", "sha256:aa", &arguments, None, None)
    }

    #[test]
    fn arguments_are_canonical_at_every_depth() {
        assert_eq!(key(json!({"b": 1, "a": 2})), key(json!({"a": 2, "b": 1})));
        assert_eq!(key(json!({"b": 1, "a": 2})).arguments(), r#"{"a":2,"b":1}"#);
        let parsed: Value = serde_json::from_str(
            "{ \"z\": [ {\"y\": 1, \"x\": {\"d\": null, \"c\": true}} ],\n \"a\": \"s p\" }",
        )
        .unwrap();
        assert_eq!(
            key(parsed).arguments(),
            r#"{"a":"s p","z":[{"x":{"c":true,"d":null},"y":1}]}"#
        );
    }

    #[test]
    fn different_arguments_tools_versions_or_tenants_differ() {
        let base = key(json!({"a": 1}));
        let others = [
            key(json!({"a": 2})),
            key(json!({"a": 1.0})),
            key(json!({"a": "1"})),
            CacheKey::new("u", "sha256:aa", &json!({"a": 1}), None, None),
            CacheKey::new("t", "sha256:bb", &json!({"a": 1}), None, None),
            CacheKey::new("t", "sha256:aa", &json!({"a": 1}), Some("x"), None),
            // An empty tenant name is a tenant, not the absence of one.
            CacheKey::new("t", "sha256:aa", &json!({"a": 1}), Some(""), None),
            // Two callers of one tenant (or of none) never share a result.
            CacheKey::new("t", "sha256:aa", &json!({"a": 1}), None, Some("alice")),
            CacheKey::new("t", "sha256:aa", &json!({"a": 1}), None, Some("")),
        ];
        for other in &others {
            assert_ne!(&base, other);
            assert_ne!(base.encoded(), other.encoded());
            assert_ne!(base.digest(), other.digest());
        }
        // Array order is meaningful and kept.
        assert_ne!(key(json!([1, 2])), key(json!([2, 1])));
        assert_eq!(key(json!(1.5e3)).arguments(), "1500.0");
    }

    #[test]
    fn parts_cannot_borrow_from_each_other() {
        // Moving text between tool and component must change the encoding.
        let a = CacheKey::new("ab", "c", &json!(1), Some("t"), None);
        let b = CacheKey::new("a", "bc", &json!(1), Some("t"), None);
        assert_ne!(a.encoded(), b.encoded());
        // Nor tenant and principal.
        let tenant = CacheKey::new("a", "c", &json!(1), Some("x"), None);
        let principal = CacheKey::new("a", "c", &json!(1), None, Some("x"));
        assert_ne!(tenant.encoded(), principal.encoded());
        assert_eq!(a.digest().len(), 64);
        assert_eq!(a.tenant(), Some("t"));
        assert_eq!(a.tool(), "ab");
    }
}
