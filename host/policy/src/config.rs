//! `wasm-agent.toml`: a `[defaults]` policy and `[tools.<alias>]` sections.
//!
//! ```toml
//! [defaults]
//! timeout = "5s"
//!
//! [tools.calc]
//! component = "tools/calculator.wasm"   # relative to this file
//! memory = "32MiB"
//! ```
//!
//! Other layers keep their own sections in the same file (`[agent]` for the
//! agent loop) and read them typed with [`ConfigFile::section`], with the same
//! file:line errors.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::{DeserializeOwned, IgnoredAny};
use toml::Spanned;

use super::{LAYER_KEYS, Policy, PolicyLayer};

/// A parsed and checked config file.
#[derive(Clone, Default)]
pub struct ConfigFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// The `[defaults]` section.
    pub defaults: PolicyLayer,
    /// `[defaults] verify`: the signature check of every component.
    pub verify: Option<VerifyConfig>,
    /// `locked = true`: refuse components whose digest differs from the lock file.
    pub locked: bool,
    /// The `[tools.<alias>]` sections, by alias.
    pub tools: BTreeMap<String, ToolConfig>,
    /// The file's text, for [`ConfigFile::section`].
    text: String,
}

impl fmt::Debug for ConfigFile {
    /// The path and the tool aliases only: the text and the policy layers
    /// may hold literal credentials (`env`, `http_headers`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigFile")
            .field("path", &self.path)
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// Where a configured component comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ComponentLocation {
    /// A file (absolute, or relative to the working directory).
    File(PathBuf),
    /// An `oci://` reference, parsed by whoever pulls it.
    Registry(String),
}

impl fmt::Display for ComponentLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ComponentLocation::File(path) => write!(f, "{}", path.display()),
            ComponentLocation::Registry(reference) => f.write_str(reference),
        }
    }
}

/// `verify = { key = "cosign.pub" }`: components must carry a cosign
/// signature this public key verifies.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyConfig {
    /// The PEM public key file (resolved against the config's folder).
    pub key: PathBuf,
}

/// One `[tools.<alias>]` section.
#[derive(Clone, Debug)]
pub struct ToolConfig {
    /// The section name, usable wherever a component path is.
    pub alias: String,
    /// The component: a file (absolute) or an `oci://` reference.
    pub component: ComponentLocation,
    /// The signature check its component must pass (its own, else `[defaults]`'s).
    pub verify: Option<VerifyConfig>,
    /// Prepended to every tool name of the component (to resolve clashes).
    pub prefix: Option<String>,
    /// Policy keys of this section (relative paths already resolved).
    pub policy: PolicyLayer,
}

/// A config file that cannot be used, with where and what.
#[derive(Debug, thiserror::Error)]
pub struct ConfigError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// Dotted key path, when known (`tools.calc.timeout`).
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        write!(f, ": ")?;
        if let Some(key) = &self.key {
            write!(f, "{key}: ")?;
        }
        write!(f, "{}", self.message)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    /// Read on its own ([`ConfigFile::defaults_section`]), so that its
    /// errors name their key and line.
    #[serde(default)]
    #[allow(dead_code)]
    defaults: Option<IgnoredAny>,
    #[serde(default)]
    locked: bool,
    #[serde(default)]
    tools: BTreeMap<String, Spanned<RawTool>>,
    /// Checked by its owner through [`ConfigFile::section`].
    #[serde(default)]
    #[allow(dead_code)]
    agent: Option<IgnoredAny>,
    /// Per-tool call settings (`[calls.<tool>]`), checked by their owner
    /// through [`ConfigFile::section`].
    #[serde(default)]
    #[allow(dead_code)]
    calls: Option<IgnoredAny>,
    /// The session store's URL, checked by its owner through [`ConfigFile::section`].
    #[serde(default)]
    #[allow(dead_code)]
    store: Option<IgnoredAny>,
    /// The result cache's URL, checked by its owner through [`ConfigFile::section`].
    #[serde(default)]
    #[allow(dead_code)]
    cache: Option<IgnoredAny>,
    /// The audit log, checked by its owner through [`ConfigFile::section`].
    #[serde(default)]
    #[allow(dead_code)]
    audit: Option<IgnoredAny>,
    /// Access rules, checked by their owner through [`ConfigFile::section`].
    #[serde(default)]
    #[allow(dead_code)]
    access: Option<IgnoredAny>,
    /// Quotas, checked by their owner through [`ConfigFile::section`].
    #[serde(default)]
    #[allow(dead_code)]
    quotas: Option<IgnoredAny>,
}

