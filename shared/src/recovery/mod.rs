//! Recovery paths: the stale-reservation sweeper ([`sweep()`]), reconcile after Redis loses its
//! data ([`reconcile()`]), and settling a ticket whose settle had no answer through MySQL
//! ([`settle_stuck`]).

mod reconcile;
mod redis_ops;
pub mod scripts;
mod stuck;
mod sweep;

pub use reconcile::{reconcile, reconcile_lost, ReconcileReport, FENCE_LIMIT};
pub use scripts::{Rebuild, RestoredFailure, RestoredOrder, Settled};
pub use stuck::{settle_stuck, Stuck};
pub use sweep::{
    decide, expire, from_reservation, sweep, SweepAction, SweepReport, SweepRules,
    CLOSED_SALE_GRACE, STUCK_FACTOR,
};
