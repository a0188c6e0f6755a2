//! Live streams (server-sent events) of a buyer's ticket, pushed rather than polled.
//!
//! The scripts that change a ticket's status publish the ticket and its record as it now is
//! on their bucket's `events` channel (`notify.lua`). Each gateway holds one subscription to
//! every such channel of its namespace ([`listener`]) and hands the new state to the streams
//! it serves for that ticket ([`Streams`]), which send it without reading anything: a burst
//! of confirmations costs no read per stream. A state the message cannot tell in full (a
//! payment, whose details MySQL holds; a message without the record) makes the stream read
//! its ticket once. Nothing is read per stream per second: a stream reads on such a change,
//! and once per heartbeat in case a message was lost while the subscription was down.

pub mod listener;
pub mod room;

use actix_web::web::Bytes;
use seckill_shared::store::TicketRecord;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// A ticket's state as the message of its change carried it (`notify.lua`).
#[derive(Debug, PartialEq, Eq)]
pub struct Pushed {
    pub record: TicketRecord,
    /// The payment deadline, when the message carried one (`confirm.lua`): `Some(None)` for an
    /// order without a payment window.
    pub pay_by_ms: Option<Option<i64>>,
}

impl Pushed {
    /// The state in a message's payload after its ticket: a JSON array of field-value pairs.
    /// `None` when it holds no record (or is not such an array).
    pub fn parse(fields: &str) -> Option<Self> {
        let flat: Vec<String> = serde_json::from_str(fields).ok()?;
        let mut h: HashMap<String, String> = flat
            .chunks_exact(2)
            .map(|kv| (kv[0].clone(), kv[1].clone()))
            .collect();
        let pay_by_ms = h.remove("pay_by").map(|v| v.parse::<i64>().ok());
        let record = TicketRecord::from_fields(&h).ok()??;
        Some(Self { record, pay_by_ms })
    }
}

/// What a stream wakes to: the latest pushed state of its ticket, or `None` when it must read
/// the ticket (a message without the state, or a subscription that was down).
pub type Change = Option<Arc<Pushed>>;

/// The streams open on this gateway: per ticket, the latest change (a stream never misses
/// one: a `watch` keeps the latest), and how many are open per buyer and in all.
pub struct Streams {
    inner: Mutex<Inner>,
    max_streams: usize,
    max_per_buyer: usize,
    /// Ends every stream when the gateway stops, so that clients reconnect elsewhere.
    pub shutdown: CancellationToken,
}

#[derive(Default)]
struct Inner {
    /// Per ticket: its latest change, and the streams that follow it.
    tickets: HashMap<String, (watch::Sender<Change>, usize)>,
    /// Per buyer: their open streams, oldest first (each one's id and ender).
    buyers: HashMap<u64, Vec<(u64, CancellationToken)>>,
    open: usize,
    next_id: u64,
}

/// Why a stream was not opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// This gateway holds `SECKILL_SSE_MAX_STREAMS` already.
    Full,
}

/// One open stream's place: it wakes on each change of its ticket, and dropping it frees the
/// place.
pub struct Subscription {
    streams: Arc<Streams>,
    ticket: String,
    buyer: u64,
    id: u64,
    pub changes: watch::Receiver<Change>,
    /// Cancelled when a newer stream of the same buyer takes this one's place, or the
    /// gateway stops.
    pub ended: CancellationToken,
}

impl Subscription {
    /// What a stream sends as it ends for `ended`: when a newer stream of the buyer took its
    /// place, a reconnection time of 30 s, so that a buyer with more tabs than the limit does
    /// not have them take each other's place every second; when the gateway stops, nothing
    /// (the client reconnects elsewhere at once).
    pub fn last_words(&self) -> Option<Bytes> {
        (!self.streams.shutdown.is_cancelled()).then(|| Bytes::from_static(EVICTED))
    }
}

/// The end of a stream whose place a newer one of the same buyer took.
const EVICTED: &[u8] = b": a newer stream of this buyer took this one's place\nretry: 30000\n\n";

impl Streams {
    pub fn new(max_streams: usize, max_per_buyer: usize, shutdown: CancellationToken) -> Self {
        Self {
            inner: Mutex::default(),
            max_streams,
            max_per_buyer,
            shutdown,
        }
    }

    /// Opens a stream of `ticket` for `buyer`. A buyer at `SECKILL_SSE_MAX_PER_BUYER` gets it
    /// all the same, and their oldest stream ends: a closed connection is noticed only at the
    /// next write (a heartbeat), so a buyer who reloads the page must not be refused for the
    /// streams they left. Refused when the gateway holds `SECKILL_SSE_MAX_STREAMS` (and the
    /// buyer none to give up).
    pub fn open(self: &Arc<Self>, ticket: &str, buyer: u64) -> Result<Subscription, Refused> {
        let mut inner = self.inner.lock().expect("streams lock");
        let held = inner.buyers.get(&buyer).map_or(0, Vec::len);
        if held >= self.max_per_buyer {
            let (_, oldest) = inner.buyers.get_mut(&buyer).expect("held").remove(0);
            oldest.cancel();
        } else if inner.open >= self.max_streams {
            return Err(Refused::Full);
        }
        inner.next_id += 1;
        let id = inner.next_id;
        let ended = self.shutdown.child_token();
        inner
            .buyers
            .entry(buyer)
            .or_default()
            .push((id, ended.clone()));
        inner.open += 1;
        let (version, followers) = inner
            .tickets
            .entry(ticket.to_owned())
            .or_insert_with(|| (watch::channel(None).0, 0));
        *followers += 1;
        let changes = version.subscribe();
        Ok(Subscription {
            streams: self.clone(),
            ticket: ticket.to_owned(),
            buyer,
            id,
            changes,
            ended,
        })
    }

