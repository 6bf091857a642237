//! [`CallObserver`]: told when each call starts and ends, synchronously and
//! without loss (unlike the event bus, whose slow subscribers drop events),
//! for metrics.

use std::time::Duration;

use crate::result::ErrorKind;

/// Watches every call of a host. Its methods run on the calling task: keep
/// them quick (counters, histograms).
pub trait CallObserver: Send + Sync {
    /// A call of `tool` began; `None` when the host offers no such tool (the
    /// name is the caller's, so it is not passed on).
    fn call_started(&self, tool: Option<&str>);

    /// That call ended: `error` is why it failed, if it did (`Cancelled`
    /// when its caller went away first).
    fn call_finished(&self, tool: Option<&str>, error: Option<ErrorKind>, took: Duration);
}
