//! A partial policy, as written in a config section or given as CLI flags, laid
//! over a base policy.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{AskGrant, ByteSize, DirGrant, NetworkGrant, Policy};

/// Policy keys that are set in one place (a config section or the CLI flags).
///
/// Applied over a base policy: scalars replace, `dirs` extend, `env` and
/// `dependencies` merge key by key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyLayer {
    #[serde(
        default,
        with = "super::duration_text::option",
        skip_serializing_if = "Option::is_none"
    )]
    /// See [`Policy::timeout`](super::Policy::timeout).
    pub timeout: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// See [`Policy::fuel`](super::Policy::fuel).
    pub fuel: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// See [`Policy::memory`](super::Policy::memory).
    pub memory: Option<ByteSize>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    /// Added to the base policy's directory grants.
    pub dirs: Vec<DirGrant>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    /// Merged into the base policy's environment.
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    /// Merged into the base policy's dependencies.
    pub dependencies: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// See [`Policy::max_output`](super::Policy::max_output).
    pub max_output: Option<ByteSize>,
    /// Added to the base policy's network grants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<NetworkGrant>,
    /// See [`Policy::max_response`](super::Policy::max_response).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_response: Option<ByteSize>,
    /// See [`Policy::max_requests`](super::Policy::max_requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_requests: Option<u32>,
    /// Merged into the base policy's headers, pattern by pattern.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub http_headers: BTreeMap<String, BTreeMap<String, String>>,
    /// Added to the base policy's delegation grants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delegate: Vec<String>,
    /// See [`Policy::max_arguments`](super::Policy::max_arguments).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_arguments: Option<ByteSize>,
    /// See [`Policy::max_artifacts`](super::Policy::max_artifacts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_artifacts: Option<u32>,
    /// See [`Policy::max_resources`](super::Policy::max_resources).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_resources: Option<u32>,
    /// See [`Policy::max_tools`](super::Policy::max_tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tools: Option<u32>,
    /// See [`Policy::max_description`](super::Policy::max_description).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_description: Option<ByteSize>,
    /// See [`Policy::max_schema`](super::Policy::max_schema).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_schema: Option<ByteSize>,
    /// See [`Policy::max_write`](super::Policy::max_write).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_write: Option<ByteSize>,
    /// Added to the base policy's tool-call grants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub call_tools: Vec<String>,
    /// See [`Policy::scratch`](super::Policy::scratch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scratch: Option<bool>,
    /// See [`Policy::keep_instance`](super::Policy::keep_instance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_instance: Option<bool>,
    /// See [`Policy::kept_idle`](super::Policy::kept_idle).
    #[serde(
        default,
        with = "super::duration_text::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub kept_idle: Option<Duration>,
    /// See [`Policy::propagate_trace`](super::Policy::propagate_trace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub propagate_trace: Option<bool>,
    /// Added to the base policy's ask grants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ask: Vec<AskGrant>,
}

/// Every key a [`PolicyLayer`] accepts (config sections are checked against it).
pub const LAYER_KEYS: &[&str] = &[
    "timeout",
    "fuel",
    "memory",
    "dirs",
    "env",
    "dependencies",
    "max_output",
    "network",
    "max_response",
    "max_requests",
    "http_headers",
    "delegate",
    "max_arguments",
    "max_artifacts",
    "max_resources",
    "max_tools",
    "max_description",
    "max_schema",
    "max_write",
    "call_tools",
    "scratch",
    "keep_instance",
    "kept_idle",
    "propagate_trace",
    "ask",
];

impl PolicyLayer {
    /// Resolves relative directory grants against `base` (a config file's folder).
    pub fn relative_to(mut self, base: &Path) -> Self {
        self.dirs = self.dirs.into_iter().map(|d| d.relative_to(base)).collect();
        self.ask = self
            .ask
            .into_iter()
            .map(|grant| match grant {
                AskGrant::Dir(dir) => AskGrant::Dir(dir.relative_to(base)),
                network => network,
            })
            .collect();
        self
    }

