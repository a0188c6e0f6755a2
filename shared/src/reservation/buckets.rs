//! Stock buckets: a hot product's stock split over N hash tags (see the module docs of
//! `store`), and the loan protocol that keeps every unit reachable by every buyer.
//!
//! A buy runs `reserve.lua` in the buyer's home bucket. When that bucket is empty, the script
//! holds the buyer's place there (`borrowing`: the buyer has a live ticket, so a second buy
//! finds it) and the gateway borrows:
//! 1. `borrow.lua` in the other buckets, one after another, until one gives a unit (the loan
//!    is recorded per ticket, `taken`);
//! 2. `settle_borrow.lua` in the home bucket: `lent` turns the ticket `pending` (a normal
//!    reservation from there on), or `none`, when no bucket had a unit, fails it and answers
//!    sold out. Only then is the sold-out marker set: every bucket was empty. A bucket found
//!    without its stock key (Redis lost it) makes the answer "unknown product" instead, so
//!    the gateway has the product rebuilt and answers `503`, never a false sold out.
//!
//! A gateway can die between the steps. The sweeper finds a ticket left `borrowing` past the
//! pending timeout, turns it `voiding` (so its gateway can no longer finish it), voids its
//! loans in every other bucket (`void.lua`: a loan taken goes back, one not taken can no
//! longer be), and fails it. The buyer never had a `202` for it.

use super::call::{Reservation, ReserveStep, UserLimit};
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
        mut limit: Option<&UserLimit>,
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
                .reserve_step(&ticket, user, now_ms, admission_verified, n, limit)
                .await?;
            // The token is taken once, whatever comes next.
            limit = None;
            match step {
                ReserveStep::Done(r) => return Ok((ticket, r)),
                ReserveStep::Borrow => {
                    let r = self.borrow(&ticket, n).await?;
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

    /// Steps 1 and 2 of a borrow (module docs). An error leaves the ticket `borrowing` for the
    /// sweeper, which gives back whatever was taken.
    async fn borrow(&self, ticket: &Ticket, n: u16) -> anyhow::Result<Reservation> {
        let home = ticket.bucket();
        // Start at a random other bucket, so that borrowers spread over the donors.
        let start = rand::random::<u16>() % (n - 1);
        let mut unloaded = false;
        for i in 0..n - 1 {
            let donor = (home + 1 + (start + i) % (n - 1)) % n;
            let keys = self.bucket_keys(ticket.product(), donor);
            let got = self
                .run(&Borrow { keys, ticket })
                .await
                .with_context(|| format!("in bucket {donor}"))?;
            match got {
                Borrowed::Lent => {
                    anyhow::ensure!(
                        self.settle_borrow(ticket, BorrowEnd::Lent).await?,
                        "the borrow of {ticket} was voided before it finished; its unit went back"
                    );
                    return Ok(Reservation::Reserved);
                }
                Borrowed::NotLoaded => unloaded = true,
                Borrowed::NoUnit => {}
            }
        }
        self.settle_borrow(ticket, BorrowEnd::None).await?;
        // A bucket Redis lost may hold units: not sold out, but a product to rebuild.
        Ok(if unloaded {
            Reservation::UnknownProduct
        } else {
            Reservation::SoldOut
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
    /// many units went back on sale (0 or 1).
    pub async fn void_borrow(&self, ticket: &Ticket) -> anyhow::Result<u64> {
        if !self.settle_borrow(ticket, BorrowEnd::Voiding).await? {
            return Ok(0);
        }
        let product = ticket.product();
        let mut back = 0;
        for donor in (0..self.buckets(product).await?).filter(|b| *b != ticket.bucket()) {
            let keys = self.bucket_keys(product, donor);
            let unit_back = self
                .run(&Void { keys, ticket })
                .await
                .with_context(|| format!("in bucket {donor}"))?;
            back += u64::from(unit_back);
        }
        self.settle_borrow(ticket, BorrowEnd::Void).await?;
        tracing::warn!(%ticket, units_back = back, "a borrow its gateway never finished was voided");
        Ok(back)
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

    /// The tickets in flight (pending or processing) in one bucket.
    pub async fn in_flight(&self, product: ProductId, bucket: u16) -> anyhow::Result<i64> {
        let mut c = self.conn.clone();
        c.zcard(self.bucket_keys(product, bucket).pending())
            .await
            .context("reading in-flight tickets")
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
