//! Registry credentials: from the environment, for one named registry, or
//! from the Docker `config.json` convention (its `auths` and credential
//! helpers). They are never logged or printed.

use std::fmt;
use std::path::PathBuf;

use docker_credential::{CredentialRetrievalError, DockerCredential};

use crate::RegistryError;

/// The registry the environment's credentials are for.
pub const ENV_REGISTRY: &str = "WASM_AGENT_REGISTRY";
/// The user name for [`ENV_REGISTRY`].
pub const ENV_USERNAME: &str = "WASM_AGENT_REGISTRY_USERNAME";
/// The password or token for [`ENV_REGISTRY`].
pub const ENV_PASSWORD: &str = "WASM_AGENT_REGISTRY_PASSWORD";

/// How to authenticate to one registry.
#[derive(Clone, Default)]
pub enum Credentials {
    /// No credentials (public repositories).
    #[default]
    Anonymous,
    /// A user name and a password (or a personal access token).
    Basic {
        /// The user.
        username: String,
        /// The password; never shown.
        password: String,
    },
    /// An identity token from a Docker login.
    Token(String),
}

impl fmt::Debug for Credentials {
    /// Says which kind, never the secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credentials::Anonymous => f.write_str("Anonymous"),
            Credentials::Basic { username, .. } => write!(f, "Basic({username}, <redacted>)"),
            Credentials::Token(_) => f.write_str("Token(<redacted>)"),
        }
    }
}

impl Credentials {
    /// The credentials for `registry` (`host[:port]`): the environment's, if
    /// [`ENV_REGISTRY`] names it, else the Docker config's, else none. The
    /// environment's are given to no other registry.
    pub fn for_registry(registry: &str) -> Result<Self, RegistryError> {
        let var = |name| std::env::var(name).ok().filter(|v| !v.is_empty());
        let (for_registry, username, password) =
            (var(ENV_REGISTRY), var(ENV_USERNAME), var(ENV_PASSWORD));
        match (&for_registry, &username, &password) {
            (None, None, None) => {}
            (Some(named), Some(username), Some(password)) => {
                if named == registry {
                    return Ok(Credentials::Basic {
                        username: username.clone(),
                        password: password.clone(),
                    });
                }
            }
            _ => {
                return Err(RegistryError::Credentials(format!(
                    "registry credentials in the environment need all of {ENV_REGISTRY} (the \
                     registry they are for, e.g. ghcr.io), {ENV_USERNAME} and {ENV_PASSWORD}"
                )));
            }
        }
        Self::from_docker_config(registry)
    }

    fn from_docker_config(registry: &str) -> Result<Self, RegistryError> {
        match docker_credential::get_credential(registry) {
            Ok(DockerCredential::UsernamePassword(username, password)) => {
                Ok(Credentials::Basic { username, password })
            }
            Ok(DockerCredential::IdentityToken(token)) => Ok(Credentials::Token(token)),
            Err(CredentialRetrievalError::ConfigReadError) if docker_config().is_file() => {
                Err(RegistryError::Credentials(format!(
                    "{}: cannot read it as a Docker config (JSON with \"auths\")",
                    docker_config().display()
                )))
            }
            Err(
                CredentialRetrievalError::NoCredentialConfigured
                | CredentialRetrievalError::ConfigNotFound
                | CredentialRetrievalError::ConfigReadError,
            ) => Ok(Credentials::Anonymous),
            // Helper and decoding failures: the library's text names no secret.
            Err(error) => Err(RegistryError::Credentials(format!(
                "cannot get the credentials for {registry} from {}: {error}",
                docker_config().display()
            ))),
        }
    }
}

/// `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`.
fn docker_config() -> PathBuf {
    std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker")))
        .unwrap_or_default()
        .join("config.json")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_secret() {
        let basic = Credentials::Basic {
            username: "ci".into(),
            password: "hunter2".into(),
        };
        assert_eq!(format!("{basic:?}"), "Basic(ci, <redacted>)");
        assert!(!format!("{:?}", Credentials::Token("t0k3n".into())).contains("t0k3n"));
    }
}