    /// Lays this layer over `policy`.
    pub fn apply_to(&self, mut policy: Policy) -> Policy {
        let PolicyLayer {
            timeout,
            fuel,
            memory,
            dirs,
            env,
            dependencies,
            max_output,
            network,
            max_response,
            max_requests,
            http_headers,
            delegate,
            max_arguments,
            max_artifacts,
            max_resources,
            max_tools,
            max_description,
            max_schema,
            max_write,
            call_tools,
            scratch,
            keep_instance,
            kept_idle,
            propagate_trace,
            ask,
        } = self;
        if let Some(timeout) = timeout {
            policy.timeout = *timeout;
        }
        if fuel.is_some() {
            policy.fuel = *fuel;
        }
        if let Some(memory) = memory {
            policy.memory = *memory;
        }
        policy.dirs.extend(dirs.iter().cloned());
        policy.env.extend(env.clone());
        policy.dependencies.extend(dependencies.clone());
        if let Some(max_output) = max_output {
            policy.max_output = *max_output;
        }
        policy.network.extend(network.iter().cloned());
        if let Some(max_response) = max_response {
            policy.max_response = *max_response;
        }
        if let Some(max_requests) = max_requests {
            policy.max_requests = *max_requests;
        }
        policy.delegate.extend(delegate.iter().cloned());
        policy.call_tools.extend(call_tools.iter().cloned());
        policy.ask.extend(ask.iter().cloned());
        replace(&mut policy.max_arguments, max_arguments);
        replace(&mut policy.max_artifacts, max_artifacts);
        replace(&mut policy.max_resources, max_resources);
        replace(&mut policy.max_tools, max_tools);
        replace(&mut policy.max_description, max_description);
        replace(&mut policy.max_schema, max_schema);
        replace(&mut policy.max_write, max_write);
        replace(&mut policy.scratch, scratch);
        replace(&mut policy.keep_instance, keep_instance);
        replace(&mut policy.kept_idle, kept_idle);
        replace(&mut policy.propagate_trace, propagate_trace);
        for (pattern, headers) in http_headers {
            policy
                .http_headers
                .entry(pattern.clone())
                .or_default()
                .extend(headers.clone());
        }
        policy
    }
}

/// Sets `target` to the layer's value, when the layer has one.
fn replace<T: Copy>(target: &mut T, value: &Option<T>) {
    if let Some(value) = value {
        *target = *value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The policy, its layer (config keys) and its builder must list the same keys.
    #[test]
    fn layer_has_every_policy_key() {
        let policy = serde_json::to_value(Policy::default()).unwrap();
        let mut policy_keys: Vec<_> = policy.as_object().unwrap().keys().cloned().collect();
        let full_layer = PolicyLayer {
            timeout: Some(Duration::from_secs(1)),
            fuel: Some(1),
            memory: Some(ByteSize(1)),
            dirs: vec!["x".parse().unwrap()],
            env: [("a".into(), "b".into())].into(),
            dependencies: [("a".into(), "b".into())].into(),
            max_output: Some(ByteSize(1)),
            network: vec!["https://example.com".parse().unwrap()],
            max_response: Some(ByteSize(1)),
            max_requests: Some(1),
            http_headers: [("a.com".into(), [("X".into(), "1".into())].into())].into(),
            delegate: vec!["researcher".into()],
            max_arguments: Some(ByteSize(1)),
            max_artifacts: Some(1),
            max_resources: Some(1),
            max_tools: Some(1),
            max_description: Some(ByteSize(1)),
            max_schema: Some(ByteSize(1)),
            max_write: Some(ByteSize(1)),
            call_tools: vec!["json_*".into()],
            scratch: Some(true),
            keep_instance: Some(true),
            kept_idle: Some(Duration::from_secs(60)),
            propagate_trace: Some(true),
            ask: vec!["https://*.github.com".parse().unwrap()],
        };
        let layer = serde_json::to_value(full_layer).unwrap();
        let mut layer_keys: Vec<_> = layer.as_object().unwrap().keys().cloned().collect();
        policy_keys.sort();
        layer_keys.sort();
        assert_eq!(policy_keys, layer_keys);
        let mut listed: Vec<String> = LAYER_KEYS.iter().map(|k| k.to_string()).collect();
        listed.sort();
        assert_eq!(listed, layer_keys, "LAYER_KEYS is out of date");
    }

    #[test]
    fn scalars_replace_lists_extend_maps_merge() {
        let base = Policy::default().env("A", "1").env("B", "1");
        let layer: PolicyLayer = toml::from_str(
            "timeout = \"500ms\"\nmemory = \"32MiB\"\nenv = { B = \"2\" }\ndirs = [\"/tmp\"]",
        )
        .unwrap();
        let merged = layer.apply_to(base);
        assert_eq!(merged.timeout, Duration::from_millis(500));
        assert_eq!(merged.memory, ByteSize::mib(32));
        assert_eq!(merged.env["A"], "1");
        assert_eq!(merged.env["B"], "2");
        assert_eq!(merged.dirs.len(), 1);
    }
}
