//! `oci://REGISTRY/REPOSITORY:TAG` and `oci://REGISTRY/REPOSITORY@sha256:HEX`.

use std::fmt;
use std::str::FromStr;

use crate::RegistryError;
use crate::digest::Digest;

/// The scheme that marks a component reference (rather than a file path).
pub const SCHEME: &str = "oci://";

/// A component in an OCI registry, by tag or by digest.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ComponentRef {
    /// `host[:port]`, always explicit (no implied Docker Hub).
    pub registry: String,
    /// `team/tools/calculator`.
    pub repository: String,
    /// The tag, when given.
    pub tag: Option<String>,
    /// The manifest digest, when given; it wins over the tag.
    pub digest: Option<Digest>,
}

impl ComponentRef {
    /// True for text that names a registry component rather than a file.
    pub fn is_reference(text: &str) -> bool {
        text.starts_with(SCHEME)
    }

    /// The same repository at `tag` (a signature's `sha256-HEX.sig`).
    pub fn with_tag(&self, tag: String) -> Self {
        Self {
            registry: self.registry.clone(),
            repository: self.repository.clone(),
            tag: Some(tag),
            digest: None,
        }
    }

    /// The same repository at a manifest digest.
    pub fn with_digest(&self, digest: Digest) -> Self {
        Self {
            registry: self.registry.clone(),
            repository: self.repository.clone(),
            tag: None,
            digest: Some(digest),
        }
    }

    /// The last path segment of the repository: the component's default name.
    pub fn name(&self) -> &str {
        self.repository
            .rsplit('/')
            .next()
            .unwrap_or(&self.repository)
    }

    /// The registry's host without the port (for the loopback check).
    pub fn host(&self) -> &str {
        host_of(&self.registry)
    }
}

/// `host` of `host:port`, `[v6]:port` or `host`.
pub(crate) fn host_of(registry: &str) -> &str {
    if let Some(rest) = registry.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    registry.split(':').next().unwrap_or(registry)
}

impl fmt::Display for ComponentRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

impl FromStr for ComponentRef {
    type Err = RegistryError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = |reason: &str| RegistryError::BadReference {
            text: text.to_string(),
            reason: reason.to_string(),
        };
        let rest = text
            .strip_prefix(SCHEME)
            .ok_or_else(|| bad("expected oci://REGISTRY/REPOSITORY:TAG or @sha256:DIGEST"))?;
        let (rest, digest) = match rest.split_once('@') {
            Some((rest, digest)) => (rest, Some(digest.parse::<Digest>().map_err(|e| bad(&e))?)),
            None => (rest, None),
        };
        let (registry, path) = rest
            .split_once('/')
            .ok_or_else(|| bad("name the registry and the repository: oci://HOST[:PORT]/REPO"))?;
        if !valid_registry(registry) {
            return Err(bad(&format!("{registry:?} is not a registry host[:port]")));
        }
        // A tag follows the last ':' after the last '/'.
        let last = path.rsplit('/').next().unwrap_or(path);
        let (repository, tag) = match last.rsplit_once(':') {
            Some((_, tag)) => (&path[..path.len() - tag.len() - 1], Some(tag.to_string())),
            None => (path, None),
        };
        if !repository.split('/').all(valid_path_component) {
            return Err(bad(&format!(
                "{repository:?} is not a repository name (lowercase letters, digits and . _ - between /)"
            )));
        }
        if let Some(tag) = &tag
            && !valid_tag(tag)
        {
            return Err(bad(&format!(
                "{tag:?} is not a tag (letters, digits, . _ -; at most 128, not starting with . or -)"
            )));
        }
        if tag.is_none() && digest.is_none() {
            return Err(bad(
                "name a tag (:1.0) or a digest (@sha256:...); there is no implied :latest",
            ));
        }
        Ok(Self {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag,
            digest,
        })
    }
}

fn valid_registry(registry: &str) -> bool {
    let (host, port) = if let Some(rest) = registry.strip_prefix('[') {
        match rest.split_once(']') {
            Some((v6, port)) => (v6, port),
            None => return false,
        }
    } else {
        match registry.split_once(':') {
            Some((host, port)) => (host, registry.get(host.len()..).unwrap_or(port)),
            None => (registry, ""),
        }
    };
    let port_ok = port.is_empty()
        || port.strip_prefix(':').is_some_and(|p| {
            !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())
        });
    let host_ok = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.:".contains(&b))
        && !host.starts_with(['-', '.'])
        && !host.contains("..");
    port_ok && host_ok
}

fn valid_path_component(part: &str) -> bool {
    let bytes = part.as_bytes();
    !part.is_empty()
        && part.len() <= 128
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(b))
        && !part.contains("..")
}

fn valid_tag(tag: &str) -> bool {
    !tag.is_empty()
        && tag.len() <= 128
        && !tag.starts_with(['.', '-'])
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn parses_tags_and_digests() {
        let by_tag: ComponentRef = "oci://127.0.0.1:5000/team/calc:1.2.0".parse().unwrap();
        assert_eq!(by_tag.registry, "127.0.0.1:5000");
        assert_eq!(by_tag.repository, "team/calc");
        assert_eq!(by_tag.tag.as_deref(), Some("1.2.0"));
        assert_eq!(by_tag.name(), "calc");
        assert_eq!(by_tag.host(), "127.0.0.1");
        assert_eq!(by_tag.to_string(), "oci://127.0.0.1:5000/team/calc:1.2.0");

        let text = format!("oci://ghcr.io/acme/tools/calc@sha256:{HEX}");
        let by_digest: ComponentRef = text.parse().unwrap();
        assert_eq!(by_digest.repository, "acme/tools/calc");
        assert_eq!(by_digest.tag, None);
        assert_eq!(by_digest.digest.unwrap().hex(), HEX);
        assert_eq!(by_digest.to_string(), text);

        let v6: ComponentRef = "oci://[::1]:5000/calc:1".parse().unwrap();
        assert_eq!(v6.host(), "::1");
    }

    #[test]
    fn refuses_bad_references_saying_why() {
        for (text, says) in [
            ("ghcr.io/calc:1", "expected oci://"),
            ("oci://ghcr.io", "name the registry and the repository"),
            ("oci://ghcr.io/calc", "no implied :latest"),
            ("oci://ghcr.io/Calc:1", "not a repository name"),
            ("oci://ghcr.io/../x:1", "not a repository name"),
            ("oci://ghcr.io/calc:-x", "not a tag"),
            ("oci://gh cr.io/calc:1", "not a registry"),
            ("oci://ghcr.io:99999x/calc:1", "not a registry"),
            ("oci://ghcr.io/calc@sha256:abc", "64 hex digits"),
            ("oci://ghcr.io/calc@md5:abc", "sha256"),
        ] {
            let error = text.parse::<ComponentRef>().unwrap_err().to_string();
            assert!(error.contains(text), "{error}");
            assert!(error.contains(says), "{text}: {error}");
        }
    }
}
