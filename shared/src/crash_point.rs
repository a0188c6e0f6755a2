//! Crash points for fault injection (`SECKILL_CHAOS_ABORT_AFTER_*`): a process that kills
//! itself at the worst moment of a two-store step, after its MySQL commit and before Redis
//! follows, as a power cut or an OOM kill there would. Used by the chaos suite (scenarios 11
//! and 19), which checks the stores against the last words printed here.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Fires once the items counted reach `after` (never when it is 0).
#[derive(Debug, Clone, Default)]
pub struct CrashPoint {
    after: u64,
    counted: Arc<AtomicU64>,
}

impl CrashPoint {
    pub fn new(after: u64) -> Self {
        Self {
            after,
            counted: Arc::default(),
        }
    }

    /// Counts `n` more items and says whether this brings them to `after` or past it.
    pub fn reached(&self, n: usize) -> bool {
        if self.after == 0 || n == 0 {
            return false;
        }
        let before = self.counted.fetch_add(n as u64, Ordering::SeqCst);
        before < self.after && before + n as u64 >= self.after
    }

    /// Counts `n` more items; when that reaches `after`, prints `last_words()` to stderr and
    /// kills the process with SIGKILL (no clean-up, no core, nothing flushed).
    pub fn count(&self, n: usize, last_words: impl FnOnce() -> String) {
        if self.reached(n) {
            eprintln!("chaos: {}", last_words());
            // SAFETY: raise(3) with a valid signal number has no memory-safety preconditions.
            #[allow(unsafe_code)]
            unsafe {
                libc::raise(libc::SIGKILL);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_fires_once_at_the_item_that_reaches_its_count() {
        let p = CrashPoint::new(5);
        assert!(!p.reached(2));
        assert!(!p.reached(0));
        assert!(!p.reached(2));
        assert!(p.reached(3), "2 + 2 + 3 reaches 5");
        assert!(!p.reached(1), "once only");
        let clone = CrashPoint::new(1);
        assert!(clone.clone().reached(1));
        assert!(!clone.reached(1), "clones share the count");
        assert!(!CrashPoint::new(0).reached(100), "0 is off");
    }
}
