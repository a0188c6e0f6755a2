//! The Redis steps of recovery: rebuilding a product Redis lost, restoring units of settled
//! orders, pruning the pending set, and the epoch that tells a Redis that came back old.

use crate::domain::{ProductId, Ticket};
use crate::store::{by_bucket, RecordStatus, TicketStore};
use anyhow::Context;
use redis::{AsyncCommands, Script};
use std::sync::LazyLock;

static RESTORE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("restore.lua")));
static REBUILD: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("rebuild.lua")));
static EPOCH: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("epoch.lua")));

/// What MySQL says of a product, for [`TicketStore::rebuild`].
#[derive(Debug, Clone, Default)]
pub struct Rebuild {
    pub mysql_stock: i64,
    pub initial: i64,
    /// Orders holding a unit: confirmed or paid.
    pub sold: i64,
    pub paid: i64,
    pub cancelled: i64,
    pub failed: i64,
    pub starts_at_ms: Option<i64>,
    pub ends_at_ms: Option<i64>,
}

impl TicketStore {
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

    /// Reconcile, step one: write settled records for tickets MySQL has settled. `entries`
    /// are (ticket, user, order id or failure reason, cancel reason or ""). `ttl_secs` is how long the records live.
    /// Returns how many records changed.
    pub async fn restore_settled(
        &self,
        product: ProductId,
        status: RecordStatus,
        entries: &[(Ticket, u64, String, String)],
        ttl_secs: u64,
    ) -> anyhow::Result<u64> {
        let mut changed = 0;
        for (bucket, idx) in by_bucket(entries.iter().map(|(t, _, _, _)| t)) {
            let part: Vec<_> = idx.iter().map(|&i| entries[i].clone()).collect();
            changed += self
                .restore_settled_in(product, bucket, status, &part, ttl_secs)
                .await?;
        }
        Ok(changed)
    }

    async fn restore_settled_in(
        &self,
        product: ProductId,
        bucket: u16,
        status: RecordStatus,
        entries: &[(Ticket, u64, String, String)],
        ttl_secs: u64,
    ) -> anyhow::Result<u64> {
        let k = self.bucket_keys(product, bucket);
        let mut changed = 0;
        for chunk in entries.chunks(500) {
            let mut inv = RESTORE.prepare_invoke();
            inv.key(k.buyers()).key(k.pending());
            inv.arg(status.as_str()).arg(ttl_secs);
            for (t, user, detail, why) in chunk {
                inv.key(k.ticket(t));
                inv.arg(t.as_str()).arg(*user).arg(detail).arg(why);
            }
            let mut c = self.conn.clone();
            let n: u64 = inv
                .invoke_async(&mut c)
                .await
                .context("running the restore script")?;
            changed += n;
        }
        Ok(changed)
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
        let k = self.bucket_keys(product, bucket);
        let opt = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_default();
        let initial = if buckets > 1 {
            String::new()
        } else {
            m.initial.to_string()
        };
        let mut c = self.conn.clone();
        REBUILD
            .key(k.stock())
            .key(k.meta())
            .key(k.pending())
            .arg(m.mysql_stock)
            .arg(initial)
            .arg(m.sold)
            .arg(m.failed)
            .arg(opt(m.starts_at_ms))
            .arg(opt(m.ends_at_ms))
            .arg(crate::now_ms())
            .arg(m.paid)
            .arg(m.cancelled)
            .arg(buckets)
            .invoke_async(&mut c)
            .await
            .context("running the rebuild script")
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
            let k = self.bucket_keys(product, bucket);
            let mut c = self.conn.clone();
            let fresh: i64 = EPOCH
                .key(k.stock())
                .key(k.meta())
                .invoke_async(&mut c)
                .await
                .context("running the epoch script")?;
            if fresh == 0 {
                dropped += 1;
            }
        }
        Ok(dropped)
    }
}
