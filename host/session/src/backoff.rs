//! How often a replica looks again at the shared store for something
//! another replica will write (a message in a mailbox, an answer).

use std::time::Duration;

/// Waits between looks: `first`, then half as long again each time, up to
/// `max`. Quick while an answer is likely near, and a bounded load on the
/// store while it is not.
#[derive(Clone, Debug)]
pub struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    /// Starts at `first` (at most `max`).
    pub fn new(first: Duration, max: Duration) -> Self {
        Self {
            next: first.min(max),
            max,
        }
    }

    /// How long to wait before the next look.
    pub fn next_wait(&mut self) -> Duration {
        let wait = self.next;
        self.next = (wait * 3 / 2).min(self.max);
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_by_half_up_to_the_most() {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(300));
        let waits: Vec<u128> = (0..5).map(|_| backoff.next_wait().as_millis()).collect();
        assert_eq!(waits, [100, 150, 225, 300, 300]);
    }

    #[test]
    fn never_starts_past_the_most() {
        let mut backoff = Backoff::new(Duration::from_secs(5), Duration::from_secs(1));
        assert_eq!(backoff.next_wait(), Duration::from_secs(1));
    }
}
