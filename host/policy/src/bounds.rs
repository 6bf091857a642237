//! The upper bound of every limit, so that no value can overflow the host's
//! arithmetic (deadlines, buffer sizes) or disable a limit by accident.

use std::time::Duration;

use super::ByteSize;

/// Longest `timeout`, and longest `kept_idle`.
pub const TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);
/// Largest `max_output`.
pub const MAX_OUTPUT: ByteSize = ByteSize::gib(1);
/// Largest `max_response`.
pub const MAX_RESPONSE: ByteSize = ByteSize::gib(4);
/// Largest `max_requests`.
pub const MAX_REQUESTS: u32 = 10_000;
/// Largest `max_arguments`.
pub const MAX_ARGUMENTS: ByteSize = ByteSize::mib(64);
/// Largest `max_artifacts`.
pub const MAX_ARTIFACTS: u32 = 10_000;
/// Fewest and most `max_resources` (a component needs a few to start).
pub const MAX_RESOURCES: (u32, u32) = (16, 65_536);
/// Largest `max_tools`.
pub const MAX_TOOLS: u32 = 10_000;
/// Largest `max_description`.
pub const MAX_DESCRIPTION: ByteSize = ByteSize::mib(1);
/// Largest `max_schema`.
pub const MAX_SCHEMA: ByteSize = ByteSize::mib(16);
/// Largest `max_write`.
pub const MAX_WRITE: ByteSize = ByteSize::gib(1024);
