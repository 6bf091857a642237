//! Byte sizes written the way operators write them: `64MiB`, `512 KiB`, `1GB`, `4096`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

use crate::ParseError;

/// A number of bytes, parsed from text such as `32MiB` or a bare integer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// `n` kibibytes.
    pub const fn kib(n: u64) -> Self {
        Self(n * 1024)
    }
    /// `n` mebibytes.
    pub const fn mib(n: u64) -> Self {
        Self(n * 1024 * 1024)
    }
    /// `n` gibibytes.
    pub const fn gib(n: u64) -> Self {
        Self(n * 1024 * 1024 * 1024)
    }
    /// The size in bytes.
    pub const fn bytes(self) -> u64 {
        self.0
    }
}

const UNITS: &[(&str, u64)] = &[
    ("b", 1),
    ("kb", 1000),
    ("kib", 1 << 10),
    ("k", 1 << 10),
    ("mb", 1000 * 1000),
    ("mib", 1 << 20),
    ("m", 1 << 20),
    ("gb", 1000 * 1000 * 1000),
    ("gib", 1 << 30),
    ("g", 1 << 30),
];

impl FromStr for ByteSize {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        let split = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(text.len());
        let (number, unit) = text.split_at(split);
        let unit = unit.trim().to_ascii_lowercase();
        let invalid = || {
            ParseError::new(
                "size",
                text,
                "expected a number with an optional unit such as 512KiB, 64MiB or 1GiB",
            )
        };
        if number.is_empty() {
            return Err(invalid());
        }
        let factor = if unit.is_empty() {
            1
        } else {
            UNITS
                .iter()
                .find(|(name, _)| *name == unit)
                .map(|(_, factor)| *factor)
                .ok_or_else(invalid)?
        };
        // Whole numbers are exact (an f64 would round above 2^53).
        if let Ok(whole) = number.parse::<u64>() {
            return whole
                .checked_mul(factor)
                .map(ByteSize)
                .ok_or_else(|| ParseError::new("size", text, "too large"));
        }
        let value: f64 = number.parse().map_err(|_| invalid())?;
        let bytes = value * factor as f64;
        if !bytes.is_finite() || bytes > u64::MAX as f64 {
            return Err(ParseError::new("size", text, "too large"));
        }
        Ok(ByteSize(bytes.round() as u64))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (unit, factor) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
            if self.0 >= factor && self.0.is_multiple_of(factor) {
                return write!(f, "{}{unit}", self.0 / factor);
            }
        }
        write!(f, "{}B", self.0)
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl de::Visitor<'_> for Visitor {
            type Value = ByteSize;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a size such as \"64MiB\" or a number of bytes")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
                u64::try_from(v)
                    .map(ByteSize)
                    .map_err(|_| E::custom("a size cannot be negative"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
                v.parse().map_err(E::custom)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_case_insensitively() {
        assert_eq!("32MiB".parse(), Ok(ByteSize::mib(32)));
        assert_eq!("512 kib".parse(), Ok(ByteSize::kib(512)));
        assert_eq!("1GB".parse(), Ok(ByteSize(1_000_000_000)));
        assert_eq!("4096".parse(), Ok(ByteSize(4096)));
        assert_eq!("1.5KiB".parse(), Ok(ByteSize(1536)));
        assert_eq!("18446744073709551615".parse(), Ok(ByteSize(u64::MAX)));
        assert!("18446744073709551615KiB".parse::<ByteSize>().is_err());
    }

    #[test]
    fn rejects_garbage_with_a_hint() {
        for bad in ["", "MiB", "12 parsecs", "-1", "1..2MiB"] {
            let err = bad.parse::<ByteSize>().unwrap_err();
            assert!(err.to_string().contains("64MiB"), "{bad}: {err}");
        }
    }

    #[test]
    fn displays_in_the_largest_exact_unit() {
        assert_eq!(ByteSize::mib(64).to_string(), "64MiB");
        assert_eq!(ByteSize(1500).to_string(), "1500B");
        assert_eq!(ByteSize::gib(1).to_string(), "1GiB");
    }
}
