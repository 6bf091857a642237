//! The last hour by the minute: calls, failures, denials and latency
//! percentiles (from a histogram of doubling-by-√2 buckets), for the health
//! page's charts. Fixed size, whatever the call rate.

use std::time::{SystemTime, UNIX_EPOCH};

use wasm_agent_sandbox::ErrorKind;

/// Minutes kept.
pub const MINUTES: usize = 60;
/// Latency buckets: bucket `i` holds durations up to `2^(i/2)` µs.
const BUCKETS: usize = 64;

/// One minute's figures.
#[derive(Clone, Debug)]
pub struct Minute {
    /// Minutes since the epoch; 0 when unused.
    stamp: u64,
    /// Calls ended.
    pub calls: u64,
    /// Calls that failed in any way.
    pub failed: u64,
    /// Calls refused, and capabilities a tool was refused.
    pub denials: u64,
    latency: [u32; BUCKETS],
}

impl Default for Minute {
    fn default() -> Self {
        Self {
            stamp: 0,
            calls: 0,
            failed: 0,
            denials: 0,
            latency: [0; BUCKETS],
        }
    }
}

impl Minute {
    /// The latency (µs) under which `quantile` (0..1) of the minute's calls
    /// ended; `None` without calls.
    pub fn percentile(&self, quantile: f64) -> Option<u64> {
        let total: u64 = self.latency.iter().map(|&n| u64::from(n)).sum();
        if total == 0 {
            return None;
        }
        let want = ((total as f64) * quantile).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (bucket, &count) in self.latency.iter().enumerate() {
            seen += u64::from(count);
            if seen >= want {
                return Some(bucket_bound(bucket));
            }
        }
        Some(bucket_bound(BUCKETS - 1))
    }
}

/// The hour, a ring of minutes.
#[derive(Clone, Debug, Default)]
pub struct Series {
    minutes: Vec<Minute>,
}

impl Series {
    /// Counts a call that ended at `now` with `outcome` (`None`: it
    /// succeeded), after `duration_us`, its tool refused `denials` times.
    pub fn add(
        &mut self,
        outcome: Option<ErrorKind>,
        duration_us: u64,
        denials: u64,
        now: SystemTime,
    ) {
        let stamp = minute_of(now);
        if self.minutes.is_empty() {
            self.minutes = vec![Minute::default(); MINUTES];
        }
        let slot = &mut self.minutes[(stamp % MINUTES as u64) as usize];
        if slot.stamp != stamp {
            *slot = Minute {
                stamp,
                ..Minute::default()
            };
        }
        slot.calls += 1;
        if outcome.is_some() {
            slot.failed += 1;
        }
        let refused = u64::from(outcome.is_some_and(ErrorKind::is_refusal));
        // A call refused for what its tool tried counts the attempts, not twice.
        slot.denials += if denials > 0 { denials } else { refused };
        slot.latency[bucket_of(duration_us)] += 1;
    }

    /// The last [`MINUTES`] minutes up to `now`, oldest first (empty
    /// minutes included).
    pub fn last_hour(&self, now: SystemTime) -> Vec<Minute> {
        let current = minute_of(now);
        (0..MINUTES as u64)
            .rev()
            .map(|ago| {
                let stamp = current.saturating_sub(ago);
                self.minutes
                    .get((stamp % MINUTES as u64) as usize)
                    .filter(|m| m.stamp == stamp && stamp != 0)
                    .cloned()
                    .unwrap_or_default()
            })
            .collect()
    }
}

fn minute_of(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 60)
}

/// The bucket of a duration: the smallest `i` with `micros <= 2^(i/2)`.
fn bucket_of(micros: u64) -> usize {
    (0..BUCKETS)
        .find(|&i| micros <= bucket_bound(i))
        .unwrap_or(BUCKETS - 1)
}

fn bucket_bound(bucket: usize) -> u64 {
    2f64.powf(bucket as f64 / 2.0).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn minutes_count_calls_failures_denials_and_percentiles() {
        let mut series = Series::default();
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000 * 60 + 5);
        for micros in [100, 200, 300, 400, 100_000] {
            series.add(None, micros, 0, now);
        }
        series.add(Some(ErrorKind::CapabilityDenied), 50, 2, now);
        series.add(Some(ErrorKind::Denied), 10, 0, now);
        // A failure while it ran is no refusal.
        series.add(Some(ErrorKind::Timeout), 100_000, 0, now);
        let hour = series.last_hour(now + Duration::from_secs(30));
        assert_eq!(hour.len(), MINUTES);
        let last = hour.last().unwrap();
        assert_eq!((last.calls, last.failed, last.denials), (8, 3, 3));
        let p50 = last.percentile(0.5).unwrap();
        assert!((200..=300).contains(&p50), "p50 {p50}");
        assert!(last.percentile(0.99).unwrap() >= 100_000);
        assert!(hour[0].percentile(0.5).is_none());
    }

    #[test]
    fn an_hour_later_the_minute_is_gone() {
        let mut series = Series::default();
        let then = UNIX_EPOCH + Duration::from_secs(7_000 * 60);
        series.add(None, 5, 0, then);
        let later = then + Duration::from_secs(60 * 60);
        assert!(series.last_hour(later).iter().all(|m| m.calls == 0));
        series.add(None, 5, 0, later);
        assert_eq!(series.last_hour(later).last().unwrap().calls, 1);
    }
}
