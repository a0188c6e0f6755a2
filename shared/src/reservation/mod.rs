//! Reservation: the buy decision in one atomic script per stock bucket (`reserve.lua`),
//! batched per bucket (`batch.rs`), with loans between buckets (`buckets.rs`), and the release
//! of a reservation Kafka never took.

mod batch;
mod buckets;
pub mod call;
pub mod lanes;

pub use call::{Reservation, UserLimit};
pub use lanes::BatchObserver;

use crate::domain::{Ticket, UserId};
use crate::store::TicketStore;
use anyhow::Context;
use call::{ReserveCall, ReserveStep};
use redis::Script;
use std::sync::LazyLock;

/// The per-user token bucket, a Lua function prepended to the scripts that take a token.
pub const TOKEN_BUCKET_LUA: &str = include_str!("token_bucket.lua");
static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("release.lua")));

impl TicketStore {
    /// Runs the reservation script once, in `ticket`'s bucket (batched with other buyers of
    /// that bucket, `batch.rs`), assuming the product has `buckets` buckets. See
    /// [`Self::reserve`].
    async fn reserve_step(
        &self,
        ticket: &Ticket,
        user: UserId,
        now_ms: i64,
        admission_verified: bool,
        buckets: u16,
        limit: Option<&UserLimit>,
    ) -> anyhow::Result<ReserveStep> {
        let (code, extra) = self
            .reserve_batched(ReserveCall {
                ticket: ticket.clone(),
                user,
                now_ms,
                admission_verified,
                buckets,
                limit: limit.cloned(),
            })
            .await?;
        let done = match code {
            1 => Reservation::Reserved,
            2 => Reservation::AlreadyHolds(
                Ticket::parse(extra.as_deref().unwrap_or_default())
                    .context("stored ticket is malformed")?,
            ),
            3 => Reservation::SoldOut,
            4 => Reservation::UnknownProduct,
            5 => Reservation::NotStarted,
            6 => Reservation::Ended,
            7 => Reservation::AdmissionRequired,
            8 => Reservation::NotAdmitted,
            9 => return Ok(ReserveStep::Borrow),
            11 => Reservation::RateLimited {
                retry_after_ms: extra
                    .as_deref()
                    .unwrap_or_default()
                    .parse()
                    .context("the wait in Redis")?,
            },
            10 => {
                let n: u16 = extra
                    .as_deref()
                    .unwrap_or_default()
                    .parse()
                    .context("the bucket count in Redis")?;
                return Ok(ReserveStep::Buckets(n));
            }
            other => anyhow::bail!("reservation script returned unknown code {other}"),
        };
        Ok(ReserveStep::Done(done))
    }

    /// Gives back a reservation that never reached Kafka and marks its ticket failed with
    /// `reason`; a waiting-room buyer is admitted again for `admission_ttl_ms` (the buy did
    /// not happen). `true` when it was released (with its unit, or without one while the
    /// product is not loaded: the rebuild counts it).
    pub async fn release(
        &self,
        ticket: &Ticket,
        user: UserId,
        reason: &str,
        admission_ttl_ms: u64,
    ) -> anyhow::Result<bool> {
        let k = self.ticket_keys(ticket);
        let mut c = self.conn.clone();
        let n: i64 = RELEASE
            .key(k.stock())
            .key(k.meta())
            .key(k.buyers())
            .key(k.pending())
            .key(k.ticket(ticket))
            .key(k.admitted())
            .key(k.queue_done())
            .arg(user.get())
            .arg(ticket.as_str())
            .arg(reason)
            .arg(self.ticket_ttl_secs)
            .arg(crate::now_ms())
            .arg(admission_ttl_ms)
            .invoke_async(&mut c)
            .await
            .context("running the release script")?;
        Ok(n != 0)
    }
}
