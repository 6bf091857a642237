//! Access rules as the config writes them (`[access]`) and as they decide:
//! the first rule whose caller and tool both match decides; when none
//! does, the default.
//!
//! ```toml
//! [access]
//! default = "deny"
//!
//! [[access.rules]]
//! name = "support reads"
//! tenants = ["acme"]
//! claims = { groups = "support" }
//! tools = ["weather", "json_*"]
//! effect = "allow"
//! ```

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use serde::Deserialize;
use wildmatch::WildMatch;

use crate::caller::{Source, Who};

/// Whether a rule lets callers see and call the tools it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    /// They may see and call them.
    Allow,
    /// They may not: the tools are not listed to them, and calling one is
    /// answered as calling a tool that does not exist.
    Deny,
}

impl Effect {
    /// `allow` or `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Allow => "allow",
            Effect::Deny => "deny",
        }
    }
}

/// The `[access]` section of a config.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessConfig {
    /// What happens when no rule matches; required, so the choice is seen.
    pub default: Effect,
    /// The rules, in the order they are tried.
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
}

/// One `[[access.rules]]` entry. A condition left out matches every caller;
/// a list matches when any of its entries does; `scopes` needs every scope.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// Its name in `access explain` and audit records (default `rule N`).
    #[serde(default)]
    pub name: Option<String>,
    /// Principals, as globs (`alice`, `oauth:*`).
    #[serde(default)]
    pub principals: Option<Vec<String>>,
    /// Tenants, as globs.
    #[serde(default)]
    pub tenants: Option<Vec<String>>,
    /// How the caller proved itself: `local`, `shared`, `tokens`, `oauth`.
    #[serde(default)]
    pub sources: Option<Vec<Source>>,
    /// Scopes the caller's token must all grant.
    #[serde(default)]
    pub scopes: Option<Vec<String>>,
    /// Claims of the caller's token: each named claim must be one of the
    /// values given (or a list holding one).
    #[serde(default)]
    pub claims: Option<BTreeMap<String, OneOrMany>>,
    /// The tools it decides, as globs of their names.
    pub tools: Vec<String>,
    /// Allow or deny.
    pub effect: Effect,
}

/// A value or a list of them.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    /// One value.
    One(String),
    /// Any of these.
    Many(Vec<String>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(one) => vec![one],
            OneOrMany::Many(many) => many,
        }
    }
}

/// Access rules that cannot be used, saying which rule and why.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// A rule names no tool.
    #[error(
        "[access] {rule}: `tools` is empty; name the tools it decides (globs such as \"json_*\")"
    )]
    NoTools {
        /// The rule.
        rule: String,
    },
    /// A pattern or value is empty.
    #[error("[access] {rule}: `{key}` holds an empty entry")]
    Empty {
        /// The rule.
        rule: String,
        /// The key.
        key: &'static str,
    },
    /// Two rules have one name.
    #[error("[access] two rules are named {0:?}; names must be unique")]
    Duplicate(String),
}

/// A pattern: a name, or a glob with `*` and `?`.
#[derive(Clone, Debug)]
enum Pattern {
    Exact(String),
    Glob(WildMatch),
}

impl Pattern {
    fn new(text: &str) -> Self {
        if text.contains(['*', '?']) {
            Pattern::Glob(WildMatch::new(text))
        } else {
            Pattern::Exact(text.to_string())
        }
    }

    fn matches(&self, text: &str) -> bool {
        match self {
            Pattern::Exact(exact) => exact == text,
            Pattern::Glob(glob) => glob.matches(text),
        }
    }

    fn text(&self) -> String {
        match self {
            Pattern::Exact(exact) => exact.clone(),
            Pattern::Glob(glob) => glob.to_string(),
        }
    }
}

fn any(patterns: &[Pattern], text: &str) -> bool {
    patterns.iter().any(|p| p.matches(text))
}

/// One rule, ready to match.
#[derive(Clone, Debug)]
struct Rule {
    name: Arc<str>,
    principals: Option<Vec<Pattern>>,
    tenants: Option<Vec<Pattern>>,
    sources: Option<Vec<Source>>,
    scopes: Vec<String>,
    claims: Vec<(String, Vec<String>)>,
    tools: Vec<Pattern>,
    effect: Effect,
}

impl Rule {
    fn covers(&self, who: &Who<'_>) -> bool {
        let optional = |patterns: &Option<Vec<Pattern>>, value: Option<&str>| match patterns {
            None => true,
            Some(patterns) => value.is_some_and(|v| any(patterns, v)),
        };
        optional(&self.principals, who.principal)
            && optional(&self.tenants, who.tenant)
            && self
                .sources
                .as_ref()
                .is_none_or(|sources| sources.contains(&who.source()))
            && self.scopes.iter().all(|scope| who.has_scope(scope))
            && self
                .claims
                .iter()
                .all(|(claim, values)| values.iter().any(|v| who.has_claim(claim, v)))
    }
}

/// What decided whether a caller may see and call a tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecidedBy {
    /// No `[access]` section: every caller may call every tool.
    NoRules,
    /// The rule with this number (1-based) and name.
    Rule {
        /// Its place in the list, from 1.
        number: usize,
        /// Its name.
        name: Arc<str>,
    },
    /// No rule matched: the default.
    Default,
}

/// Whether a caller may see and call a tool, and what decided it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// May see and call it.
    pub allowed: bool,
    /// What decided.
    pub by: DecidedBy,
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let effect = if self.allowed { "allow" } else { "deny" };
        match &self.by {
            DecidedBy::NoRules => write!(f, "allow (no [access] rules)"),
            DecidedBy::Rule { number, name } => write!(f, "{effect} by rule {number} {name:?}"),
            DecidedBy::Default => write!(f, "{effect} by the default"),
        }
    }
}

