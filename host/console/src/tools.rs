//! The tools page: every loaded tool, where its component came from and how
//! it was checked, and the policy, approval, cache and access rules its
//! calls are held to, as the host applies them.

use std::collections::BTreeMap;

use serde_json::Value;
use wasm_agent_pipeline::{AnsweredBy, CallSettings};
use wasm_agent_sandbox::ToolHost;
use wasm_agent_sandbox::approval::Approval;

use crate::Provenance;

/// One tool as the page shows it.
pub(crate) struct ToolRow {
    pub name: String,
    pub description: String,
    pub component: String,
    pub source: String,
    pub digest: String,
    pub signature: String,
    pub lock: String,
    pub approval: String,
    pub cache: String,
    pub access: Vec<String>,
    pub annotations: Vec<&'static str>,
    pub policy: Vec<(String, String)>,
}

/// What the page needs to know beyond the host.
pub(crate) struct ToolFacts<'a> {
    pub host: &'a ToolHost,
    pub settings: &'a BTreeMap<String, CallSettings>,
    pub provenance: &'a BTreeMap<String, Provenance>,
    pub access: &'a wasm_agent_access::AccessRules,
}

/// Every tool the host offers, by name.
pub(crate) fn rows(facts: &ToolFacts<'_>) -> Vec<ToolRow> {
    let mut tools = facts.host.tools();
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    tools
        .into_iter()
        .map(|tool| {
            let identity = facts.host.component_of(&tool.name);
            let source = identity
                .as_ref()
                .map(|c| c.source.to_string())
                .unwrap_or_default();
            let provenance = facts.provenance.get(&tool.component);
            let source = provenance
                .and_then(|p| p.reference.clone())
                .unwrap_or(source);
            let settings = facts.settings.get(&tool.name).cloned().unwrap_or_default();
            let annotations = [
                (tool.annotations.read_only, "read-only"),
                (tool.annotations.destructive, "destructive"),
                (tool.annotations.idempotent, "idempotent"),
                (tool.annotations.open_world, "open world"),
            ]
            .into_iter()
            .filter_map(|(set, name)| set.then_some(name))
            .collect();
            ToolRow {
                policy: facts
                    .host
                    .policy_of(&tool.name)
                    .map(|p| policy_rows(&p))
                    .unwrap_or_default(),
                access: match facts.access.covering(&tool.name) {
                    lines if lines.is_empty() => vec!["every caller (no [access] rules)".into()],
                    lines => lines,
                },
                approval: approval_text(&settings),
                cache: match settings.cache_ttl {
                    None => "not cached".into(),
                    Some(ttl) => format!(
                        "{} per {}",
                        humantime::format_duration(ttl),
                        if settings.cache_shared {
                            "tenant"
                        } else {
                            "caller"
                        }
                    ),
                },
                signature: provenance.map_or_else(|| "not checked".into(), |p| p.signature.clone()),
                lock: provenance.map_or_else(|| "not locked".into(), |p| p.lock.clone()),
                digest: tool.digest,
                component: tool.component,
                description: tool.description,
                source,
                annotations,
                name: tool.name,
            }
        })
        .collect()
}

/// Which calls need approval, and who is asked.
fn approval_text(settings: &CallSettings) -> String {
    let who = match settings.answered_by {
        AnsweredBy::Person => "the person behind the call",
        AnsweredBy::Operators => "the operators, here",
    };
    match settings.approval {
        Approval::Never => format!("not needed (its questions go to {who})"),
        Approval::Always => format!("every call, asked of {who}"),
        Approval::When(_) => format!("calls whose arguments match its rules, asked of {who}"),
    }
}

/// The policy's keys and values, secrets left out: environment variables
/// and credential headers by name only.
pub(crate) fn policy_rows(policy: &wasm_agent_policy::Policy) -> Vec<(String, String)> {
    let Ok(Value::Object(map)) = serde_json::to_value(policy) else {
        return Vec::new();
    };
    map.into_iter()
        .map(|(key, value)| {
            let shown = match (key.as_str(), value) {
                ("env", Value::Object(vars)) => names(vars.keys()),
                ("http_headers", Value::Object(hosts)) if !hosts.is_empty() => hosts
                    .iter()
                    .map(|(host, headers)| {
                        let headers = headers
                            .as_object()
                            .map(|h| names(h.keys()))
                            .unwrap_or_default();
                        format!("{host}: {headers}")
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
                (_, value) => shown(value),
            };
            (key, shown)
        })
        .collect()
}

/// A policy value in words: nothing set is `none`, lists are listed.
fn shown(value: Value) -> String {
    match value {
        Value::Null => "none".into(),
        Value::String(text) => text,
        Value::Array(items) if items.is_empty() => "none".into(),
        Value::Array(items) => items.into_iter().map(shown).collect::<Vec<_>>().join(", "),
        Value::Object(map) if map.is_empty() => "none".into(),
        other => other.to_string(),
    }
}

fn names<'a>(keys: impl Iterator<Item = &'a String>) -> String {
    let names: Vec<&str> = keys.map(String::as_str).collect();
    match names.is_empty() {
        true => "none".into(),
        false => format!("{} (values hidden)", names.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_of_a_policy_are_never_shown() {
        let mut policy = wasm_agent_policy::Policy::default();
        policy.env.insert("API_KEY".into(), "sk-live-123456".into());
        policy
            .http_headers
            .entry("api.example.com".into())
            .or_default()
            .insert("Authorization".into(), "Bearer abcdef".into());
        let rows = policy_rows(&policy);
        let text = format!("{rows:?}");
        assert!(
            !text.contains("sk-live") && !text.contains("abcdef"),
            "{text}"
        );
        assert!(text.contains("API_KEY (values hidden)"), "{text}");
        assert!(
            text.contains("api.example.com: Authorization (values hidden)"),
            "{text}"
        );
        assert!(rows.iter().any(|(key, _)| key == "timeout"));
    }
}
