//! Stock buckets: a hot product's stock split over N hash tags (see the module docs of
//! `store`), and the loan protocol that keeps every unit reachable by every buyer.
//!
//! A buy runs `reserve.lua` in the buyer's home bucket. When that bucket has fewer units than
//! the order asks for, the script takes none there, holds the buyer's place (`borrowing`: the
//! buyer has a live ticket, so a second buy finds it) and the gateway borrows:
//! 1. `borrow.lua` in the buckets, one after another, each giving what it has up to the units
//!    still missing (the loan is recorded per ticket, `taken` or `taken:<n>`), until the order
//!    is filled. For an order of more than one unit the home bucket is asked first, as a
//!    donor like the others: it may hold part of the order.
//! 2. `settle_borrow.lua` in the home bucket: `lent` turns the ticket `pending` (a normal
//!    reservation from there on), or `none`, when no bucket had a unit, fails it and answers
//!    sold out. Only then is the sold-out marker set: every bucket was empty. A bucket found
//!    without its stock key (Redis lost it) makes the answer "unknown product" instead, so
//!    the gateway has the product rebuilt and answers `503`, never a false sold out.
//! 3. When the buckets together had some units but fewer than the order asks for, the lending
//!    failed halfway: the gateway gives the units it borrowed back as the sweeper would
//!    ([`TicketStore::void_borrow`]: `voiding`, every loan voided or returned, then `failed`
//!    with `out_of_stock`), and answers `409 not_enough_stock` with the units it had found.
//!    Meanwhile those units were held for this order: a buyer of one unit may have been told
//!    sold out while they were, and is told they are back (the gateway publishes `"false"`).
//!
//! A gateway can die between the steps. The sweeper finds a ticket left `borrowing` past the
//! pending timeout, turns it `voiding` (so its gateway can no longer finish it), voids its
//! loans in every other bucket (`void.lua`: a loan taken goes back, one not taken can no
//! longer be), and fails it. The buyer never had a `202` for it.

use super::call::{Reservation, ReserveCall, ReserveStep, UserLimit};
use super::scripts::{Borrow, BorrowEnd, Borrowed, SettleBorrow, Void};
use crate::domain::{home_bucket, ProductId, Ticket, UserId};
use crate::recovery::Rebuild;
use crate::store::TicketStore;
use anyhow::Context;
use redis::AsyncCommands;

impl TicketStore {
    /// Tells the store how many buckets `product` has (from MySQL, or Redis).
    pub fn learn_buckets(&self, product: ProductId, buckets: u16) {
        let mut known = self
            .bucket_counts
            .write()
            .unwrap_or_else(|e| e.into_inner());
        known.insert(product, buckets.max(1));
    }

    fn known_buckets(&self, product: ProductId) -> Option<u16> {
        let known = self.bucket_counts.read().unwrap_or_else(|e| e.into_inner());
        known.get(&product).copied()
    }

    /// How many buckets `product` has: as learnt, else as its first bucket's meta says (1 when
    /// it says nothing, as for a product loaded before the count was written for every
    /// product: read again next time). After Redis lost the
    /// first bucket, only what was learnt from MySQL knows.
    pub async fn buckets(&self, product: ProductId) -> anyhow::Result<u16> {
        if let Some(n) = self.known_buckets(product) {
            return Ok(n);
        }
        let mut c = self.conn.clone();
        let n: Option<u16> = c
            .hget(self.keys(product).meta(), "buckets")
            .await
            .context("reading the bucket count")?;
        if let Some(n) = n {
            self.learn_buckets(product, n);
        }
        Ok(n.unwrap_or(1))
    }

    /// The whole buy decision for `user`: one atomic script in the buyer's home bucket, and
    /// for a product in buckets whose home bucket is empty, a loan from another bucket (see
    /// the module docs). Returns the new ticket (used only when `Reserved`).
    /// `admission_verified`: the gateway verified the buyer's admission token (needed for a
    /// product with a waiting room).
    pub async fn reserve(
        &self,
        product: ProductId,
        user: UserId,
        now_ms: i64,
        admission_verified: bool,
    ) -> anyhow::Result<(Ticket, Reservation)> {
        self.reserve_limited(product, user, now_ms, admission_verified, None)
            .await
    }