/// The access rules of a server or run; [`AccessRules::default`] has none
/// and allows everything.
#[derive(Clone, Debug, Default)]
pub struct AccessRules {
    /// `None`: no `[access]` section.
    default: Option<Effect>,
    rules: Vec<Rule>,
}

impl AccessRules {
    /// Rules from an `[access]` section, checked.
    pub fn new(config: AccessConfig) -> Result<Self, AccessError> {
        let mut names = HashSet::new();
        let mut rules = Vec::with_capacity(config.rules.len());
        for (index, rule) in config.rules.into_iter().enumerate() {
            let name: Arc<str> = match rule.name {
                Some(name) if !name.trim().is_empty() => name.into(),
                _ => format!("rule {}", index + 1).into(),
            };
            if !names.insert(name.clone()) {
                return Err(AccessError::Duplicate(name.to_string()));
            }
            let label = format!("rule {} {name:?}", index + 1);
            let patterns = |key: &'static str, list: Vec<String>| {
                if list.iter().any(|p| p.is_empty()) {
                    return Err(AccessError::Empty {
                        rule: label.clone(),
                        key,
                    });
                }
                Ok(list.iter().map(|p| Pattern::new(p)).collect::<Vec<_>>())
            };
            if rule.tools.is_empty() {
                return Err(AccessError::NoTools { rule: label });
            }
            let tools = patterns("tools", rule.tools)?;
            let principals = rule
                .principals
                .map(|list| patterns("principals", list))
                .transpose()?;
            let tenants = rule
                .tenants
                .map(|list| patterns("tenants", list))
                .transpose()?;
            let scopes = rule.scopes.unwrap_or_default();
            let mut claims = Vec::new();
            for (claim, values) in rule.claims.unwrap_or_default() {
                let values = values.into_vec();
                if claim.is_empty() || values.is_empty() || values.iter().any(String::is_empty) {
                    return Err(AccessError::Empty {
                        rule: label,
                        key: "claims",
                    });
                }
                claims.push((claim, values));
            }
            if scopes.iter().any(String::is_empty) {
                return Err(AccessError::Empty {
                    rule: label,
                    key: "scopes",
                });
            }
            rules.push(Rule {
                name,
                principals,
                tenants,
                sources: rule.sources,
                scopes,
                claims,
                tools,
                effect: rule.effect,
            });
        }
        Ok(Self {
            default: Some(config.default),
            rules,
        })
    }

    /// Whether there are rules at all (an `[access]` section).
    pub fn is_configured(&self) -> bool {
        self.default.is_some()
    }

    /// Whether `who` may see and call `tool`, and what decided.
    pub fn decide(&self, who: &Who<'_>, tool: &str) -> Decision {
        let Some(default) = self.default else {
            return Decision {
                allowed: true,
                by: DecidedBy::NoRules,
            };
        };
        for (index, rule) in self.rules.iter().enumerate() {
            if any(&rule.tools, tool) && rule.covers(who) {
                return Decision {
                    allowed: rule.effect == Effect::Allow,
                    by: DecidedBy::Rule {
                        number: index + 1,
                        name: rule.name.clone(),
                    },
                };
            }
        }
        Decision {
            allowed: default == Effect::Allow,
            by: DecidedBy::Default,
        }
    }

    /// The tool patterns of rules that match none of `names` (a typo, or a
    /// tool not loaded), as `rule N "NAME": PATTERN`.
    pub fn unmatched(&self, names: &[&str]) -> Vec<String> {
        let mut unmatched = Vec::new();
        for (index, rule) in self.rules.iter().enumerate() {
            for pattern in &rule.tools {
                if !names.iter().any(|name| pattern.matches(name)) {
                    unmatched.push(format!(
                        "rule {} {:?}: {:?}",
                        index + 1,
                        rule.name,
                        pattern.text()
                    ));
                }
            }
        }
        unmatched
    }

    /// The rules that can decide `tool`, in the order they are tried, then
    /// the default, each in words (`rule 2 "ops": allow principals
    /// ["alice"]`); empty without an `[access]` section.
    pub fn covering(&self, tool: &str) -> Vec<String> {
        let Some(default) = self.default else {
            return Vec::new();
        };
        let mut lines = Vec::new();
        for (index, rule) in self.rules.iter().enumerate() {
            if !any(&rule.tools, tool) {
                continue;
            }
            let mut who = Vec::new();
            let texts =
                |patterns: &[Pattern]| patterns.iter().map(Pattern::text).collect::<Vec<_>>();
            if let Some(principals) = &rule.principals {
                who.push(format!("principals {:?}", texts(principals)));
            }
            if let Some(tenants) = &rule.tenants {
                who.push(format!("tenants {:?}", texts(tenants)));
            }
            if let Some(sources) = &rule.sources {
                let names: Vec<&str> = sources.iter().map(|s| s.as_str()).collect();
                who.push(format!("sources {names:?}"));
            }
            if !rule.scopes.is_empty() {
                who.push(format!("scopes {:?}", rule.scopes));
            }
            for (claim, values) in &rule.claims {
                who.push(format!("claim {claim} in {values:?}"));
            }
            let who = match who.is_empty() {
                true => "every caller".to_string(),
                false => who.join(", "),
            };
            lines.push(format!(
                "rule {} {:?}: {} {who}",
                index + 1,
                rule.name,
                rule.effect.as_str()
            ));
        }
        lines.push(format!("otherwise: {}", default.as_str()));
        lines
    }

    /// Whether `who` may see and call `tool`.
    pub fn allows(&self, who: &Who<'_>, tool: &str) -> bool {
        self.default.is_none() || self.decide(who, tool).allowed
    }
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
