//! A call's deadline. Waiting for a person to answer an `ask` question
//! pushes it back by the time waited: that wait is not the tool's time
//! (it is bounded by the question's own wait instead).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// When a call must end; shared by everything that waits within the call.
#[derive(Clone, Debug)]
pub struct CallDeadline(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    set: Instant,
    /// Nanoseconds it was pushed back by.
    pushed: AtomicU64,
    moved: tokio::sync::Notify,
}

impl CallDeadline {
    /// The deadline `at`.
    pub fn at(at: Instant) -> Self {
        Self(Arc::new(Inner {
            set: at,
            pushed: AtomicU64::new(0),
            moved: tokio::sync::Notify::new(),
        }))
    }

    /// When it is now.
    pub fn instant(&self) -> Instant {
        let pushed = Duration::from_nanos(self.0.pushed.load(Ordering::Acquire));
        self.0.set.checked_add(pushed).unwrap_or(self.0.set)
    }

    /// Whether it passed.
    pub fn passed(&self) -> bool {
        Instant::now() >= self.instant()
    }

    /// The time left.
    pub fn remaining(&self) -> Duration {
        self.instant().saturating_duration_since(Instant::now())
    }

    /// Waits until it passes, following it when it moves.
    pub async fn reached(&self) {
        loop {
            let moved = self.0.moved.notified();
            tokio::pin!(moved);
            moved.as_mut().enable();
            tokio::select! {
                () = tokio::time::sleep_until(self.instant().into()) => {
                    if self.passed() {
                        return;
                    }
                }
                () = moved => {}
            }
        }
    }

    /// Pushes the deadline back by `longest` (the most a wait may take);
    /// when the returned guard is dropped, the part not waited is taken
    /// back, so the call is charged nothing for the wait.
    pub fn pause(&self, longest: Duration) -> Pause {
        let longest = u64::try_from(longest.as_nanos()).unwrap_or(u64::MAX / 4);
        self.0.pushed.fetch_add(longest, Ordering::AcqRel);
        self.0.moved.notify_waiters();
        Pause {
            deadline: self.clone(),
            longest,
            started: Instant::now(),
        }
    }
}

/// A wait the call is not charged for; see [`CallDeadline::pause`].
#[derive(Debug)]
pub struct Pause {
    deadline: CallDeadline,
    longest: u64,
    started: Instant,
}

impl Drop for Pause {
    fn drop(&mut self) {
        let waited = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let unused = self.longest.saturating_sub(waited);
        self.deadline.0.pushed.fetch_sub(unused, Ordering::AcqRel);
        self.deadline.0.moved.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_pause_moves_the_deadline_by_the_time_waited() {
        let ms = Duration::from_millis;
        let start = Instant::now();
        let deadline = CallDeadline::at(start + ms(200));
        let waiting = {
            let deadline = deadline.clone();
            tokio::spawn(async move {
                deadline.reached().await;
                start.elapsed()
            })
        };
        tokio::time::sleep(ms(150)).await;
        let pause = deadline.pause(Duration::from_secs(60));
        // Past the old deadline while paused: not reached.
        tokio::time::sleep(ms(200)).await;
        assert!(!deadline.passed());
        drop(pause);
        let reached = waiting.await.unwrap();
        // 200 ms of the call's own time plus the ~200 ms waited.
        assert!(reached >= ms(400) && reached < ms(2000), "{reached:?}");
    }
}
