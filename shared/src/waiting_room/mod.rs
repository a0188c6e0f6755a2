//! The waiting room: joins, polls and admissions, decided in Redis on each call
//! (`queue.lua`), so every gateway serves any entry.

pub mod pow;
pub mod scripts;

use crate::domain::{ProductId, UserId};
use crate::store::TicketStore;
use anyhow::Context;
use redis::AsyncCommands;
use scripts::Queue;

/// A buyer's place in a product's waiting room, as `queue.lua` left it.
#[derive(Debug, Clone, PartialEq)]
pub enum QueueState {
    UnknownProduct,
    NoWaitingRoom,
    /// Joining before `opens_at`.
    NotOpen,
    /// The buyer never joined.
    NotJoined,
    Waiting {
        queue_id: String,
        /// Places ahead; `None` before the sale starts (the order is drawn at random).
        ahead: Option<u64>,
        /// No unit left and none in flight.
        sold_out: bool,
        admit_per_sec: f64,
        starts_at_ms: i64,
        /// Admissions per second actually measured (`None` before a window closed).
        measured_per_sec: Option<f64>,
        /// The places ahead and the admitted who have not bought outnumber the units left and
        /// in flight: a unit reaches this place only if some of them do not buy.
        unlikely: bool,
        /// Everyone admitted so far, read with `ahead` (see [`RoomFigures::admitted_total`]).
        admitted_total: u64,
        /// Admissions taken back so far (see [`RoomFigures::returned_total`]).
        returned_total: u64,
    },
    /// What a `tick` answers: the room's figures, after admitting whoever's turn has come.
    Room(RoomFigures),
    Admitted {
        queue_id: String,
        until_ms: i64,
    },
    Expired {
        queue_id: String,
    },
    Bought {
        queue_id: String,
    },
    /// The sale is past its end, and this entry was neither bought nor expired: final.
    Ended {
        queue_id: String,
    },
    /// A join after the sale's end, by a buyer who never joined: nothing was added.
    SaleEnded,
    /// A join without a proof of work, by a buyer who never joined, of a room that asks for
    /// one: nothing was added. The join was counted in `joins_per_sec`, which the challenge's
    /// difficulty follows.
    Challenge {
        /// Joins asked for over the last second, this one included.
        joins_per_sec: f64,
        pow: crate::db::Pow,
    },
    /// A join whose proof of work was used before: nothing was done.
    ChallengeUsed,
}

/// A waiting room's whole line, as `line.lua` reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueLine {
    /// Everyone admitted so far, read with the places (see [`RoomFigures::admitted_total`]).
    pub admitted_total: u64,
    /// Admissions taken back so far (see [`RoomFigures::returned_total`]).
    pub returned_total: u64,
    /// User id → entries ahead of them.
    pub places: std::collections::HashMap<u64, u64>,
}

/// A waiting room's figures, as a `tick` of `queue.lua` reads them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RoomFigures {
    /// Everyone admitted so far. After the start, a waiting place moves up by exactly what
    /// this grows by (places leave the line only by admission; later joiners queue behind),
    /// while no admission is taken back ([`Self::returned_total`]).
    pub admitted_total: u64,
    pub sold_out: bool,
    pub admit_per_sec: f64,
    pub starts_at_ms: i64,
    pub measured_per_sec: Option<f64>,
    /// Units left in Redis (below zero while a loan is settled).
    pub stock: i64,
    /// Reservations not settled yet: units that may come back.
    pub in_flight: u64,
    /// Admitted buyers who have not bought yet.
    pub admitted_now: u64,
    /// Admissions taken back to the head of the line so far (`reserve.lua`, to keep the cap):
    /// each moves every place behind it back by one, so a place worked out from
    /// `admitted_total` holds only while this does not grow.
    pub returned_total: u64,
    /// The sale is past its end: nobody is admitted any more, and every entry not bought
    /// nor expired is `ended`.
    pub ended: bool,
}

impl RoomFigures {
    /// Whether the place `ahead + 1` is unlikely to get a unit (see
    /// [`QueueState::Waiting::unlikely`]).
    pub fn unlikely(&self, ahead: u64) -> bool {
        ahead + 1 + self.admitted_now > self.stock.max(0) as u64 + self.in_flight
    }
}

/// The meta fields of a room's proof of work.
const POW_FIELDS: [&str; 3] = ["wr_pow_min", "wr_pow_max", "wr_pow_target"];

/// Joins over the last second from `queue.lua`'s two one-second windows (`wr_jw`: the
/// current window, in whole seconds; `wr_jc` joins in it; `wr_jp` joins in the one before):
/// the window before weighted by how much of it the last second still covers, plus the
/// current one. The same sum as `queue.lua`'s.
pub fn join_rate(
    now_ms: i64,
    window: Option<i64>,
    current: Option<f64>,
    previous: Option<f64>,
) -> f64 {
    let (Some(w), Some(cur)) = (window, current) else {
        return 0.0;
    };
    let now_w = now_ms.div_euclid(1000);
    let into = now_ms.rem_euclid(1000) as f64 / 1000.0;
    if now_w == w {
        previous.unwrap_or(0.0) * (1.0 - into) + cur
    } else if now_w == w + 1 {
        cur * (1.0 - into)
    } else {
        0.0
    }
}

