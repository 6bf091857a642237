//! From a policy as written to the policy the sandbox enforces, in two
//! explicit steps:
//!
//! 1. [`Policy::validate`] checks every limit and grant as written. It reads
//!    nothing from the machine, so a config file can be checked anywhere.
//! 2. [`ValidPolicy::resolve`] reads what depends on this machine: `${VAR}`s
//!    in credential headers from the host environment, and directory grants
//!    to canonical host paths (so a grant cannot later be redirected by a
//!    symlink).
//!
//! The sandbox accepts only a `ValidPolicy<Resolved>`, and the only way to
//! one is through both steps; its fields are private.

use std::marker::PhantomData;
use std::ops::Deref;

use super::{
    AskGrant, ByteSize, CredentialHeaders, MAX_MEMORY, Policy, PolicyError, ask, bounds, dirs,
    headers,
};

/// A [`ValidPolicy`] whose machine-dependent parts are not read yet.
#[derive(Clone, Copy, Debug)]
pub enum Unresolved {}

/// A [`ValidPolicy`] resolved against this machine: what the sandbox accepts.
#[derive(Clone, Copy, Debug)]
pub enum Resolved {}

/// A policy that passed [`Policy::validate`] (and, as `ValidPolicy<Resolved>`,
/// [`ValidPolicy::resolve`]). Read its keys through `Deref<Target = Policy>`.
#[derive(Clone, Debug)]
pub struct ValidPolicy<S = Resolved> {
    policy: Policy,
    /// Credential headers with their values read, marked sensitive
    /// (empty until resolved).
    headers: Vec<CredentialHeaders>,
    state: PhantomData<S>,
}

impl<S> Deref for ValidPolicy<S> {
    type Target = Policy;

    fn deref(&self) -> &Policy {
        &self.policy
    }
}

impl ValidPolicy<Unresolved> {
    /// Reads `${VAR}`s of credential headers from the host environment and
    /// resolves directory grants to canonical host paths; refuses a folder
    /// that does not exist, a variable that is not set, or two grants that
    /// end up at one guest path.
    pub fn resolve(self) -> Result<ValidPolicy<Resolved>, PolicyError> {
        let mut policy = self.policy;
        let headers = headers::resolve(&policy.http_headers)?;
        policy.dirs = dirs::resolve(std::mem::take(&mut policy.dirs))?;
        policy.ask = ask::resolve(std::mem::take(&mut policy.ask), &policy.dirs)?;
        Ok(ValidPolicy {
            policy,
            headers,
            state: PhantomData,
        })
    }
}

impl ValidPolicy<Resolved> {
    /// Credential headers ready to send, by the requests they go to.
    pub fn credential_headers(&self) -> &[CredentialHeaders] {
        &self.headers
    }
}

