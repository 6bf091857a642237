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

/// One `[tools.<alias>]` section.
#[derive(Clone, Debug)]
pub struct ToolConfig {
    /// The section name, usable wherever a component path is.
    pub alias: String,
    /// The component file (absolute).
    pub component: PathBuf,
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
    #[serde(default)]
    defaults: PolicyLayer,
    #[serde(default)]
    tools: BTreeMap<String, Spanned<RawTool>>,
    /// Checked by its owner through [`ConfigFile::section`].
    #[serde(default)]
    #[allow(dead_code)]
    agent: Option<IgnoredAny>,
    /// The session store's URL, checked by its owner through [`ConfigFile::section`].
    #[serde(default)]
    #[allow(dead_code)]
    store: Option<IgnoredAny>,
    /// The result cache's URL, checked by its owner through [`ConfigFile::section`].
    #[serde(default)]
    #[allow(dead_code)]
    cache: Option<IgnoredAny>,
}

/// The keys of every `[tools.<alias>]` section, with where they are: serde
/// cannot refuse unknown keys beside a flattened struct, so they are checked
/// on their own.
#[derive(Deserialize)]
struct ToolKeys {
    #[serde(default)]
    tools: BTreeMap<String, BTreeMap<Spanned<String>, serde::de::IgnoredAny>>,
}

/// Keys a `[tools.<alias>]` section takes besides the policy keys.
const TOOL_KEYS: &[&str] = &["component", "prefix"];

#[derive(Deserialize)]
struct RawTool {
    component: Spanned<PathBuf>,
    #[serde(default)]
    prefix: Option<String>,
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
        for (alias, section) in &keys.tools {
            if let Some(unknown) = section.keys().find(|key| {
                !TOOL_KEYS.contains(&key.get_ref().as_str())
                    && !LAYER_KEYS.contains(&key.get_ref().as_str())
            }) {
                return Err(error(
                    Some(unknown.span()),
                    Some(format!("tools.{alias}.{}", unknown.get_ref())),
                    format!(
                        "unknown key; expected one of {}",
                        TOOL_KEYS
                            .iter()
                            .chain(LAYER_KEYS)
                            .copied()
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        }
        let defaults = raw.defaults.relative_to(&base);
        let mut tools = BTreeMap::new();
        for (alias, section) in raw.tools {
            let span = section.span();
            let tool = section.into_inner();
            let component_span = tool.component.span();
            let component = base.join(tool.component.into_inner());
            if !component.is_file() {
                return Err(error(
                    Some(component_span),
                    Some(format!("tools.{alias}.component")),
                    format!("{} does not exist or is not a file", component.display()),
                ));
            }
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
        assert!(tool.component.is_absolute() || tool.component.starts_with(std::env::temp_dir()));
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
}