/// What a join or poll does in [`TicketStore::queue`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueOp<'a> {
    /// Join with this new queue id and random place (below 2^50), unless already in. A room
    /// that asks for a proof of work takes the join only with `pow`, once per challenge.
    Join {
        queue_id: &'a str,
        place: u64,
        pow: Option<PowSpent<'a>>,
    },
    Poll,
    /// Only admits whoever's turn has come, and answers the room's figures
    /// ([`QueueState::Room`]); the user is ignored.
    Tick,
}

/// A proof of work a join brings (already checked by the gateway): its challenge is marked used
/// until a challenge's lifetime past its expiry (gateways' clocks may differ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PowSpent<'a> {
    /// The challenge's nonce, in hex.
    pub nonce: &'a str,
    pub expires_at_ms: i64,
}

impl TicketStore {
    /// Joins or polls a product's waiting room for `user`, admitting whoever's turn has come
    /// (see `queue.lua`). `admission_ttl_ms`: how long an admission lasts.
    pub async fn queue(
        &self,
        product: ProductId,
        user: UserId,
        op: QueueOp<'_>,
        now_ms: i64,
        admission_ttl_ms: u64,
    ) -> anyhow::Result<QueueState> {
        self.run(&Queue {
            keys: self.keys(product),
            user,
            op,
            now_ms,
            admission_ttl_ms,
        })
        .await
    }

    /// The whole line of `product`'s waiting room, in one read.
    pub async fn queue_line(&self, product: ProductId) -> anyhow::Result<QueueLine> {
        self.run(&scripts::Line {
            keys: self.keys(product),
        })
        .await
    }

    /// Writes (or, with `None`, removes) a product's waiting room in its Redis meta.
    pub async fn set_waiting_room(
        &self,
        product: ProductId,
        room: Option<&crate::db::WaitingRoom>,
    ) -> anyhow::Result<()> {
        let k = self.keys(product);
        let mut c = self.conn.clone();
        match room {
            Some(w) => {
                let mut pipe = redis::pipe();
                pipe.atomic().hset_multiple(
                    k.meta(),
                    &[
                        ("wr_rate", w.admit_per_sec.to_string()),
                        ("wr_factor", w.max_admitted_factor.to_string()),
                        ("wr_opens", w.opens_at_ms.to_string()),
                    ],
                );
                match w.pow {
                    Some(p) => pipe.hset_multiple(
                        k.meta(),
                        &[
                            ("wr_pow_min", p.min_bits.to_string()),
                            ("wr_pow_max", p.max_bits.to_string()),
                            ("wr_pow_target", p.target_joins_per_sec.to_string()),
                        ],
                    ),
                    None => pipe.hdel(k.meta(), &POW_FIELDS),
                };
                let _: () = pipe
                    .query_async(&mut c)
                    .await
                    .context("writing the waiting room")?;
            }
            None => {
                let mut fields = vec!["wr_rate", "wr_factor", "wr_opens"];
                fields.extend(POW_FIELDS);
                let _: () = c
                    .hdel(k.meta(), &fields)
                    .await
                    .context("removing the waiting room")?;
            }
        }
        Ok(())
    }

    /// A waiting room's joins asked for over the last second, as `queue.lua` counts them for
    /// the proof of work's difficulty (0 when none was counted).
    pub async fn joins_per_sec(&self, product: ProductId, now_ms: i64) -> anyhow::Result<f64> {
        let k = self.keys(product);
        let mut c = self.conn.clone();
        let (w, cur, prev): (Option<i64>, Option<f64>, Option<f64>) = c
            .hmget(k.meta(), &["wr_jw", "wr_jc", "wr_jp"])
            .await
            .context("reading the waiting room's joins")?;
        Ok(join_rate(now_ms, w, cur, prev))
    }

    /// Waiting room: (admitted buyers who have not bought, units left), read together.
    pub async fn admitted_and_stock(&self, product: ProductId) -> anyhow::Result<(u64, i64)> {
        let k = self.keys(product);
        let mut c = self.conn.clone();
        let (admitted, stock): (u64, Option<i64>) = redis::pipe()
            .atomic()
            .zcard(k.admitted())
            .get(k.stock())
            .query_async(&mut c)
            .await
            .context("reading the waiting room")?;
        Ok((admitted, stock.unwrap_or(0)))
    }

    /// A waiting room's admitted buyers who have not bought, and the buyers still waiting.
    pub async fn room_counts(&self, product: ProductId) -> anyhow::Result<(u64, u64)> {
        let k = self.keys(product);
        let mut c = self.conn.clone();
        redis::pipe()
            .zcard(k.admitted())
            .zcard(k.queue())
            .query_async(&mut c)
            .await
            .context("reading the waiting room")
    }
}

#[cfg(test)]
mod tests {
    use super::join_rate;

    #[test]
    fn the_join_rate_reads_the_last_second_over_two_windows() {
        assert_eq!(join_rate(5_000, None, None, None), 0.0, "none counted");
        // In the window: all of it, and what the last second still covers of the one before.
        assert_eq!(join_rate(5_250, Some(5), Some(10.0), Some(40.0)), 40.0);
        assert_eq!(join_rate(5_000, Some(5), Some(10.0), None), 10.0);
        // A second later the window is the one before, and fades out.
        assert_eq!(join_rate(6_500, Some(5), Some(10.0), Some(40.0)), 5.0);
        assert_eq!(
            join_rate(7_000, Some(5), Some(10.0), Some(40.0)),
            0.0,
            "quiet"
        );
    }
}
