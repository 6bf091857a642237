//! `--model PROVIDER:MODEL` parsing and the provider families it names.

use std::fmt;
use std::str::FromStr;

use super::ProviderError;

/// A provider family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProviderKind {
    /// OpenAI Chat Completions at api.openai.com.
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini.
    Gemini,
    /// Ollama's OpenAI-compatible endpoint (localhost:11434 by default).
    Ollama,
    /// Any OpenAI-compatible server; needs a base URL.
    OpenAiCompatible,
}

impl ProviderKind {
    const ALL: [(&'static str, ProviderKind); 5] = [
        ("openai", ProviderKind::OpenAi),
        ("anthropic", ProviderKind::Anthropic),
        ("gemini", ProviderKind::Gemini),
        ("ollama", ProviderKind::Ollama),
        ("openai-compatible", ProviderKind::OpenAiCompatible),
    ];

    /// The prefix used in `--model`.
    pub fn prefix(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, kind)| *kind == self)
            .map_or("openai", |(name, _)| name)
    }

    /// The base URL used when none is given.
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            ProviderKind::OpenAi => Some("https://api.openai.com/v1"),
            ProviderKind::Anthropic => Some("https://api.anthropic.com"),
            ProviderKind::Gemini => Some("https://generativelanguage.googleapis.com"),
            ProviderKind::Ollama => Some("http://localhost:11434/v1"),
            ProviderKind::OpenAiCompatible => None,
        }
    }

    /// The environment variable holding the API key, and whether one is
    /// required. OpenAI-compatible servers get their own variable so that an
    /// OpenAI key is never sent to some other server.
    pub fn key_variable(self) -> (&'static str, bool) {
        match self {
            ProviderKind::OpenAi => ("OPENAI_API_KEY", true),
            ProviderKind::Anthropic => ("ANTHROPIC_API_KEY", true),
            ProviderKind::Gemini => ("GEMINI_API_KEY", true),
            ProviderKind::Ollama => ("OLLAMA_API_KEY", false),
            ProviderKind::OpenAiCompatible => ("OPENAI_COMPATIBLE_API_KEY", false),
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.prefix())
    }
}

/// A model named as `PROVIDER:MODEL`, e.g. `anthropic:claude-sonnet-4-5`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelSpec {
    /// The provider family.
    pub kind: ProviderKind,
    /// The provider's model name.
    pub model: String,
}

impl FromStr for ModelSpec {
    type Err = ProviderError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let known = ProviderKind::ALL.map(|(name, _)| name).join(", ");
        let Some((prefix, model)) = text.split_once(':') else {
            return Err(ProviderError::BadSpec(format!(
                "model {text:?} names no provider: write PROVIDER:MODEL, e.g. openai:gpt-4o-mini \
                 (providers: {known})"
            )));
        };
        let kind = ProviderKind::ALL
            .iter()
            .find(|(name, _)| *name == prefix)
            .map(|(_, kind)| *kind)
            .ok_or_else(|| {
                ProviderError::BadSpec(format!(
                    "unknown provider {prefix:?} in model {text:?}; providers: {known}"
                ))
            })?;
        if model.trim().is_empty() {
            return Err(ProviderError::BadSpec(format!(
                "model {text:?} has no model name after {prefix}:"
            )));
        }
        Ok(ModelSpec {
            kind,
            model: model.to_string(),
        })
    }
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_provider() {
        let spec: ModelSpec = "ollama:llama3.2:3b".parse().unwrap();
        assert_eq!(spec.kind, ProviderKind::Ollama);
        assert_eq!(spec.model, "llama3.2:3b");
        for (name, kind) in ProviderKind::ALL {
            let spec: ModelSpec = format!("{name}:m").parse().unwrap();
            assert_eq!(spec.kind, kind);
            assert_eq!(spec.to_string(), format!("{name}:m"));
        }
    }

    #[test]
    fn explains_bad_specs() {
        let error = "gpt-4o".parse::<ModelSpec>().unwrap_err().to_string();
        assert!(error.contains("PROVIDER:MODEL"), "{error}");
        let error = "mistral:large"
            .parse::<ModelSpec>()
            .unwrap_err()
            .to_string();
        assert!(error.contains("unknown provider \"mistral\""), "{error}");
        assert!("openai:".parse::<ModelSpec>().is_err());
    }
}
