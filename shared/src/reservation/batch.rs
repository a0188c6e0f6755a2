//! Reservations batched per stock bucket (group commit). A buy whose bucket has no
//! reservation call in flight goes to Redis at once, alone; buys that arrive while one is in
//! flight wait for it and then go together, in one call of `reserve.lua`, which decides for
//! each of them in order. So an idle sale adds no wait, and a busy one pays Redis's per-call
//! cost (reading the call, setting up the script, writing the reply), the script's reads of
//! the product and writes of its stock, buyers and pending set, and the gateway's round trip
//! once per batch instead of once per buyer.
//!
//! Each connection ([`TicketStore::on_new_connection`]) batches its own calls: a gateway
//! thread's buys share that thread's connection and its batches.
//!
//! The same lanes carry the Kafka locations of the orders accepted before
//! ([`TicketStore::locate_soon`]): they ride the bucket's next reservation call. When no buyer
//! waits, they wait for one up to [`HOLD_LOCATED`], then go in a call of `locate.lua` of their
//! own: in a busy sale the next buyer comes first, so a location costs no call of its own.

use super::call::{Reply, ReserveCall};
use super::lanes::{Lane, LaneKey, Lanes, Next, Unstick, Waiting};
use super::scripts::Reserve;
use crate::domain::ProductId;
use crate::locations::Located;
use crate::store::TicketStore;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, Notify};

/// Buyers per call at most: a call holds Redis for several µs per buyer.
const MAX_BATCH: usize = 32;

/// How long Kafka locations wait for a buyer of their bucket to ride with, when none waits
/// (fewer than [`crate::locations::MAX_LOCATED`] of them). Only a gateway that dies meanwhile loses
/// them, which leaves its orders to the sweeper's timeout for an unknown location, as a
/// location lost on its way to Redis does.
const HOLD_LOCATED: Duration = Duration::from_millis(crate::locations::HOLD_LOCATED_MS);

impl TicketStore {
    /// Runs `call` in the next batch of its bucket, and returns its reply.
    pub(super) async fn reserve_batched(&self, call: ReserveCall) -> Reply {
        let lane = (call.ticket.product(), call.ticket.bucket());
        let (reply, answer) = oneshot::channel();
        self.enqueue(lane, |l| {
            l.buyers.push(Waiting { call, reply });
            if let Some(wake) = l.hold.take() {
                wake.notify_one();
            }
        });
        match answer.await {
            Ok((reply, shared_by)) => {
                // A traced buy's `redis.reserve` span has the field; elsewhere this records
                // nothing (and with traces off it is not asked).
                if crate::telemetry::enabled() {
                    tracing::Span::current().record("seckill.batch_size", shared_by as i64);
                }
                reply
            }
            Err(_) => Err(anyhow::anyhow!("the reservation batch was dropped")),
        }
    }

    /// Records where an accepted order landed in Kafka, soon and without waiting: in the next
    /// call of its bucket on this connection. A location that cannot be recorded is logged;
    /// its ticket then keeps the sweeper's timeout for an unknown location. Needs a Tokio
    /// runtime.
    pub fn locate_soon(&self, located: Located) {
        let lane = (located.ticket.product(), located.ticket.bucket());
        self.enqueue(lane, |l| l.located.push(located));
    }

    /// Records the Kafka locations still waiting on every connection of this store's family
    /// (itself and those from [`TicketStore::on_new_connection`]), on this store's connection.
    /// The gateway calls it on shutdown, after its HTTP workers (whose runtimes drive the
    /// lanes) have stopped, so no answered order is left without its location. Returns how
    /// many were recorded.
    pub async fn record_waiting_locations(&self) -> usize {
        let lanes: Vec<Arc<Lanes>> = self
            .all_lanes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut by_product: HashMap<ProductId, Vec<Located>> = HashMap::new();
        for l in lanes {
            for located in l.take_located() {
                by_product
                    .entry(located.ticket.product())
                    .or_default()
                    .push(located);
            }
        }
        let mut recorded = 0;
        for (product, located) in by_product {
            recorded += self.locate_or_warn(product, &located).await;
        }
        recorded
    }

    /// Records `located` with a call of its own (`locate.lua`), and says so when it cannot:
    /// those orders then keep the sweeper's timeout for an unknown location. Returns how many
    /// were recorded.
    async fn locate_or_warn(&self, product: ProductId, located: &[Located]) -> usize {
        match self.locate(product, located).await {
            Ok(n) => n as usize,
            Err(e) => {
                tracing::warn!(error = format!("{e:#}"), %product, orders = located.len(), "could not record orders' Kafka offsets");
                0
            }
        }
    }

    /// Adds to a lane, and starts its driver when the lane was idle.
    fn enqueue(&self, lane: LaneKey, add: impl FnOnce(&mut Lane)) {
        let start = match self.lanes.lock().entry(lane) {
            Entry::Occupied(mut l) => {
                add(l.get_mut());
                false
            }
            Entry::Vacant(l) => {
                add(l.insert(Lane::default()));
                true
            }
        };
        if start {
            // The guard goes with the task, so even a task dropped before it first runs (its
            // runtime shutting down) frees the lane.
            let unstick = Unstick {
                lanes: self.lanes.clone(),
                lane,
                armed: true,
                in_call: Vec::new(),
            };
            tokio::spawn(self.clone().drive(lane, unstick));
        }
    }

