//! The config file's `audit`: a file name (`audit = "audit.jsonl"`) or a
//! table (`[audit]` with `file`, `arguments`, `fail`, `max_size`).

use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use wasm_agent_policy::ByteSize;

use crate::FailMode;

/// `[audit]`, as written.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// The log file, or a `postgres://` URL (records go to a table).
    pub file: Option<PathBuf>,
    /// This process's chain in a table (default: the host name).
    pub replica: Option<String>,
    /// Whether records carry the arguments (redacted).
    pub arguments: Option<bool>,
    /// `"closed"` or `"open"`.
    pub fail: Option<FailMode>,
    /// The size at which the file is rotated (`"100MiB"`).
    pub max_size: Option<ByteSize>,
    /// The file holding the arguments digests' key (default: `.NAME.key`
    /// beside a file log; replicas writing to a table share one this way).
    pub key_file: Option<PathBuf>,
}

/// The config's `audit` key, in either form.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditSection(pub AuditConfig);

impl<'de> Deserialize<'de> for AuditSection {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Either;
        impl<'de> Visitor<'de> for Either {
            type Value = AuditSection;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a file name, or a table with file, replica, arguments, fail, max_size, key_file")
            }
            fn visit_str<E: de::Error>(self, file: &str) -> Result<AuditSection, E> {
                Ok(AuditSection(AuditConfig {
                    file: Some(file.into()),
                    ..AuditConfig::default()
                }))
            }
            fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<AuditSection, M::Error> {
                AuditConfig::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(AuditSection)
            }
        }
        deserializer.deserialize_any(Either)
    }
}
