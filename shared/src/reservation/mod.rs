//! Reservation: the buy decision in one atomic script per stock bucket (`reserve.lua`),
//! batched per bucket (`batch.rs`), with loans between buckets (`buckets.rs`), and the release
//! of a reservation Kafka never took.

mod batch;
mod buckets;
pub mod call;
pub mod failed_publish;
pub mod lanes;
pub mod scripts;

pub use call::{Reservation, UserLimit};
pub use lanes::BatchObserver;

use crate::domain::{FailureReason, Ticket, UserId};
use crate::store::TicketStore;
use scripts::{Release, Released};

/// The per-user token bucket, a Lua function prepended to the scripts that take a token.
pub const TOKEN_BUCKET_LUA: &str = include_str!("token_bucket.lua");

impl TicketStore {
    /// Gives back a reservation that never reached Kafka and marks its ticket failed with
    /// `reason`; a waiting-room buyer is admitted again for `admission_ttl_ms` (the buy did
    /// not happen). `true` when it was released (with its unit, or without one while the
    /// product is not loaded: the rebuild counts it).
    pub async fn release(
        &self,
        ticket: &Ticket,
        user: UserId,
        reason: FailureReason,
        admission_ttl_ms: u64,
    ) -> anyhow::Result<bool> {
        let released = self
            .run(&Release {
                keys: self.ticket_keys(ticket),
                ticket,
                user,
                reason,
                ticket_ttl_secs: self.ticket_ttl_secs,
                now_ms: crate::now_ms(),
                admission_ttl_ms,
            })
            .await?;
        Ok(released != Released::Unchanged)
    }
}