    /// Sends a lane's calls, in batches, until nothing waits.
    async fn drive(self, lane: LaneKey, mut unstick: Unstick) {
        // Whether the locations waiting have been held for a buyer already.
        let mut held = false;
        loop {
            let next = 'take: {
                let mut lanes = self.lanes.lock();
                let Some(waiting) = lanes
                    .get_mut(&lane)
                    .filter(|l| !(l.buyers.is_empty() && l.located.is_empty()))
                else {
                    lanes.remove(&lane);
                    unstick.armed = false;
                    return;
                };
                waiting.hold = None;
                if waiting.buyers.is_empty()
                    && !held
                    && waiting.located.len() < crate::locations::MAX_LOCATED
                {
                    // A new one each time: a wake-up left over from the last hold must not
                    // cut this one short.
                    let wake = Arc::new(Notify::new());
                    waiting.hold = Some(wake.clone());
                    break 'take Next::Hold(wake);
                }
                let n = one_limit(&waiting.buyers).min(MAX_BATCH);
                let m = waiting.located.len().min(crate::locations::MAX_LOCATED);
                Next::Send(
                    waiting.buyers.drain(..n).collect(),
                    waiting.located.drain(..m).collect(),
                )
            };
            let batch = match next {
                Next::Send(batch, located) => {
                    unstick.in_call = located;
                    batch
                }
                Next::Hold(wake) => {
                    tokio::select! {
                        _ = wake.notified() => {}
                        _ = tokio::time::sleep(HOLD_LOCATED) => {}
                    }
                    held = true;
                    continue;
                }
            };
            held = false;
            if batch.is_empty() {
                self.locate_or_warn(lane.0, &unstick.in_call).await;
                unstick.in_call.clear();
                continue;
            }
            if let Some(observe) = &self.batch_observer {
                observe(batch.len());
            }
            let shared_by = batch.len();
            let (calls, replies): (Vec<_>, Vec<_>) =
                batch.into_iter().map(|w| (w.call, w.reply)).unzip();
            let ran = self.run_batch(lane, &unstick.in_call, &calls).await;
            if ran.is_err() && !unstick.in_call.is_empty() {
                // Once more on their own: a location lost leaves its answered order to the
                // sweeper's timeout for an unknown location.
                self.locate_or_warn(lane.0, &unstick.in_call).await;
            }
            unstick.in_call.clear();
            match ran {
                Ok(answers) => {
                    for (reply, answer) in replies.into_iter().zip(answers) {
                        let _ = reply.send((answer, shared_by));
                    }
                }
                Err(e) => {
                    for reply in replies {
                        let _ = reply.send((Err(anyhow::anyhow!("{e:#}")), shared_by));
                    }
                }
            }
        }
    }

    /// One call of `reserve.lua` for `calls`, all in bucket `lane`, which first records the
    /// Kafka locations `located` of earlier orders of that bucket.
    async fn run_batch(
        &self,
        lane: LaneKey,
        located: &[Located],
        calls: &[ReserveCall],
    ) -> anyhow::Result<Vec<Reply>> {
        let (product, bucket) = lane;
        let replies = self
            .run(&Reserve {
                keys: self.bucket_keys(product, bucket),
                ticket_ttl_secs: self.ticket_ttl_secs,
                located,
                calls,
            })
            .await?;
        anyhow::ensure!(
            replies.len() == calls.len(),
            "the reservation script answered {} of {} buyers",
            replies.len(),
            calls.len()
        );
        Ok(replies)
    }
}

/// How many buyers from the head of `waiting` can go in one call: `reserve.lua` takes one
/// rate and burst per call, so the batch ends before a buyer whose limit has other numbers
/// (gateways of one fleet share one limit; a buyer without a limit goes with any).
fn one_limit(waiting: &[Waiting]) -> usize {
    let mut first: Option<(u64, u64)> = None;
    waiting
        .iter()
        .take_while(|w| match &w.call.limit {
            None => true,
            // Bits, so that even a rate that is no number matches itself (the first buyer always
            // goes).
            Some(l) => {
                let numbers = (l.rate.to_bits(), l.burst);
                *first.get_or_insert(numbers) == numbers
            }
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Ticket, UserId};
    use crate::reservation::UserLimit;

    fn waiting(limit: Option<(f64, u64)>) -> Waiting {
        let user = UserId::new(1).unwrap();
        Waiting {
            call: ReserveCall {
                ticket: Ticket::generate(ProductId::new(1).unwrap()),
                user,
                now_ms: 0,
                admission_verified: false,
                buckets: 1,
                limit: limit.map(|(rate, burst)| UserLimit {
                    key: "k".into(),
                    rate,
                    burst,
                }),
                quantity: 1,
            },
            reply: oneshot::channel().0,
        }
    }

    #[test]
    fn a_call_takes_buyers_while_their_limits_agree() {
        let (a, b) = (Some((5.0, 10)), Some((5.0, 3)));
        let n = |limits: &[Option<(f64, u64)>]| {
            one_limit(&limits.iter().map(|l| waiting(*l)).collect::<Vec<_>>())
        };
        assert_eq!(n(&[]), 0);
        assert_eq!(n(&[a, None, a, a]), 4);
        // A buyer without a limit goes with any call, even before the first limit.
        assert_eq!(n(&[None, b, None, b]), 4);
        assert_eq!(n(&[a, a, b, a]), 2);
        assert_eq!(n(&[None, a, b]), 2);
        assert_eq!(n(&[b, a]), 1);
        // A rate that is no number (the settings refuse one) still makes a call.
        assert_eq!(n(&[Some((f64::NAN, 1)), Some((f64::NAN, 1)), a]), 2);
    }
}
