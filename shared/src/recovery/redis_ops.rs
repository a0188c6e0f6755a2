//! The Redis steps of recovery: rebuilding a product Redis lost, restoring units of settled
//! orders, pruning the pending set, and the epoch that tells a Redis that came back old.

use super::scripts::{Epoch, EpochCheck, FailReason, Rebuild, RebuildBucket, Restore, Settled};
use crate::domain::FailureReason;
use crate::domain::{ProductId, Ticket};
use crate::store::{by_bucket, TicketStore};
use anyhow::Context;
use redis::AsyncCommands;

impl TicketStore {
    /// A failed record takes `reason`, MySQL's (`fail_reason.lua`). `true` when it changed.
    pub async fn follow_failure(
        &self,
        ticket: &Ticket,
        reason: FailureReason,
    ) -> anyhow::Result<bool> {
        self.run(&FailReason {
            keys: self.ticket_keys(ticket),
            ticket,
            reason,
        })
        .await
    }

    /// Tickets of a product still unsettled in Redis and reserved at or before `cutoff_ms`,
    /// at most `limit` per bucket.
    pub async fn unsettled_before(
        &self,
        product: ProductId,
        cutoff_ms: i64,
        limit: isize,
    ) -> anyhow::Result<Vec<Ticket>> {
        let mut out = vec![];
        for bucket in 0..self.buckets(product).await? {
            let mut c = self.conn.clone();
            let raw: Vec<String> = redis::cmd("ZRANGEBYSCORE")
                .arg(self.bucket_keys(product, bucket).pending())
                .arg("-inf")
                .arg(cutoff_ms)
                .arg("LIMIT")
                .arg(0)
                .arg(limit)
                .query_async(&mut c)
                .await
                .context("reading pending tickets")?;
            out.extend(raw.iter().filter_map(|t| Ticket::parse(t).ok()));
        }
        Ok(out)
    }

    /// Reconcile, step one: write settled records for tickets MySQL has settled, of one kind
    /// (orders of one status, or failures). `ttl_secs` is how long the records live.
    /// Returns how many records changed.
    pub async fn restore_settled(
        &self,
        product: ProductId,
        settled: Settled<'_>,
        ttl_secs: u64,
    ) -> anyhow::Result<u64> {
        let mut changed = 0;
        match settled {
            Settled::Orders { status, orders } => {
                for (bucket, idx) in by_bucket(orders.iter().map(|o| &o.ticket)) {
                    let part: Vec<_> = idx.iter().map(|&i| orders[i].clone()).collect();
                    for chunk in part.chunks(500) {
                        let orders = Settled::Orders {
                            status,
                            orders: chunk,
                        };
                        changed += self.restore_in(product, bucket, orders, ttl_secs).await?;
                    }
                }
            }
            Settled::Failed(failed) => {
                for (bucket, idx) in by_bucket(failed.iter().map(|f| &f.ticket)) {
                    let part: Vec<_> = idx.iter().map(|&i| failed[i].clone()).collect();
                    for chunk in part.chunks(500) {
                        let failed = Settled::Failed(chunk);
                        changed += self.restore_in(product, bucket, failed, ttl_secs).await?;
                    }
                }
            }
        }
        Ok(changed)
    }

    async fn restore_in(
        &self,
        product: ProductId,
        bucket: u16,
        settled: Settled<'_>,
        ttl_secs: u64,
    ) -> anyhow::Result<u64> {
        self.run(&Restore {
            keys: self.bucket_keys(product, bucket),
            settled,
            ttl_secs,
        })
        .await
    }

    /// Reconcile, step two, for a product in one bucket: counters and stock from MySQL.
    /// Returns the new stock. (A product in buckets: [`Self::rebuild_bucket`].)
    pub async fn rebuild(&self, product: ProductId, m: &Rebuild) -> anyhow::Result<i64> {
        self.run_rebuild(product, 0, 1, m).await
    }

    pub(crate) async fn run_rebuild(
        &self,
        product: ProductId,
        bucket: u16,
        buckets: u16,
        m: &Rebuild,
    ) -> anyhow::Result<i64> {
        self.run(&RebuildBucket {
            keys: self.bucket_keys(product, bucket),
            mysql: m,
            buckets,
            now_ms: crate::now_ms(),
        })
        .await
    }

    /// Drops `pending` entries whose ticket record is gone (expired).
    pub async fn prune_pending(&self, product: ProductId) -> anyhow::Result<u64> {
        let mut pruned = 0;
        for bucket in 0..self.buckets(product).await? {
            let k = self.bucket_keys(product, bucket);
            let mut c = self.conn.clone();
            let members: Vec<String> = c
                .zrange(k.pending(), 0, -1)
                .await
                .context("reading pending")?;
            for m in members {
                let Ok(t) = Ticket::parse(&m) else { continue };
                let exists: bool = c.exists(k.ticket(&t)).await.context("checking a ticket")?;
                if !exists {
                    let n: u64 = c.zrem(k.pending(), &m).await.context("pruning pending")?;
                    pruned += n;
                }
            }
        }
        Ok(pruned)
    }

    /// Checks that each bucket of a product holds the state of the Redis server's current run,
    /// and drops the stock of a bucket that does not (it may be old: see `epoch.lua`), so that
    /// the product counts as lost and is rebuilt. Returns how many buckets were dropped.
    pub async fn check_epoch(&self, product: ProductId) -> anyhow::Result<u16> {
        let mut dropped = 0;
        for bucket in 0..self.buckets(product).await? {
            let keys = self.bucket_keys(product, bucket);
            if self.run(&Epoch { keys }).await? == EpochCheck::Dropped {
                dropped += 1;
            }
        }
        Ok(dropped)
    }
}
