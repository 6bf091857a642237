//! Memory and table limits of one call, recording what was refused so a guest
//! that aborts afterwards is reported as `memory_limit`, not a bare trap.

use wasmtime::ResourceLimiter;

/// Caps the total linear memory of one store.
#[derive(Debug)]
pub struct CallLimiter {
    max_memory: usize,
    used_memory: usize,
    peak_memory: usize,
    refused: Option<usize>,
}

/// Table elements allowed per table; generous for any real toolchain output.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

impl CallLimiter {
    /// A limiter allowing `max_memory` bytes of linear memory in total.
    pub fn new(max_memory: u64) -> Self {
        Self {
            max_memory: usize::try_from(max_memory).unwrap_or(usize::MAX),
            used_memory: 0,
            peak_memory: 0,
            refused: None,
        }
    }

    /// The total size a refused growth asked for, if any growth was refused.
    pub fn refused_growth(&self) -> Option<usize> {
        self.refused
    }

    /// The most linear memory the store has held at once, in bytes.
    pub fn peak_memory(&self) -> usize {
        self.peak_memory
    }

    /// Counts the memory `other` holds as this limiter's: the store it
    /// limited was taken over, its instance and memory with it.
    pub fn carry(&mut self, other: &CallLimiter) {
        self.used_memory = other.used_memory;
        self.peak_memory = self.peak_memory.max(other.peak_memory);
    }

    /// Forgets a refused growth (a kept instance's next call starts clean;
    /// its memory stays counted).
    pub fn forget_refusal(&mut self) {
        self.refused = None;
    }
}

impl ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self.used_memory - current.min(self.used_memory) + desired;
        if total > self.max_memory {
            self.refused = Some(total);
            return Ok(false);
        }
        self.used_memory = total;
        self.peak_memory = self.peak_memory.max(total);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_all_memories_together_and_records_refusal() {
        let mut limiter = CallLimiter::new(100);
        assert!(limiter.memory_growing(0, 60, None).unwrap());
        assert!(limiter.memory_growing(0, 30, None).unwrap());
        assert!(!limiter.memory_growing(30, 50, None).unwrap());
        assert_eq!(limiter.refused_growth(), Some(110));
        assert!(limiter.memory_growing(30, 40, None).unwrap());
        assert_eq!(limiter.peak_memory(), 100);
    }
}
