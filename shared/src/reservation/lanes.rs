//! What waits for each stock bucket's next reservation call (see `batch.rs`): buyers, and the
//! Kafka locations of earlier orders.

use super::call::{Reply, ReserveCall};
use crate::domain::ProductId;
use crate::locations::located::Located;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{oneshot, Notify};

/// Told the size of each batch sent (the gateway's histogram).
pub type BatchObserver = Arc<dyn Fn(usize) + Send + Sync>;

pub(crate) struct Waiting {
    pub(crate) call: ReserveCall,
    /// The reply, and how many buyers shared its call.
    pub(crate) reply: oneshot::Sender<(Reply, usize)>,
}

/// What waits for a bucket's next call: buyers, and the Kafka locations of earlier orders.
#[derive(Default)]
pub(crate) struct Lane {
    pub(crate) buyers: Vec<Waiting>,
    pub(crate) located: Vec<Located>,
    /// Set while the driver holds locations for a buyer (`HOLD_LOCATED` (`batch.rs`)): the next buyer
    /// takes it and wakes the driver.
    pub(crate) hold: Option<Arc<Notify>>,
}

pub(crate) type LaneKey = (ProductId, u16);

/// What a lane's driver does next.
pub(crate) enum Next {
    /// Wait for a buyer to carry the lane's locations, up to `HOLD_LOCATED` (`batch.rs`).
    Hold(Arc<Notify>),
    /// Send these buyers, and these locations, in one call.
    Send(Vec<Waiting>, Vec<Located>),
}

/// (product, bucket) → what waits for it. A lane is here exactly while a driver task sends
/// its calls: whatever adds it starts the driver, and the driver removes it once nothing waits.
#[derive(Default)]
pub(crate) struct Lanes {
    map: Mutex<HashMap<LaneKey, Lane>>,
    /// Locations of lanes whose driver ended early (its runtime shut down, or it panicked),
    /// for [`TicketStore::record_waiting_locations`].
    orphans: Mutex<Vec<Located>>,
}

impl Lanes {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<LaneKey, Lane>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn orphans(&self) -> std::sync::MutexGuard<'_, Vec<Located>> {
        self.orphans.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes every location still waiting, in lanes or left by ended drivers.
    pub(crate) fn take_located(&self) -> Vec<Located> {
        let mut all = std::mem::take(&mut *self.orphans());
        for lane in self.lock().values_mut() {
            all.append(&mut lane.located);
        }
        all
    }
}

/// Frees a lane whose driver ended without emptying it (a panic, or its runtime shutting
/// down): the calls still waiting get an error, the next call starts a new driver, and the
/// locations waiting are kept for [`TicketStore::record_waiting_locations`].
pub(crate) struct Unstick {
    pub(crate) lanes: Arc<Lanes>,
    pub(crate) lane: LaneKey,
    pub(crate) armed: bool,
    /// The locations of the call in flight, taken from the lane: a driver dropped mid-call
    /// (its runtime shutting down) leaves them for the shutdown too. A call that reached
    /// Redis before the drop has them recorded twice, which is harmless (the same location).
    pub(crate) in_call: Vec<Located>,
}

impl Drop for Unstick {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut left = std::mem::take(&mut self.in_call);
        if let Some(mut lane) = self.lanes.lock().remove(&self.lane) {
            left.append(&mut lane.located);
        }
        if !left.is_empty() {
            tracing::warn!(
                product = %self.lane.0,
                orders = left.len(),
                "a reservation batch driver ended early; its orders' Kafka locations wait for the shutdown"
            );
            self.lanes.orphans().extend(left);
        }
    }
}
