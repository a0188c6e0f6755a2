//! Live streams of waiting-room entries (`GET /v1/seckill/{p}/queue/{id}/events`).
//!
//! Admission happens when someone calls `queue.lua`; with buyers on streams instead of
//! polling, this gateway calls it for them. One task per product with streams here ticks once
//! a second: one `tick` call admits whoever's turn has come and reads the room's figures.
//! After the start a waiting place moves up by exactly the admissions since it was read
//! (places leave the line only by admission, and later joiners queue behind), so each
//! entry's place is worked out here, not read. An entry is read again (`poll`) only when the
//! admissions since reach its place (it may be admitted), when an admission was taken back to
//! the head of the line (`reserve.lua`, to keep the cap: the places behind it move back), the
//! first time after the start, and every 30 s in any case; an admitted entry, every tick.
//! A stream is told only what is worth an event (see `moved`). Past the sale's end, every
//! entry is read, for its final state (`ended`).

use crate::waiting_room::{shape, Admissions};
use seckill_shared::api::QueueBody;
use seckill_shared::store::TicketStore;
use seckill_shared::waiting_room::{QueueOp, QueueState, RoomFigures};
use seckill_shared::{now_ms, ProductId, UserId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How often a room's task ticks.
pub const TICK: Duration = Duration::from_secs(1);
/// A place that moved by less than a twentieth is told after this long.
const SLOW_MS: i64 = 5_000;
/// A tick reads the whole line when this many places are stale.
const LINE_AT: usize = 32;
/// A tick lets the thread's other tasks run after this many entries.
const YIELD_EVERY: usize = 256;
/// An entry's place is read again at least this often.
const REREAD_MS: i64 = 30_000;

/// The waiting rooms with streams on this gateway.
pub struct Rooms {
    rooms: Mutex<HashMap<ProductId, Arc<Room>>>,
    store: TicketStore,
    admissions: Arc<Admissions>,
    stop: CancellationToken,
}

struct Room {
    product: ProductId,
    entries: Mutex<HashMap<UserId, Entry>>,
}

struct Entry {
    queue_id: String,
    /// The place as last read: entries ahead, and the admissions so far then.
    base: Option<Base>,
    body: watch::Sender<QueueBody>,
    /// When `body` last changed (its streams were told).
    told_at_ms: i64,
    followers: usize,
}

#[derive(Clone, Copy)]
struct Base {
    ahead: u64,
    admitted_total: u64,
    returned_total: u64,
    read_at_ms: i64,
}

/// A stream's hold on its entry: it wakes when the entry's answer changes.
pub struct Following {
    room: Arc<Room>,
    user: UserId,
    pub changes: watch::Receiver<QueueBody>,
}

impl Drop for Following {
    fn drop(&mut self) {
        let mut entries = self.room.entries.lock().expect("room lock");
        if let Some(e) = entries.get_mut(&self.user) {
            e.followers -= 1;
            if e.followers == 0 {
                entries.remove(&self.user);
            }
        }
    }
}

/// Whether `new` is worth a stream's event, after `old`, told `since_ms` ago: a change of
/// state, likelihood or admission; an estimate moved by a fifth; a place that moved by a
/// twentieth (every move near the head of the line), or moved at all after [`SLOW_MS`]. So a
/// place far back, which moves a little every second, is told every few seconds, not every
/// tick.
fn moved(old: &QueueBody, new: &QueueBody, since_ms: i64) -> bool {
    let wait_moved = match (old.estimated_wait_ms, new.estimated_wait_ms) {
        (Some(a), Some(b)) => a.abs_diff(b) * 5 > a.max(b),
        (a, b) => a.is_some() != b.is_some(),
    };
    let place_moved = match (old.position, new.position) {
        (Some(a), Some(b)) => a != b && (a.abs_diff(b) * 20 >= a.max(b) || since_ms >= SLOW_MS),
        (a, b) => a != b,
    };
    old.state != new.state
        || place_moved
        || old.unlikely != new.unlikely
        || old.admission_token != new.admission_token
        || wait_moved
}

impl Rooms {
    pub fn new(store: TicketStore, admissions: Arc<Admissions>, stop: CancellationToken) -> Self {
        Self {
            rooms: Mutex::default(),
            store,
            admissions,
            stop,
        }
    }

    /// Follows `user`'s entry `queue_id`, whose answer was just `first` (from `found`).
    pub fn follow(
        self: &Arc<Self>,
        product: ProductId,
        user: UserId,
        queue_id: &str,
        first: &QueueBody,
        found: &QueueState,
    ) -> Following {
        // Under the rooms' lock, as the task checks for no entries: a room it ends is never
        // given a new entry.
        let mut rooms = self.rooms.lock().expect("rooms lock");
        let room = rooms
            .entry(product)
            .or_insert_with(|| {
                let room = Arc::new(Room {
                    product,
                    entries: Mutex::default(),
                });
                tokio::spawn(self.clone().drive(room.clone()));
                room
            })
            .clone();
        let mut entries = room.entries.lock().expect("room lock");
        let entry = entries.entry(user).or_insert_with(|| Entry {
            queue_id: queue_id.to_owned(),
            base: base_of(found, now_ms()),
            body: watch::channel(first.clone()).0,
            told_at_ms: now_ms(),
            followers: 0,
        });
        entry.followers += 1;
        let changes = entry.body.subscribe();
        drop(entries);
        drop(rooms);
        Following {
            room,
            user,
            changes,
        }
    }

    /// A room's task: ticks until no stream follows any of its entries.
    async fn drive(self: Arc<Self>, room: Arc<Room>) {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            {
                let mut rooms = self.rooms.lock().expect("rooms lock");
                if room.entries.lock().expect("room lock").is_empty() {
                    rooms.remove(&room.product);
                    return;
                }
            }
            if let Err(e) = self.tick(&room).await {
                tracing::debug!(error = format!("{e:#}"), product = %room.product, "a waiting room's tick failed; the next one tries again");
            }
        }
    }

    async fn tick(&self, room: &Room) -> anyhow::Result<()> {
        let now = now_ms();
        let ttl = self.admissions.ttl_ms;
        let anyone = UserId::new(1).expect("1 is a user id");
        let figures = match self
            .store
            .queue(room.product, anyone, QueueOp::Tick, now, ttl)
            .await?
        {
            QueueState::Room(f) => f,
            // Gone from Redis (being rebuilt), or no waiting room now: each entry is read.
            _ => RoomFigures {
                admitted_total: u64::MAX,
                sold_out: false,
                admit_per_sec: 0.0,
                starts_at_ms: 0,
                measured_per_sec: None,
                stock: 0,
                in_flight: 0,
                admitted_now: 0,
                returned_total: u64::MAX,
                ended: false,
            },
        };
        let started = now >= figures.starts_at_ms;
        let snapshot: Vec<(UserId, String, Option<Base>)> = room
            .entries
            .lock()
            .expect("room lock")
            .iter()
            .map(|(u, e)| (*u, e.queue_id.clone(), e.base))
            .collect();
        // A place that cannot be worked out from the figures is read again: when many are,
        // the whole line is read at once instead (at the start, and every 30 s).
        let stale = |b: &Option<Base>| {
            b.is_none_or(|b| {
                now - b.read_at_ms >= REREAD_MS || b.returned_total != figures.returned_total
            })
        };
        let line = match started && !figures.ended {
            true if snapshot.iter().filter(|(_, _, b)| stale(b)).count() >= LINE_AT => {
                Some(self.store.queue_line(room.product).await?)
            }
            _ => None,
        };
        for (i, (user, queue_id, base)) in snapshot.into_iter().enumerate() {
            // Every so many entries, the other tasks of this thread run (each entry told
            // wakes its stream): a ticket's event waits behind a few hundred place updates,
            // not behind every entry of a large room.
            if i % YIELD_EVERY == YIELD_EVERY - 1 {
                tokio::task::yield_now().await;
            }
            // A stale place is taken from the line, if it was read; one not in the line (it
            // may be admitted) is polled below.
            let base = match &line {
                Some(l) if stale(&base) => l.places.get(&user.get()).map(|&ahead| Base {
                    ahead,
                    admitted_total: l.admitted_total,
                    returned_total: l.returned_total,
                    read_at_ms: now,
                }),
                _ => base,
            };
            // Worked out from the admissions since the place was read, while that holds (and
            // the sale has not ended: then each entry is read, for its final state). A place
            // read after the figures (from the line) is as it was read.
            let worked_out = base
                .filter(|b| started && !figures.ended && now - b.read_at_ms < REREAD_MS)
                .filter(|b| b.returned_total == figures.returned_total)
                .and_then(|b| {
                    let since = figures.admitted_total.saturating_sub(b.admitted_total);
                    b.ahead.checked_sub(since)
                });
            let (found, new_base) = match (started, worked_out) {
                (false, _) if figures.admitted_total != u64::MAX && !figures.ended => (
                    QueueState::Waiting {
                        queue_id: queue_id.clone(),
                        ahead: None,
                        sold_out: figures.sold_out,
                        admit_per_sec: figures.admit_per_sec,
                        starts_at_ms: figures.starts_at_ms,
                        measured_per_sec: figures.measured_per_sec,
                        unlikely: false,
                        admitted_total: figures.admitted_total,
                        returned_total: figures.returned_total,
                    },
                    base,
                ),
                (true, Some(ahead)) => (
                    QueueState::Waiting {
                        queue_id: queue_id.clone(),
                        ahead: Some(ahead),
                        sold_out: figures.sold_out,
                        admit_per_sec: figures.admit_per_sec,
                        starts_at_ms: figures.starts_at_ms,
                        measured_per_sec: figures.measured_per_sec,
                        unlikely: figures.unlikely(ahead),
                        admitted_total: figures.admitted_total,
                        returned_total: figures.returned_total,
                    },
                    base,
                ),
                _ => {
                    let found = self
                        .store
                        .queue(room.product, user, QueueOp::Poll, now, ttl)
                        .await?;
                    let base = base_of(&found, now);
                    (found, base)
                }
            };
            let Ok(body) = shape(
                &self.admissions,
                room.product,
                user,
                found,
                Some(&queue_id),
                now,
            ) else {
                continue;
            };
            let mut entries = room.entries.lock().expect("room lock");
            if let Some(e) = entries.get_mut(&user) {
                e.base = new_base;
                let since_ms = now - e.told_at_ms;
                if e.body.send_if_modified(|old| {
                    let changed = moved(old, &body, since_ms);
                    if changed {
                        *old = body;
                    }
                    changed
                }) {
                    e.told_at_ms = now;
                }
            }
        }
        Ok(())
    }
}