impl Policy {
    /// Checks that the policy can be enforced as written: every limit within
    /// its bounds, every grant, header pattern and name well formed. Reads
    /// nothing from the machine; [`ValidPolicy::resolve`] is the next step.
    pub fn validate(self) -> Result<ValidPolicy<Unresolved>, PolicyError> {
        if self.timeout.is_zero() {
            return Err(limit("timeout", "must be greater than zero"));
        }
        if self.fuel == Some(0) {
            return Err(limit("fuel", "must be greater than zero"));
        }
        if self.memory.bytes() < ByteSize::mib(1).bytes() || self.memory > MAX_MEMORY {
            return Err(limit(
                "memory",
                format!("{} is outside 1MiB..=4GiB", self.memory),
            ));
        }
        if self.timeout > bounds::TIMEOUT {
            return Err(limit(
                "timeout",
                format!(
                    "{} is longer than the largest allowed, {}",
                    humantime::format_duration(self.timeout),
                    humantime::format_duration(bounds::TIMEOUT)
                ),
            ));
        }
        if self.kept_idle < std::time::Duration::from_secs(1) || self.kept_idle > bounds::TIMEOUT {
            return Err(limit(
                "kept_idle",
                format!(
                    "{} is outside 1s..=24h",
                    humantime::format_duration(self.kept_idle)
                ),
            ));
        }
        within_size("max_output", self.max_output, 1, bounds::MAX_OUTPUT)?;
        within_size("max_response", self.max_response, 1, bounds::MAX_RESPONSE)?;
        within_size(
            "max_arguments",
            self.max_arguments,
            2,
            bounds::MAX_ARGUMENTS,
        )?;
        within_size(
            "max_description",
            self.max_description,
            1,
            bounds::MAX_DESCRIPTION,
        )?;
        within_size("max_schema", self.max_schema, 2, bounds::MAX_SCHEMA)?;
        within_size("max_write", self.max_write, 0, bounds::MAX_WRITE)?;
        within("max_requests", self.max_requests, 0, bounds::MAX_REQUESTS)?;
        within(
            "max_artifacts",
            self.max_artifacts,
            0,
            bounds::MAX_ARTIFACTS,
        )?;
        let (fewest, most) = bounds::MAX_RESOURCES;
        within("max_resources", self.max_resources, fewest, most)?;
        within("max_tools", self.max_tools, 1, bounds::MAX_TOOLS)?;
        if let Some(grant) = self.network.iter().find(|g| g.grants_everything()) {
            tracing::warn!(
                "network grant {grant} allows every scheme, host and port (private addresses \
                 still need an explicit IP or CIDR grant)"
            );
        }
        if let Some(key) = self
            .env
            .keys()
            .find(|k| k.is_empty() || k.contains(['=', '\0']))
        {
            return Err(PolicyError::EnvName(key.clone()));
        }
        if let Some(pattern) = self
            .call_tools
            .iter()
            .find(|p| !crate::names::valid_tool_pattern(p))
        {
            return Err(PolicyError::CallToolPattern(pattern.clone()));
        }
        headers::check(&self.http_headers)?;
        dirs::check(&self.dirs)?;
        let asked: Vec<_> = self.ask.iter().filter_map(AskGrant::dir).cloned().collect();
        dirs::check(&asked)?;
        if self.keep_instance && !asked.is_empty() {
            return Err(limit(
                "ask",
                "folders to ask about cannot go with keep_instance: a kept instance keeps \
                 the folders of its first call open",
            ));
        }
        Ok(ValidPolicy {
            policy: self,
            headers: Vec::new(),
            state: PhantomData,
        })
    }

    /// [`validate`](Self::validate) then [`resolve`](ValidPolicy::resolve):
    /// the policy the sandbox enforces.
    pub fn validate_and_resolve(self) -> Result<ValidPolicy, PolicyError> {
        self.validate()?.resolve()
    }
}

/// Checks that a count lies in `min..=max`.
fn within(key: &'static str, value: u32, min: u32, max: u32) -> Result<(), PolicyError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(limit(key, format!("{value} is outside {min}..={max}")))
    }
}

/// Checks that a size lies in `min..=max` bytes.
fn within_size(
    key: &'static str,
    value: ByteSize,
    min: u64,
    max: ByteSize,
) -> Result<(), PolicyError> {
    if (min..=max.bytes()).contains(&value.bytes()) {
        Ok(())
    } else {
        Err(limit(
            key,
            format!("{value} is outside {}..={max}", ByteSize(min)),
        ))
    }
}

fn limit(key: &'static str, reason: impl Into<String>) -> PolicyError {
    PolicyError::Limit {
        key,
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_reads_nothing_and_resolution_reads_the_machine() {
        let folder =
            Policy::default().allow_dir("/definitely/not/here", "/data", crate::DirMode::Ro);
        let variable = Policy::default().http_header(
            "api.example.com",
            "X-Key",
            "${WASM_AGENT_SURELY_UNSET_2}",
        );
        for (policy, named) in [
            (folder, "/definitely/not/here"),
            (variable, "WASM_AGENT_SURELY_UNSET_2"),
        ] {
            let valid = policy
                .validate()
                .expect("validation reads no folder or variable");
            let err = valid.resolve().unwrap_err().to_string();
            assert!(err.contains(named), "{err}");
        }
        let policy = Policy::default().http_header("api.example.com", "X-Key", "${UNCLOSED");
        assert!(
            policy
                .validate()
                .unwrap_err()
                .to_string()
                .contains("unclosed")
        );
    }

    #[test]
    fn a_value_read_from_the_environment_is_not_expanded_again() {
        let key = "WASM_AGENT_TEST_NESTED_7";
        // SAFETY: no other test reads or writes this variable.
        unsafe { std::env::set_var(key, "${HOME}") };
        let policy = Policy::default()
            .http_header("api.example.com", "X-Key", format!("${{{key}}}"))
            .validate_and_resolve()
            .unwrap();
        assert_eq!(policy.credential_headers()[0].headers[0].1, "${HOME}");
    }
}