/// The keys of every `[tools.<alias>]` section, with where they are: serde
/// cannot refuse unknown keys beside a flattened struct, so they are checked
/// on their own.
#[derive(Deserialize)]
struct ToolKeys {
    #[serde(default)]
    tools: BTreeMap<String, SectionKeys>,
    #[serde(default)]
    defaults: SectionKeys,
}

/// The keys of one section, with where they are.
type SectionKeys = BTreeMap<Spanned<String>, serde::de::IgnoredAny>;

/// Keys `[defaults]` takes besides the policy keys.
const DEFAULTS_KEYS: &[&str] = &["verify"];

/// Keys a `[tools.<alias>]` section takes besides the policy keys.
const TOOL_KEYS: &[&str] = &["component", "prefix", "verify"];

/// `[defaults]`: the policy keys and `verify`.
#[derive(Default)]
struct RawDefaults {
    verify: Option<VerifyConfig>,
    policy: PolicyLayer,
}

/// `[defaults]`, read with the spans of its keys: `verify` taken out and
/// read on its own, the rest as a policy layer (which refuses unknown keys).
fn defaults_section(text: &str, path: &Path) -> Result<RawDefaults, ConfigError> {
    let error = |span: Option<std::ops::Range<usize>>, key: String, message: String| ConfigError {
        path: path.to_path_buf(),
        line: span.map(|s| line_of(text, s.start)),
        key: Some(key),
        message,
    };
    let mut table = toml::de::DeTable::parse(text)
        .map_err(|e| error(e.span(), "defaults".into(), e.message().to_string()))?
        .into_inner();
    let Some(mut defaults) = table.remove("defaults") else {
        return Ok(RawDefaults::default());
    };
    let verify = match defaults.get_mut() {
        toml::de::DeValue::Table(section) => section.remove("verify"),
        _ => None,
    };
    let policy = deserialize_at(defaults, "defaults", &error)?;
    let verify = match verify {
        Some(value) => Some(deserialize_at(value, "defaults.verify", &error)?),
        None => None,
    };
    Ok(RawDefaults { verify, policy })
}

/// Deserializes `value`, found at `name`, with errors naming key and line.
fn deserialize_at<T: DeserializeOwned>(
    value: toml::Spanned<toml::de::DeValue<'_>>,
    name: &str,
    error: &impl Fn(Option<std::ops::Range<usize>>, String, String) -> ConfigError,
) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(toml::de::ValueDeserializer::from(value)).map_err(|e| {
        let at = e.path().to_string();
        let inner = e.into_inner();
        let key = if at == "." {
            name.to_string()
        } else {
            format!("{name}.{at}")
        };
        error(inner.span(), key, inner.message().to_string())
    })
}

#[derive(Deserialize)]
struct RawTool {
    component: Spanned<String>,
    #[serde(default)]
    prefix: Option<String>,
    #[serde(default)]
    verify: Option<VerifyConfig>,
    #[serde(flatten)]
    policy: PolicyLayer,
}

