//! # wasm-agent-access
//!
//! Who may see and call which tools: rules from a config's `[access]`
//! section ([`AccessRules`]) matched against a caller ([`Who`]: principal,
//! tenant, how it proved itself, an OAuth token's scopes and claims). The
//! call pipeline applies them to every call, whoever makes it, and entry
//! points list a caller only the tools it may call. [`quota`]: how much
//! a tenant or principal may call, and the counters that hold it.

#![warn(missing_docs)]

mod caller;
pub mod quota;
mod rules;

pub use caller::{Credentials, Source, Who};
pub use rules::{
    AccessConfig, AccessError, AccessRules, DecidedBy, Decision, Effect, OneOrMany, RuleConfig,
};
