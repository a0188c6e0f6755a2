//! Locations: where each accepted order landed in Kafka (partition, offset), kept per stock
//! bucket in Redis so that the sweeper can tell an order Kafka holds from one it lost.

pub mod located;
pub mod scripts;

pub use located::{located_entry, Located, HOLD_LOCATED_MS, MAX_LOCATED};

use crate::domain::{ProductId, Ticket};
use crate::store::{by_bucket, TicketStore};
use anyhow::Context;
use located::parse_located_entry;
use redis::AsyncCommands;
use scripts::{Locate, LocateHeld, TrimLocated};
use std::collections::HashMap;

impl TicketStore {
    /// Records where the orders of one product landed in Kafka, one entry of each bucket's
    /// `located` list. Returns how many were recorded.
    pub async fn locate(&self, product: ProductId, located: &[Located]) -> anyhow::Result<u64> {
        for (bucket, idx) in by_bucket(located.iter().map(|l| &l.ticket)) {
            let part: Vec<_> = idx.iter().map(|&i| located[i].clone()).collect();
            for located in part.chunks(MAX_LOCATED) {
                let keys = self.bucket_keys(product, bucket);
                self.run(&Locate { keys, located }).await?;
            }
        }
        Ok(located.len() as u64)
    }

    /// Where the orders of one stock bucket landed in Kafka, as the gateways recorded them
    /// (ticket → (partition, offset)), for the entries not trimmed yet ([`Self::trim_located`]:
    /// no entry with a ticket still in flight is).
    pub async fn locations(
        &self,
        product: ProductId,
        bucket: u16,
    ) -> anyhow::Result<HashMap<String, (i32, i64)>> {
        let mut c = self.conn.clone();
        let entries: Vec<String> = c
            .lrange(self.bucket_keys(product, bucket).located(), 0, -1)
            .await
            .context("reading Kafka locations")?;
        let mut out = HashMap::new();
        for entry in &entries {
            parse_located_entry(entry, &mut out);
        }
        Ok(out)
    }

    /// Records on a held ticket's own record where a buy again published its order again,
    /// while it is still `pending` (`locate_held.lua`); the sweeper never expires a ticket
    /// located so. `false` when it is no longer pending.
    pub async fn locate_held(
        &self,
        ticket: &Ticket,
        partition: i32,
        offset: i64,
    ) -> anyhow::Result<bool> {
        self.run(&LocateHeld {
            keys: self.ticket_keys(ticket),
            ticket,
            partition,
            offset,
        })
        .await
    }

    /// Where one ticket's order landed in Kafka, once its gateway recorded it (and while its
    /// entry is not trimmed).
    pub async fn location(&self, ticket: &Ticket) -> anyhow::Result<Option<(i32, i64)>> {
        let all = self.locations(ticket.product(), ticket.bucket()).await?;
        Ok(all.get(ticket.as_str()).copied())
    }

    /// Drops the entries at the head of each bucket's `located` list whose tickets were all
    /// reserved before the oldest ticket in flight (`trim_located.lua`), so none is in flight,
    /// looking at `limit` entries per bucket at most.
    /// Returns how many were dropped.
    pub async fn trim_located(&self, product: ProductId, limit: usize) -> anyhow::Result<u64> {
        let mut dropped = 0;
        for bucket in 0..self.buckets(product).await? {
            let keys = self.bucket_keys(product, bucket);
            dropped += self
                .run(&TrimLocated { keys, limit })
                .await
                .context("trimming Kafka locations")?;
        }
        Ok(dropped)
    }
}