    /// [`Self::reserve`], taking the buyer's per-user limit first in the same script call
    /// (only when Redis is one server: in a cluster the bucket lives in another slot).
    pub async fn reserve_limited(
        &self,
        product: ProductId,
        user: UserId,
        now_ms: i64,
        admission_verified: bool,
        limit: Option<&UserLimit>,
    ) -> anyhow::Result<(Ticket, Reservation)> {
        self.reserve_units(product, user, now_ms, admission_verified, limit, 1)
            .await
    }

    /// [`Self::reserve_limited`] for an order of `quantity` units: all of them, or none.
    pub async fn reserve_units(
        &self,
        product: ProductId,
        user: UserId,
        now_ms: i64,
        admission_verified: bool,
        mut limit: Option<&UserLimit>,
        quantity: u16,
    ) -> anyhow::Result<(Ticket, Reservation)> {
        anyhow::ensure!(
            limit.is_none() || self.conn.is_single_server(),
            "the per-user limit is taken in the reservation only on one Redis server"
        );
        // A product's bucket count never changes, so one miss per process and product.
        let mut n = self.known_buckets(product).unwrap_or(1);
        for _ in 0..2 {
            let ticket = Ticket::generate_in(product, home_bucket(user, n));
            let step = self
                .reserve_batched(ReserveCall {
                    ticket: ticket.clone(),
                    user,
                    now_ms,
                    admission_verified,
                    buckets: n,
                    limit: limit.cloned(),
                    quantity,
                })
                .await?;
            // The token is taken once, whatever comes next.
            limit = None;
            match step {
                ReserveStep::Done(r) => return Ok((ticket, r)),
                ReserveStep::Borrow => {
                    let r = self.borrow(&ticket, n, quantity).await?;
                    return Ok((ticket, r));
                }
                ReserveStep::Buckets(actual) => {
                    self.learn_buckets(product, actual);
                    n = actual;
                }
            }
        }
        anyhow::bail!("the product's bucket count changed under the reservation")
    }

    /// Steps 1 to 3 of a borrow (module docs) for an order of `quantity` units. An error
    /// leaves the ticket `borrowing` for the sweeper, which gives back whatever was taken.
    async fn borrow(&self, ticket: &Ticket, n: u16, quantity: u16) -> anyhow::Result<Reservation> {
        let home = ticket.bucket();
        // Start at a random other bucket, so that borrowers spread over the donors; an order
        // of more than one unit asks its home bucket first (it may hold part of the order).
        let start = rand::random::<u16>() % (n - 1);
        let others = (0..n - 1).map(|i| (home + 1 + (start + i) % (n - 1)) % n);
        let donors: Vec<u16> = if quantity > 1 {
            std::iter::once(home).chain(others).collect()
        } else {
            others.collect()
        };
        let mut unloaded = false;
        let mut got: u16 = 0;
        for donor in donors {
            let keys = self.bucket_keys(ticket.product(), donor);
            let lent = self
                .run(&Borrow {
                    keys,
                    ticket,
                    want: quantity - got,
                })
                .await
                .with_context(|| format!("in bucket {donor}"))?;
            match lent {
                Borrowed::Lent(units) => {
                    got += units.min(quantity - got);
                    if got == quantity {
                        anyhow::ensure!(
                            self.settle_borrow(ticket, BorrowEnd::Lent).await?,
                            "the borrow of {ticket} was voided before it finished; its units went back"
                        );
                        return Ok(Reservation::Reserved);
                    }
                }
                Borrowed::NotLoaded => unloaded = true,
                Borrowed::NoUnit => {}
            }
        }
        if got == 0 {
            self.settle_borrow(ticket, BorrowEnd::None).await?;
        } else {
            // Halfway: what was borrowed goes back before the answer.
            let back = self.give_up_borrow(ticket, BorrowEnd::Short).await?;
            anyhow::ensure!(
                back.is_some(),
                "the borrow of {ticket} was voided by the sweeper before it finished"
            );
        }
        // A bucket Redis lost may hold units: not sold out, but a product to rebuild.
        Ok(if unloaded {
            Reservation::UnknownProduct
        } else if got == 0 {
            Reservation::SoldOut
        } else {
            Reservation::NotEnough {
                left: u64::from(got),
            }
        })
    }

    async fn settle_borrow(&self, ticket: &Ticket, end: BorrowEnd) -> anyhow::Result<bool> {
        self.run(&SettleBorrow {
            keys: self.ticket_keys(ticket),
            ticket,
            end,
        })
        .await
    }

