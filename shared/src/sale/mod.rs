//! The sale: preloading a product's stock into Redis (split over its buckets), ending it,
//! and its counts.

pub mod scripts;

use crate::domain::ProductId;
use crate::store::TicketStore;
use anyhow::Context;
use scripts::Preload;
use std::collections::HashMap;
use std::time::Duration;

/// Redis view of a product, for the admin API and the auditor.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ProductCounts {
    pub stock: Option<i64>,
    pub initial: Option<i64>,
    /// Units reserved and not settled yet (of the `pending_orders`).
    pub pending: i64,
    /// Tickets reserved and not settled yet.
    pub pending_orders: i64,
    /// Units sold: confirmed, paid or not yet. Every counter counts units.
    pub confirmed: i64,
    pub paid: i64,
    pub cancelled: i64,
    pub failed: i64,
    pub buyers: i64,
    /// The end of the sale, ms since the epoch, when it has one.
    pub ends_at_ms: Option<i64>,
    /// Each bucket, for a product split into several (else empty).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub buckets: Vec<BucketCounts>,
}

/// The Redis counts of one stock bucket. Each bucket keeps
/// `initial − lent + borrowed = stock + pending + confirmed`, and over all buckets the loans
/// cancel out (`Σ lent = Σ borrowed`), so the product keeps `initial = stock + pending +
/// confirmed`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct BucketCounts {
    pub bucket: u16,
    pub stock: Option<i64>,
    /// The bucket's share of the stock when loaded or rebuilt.
    pub initial: Option<i64>,
    /// Units in flight: the pending tickets' and, beyond one each, the meta's
    /// `pending_extra`.
    pub pending: i64,
    /// Tickets in flight.
    pub pending_orders: i64,
    pub confirmed: i64,
    pub paid: i64,
    pub cancelled: i64,
    pub failed: i64,
    pub buyers: i64,
    /// Units this bucket gave to buyers of other buckets.
    pub lent: i64,
    /// Units this bucket's buyers took from other buckets.
    pub borrowed: i64,
    /// Tickets holding a buyer's place here while they borrow.
    pub borrowing: i64,
    #[serde(skip)]
    pub ends_at_ms: Option<i64>,
}

/// `total` split over `n` buckets as evenly as it goes: the first `total % n` get one more.
pub fn split(total: i64, n: u16) -> Vec<i64> {
    let n = i64::from(n.max(1));
    let total = total.max(0);
    (0..n)
        .map(|b| total / n + i64::from(b < total % n))
        .collect()
}

impl TicketStore {
    /// Loads a product for sale, its MySQL stock split evenly over `buckets` buckets.
    /// Returns the Redis stock it set (all buckets).
    pub async fn preload(
        &self,
        product: ProductId,
        mysql_stock: i64,
        starts_at_ms: Option<i64>,
        ends_at_ms: Option<i64>,
        buckets: u16,
        max_per_buyer: u16,
    ) -> anyhow::Result<i64> {
        let buckets = buckets.max(1);
        self.learn_buckets(product, buckets);
        let mut total = 0;
        for (bucket, share) in split(mysql_stock, buckets).into_iter().enumerate() {
            total += self
                .run(&Preload {
                    keys: self.bucket_keys(product, bucket as u16),
                    mysql_stock: share,
                    starts_at_ms,
                    ends_at_ms,
                    now_ms: crate::now_ms(),
                    buckets,
                    max_per_buyer,
                })
                .await?;
        }
        Ok(total)
    }

    /// A closed sale's keys (stock, meta, buyers, pending, located, a bucket's loans, and the
    /// waiting room's) expire after `grace`. Ticket records keep their own TTL.
    pub async fn expire_sale(&self, product: ProductId, grace: Duration) -> anyhow::Result<()> {
        let secs = grace.as_secs().max(1) as i64;
        for bucket in 0..self.buckets(product).await? {
            let k = self.bucket_keys(product, bucket);
            let mut c = self.conn.clone();
            let mut pipe = redis::pipe();
            for key in [
                k.stock(),
                k.meta(),
                k.buyers(),
                k.pending(),
                k.located(),
                k.loans(),
                k.borrowing(),
                k.queue(),
                k.admitted(),
                k.queue_done(),
                k.queue_ids(),
                k.pow_used(),
            ] {
                pipe.expire(key, secs).ignore();
            }
            let _: () = pipe
                .query_async(&mut c)
                .await
                .context("expiring a closed sale's keys")?;
        }
        Ok(())
    }