/// The place `found` says, as a base to work out later places from.
fn base_of(found: &QueueState, now: i64) -> Option<Base> {
    match found {
        QueueState::Waiting {
            ahead: Some(ahead),
            admitted_total,
            returned_total,
            ..
        } => Some(Base {
            ahead: *ahead,
            admitted_total: *admitted_total,
            returned_total: *returned_total,
            read_at_ms: now,
        }),
        _ => None,
    }
}

/// Whether a stream of an entry in this state is over. Not `admitted`: an admission can be
/// taken back to the head of the line (to keep the cap) until the buyer buys.
pub fn is_final(body: &QueueBody) -> bool {
    matches!(body.state.as_str(), "expired" | "bought" | "ended")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(position: Option<u64>, wait: Option<u64>) -> QueueBody {
        QueueBody {
            queue_id: "0".repeat(32),
            state: "waiting".into(),
            position,
            ahead: position.map(|p| p - 1),
            estimated_wait_ms: wait,
            unlikely: false,
            refresh_after_ms: 1000,
            admission_token: None,
            admitted_until_ms: None,
        }
    }

    #[test]
    fn only_a_move_is_worth_an_event() {
        let a = waiting(Some(10), Some(10_000));
        let soon = 1000;
        assert!(!moved(&a, &a.clone(), soon));
        assert!(!moved(&a, &a.clone(), SLOW_MS), "nothing moved");
        assert!(!moved(&a, &waiting(Some(10), Some(9_000)), soon), "a tenth");
        assert!(
            moved(&a, &waiting(Some(10), Some(7_000)), soon),
            "three tenths"
        );
        assert!(
            moved(&a, &waiting(Some(9), Some(10_000)), soon),
            "near the head"
        );
        assert!(moved(&a, &waiting(Some(10), None), soon));
        let mut b = a.clone();
        b.unlikely = true;
        assert!(moved(&a, &b, soon));
        let mut c = a.clone();
        c.state = "sold_out".into();
        assert!(moved(&a, &c, soon));
        // Far back: a small move waits, a twentieth does not.
        let far = waiting(Some(10_000), Some(200_000));
        let near = |p| waiting(Some(p), Some(200_000));
        assert!(!moved(&far, &near(9_950), soon));
        assert!(moved(&far, &near(9_950), SLOW_MS));
        assert!(moved(&far, &near(9_500), soon));
    }
}
