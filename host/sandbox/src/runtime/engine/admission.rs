//! Admission of a call: a slot among the calls that may run at once, waited
//! for no longer than the call's deadline, and the share of the process's
//! open-file descriptors that comes with the slot.
//!
//! The process has a fixed number of descriptors, shared by every call. Each
//! slot owns an equal share of them (the soft open-file limit, less a reserve
//! for the host itself, divided by the number of slots), and a call may hold
//! no more host resources than its share (nor than its `max_resources`).
//! Every open file, socket, stream or HTTP response is such a resource, so
//! one tool that opens all it may can never leave another call without a
//! descriptor.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::result::{CallError, ErrorKind};
use wasm_agent_policy::Policy;

/// Descriptors kept for the host itself (listeners, client connections, the
/// compile cache, session files) when sizing the budget of calls.
const HOST_RESERVE: u64 = 1024;
/// Fewest resources a call is given, whatever the share (a component needs a
/// few to start).
const MIN_RESOURCES: u32 = 16;

/// Call slots and each one's share of descriptors.
pub struct Admission {
    slots: Arc<Semaphore>,
    share: u32,
}

impl Admission {
    /// `slots` calls at once, within the process's open-file limit.
    pub fn new(slots: u32) -> Self {
        Self::within(slots, descriptor_budget())
    }

    /// `slots` calls at once sharing `budget` descriptors; fewer slots when
    /// the budget cannot give each the minimum.
    fn within(slots: u32, budget: u32) -> Self {
        let most = (budget / MIN_RESOURCES).max(1);
        let slots = if slots.max(1) > most {
            tracing::warn!(
                "the open-file limit leaves room for {most} calls at once, not {slots}; \
                 raise the limit (ulimit -n) for more"
            );
            most
        } else {
            slots.max(1)
        };
        let share = (budget / slots).max(MIN_RESOURCES);
        tracing::debug!(budget, share, slots, "descriptors available to each call");
        Self {
            slots: Arc::new(Semaphore::new(slots as usize)),
            share,
        }
    }

    /// The most host resources a call under `policy` may hold at once: its
    /// `max_resources`, within its slot's share of descriptors (less its
    /// granted folders, which are open for the whole call).
    pub fn resource_limit(&self, policy: &Policy) -> u32 {
        let share = self
            .share
            .saturating_sub(policy.dirs.len() as u32)
            .max(MIN_RESOURCES);
        policy.max_resources.min(share)
    }

    /// Waits for a slot, until the deadline or a cancellation. The slot is
    /// free again once the permit is dropped.
    pub async fn admit(
        &self,
        deadline: Instant,
        cancellation: &CancellationToken,
    ) -> Result<OwnedSemaphorePermit, Waited> {
        if let Ok(permit) = self.slots.clone().try_acquire_owned() {
            return Ok(permit);
        }
        tokio::select! {
            permit = self.slots.clone().acquire_owned() => permit.map_err(|_| Waited::Closed),
            _ = cancellation.cancelled() => Err(Waited::Cancelled),
            _ = tokio::time::sleep_until(deadline.into()) => Err(Waited::Deadline),
        }
    }
}

/// Why a call was not admitted.
pub enum Waited {
    /// The deadline passed first.
    Deadline,
    /// The call was cancelled first.
    Cancelled,
    /// The host is shutting down.
    Closed,
}

impl Waited {
    /// The error a caller sees.
    pub fn into_error(self, timed_out: impl FnOnce() -> CallError) -> CallError {
        match self {
            Waited::Deadline => timed_out(),
            Waited::Cancelled => CallError::new(
                ErrorKind::Cancelled,
                "the call was cancelled before it finished",
            ),
            Waited::Closed => CallError::new(ErrorKind::Cancelled, "the host is shutting down"),
        }
    }
}

/// Descriptors calls may use: the soft open-file limit minus the host's own.
fn descriptor_budget() -> u32 {
    let soft = open_file_limit().unwrap_or(1024);
    let reserve = HOST_RESERVE.max(soft / 4).min(soft / 2);
    u32::try_from(soft - reserve).unwrap_or(u32::MAX).max(1)
}

#[cfg(unix)]
fn open_file_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0).then_some(limit.rlim_cur)
}

#[cfg(not(unix))]
fn open_file_limit() -> Option<u64> {
    None
}

/// Raises the soft open-file limit of the process to its hard limit and
/// returns the new soft limit. Call it once at start, before building a host
/// (the CLI does); a library embedder decides for its own process.
#[cfg(unix)]
pub fn raise_open_file_limit() -> std::io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write only the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // macOS reports an unlimited hard limit but refuses a soft limit
        // above OPEN_MAX.
        #[cfg(target_os = "macos")]
        let hard = limit.rlim_max.min(libc::OPEN_MAX as libc::rlim_t);
        #[cfg(not(target_os = "macos"))]
        let hard = limit.rlim_max;
        if limit.rlim_cur < hard {
            let raised = libc::rlimit {
                rlim_cur: hard,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            limit.rlim_cur = hard;
        }
    }
    Ok(limit.rlim_cur)
}

/// Raises the soft open-file limit (nothing to do on this platform).
#[cfg(not(unix))]
pub fn raise_open_file_limit() -> std::io::Result<u64> {
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_holds_no_more_than_its_slots_share() {
        let few = Admission::within(4, 10_000);
        let greedy = Policy::default().max_resources(65_536);
        assert_eq!(few.resource_limit(&greedy), 2500);
        let modest = Policy::default().max_resources(20);
        assert_eq!(few.resource_limit(&modest), 20);
        // More slots than the budget can give the minimum: fewer slots.
        let many = Admission::within(100_000, 1000);
        assert_eq!(many.resource_limit(&greedy), MIN_RESOURCES);
        assert_eq!(
            many.slots.available_permits(),
            1000 / MIN_RESOURCES as usize
        );
    }

    #[tokio::test]
    async fn a_call_waits_for_a_slot_no_longer_than_its_deadline() {
        let admission = Admission::within(1, 1000);
        let never = CancellationToken::new();
        let far = Instant::now() + std::time::Duration::from_secs(60);
        let held = admission.admit(far, &never).await.ok().unwrap();
        let soon = Instant::now() + std::time::Duration::from_millis(50);
        assert!(matches!(
            admission.admit(soon, &never).await,
            Err(Waited::Deadline)
        ));
        drop(held);
        assert!(admission.admit(far, &never).await.is_ok());
    }
}