    /// Tickets of a product left `borrowing` (or `voiding`) since before `cutoff_ms`.
    pub async fn stale_borrows(
        &self,
        product: ProductId,
        cutoff_ms: i64,
    ) -> anyhow::Result<Vec<Ticket>> {
        let n = self.buckets(product).await?;
        if n == 1 {
            return Ok(vec![]);
        }
        let mut out = vec![];
        for bucket in 0..n {
            let mut c = self.conn.clone();
            let raw: Vec<String> = c
                .zrangebyscore_limit(
                    self.bucket_keys(product, bucket).borrowing(),
                    "-inf",
                    cutoff_ms,
                    0,
                    1000,
                )
                .await
                .context("reading borrowing tickets")?;
            out.extend(raw.iter().filter_map(|t| Ticket::parse(t).ok()));
        }
        Ok(out)
    }

    /// The sweeper's end of a borrow its gateway never finished (module docs). Returns how
    /// many units went back on sale.
    pub async fn void_borrow(&self, ticket: &Ticket) -> anyhow::Result<u64> {
        let back = self.give_up_borrow(ticket, BorrowEnd::Void).await?;
        if let Some(back) = back {
            tracing::warn!(%ticket, units_back = back, "a borrow its gateway never finished was voided");
        }
        Ok(back.unwrap_or(0))
    }

    /// Gives a borrow up: `voiding`, then every loan in every bucket (the home one too: it
    /// lends to an order of more than one unit) voided or returned, then `end` (`failed`).
    /// `None` when the ticket was no longer borrowing (someone else ended it), else the units
    /// that went back on sale.
    async fn give_up_borrow(&self, ticket: &Ticket, end: BorrowEnd) -> anyhow::Result<Option<u64>> {
        if !self.settle_borrow(ticket, BorrowEnd::Voiding).await? {
            return Ok(None);
        }
        let product = ticket.product();
        let mut back = 0;
        for donor in 0..self.buckets(product).await? {
            let keys = self.bucket_keys(product, donor);
            back += self
                .run(&Void { keys, ticket })
                .await
                .with_context(|| format!("in bucket {donor}"))?;
        }
        self.settle_borrow(ticket, end).await?;
        Ok(Some(back))
    }

    /// Reconcile of a product in buckets, first step: every bucket stops selling (its stock
    /// key goes, so buys answer `503` while it is rebuilt) and every borrow in flight is voided,
    /// so nothing moves between the buckets while they are rebuilt one by one.
    pub async fn freeze(&self, product: ProductId) -> anyhow::Result<()> {
        let n = self.buckets(product).await?;
        for bucket in 0..n {
            let mut c = self.conn.clone();
            let _: () = c
                .del(self.bucket_keys(product, bucket).stock())
                .await
                .context("freezing a bucket")?;
        }
        for ticket in self.stale_borrows(product, i64::MAX).await? {
            self.void_borrow(&ticket).await?;
        }
        Ok(())
    }

    /// The units in flight (of tickets pending or processing) in one bucket: each pending
    /// ticket's `qty` (1 when its record has none, or is gone), read from the records
    /// themselves (reconcile's count, not the hot path's `pending_extra`).
    pub async fn in_flight(&self, product: ProductId, bucket: u16) -> anyhow::Result<i64> {
        let mut c = self.conn.clone();
        let k = self.bucket_keys(product, bucket);
        let tickets: Vec<String> = c
            .zrange(k.pending(), 0, -1)
            .await
            .context("reading in-flight tickets")?;
        let mut units = 0;
        for chunk in tickets.chunks(500) {
            let mut pipe = redis::pipe();
            for t in chunk {
                match Ticket::parse(t) {
                    Ok(t) => pipe.hget(k.ticket(&t), "qty"),
                    // Not a ticket: it holds one place, as it counted before.
                    Err(_) => pipe.cmd("ECHO").arg(1),
                };
            }
            let qty: Vec<Option<i64>> = pipe
                .query_async(&mut c)
                .await
                .context("reading in-flight quantities")?;
            units += qty.into_iter().map(|q| q.unwrap_or(1)).sum::<i64>();
        }
        Ok(units)
    }

    /// Reconcile, last step, for one bucket of a product in `buckets`: `m.mysql_stock` is the
    /// bucket's stock itself, and the counters are the bucket's tickets. The bucket's initial
    /// becomes what it holds, and its loans start over. Returns the stock set.
    pub async fn rebuild_bucket(
        &self,
        product: ProductId,
        bucket: u16,
        buckets: u16,
        m: &Rebuild,
    ) -> anyhow::Result<i64> {
        self.run_rebuild(product, bucket, buckets, m).await
    }
}
