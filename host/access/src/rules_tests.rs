use serde_json::json;

use super::*;
use crate::caller::Credentials;

fn rules(text: &str) -> AccessRules {
    #[derive(Deserialize)]
    struct File {
        access: AccessConfig,
    }
    let file: File = toml::from_str(text).unwrap();
    AccessRules::new(file.access).unwrap()
}

fn who<'a>(
    principal: &'a str,
    tenant: Option<&'a str>,
    credentials: Option<&'a Credentials>,
) -> Who<'a> {
    Who {
        principal: Some(principal),
        tenant,
        credentials,
    }
}

const CONFIG: &str = r#"
[access]
default = "deny"

[[access.rules]]
name = "no deletes for contractors"
claims = { groups = "contractors" }
tools = ["*_delete"]
effect = "deny"

[[access.rules]]
name = "support"
sources = ["oauth"]
scopes = ["tools:read"]
claims = { groups = ["support", "ops"] }
tools = ["weather", "json_*", "files_delete"]
effect = "allow"

[[access.rules]]
tenants = ["acme"]
principals = ["alice", "bob*"]
tools = ["calculate"]
effect = "allow"
"#;

#[test]
fn the_first_rule_that_matches_decides_else_the_default() {
    let rules = rules(CONFIG);
    let alice = who("alice", Some("acme"), None);
    let decision = rules.decide(&alice, "calculate");
    assert!(decision.allowed);
    assert_eq!(decision.to_string(), "allow by rule 3 \"rule 3\"");
    assert!(rules.allows(&who("bobby", Some("acme"), None), "calculate"));
    // Another tenant, or a tool no rule names: the default.
    let other = rules.decide(&who("alice", Some("globex"), None), "calculate");
    assert_eq!(other.by, DecidedBy::Default);
    assert!(!other.allowed);
    assert!(!rules.allows(&alice, "weather"));
    assert_eq!(
        rules.decide(&alice, "weather").to_string(),
        "deny by the default"
    );
}

#[test]
fn scopes_claims_and_source_must_all_hold() {
    let rules = rules(CONFIG);
    let token = |claims: serde_json::Value| Credentials::oauth(claims.as_object().unwrap().clone());
    let support = token(json!({"scope": "tools:read", "groups": ["support"]}));
    let caller = who("oauth:u1", None, Some(&support));
    assert!(rules.allows(&caller, "weather") && rules.allows(&caller, "json_query"));
    assert!(rules.allows(&caller, "files_delete"));
    assert!(!rules.allows(&caller, "calculate"));
    let no_scope = token(json!({"scope": "other", "groups": ["support"]}));
    assert!(!rules.allows(&who("oauth:u1", None, Some(&no_scope)), "weather"));
    // The same claims from a tokens-file entry are no OAuth claims.
    let tokens = Credentials {
        source: Source::Tokens,
        ..support.clone()
    };
    assert!(!rules.allows(&who("oauth:u1", None, Some(&tokens)), "weather"));
    // An earlier deny wins over a later allow.
    let contractor = token(json!({"scope": "tools:read", "groups": ["support", "contractors"]}));
    let decision = rules.decide(&who("oauth:u2", None, Some(&contractor)), "files_delete");
    assert!(!decision.allowed);
    assert_eq!(
        decision.to_string(),
        "deny by rule 1 \"no deletes for contractors\""
    );
}

#[test]
fn a_caller_without_a_principal_matches_no_principal_pattern() {
    let rules = rules(
        r#"
[access]
default = "deny"
[[access.rules]]
principals = ["*"]
tools = ["*"]
effect = "allow"
"#,
    );
    let anonymous = Who {
        principal: None,
        tenant: None,
        credentials: None,
    };
    assert!(!rules.allows(&anonymous, "calculate"));
    assert!(rules.allows(&who("x", None, None), "calculate"));
}

#[test]
fn without_a_section_everything_is_allowed() {
    let none = AccessRules::default();
    assert!(!none.is_configured());
    let decision = none.decide(&who("x", None, None), "anything");
    assert_eq!(decision.by, DecidedBy::NoRules);
    assert!(decision.allowed);
}

#[test]
fn bad_rules_are_named() {
    let error = |text: &str| {
        #[derive(Deserialize)]
        struct File {
            access: AccessConfig,
        }
        match toml::from_str::<File>(text) {
            Ok(file) => AccessRules::new(file.access).unwrap_err().to_string(),
            Err(e) => e.to_string(),
        }
    };
    let no_tools = error("[access]\ndefault='deny'\n[[access.rules]]\ntools=[]\neffect='allow'");
    assert!(
        no_tools.contains("rule 1 \"rule 1\": `tools` is empty"),
        "{no_tools}"
    );
    let empty = error(
        "[access]\ndefault='deny'\n[[access.rules]]\nname='r'\nprincipals=['']\ntools=['x']\neffect='allow'",
    );
    assert!(
        empty.contains("rule 1 \"r\": `principals` holds an empty entry"),
        "{empty}"
    );
    let twice = error(
        "[access]\ndefault='deny'\n[[access.rules]]\nname='r'\ntools=['x']\neffect='allow'\n[[access.rules]]\nname='r'\ntools=['y']\neffect='deny'",
    );
    assert!(twice.contains("two rules are named \"r\""), "{twice}");
    let no_default = error("[access]\n[[access.rules]]\ntools=['x']\neffect='allow'");
    assert!(
        no_default.contains("missing field `default`"),
        "{no_default}"
    );
    let typo = error("[access]\ndefault='deny'\n[[access.rules]]\ntool=['x']\neffect='allow'");
    assert!(typo.contains("unknown field `tool`"), "{typo}");
    let source = error(
        "[access]\ndefault='deny'\n[[access.rules]]\nsources=['jwt']\ntools=['x']\neffect='allow'",
    );
    assert!(source.contains("unknown variant `jwt`"), "{source}");
}

#[test]
fn patterns_that_match_no_loaded_tool_are_named() {
    let rules = rules(CONFIG);
    let unmatched = rules.unmatched(&["calculate", "weather", "json_query"]);
    assert_eq!(
        unmatched,
        [
            "rule 1 \"no deletes for contractors\": \"*_delete\"",
            "rule 2 \"support\": \"files_delete\""
        ]
    );
}

#[test]
fn covering_lists_the_rules_that_can_decide_a_tool_in_order() {
    let rules = rules(CONFIG);
    let lines = rules.covering("db_delete");
    assert_eq!(
        lines.first().map(String::as_str),
        Some(r#"rule 1 "no deletes for contractors": deny claim groups in ["contractors"]"#)
    );
    assert_eq!(lines.last().map(String::as_str), Some("otherwise: deny"));
    assert!(
        lines
            .iter()
            .all(|line| !line.contains("rule 1") || line.contains("deny"))
    );
    assert!(AccessRules::default().covering("db_delete").is_empty());
}