impl ConfigFile {
    /// Reads and checks a config file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            path: path.to_path_buf(),
            line: None,
            key: None,
            message: format!("cannot read the config file: {e}"),
        })?;
        Self::parse(&text, path)
    }

    /// Parses config text; relative paths resolve against `path`'s folder.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf();
        let error = |span: Option<std::ops::Range<usize>>, key: Option<String>, message: String| {
            ConfigError {
                path: path.to_path_buf(),
                line: span.map(|s| line_of(text, s.start)),
                key,
                message,
            }
        };
        let deserializer = toml::Deserializer::parse(text)
            .map_err(|e| error(e.span(), None, e.message().to_string()))?;
        let raw: RawConfig = serde_path_to_error::deserialize(deserializer).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            let key = (path != ".").then_some(path);
            error(inner.span(), key, inner.message().to_string())
        })?;

        let keys: ToolKeys =
            toml::from_str(text).map_err(|e| error(e.span(), None, e.message().to_string()))?;
        let sections = keys
            .tools
            .iter()
            .map(|(alias, keys)| (format!("tools.{alias}"), keys, TOOL_KEYS))
            .chain(std::iter::once((
                "defaults".to_string(),
                &keys.defaults,
                DEFAULTS_KEYS,
            )));
        for (section, keys, own) in sections {
            let known = |key: &str| own.contains(&key) || LAYER_KEYS.contains(&key);
            if let Some(unknown) = keys.keys().find(|key| !known(key.get_ref())) {
                return Err(error(
                    Some(unknown.span()),
                    Some(format!("{section}.{}", unknown.get_ref())),
                    format!(
                        "unknown key; expected one of {}",
                        own.iter()
                            .chain(LAYER_KEYS)
                            .copied()
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        }
        let raw_defaults = defaults_section(text, path)?;
        let defaults = raw_defaults.policy.relative_to(&base);
        let verify_key = |verify: Option<VerifyConfig>, key: String| {
            let Some(verify) = verify else {
                return Ok(None);
            };
            let path = base.join(&verify.key);
            if !path.is_file() {
                return Err(error(
                    None,
                    Some(key),
                    format!("{} does not exist or is not a file", path.display()),
                ));
            }
            Ok(Some(VerifyConfig { key: path }))
        };
        let default_verify = verify_key(raw_defaults.verify, "defaults.verify.key".into())?;
        let mut tools = BTreeMap::new();
        for (alias, section) in raw.tools {
            let span = section.span();
            let tool = section.into_inner();
            let component_span = tool.component.span();
            let text = tool.component.into_inner();
            let component = if text.starts_with("oci://") {
                ComponentLocation::Registry(text)
            } else {
                let path = base.join(text);
                if !path.is_file() {
                    return Err(error(
                        Some(component_span),
                        Some(format!("tools.{alias}.component")),
                        format!("{} does not exist or is not a file", path.display()),
                    ));
                }
                ComponentLocation::File(path)
            };
            let verify = verify_key(tool.verify, format!("tools.{alias}.verify.key"))?;
            if let Some(prefix) = &tool.prefix
                && !prefix
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-".contains(c))
            {
                return Err(error(
                    Some(span),
                    Some(format!("tools.{alias}.prefix")),
                    format!("{prefix:?} may only contain [a-zA-Z0-9_-]"),
                ));
            }
            let policy = tool.policy.relative_to(&base);
            policy
                .apply_to(defaults.apply_to(Policy::default()))
                // Resolved here too, so that a missing folder or variable is
                // reported with this file's line.
                .validate_and_resolve()
                .map_err(|e| {
                    error(
                        Some(span.clone()),
                        Some(format!("tools.{alias}")),
                        e.to_string(),
                    )
                })?;
            tools.insert(
                alias.clone(),
                ToolConfig {
                    alias,
                    component,
                    verify: verify.or_else(|| default_verify.clone()),
                    prefix: tool.prefix,
                    policy,
                },
            );
        }
        defaults
            .apply_to(Policy::default())
            .validate_and_resolve()
            .map_err(|e| error(None, Some("defaults".into()), e.to_string()))?;
        Ok(ConfigFile {
            path: path.to_path_buf(),
            defaults,
            verify: default_verify,
            locked: raw.locked,
            tools,
            text: text.to_string(),
        })
    }

    /// Reads a section or top-level key that belongs to another layer
    /// (`agent`, `store`: the ones `RawConfig` admits besides the policy's;
    /// the file refuses any other unknown key), or `T::default()` when the
    /// file has none. Errors name the file, line and dotted key as those of
    /// the policy sections do.
    pub fn section<T: DeserializeOwned + Default>(&self, name: &str) -> Result<T, ConfigError> {
        let error = |span: Option<std::ops::Range<usize>>, key: Option<String>, message: String| {
            ConfigError {
                path: self.path.clone(),
                line: span.map(|s| line_of(&self.text, s.start)),
                key,
                message,
            }
        };
        let mut table = toml::de::DeTable::parse(&self.text)
            .map_err(|e| error(e.span(), None, e.message().to_string()))?
            .into_inner();
        let Some(value) = table.remove(name) else {
            return Ok(T::default());
        };
        let deserializer = toml::de::ValueDeserializer::from(value);
        serde_path_to_error::deserialize(deserializer).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            let key = if path == "." {
                name.to_string()
            } else {
                format!("{name}.{path}")
            };
            error(inner.span(), Some(key), inner.message().to_string())
        })
    }

    /// The policy of a configured tool: built-in defaults, then `[defaults]`,
    /// then its own section.
    pub fn policy_for(&self, alias: &str) -> Option<Policy> {
        let tool = self.tools.get(alias)?;
        Some(
            tool.policy
                .apply_to(self.defaults.apply_to(Policy::default())),
        )
    }

    /// The policy for a component not named in the file: `[defaults]` only.
    pub fn default_policy(&self) -> Policy {
        self.defaults.apply_to(Policy::default())
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn parse(text: &str) -> Result<ConfigFile, ConfigError> {
        let dir = std::env::temp_dir().join("wasm-agent-config-test");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("tool.wasm"), b"").unwrap();
        ConfigFile::parse(text, &dir.join("wasm-agent.toml"))
    }

    #[test]
    fn layers_defaults_and_tool_sections() {
        let config = parse(
            "[defaults]\ntimeout = \"2s\"\nenv = { A = \"1\" }\n\n[tools.calc]\ncomponent = \"tool.wasm\"\nmemory = \"16MiB\"\nprefix = \"c_\"\n",
        )
        .unwrap();
        let policy = config.policy_for("calc").unwrap();
        assert_eq!(policy.timeout, Duration::from_secs(2));
        assert_eq!(policy.memory.bytes(), 16 << 20);
        assert_eq!(policy.env["A"], "1");
        let tool = &config.tools["calc"];
        let ComponentLocation::File(path) = &tool.component else {
            panic!("a file")
        };
        assert!(path.is_absolute() || path.starts_with(std::env::temp_dir()));
        assert_eq!(tool.prefix.as_deref(), Some("c_"));
    }

    #[test]
    fn unknown_key_names_key_and_line() {
        let err = parse("[defaults]\ntimeout = \"2s\"\ntimout = \"3s\"\n").unwrap_err();
        assert_eq!(err.line, Some(3), "{err}");
        assert!(err.to_string().contains("timout"), "{err}");
    }

    #[test]
    fn bad_duration_and_size_name_the_key() {
        let err =
            parse("[tools.calc]\ncomponent = \"tool.wasm\"\ntimeout = \"soon\"\n").unwrap_err();
        assert!(err.to_string().contains("invalid duration"), "{err}");
        assert!(err.to_string().contains("tools.calc"), "{err}");
        let err = parse("[defaults]\nmemory = \"lots\"\n").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("defaults.memory"), "{err}");
        assert_eq!(err.line, Some(2), "{err}");
    }

    #[test]
    fn other_sections_are_read_typed_with_lines() {
        #[derive(Debug, Default, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Agent {
            model: Option<String>,
            #[serde(default)]
            #[allow(dead_code)]
            tools: BTreeMap<String, BTreeMap<String, u32>>,
        }
        let config = parse("[agent]\nmodel = \"m\"\n\n[agent.tools.q]\nlimit = \"x\"\n").unwrap();
        let err = config.section::<Agent>("agent").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("agent.tools.q.limit"), "{err}");
        assert_eq!(err.line, Some(5), "{err}");
        let config = parse("[agent]\nmodle = \"m\"\n").unwrap();
        let err = config.section::<Agent>("agent").unwrap_err();
        assert_eq!(err.line, Some(2), "{err}");
        let config = parse("[agent]\nmodel = \"m\"\n").unwrap();
        assert_eq!(
            config.section::<Agent>("agent").unwrap().model.as_deref(),
            Some("m")
        );
        assert!(
            parse("[defaults]\n")
                .unwrap()
                .section::<Agent>("agent")
                .unwrap()
                .model
                .is_none()
        );
        assert!(parse("[agnet]\nmodel = \"m\"\n").is_err());
    }

    #[test]
    fn unknown_tool_keys_name_key_and_line() {
        let err =
            parse("[tools.calc]\ncomponent = \"tool.wasm\"\n\ntimout = \"3s\"\n").unwrap_err();
        assert_eq!(err.line, Some(4), "{err}");
        assert_eq!(err.key.as_deref(), Some("tools.calc.timout"), "{err}");
        assert!(err.message.contains("timeout"), "{err}");
        let err = parse("[tools.calc]\ncomponent = \"tool.wasm\"\nmax_artifact = 3\n").unwrap_err();
        assert_eq!(err.line, Some(3), "{err}");
        let config =
            parse("[tools.calc]\ncomponent = \"tool.wasm\"\nmax_artifacts = 3\nprefix = \"c_\"\n")
                .unwrap();
        assert_eq!(config.policy_for("calc").unwrap().max_artifacts, 3);
    }

    #[test]
    fn missing_component_names_key_and_line() {
        let err = parse("\n[tools.x]\ncomponent = \"nope.wasm\"\n").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("tools.x.component"));
        assert_eq!(err.line, Some(3));
        assert!(err.message.contains("nope.wasm"));
    }

    #[test]
    fn missing_dir_names_the_section() {
        let err =
            parse("[tools.x]\ncomponent = \"tool.wasm\"\ndirs = [\"no-such-dir\"]\n").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("tools.x"));
        assert!(err.message.contains("no-such-dir"), "{err}");
    }

    #[test]
    fn syntax_error_has_a_line() {
        let err = parse("[defaults\n").unwrap_err();
        assert_eq!(err.line, Some(1), "{err}");
    }

    #[test]
    fn registry_components_verify_keys_and_locked() {
        let dir = std::env::temp_dir().join("wasm-agent-config-test");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cosign.pub"), b"").unwrap();
        let config = parse(
            "locked = true\n[defaults]\nverify = { key = \"cosign.pub\" }\ntimeout = \"2s\"\n\n\
             [tools.calc]\ncomponent = \"oci://127.0.0.1:5000/calc:1\"\n\n\
             [tools.local]\ncomponent = \"tool.wasm\"\nverify = { key = \"cosign.pub\" }\n",
        )
        .unwrap();
        assert!(config.locked);
        assert_eq!(
            config.tools["calc"].component,
            ComponentLocation::Registry("oci://127.0.0.1:5000/calc:1".into())
        );
        let key = dir.join("cosign.pub");
        assert_eq!(config.tools["calc"].verify.as_ref().unwrap().key, key);
        assert_eq!(config.verify.as_ref().unwrap().key, key);
        assert_eq!(
            config.policy_for("calc").unwrap().timeout,
            Duration::from_secs(2)
        );

        let err = parse("[defaults]\nverify = { key = \"missing.pub\" }\n").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("defaults.verify.key"), "{err}");
        let err =
            parse("[tools.x]\ncomponent = \"tool.wasm\"\nverify = { keys = \"a\" }\n").unwrap_err();
        assert!(err.message.contains("keys"), "{err}");
        let err = parse("[defaults]\ntimout = \"1s\"\n").unwrap_err();
        assert!(err.to_string().contains("defaults.timout"), "{err}");
    }
}