    /// `ticket` changed: wake its streams on this gateway, if any, with the state `fields`
    /// carry (see [`Pushed::parse`]), parsed only when a stream here follows it.
    pub fn changed(&self, ticket: &str, fields: &str) {
        let inner = self.inner.lock().expect("streams lock");
        if let Some((latest, _)) = inner.tickets.get(ticket) {
            latest.send_replace(Pushed::parse(fields).map(Arc::new));
        }
    }

    /// Every stream reads its ticket again (the subscription was down: a change may have been
    /// missed).
    pub fn changed_all(&self) {
        let inner = self.inner.lock().expect("streams lock");
        for (latest, _) in inner.tickets.values() {
            latest.send_replace(None);
        }
    }

    /// Streams open now.
    pub fn open_count(&self) -> usize {
        self.inner.lock().expect("streams lock").open
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut inner = self.streams.inner.lock().expect("streams lock");
        inner.open -= 1;
        if let Some(held) = inner.buyers.get_mut(&self.buyer) {
            held.retain(|(id, _)| *id != self.id);
            if held.is_empty() {
                inner.buyers.remove(&self.buyer);
            }
        }
        if let Some((_, followers)) = inner.tickets.get_mut(&self.ticket) {
            *followers -= 1;
            if *followers == 0 {
                inner.tickets.remove(&self.ticket);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn streams(max: usize, per_buyer: usize) -> Arc<Streams> {
        Arc::new(Streams::new(max, per_buyer, CancellationToken::new()))
    }

    #[test]
    fn limits_count_open_streams_and_free_on_drop() {
        let s = streams(3, 2);
        let a = s.open("t1", 1).unwrap();
        let b = s.open("t1", 1).unwrap();
        // Over the buyer's limit: the oldest of theirs ends, the new one opens.
        let b2 = s.open("t2", 1).unwrap();
        assert!(a.ended.is_cancelled() && !b.ended.is_cancelled());
        // The gateway is full (a's place is freed only when its stream is dropped).
        assert_eq!(s.open("t3", 3).err(), Some(Refused::Full));
        drop(a);
        let c = s.open("t2", 2).unwrap();
        assert_eq!(s.open("t3", 3).err(), Some(Refused::Full));
        drop(b);
        assert_eq!(s.open_count(), 2);
        let d = s.open("t3", 1).unwrap();
        drop((b2, c, d));
        assert_eq!(s.open_count(), 0);
        let inner = s.inner.lock().unwrap();
        assert!(inner.tickets.is_empty() && inner.buyers.is_empty());
    }

    #[tokio::test]
    async fn a_change_wakes_only_its_tickets_streams_and_none_is_missed() {
        let s = streams(10, 10);
        let mut a = s.open("t1", 1).unwrap();
        let mut b = s.open("t2", 2).unwrap();
        s.changed("t1", "");
        s.changed("t1", "");
        s.changed("nobody's", "");
        assert!(a.changes.has_changed().unwrap());
        assert!(!b.changes.has_changed().unwrap());
        a.changes.borrow_and_update();
        assert!(!a.changes.has_changed().unwrap());
        s.changed_all();
        assert!(a.changes.has_changed().unwrap() && b.changes.has_changed().unwrap());
        // A change while the stream was busy is still seen by its next wait.
        b.changes.borrow_and_update();
        s.changed("t2", "");
        tokio::time::timeout(std::time::Duration::from_secs(1), b.changes.changed())
            .await
            .unwrap()
            .unwrap();
    }

    #[test]
    fn a_change_carries_the_record_and_the_deadline() {
        use seckill_shared::store::RecordStatus;
        use seckill_shared::TicketStatus;
        // As notify.lua publishes it after confirm.lua.
        let p = Pushed::parse(
            r#"["status","confirmed","user_id","7","created_at","1000","order_id","12","confirmed_at","2000","pay_by","902000"]"#,
        )
        .unwrap();
        assert_eq!(p.record.state, RecordStatus::Confirmed);
        assert_eq!(p.record.status, TicketStatus::Confirmed);
        assert_eq!((p.record.user_id, p.record.order_id), (7, Some(12)));
        assert_eq!(p.record.confirmed_at_ms, Some(2000));
        assert_eq!(p.pay_by_ms, Some(Some(902_000)));
        // No payment window.
        let p = Pushed::parse(r#"["status","confirmed","user_id","7","pay_by",""]"#).unwrap();
        assert_eq!(p.pay_by_ms, Some(None));
        // Any other change carries no deadline.
        let p =
            Pushed::parse(r#"["status","failed","user_id","7","reason","out_of_stock"]"#).unwrap();
        assert_eq!(
            (p.pay_by_ms, p.record.reason.as_deref()),
            (None, Some("out_of_stock"))
        );
        // A record gone (an empty hash: cjson's `{}` is refused as well), a status unknown,
        // or not an array: nothing pushed, the stream reads.
        for bad in ["[]", "{}", r#"["status","weird"]"#, "", "7"] {
            assert_eq!(Pushed::parse(bad), None, "{bad}");
        }
        // A change wakes with its state; a subscription that was down wakes with none.
        let s = streams(10, 10);
        let mut a = s.open("t1", 7).unwrap();
        s.changed("t1", r#"["status","paid","user_id","7"]"#);
        let got = a.changes.borrow_and_update().clone().unwrap();
        assert_eq!(got.record.state, RecordStatus::Paid);
        s.changed_all();
        assert!(a.changes.borrow_and_update().is_none());
    }
}
