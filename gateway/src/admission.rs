//! Global admission: at most `SECKILL_MAX_IN_FLIGHT` buys in flight in one gateway process,
//! from the rate-limit check to the Kafka ack. Past the cap a buy is refused at once (`503`
//! with `Retry-After`) rather than queued, so a burst cannot pile up on Redis and Kafka.

use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub struct Admission {
    permits: Arc<Semaphore>,
    max: usize,
}

/// One admitted buy. Dropping it frees its place.
pub type Permit = OwnedSemaphorePermit;

impl Admission {
    /// `max` is at least 1 (`Settings::validate` checks it).
    pub fn new(max: usize) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(max)),
            max,
        }
    }

    /// Admits one buy, or `None` at once when `max` are in flight already. Never waits.
    pub fn try_admit(&self) -> Option<Permit> {
        self.permits.clone().try_acquire_owned().ok()
    }

    /// Buys in flight now.
    pub fn in_flight(&self) -> usize {
        self.max - self.permits.available_permits()
    }

    pub fn max(&self) -> usize {
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_past_the_cap_without_waiting_and_frees_on_drop() {
        let a = Admission::new(2);
        let one = a.try_admit().expect("first");
        let two = a.try_admit().expect("second");
        assert_eq!(a.in_flight(), 2);
        assert!(a.try_admit().is_none(), "third is refused");
        drop(one);
        assert_eq!(a.in_flight(), 1);
        let three = a.try_admit().expect("a freed place is reused");
        assert!(a.try_admit().is_none());
        drop((two, three));
        assert_eq!(a.in_flight(), 0);
    }

    #[tokio::test]
    async fn a_permit_held_by_a_task_is_freed_when_the_task_ends() {
        let a = Admission::new(1);
        let permit = a.try_admit().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _permit = permit;
            let _ = rx.await;
        });
        assert!(a.try_admit().is_none());
        tx.send(()).unwrap();
        task.await.unwrap();
        assert!(a.try_admit().is_some());
    }
}