    /// The Redis counts of a product, summed over its buckets; `buckets` lists each bucket
    /// of a product split into several.
    pub async fn counts(&self, product: ProductId) -> anyhow::Result<ProductCounts> {
        let n = self.buckets(product).await?;
        let mut each = Vec::with_capacity(n as usize);
        for bucket in 0..n {
            each.push(self.bucket_counts(product, bucket).await?);
        }
        let sum = |f: fn(&BucketCounts) -> i64| each.iter().map(f).sum::<i64>();
        let first = each[0].clone();
        Ok(ProductCounts {
            stock: each.iter().map(|b| b.stock).sum::<Option<i64>>(),
            initial: each.iter().map(|b| b.initial).sum::<Option<i64>>(),
            pending: sum(|b| b.pending),
            pending_orders: sum(|b| b.pending_orders),
            confirmed: sum(|b| b.confirmed),
            paid: sum(|b| b.paid),
            cancelled: sum(|b| b.cancelled),
            failed: sum(|b| b.failed),
            buyers: sum(|b| b.buyers),
            ends_at_ms: first.ends_at_ms,
            buckets: if n > 1 { each } else { vec![] },
        })
    }

    /// The Redis counts of one bucket.
    pub async fn bucket_counts(
        &self,
        product: ProductId,
        bucket: u16,
    ) -> anyhow::Result<BucketCounts> {
        let k = self.bucket_keys(product, bucket);
        let mut c = self.conn.clone();
        // Text, parsed field by field: the meta hash also holds decimals (a waiting room's
        // `wr_factor`, `wr_credit`).
        #[allow(clippy::type_complexity)]
        let (stock, meta, pending, buyers, borrowing): (
            Option<i64>,
            HashMap<String, String>,
            i64,
            i64,
            i64,
        ) = redis::pipe()
            .get(k.stock())
            .hgetall(k.meta())
            .zcard(k.pending())
            .hlen(k.buyers())
            .zcard(k.borrowing())
            .query_async(&mut c)
            .await
            .context("reading product counts")?;
        let int = |field: &str| -> anyhow::Result<Option<i64>> {
            meta.get(field)
                .map(|v| v.parse::<i64>())
                .transpose()
                .with_context(|| format!("meta field {field} is not a whole number"))
        };
        Ok(BucketCounts {
            bucket,
            stock,
            initial: int("initial")?,
            pending: pending + int("pending_extra")?.unwrap_or(0),
            pending_orders: pending,
            confirmed: int("confirmed")?.unwrap_or(0),
            paid: int("paid")?.unwrap_or(0),
            cancelled: int("cancelled")?.unwrap_or(0),
            failed: int("failed")?.unwrap_or(0),
            buyers,
            lent: int("lent")?.unwrap_or(0),
            borrowed: int("borrowed")?.unwrap_or(0),
            borrowing,
            ends_at_ms: int("ends_at")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stock_splits_evenly_and_whole() {
        assert_eq!(split(10, 4), vec![3, 3, 2, 2]);
        assert_eq!(split(3, 4), vec![1, 1, 1, 0]);
        assert_eq!(split(0, 2), vec![0, 0]);
        assert_eq!(split(-5, 2), vec![0, 0]);
        assert_eq!(split(7, 1), vec![7]);
        for total in 0..50 {
            for n in 1..9u16 {
                let s = split(total, n);
                assert_eq!(s.iter().sum::<i64>(), total);
                assert!(s.iter().max().unwrap() - s.iter().min().unwrap() <= 1);
            }
        }
    }
}
