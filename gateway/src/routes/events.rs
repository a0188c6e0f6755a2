//! Live streams (server-sent events): `GET /v1/orders/{ticket}/events`, a ticket's states
//! pushed to its owner as they happen (see [`crate::events`] for how a change reaches this
//! gateway); and `GET /v1/seckill/{product_id}/queue/{queue_id}/events`, a waiting-room
//! entry's place (see [`crate::events::room`]).
//!
//! A ticket stream:
//! Each event's `data` is the body of `GET /v1/orders/{ticket}`, and its `id` the state's
//! rank: 1 `pending`, 2 `confirmed` (to be paid), 3 a final state (`paid`, `cancelled`,
//! `failed`, or `confirmed` without a payment window). A state
//! is sent once it ranks above the last one sent (or above the `Last-Event-ID` a reconnecting
//! client sends), and the stream ends after a final state. So a client that reconnects, here
//! or on another gateway, gets the state it missed, and never misses the final one.

use crate::auth::Buyer;
use crate::error::{documented as e, ApiError};
use crate::events::room::{self, Following};
use crate::events::{Pushed, Refused, Subscription};
use crate::routes::openapi::schema;
use crate::routes::orders::read_ticket_told;
use crate::routes::queue::{check_queue_id, run as queue_run};
use crate::state::{AppState, ThreadRedis};
use actix_web::http::header;
use actix_web::web::Bytes;
use actix_web::{web, HttpRequest, HttpResponse};
use seckill_shared::api::{QueueBody, TicketBody};
use seckill_shared::waiting_room::QueueOp;
use seckill_shared::{ProductId, Ticket, TicketStatus, UserId};

/// A state's rank, the event's `id`: states only move up. `window`: whether a confirmed
/// order may still be paid or cancelled (it has a payment deadline); one that has none is
/// final.
pub fn rank(status: TicketStatus, window: bool) -> u8 {
    match status {
        TicketStatus::Pending => 1,
        TicketStatus::Confirmed if window => 2,
        TicketStatus::Confirmed
        | TicketStatus::Paid
        | TicketStatus::Cancelled
        | TicketStatus::Failed => FINAL,
    }
}

const FINAL: u8 = 3;

/// The ticket as [`read_ticket_told`] reads it, with its rank: `None` for a confirmed ticket
/// whose deadline MySQL could not say (its Redis copy alone holds none, as while MySQL is
/// down), which may or may not be final.
async fn read_ranked(
    state: &AppState,
    ticket: &Ticket,
    buyer: Option<UserId>,
) -> Result<(TicketBody, Option<u8>), ApiError> {
    let (body, told) = read_ticket_told(state, ticket, buyer).await?;
    let r = match body.status {
        TicketStatus::Confirmed if !told => None,
        status => Some(rank(status, body.pay_by_ms.is_some())),
    };
    Ok((body, r))
}

/// The body and rank of a state pushed with its change (see [`crate::events`]), when the
/// message tells all a read would: `None` for a payment (MySQL holds its body), a confirmation
/// without its deadline (a rebuild's, not a worker's), or another buyer's record.
fn pushed_ranked(
    ticket: &Ticket,
    buyer: Option<UserId>,
    pushed: &Pushed,
) -> Option<(TicketBody, u8)> {
    let rec = &pushed.record;
    if buyer.is_some_and(|b| b.get() != rec.user_id) {
        return None;
    }
    let body = TicketBody::from_record(ticket, rec.clone());
    match rec.status {
        TicketStatus::Failed | TicketStatus::Cancelled => Some((body, FINAL)),
        TicketStatus::Confirmed => {
            let pay_by_ms = pushed.pay_by_ms?;
            let r = rank(TicketStatus::Confirmed, pay_by_ms.is_some());
            Some((TicketBody { pay_by_ms, ..body }, r))
        }
        TicketStatus::Paid | TicketStatus::Pending => None,
    }
}

/// One event: the state's rank as its id, the ticket as its data.
fn event(rank: u8, body: &TicketBody) -> Bytes {
    let data = serde_json::to_string(body).expect("a ticket serialises");
    Bytes::from(format!("id: {rank}\ndata: {data}\n\n"))
}

#[utoipa::path(
    get,
    path = "/v1/orders/{ticket}/events",
    operation_id = "streamOrder",
    tag = "buy",
    summary = "Follow a ticket live (server-sent events)",
    description = "The owner only. A `text/event-stream` of the ticket's states as they happen, each event's `data` the body of `GET /v1/orders/{ticket}` and its `id` the state's rank (1 `pending`, 2 `confirmed` with a payment deadline, 3 final: `paid`, `cancelled`, `failed`, or `confirmed` without a payment window). It starts with the current state and ends after a final one. A client that reconnects (to any gateway) sends `Last-Event-ID`: a state is sent only if it ranks above it, so nothing is sent twice and the final state is never missed; after the final state (3), the answer is `204`, which stops an `EventSource`. A comment line every `SECKILL_SSE_HEARTBEAT_SECS` keeps proxies from closing a quiet stream. A buyer's stream past `SECKILL_SSE_MAX_PER_BUYER` on one gateway ends their oldest, which is told `retry: 30000`; past `SECKILL_SSE_MAX_STREAMS` streams on the gateway, `503`. A gateway told to stop ends its streams at once. Polling `GET /v1/orders/{ticket}` keeps working.",
    params(
        ("ticket" = inline(schema::TicketText), Path, description = "As a buy answered it."),
        ("Last-Event-ID" = Option<String>, Header, nullable = false, pattern = "^[0-3]$", description = "The `id` of the last event received, when reconnecting (0: none; 3, the final state: `204`)."),
    ),
    security(("buyer" = [])),
    responses(
        (status = 200, description = "The stream: events whose `data` is the ticket.", content_type = "text/event-stream", body = TicketBody),
        (status = 204, description = "`Last-Event-ID` is 3: the client has the final state and nothing more will come (an `EventSource` stops reconnecting)."),
        e::BadRequest,
        e::Unauthenticated,
        e::UnknownTicket,
        e::AddressLimited,
        e::Unavailable,
    ),
)]
pub async fn ticket_events(
    req: HttpRequest,
    buyer: Buyer,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let ticket = Ticket::parse(&path)?;
    let last_seen = match req.headers().get("Last-Event-ID") {
        None => 0,
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|v| match v.trim() {
                "0" => Some(0),
                "1" => Some(1),
                "2" => Some(2),
                "3" => Some(FINAL),
                _ => None,
            })
            .ok_or_else(|| {
                ApiError::BadRequest(
                    "Last-Event-ID is the id of an event: 1, 2 or 3 (or 0: none)".into(),
                )
            })?,
    };
    let first = read_ranked(&state, &ticket, buyer.0).await?;
    if last_seen == FINAL {
        // The client has the final state: nothing more will come. A 204 tells an
        // EventSource to stop reconnecting.
        return Ok(HttpResponse::NoContent().finish());
    }
    let mut subscription = open_stream(&state, ticket.as_str(), first.0.user_id)?;
    // A change between the first read and the subscription would wake nothing: read once
    // more right after the first event.
    subscription.changes.mark_changed();
    let follow = Follow {
        state: state.clone(),
        ticket,
        buyer: buyer.0,
        subscription,
        last_sent: last_seen,
        first: Some(first),
        heartbeat: tokio::time::interval_at(
            tokio::time::Instant::now() + state.sse_heartbeat,
            state.sse_heartbeat,
        ),
        done: false,
    };
    let stream = futures::stream::unfold(follow, |mut f| async move {
        let chunk = f.next().await?;
        Some((Ok::<_, actix_web::Error>(chunk), f))
    });
    Ok(event_stream(stream))
}

/// One stream's state.
struct Follow {
    state: web::Data<AppState>,
    ticket: Ticket,
    buyer: Option<UserId>,
    subscription: Subscription,
    last_sent: u8,
    first: Option<(TicketBody, Option<u8>)>,
    heartbeat: tokio::time::Interval,
    done: bool,
}

impl Follow {
    /// The next chunk to send, or `None` once the stream is over.
    async fn next(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        if let Some((body, rank)) = self.first.take() {
            // How long a client waits before it reconnects, then the current state.
            let mut out = b"retry: 1000\n\n".to_vec();
            out.extend_from_slice(&self.send_ranked(body, rank).unwrap_or_default());
            return Some(Bytes::from(out));
        }
        loop {
            let heartbeat = tokio::select! {
                _ = self.subscription.ended.cancelled() => {
                    self.done = true;
                    return self.subscription.last_words();
                }
                changed = self.subscription.changes.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                    false
                }
                _ = self.heartbeat.tick() => true,
            };
            // The state pushed with the change, or else read. A read that fails (a store
            // down) sends nothing: the next change or heartbeat reads again.
            let pushed = match heartbeat {
                false => self.subscription.changes.borrow_and_update().clone(),
                true => None,
            };
            let known = pushed.and_then(|p| pushed_ranked(&self.ticket, self.buyer, &p));
            let state = match known {
                Some((body, rank)) => Some((body, Some(rank))),
                None => read_ranked(&self.state, &self.ticket, self.buyer)
                    .await
                    .ok(),
            };
            if let Some(chunk) = state.and_then(|(body, rank)| self.send_ranked(body, rank)) {
                self.heartbeat.reset();
                return Some(chunk);
            }
            if heartbeat {
                return Some(Bytes::from_static(b": keep-alive\n\n"));
            }
        }
    }

    /// The event of `body`, if its rank is known and above the last one sent; after a final
    /// state the stream ends.
    fn send_ranked(&mut self, body: TicketBody, rank: Option<u8>) -> Option<Bytes> {
        let r = rank?;
        if r <= self.last_sent {
            self.done = self.last_sent == FINAL;
            return None;
        }
        self.last_sent = r;
        self.done = r == FINAL;
        Some(event(r, &body))
    }
}

/// The limits of live streams, for a stream of `key` by `buyer`.
fn open_stream(state: &AppState, key: &str, buyer: u64) -> Result<Subscription, ApiError> {
    state
        .streams
        .open(key, buyer)
        .map_err(|Refused::Full| ApiError::Overloaded)
}

/// A response that streams `chunks`.
fn event_stream(
    chunks: impl futures::Stream<Item = Result<Bytes, actix_web::Error>> + 'static,
) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, "text/event-stream"))
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        // nginx buffers a response unless told not to.
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(chunks)
}

#[utoipa::path(
    get,
    path = "/v1/seckill/{product_id}/queue/{queue_id}/events",
    operation_id = "streamQueue",
    tag = "buy",
    summary = "Follow a waiting-room entry live (server-sent events)",
    description = "The entry's owner only. A `text/event-stream` whose events' `data` is the body a poll of the entry answers: its place and estimated wait (at the admission rate actually measured), `unlikely` once the places ahead and the admitted who have not bought outnumber the units left and in flight, then `sold_out`, or `admitted` with its `admission_token`. It starts with the current state; an event follows only when the state or the likelihood changed, the estimate moved by a fifth, or the place moved (by a twentieth, or at all after 5 s: near the head of the line, every move), at most one a second. It ends after `bought`, `expired` or `ended` (the sale passed its `ends_at`): not at `admitted`, which can be taken back to the head of the line (to keep the cap) until the buy, nor at `sold_out`, which may reopen. Events are numbered 1, 2, …, and a final event's `id` is the state's name. A reconnect gets the current state first; one whose `Last-Event-ID` names the final state gets `204`. Limits as for a ticket's stream; polling keeps working.",
    params(
        ("product_id" = inline(schema::Id), Path, description = "The product."),
        ("queue_id" = inline(schema::QueueId), Path, description = "As the join answered it."),
        ("Last-Event-ID" = Option<String>, Header, nullable = false, description = "The `id` of the last event received, when reconnecting. Only a final event's id (`bought`, `expired` or `ended`, the state's name) is read: `204`. Any other is ignored."),
    ),
    security(("buyer" = [])),
    responses(
        (status = 200, description = "The stream: events whose `data` is the entry.", content_type = "text/event-stream", body = QueueBody),
        (status = 204, description = "`Last-Event-ID` names the entry's final state: the client has it, and nothing more will come (an `EventSource` stops reconnecting)."),
        e::BadRequest,
        e::Unauthenticated,
        e::UnknownQueueEntry,
        e::RateLimited,
        e::Unavailable,
    ),
)]
pub async fn queue_events(
    req: HttpRequest,
    buyer: Buyer,
    state: web::Data<AppState>,
    redis: web::Data<ThreadRedis>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (product, queue_id) = path.into_inner();
    let product = ProductId::parse(&product)?;
    check_queue_id(&queue_id)?;
    let user = buyer.resolve(None)?;
    let (first, found) = queue_run(
        &state,
        &redis,
        product,
        user,
        QueueOp::Poll,
        Some(&queue_id),
    )
    .await?;
    // A client that has the final event (its id is the state's name): nothing more will
    // come, and a 204 tells an EventSource to stop reconnecting.
    let seen = req
        .headers()
        .get("Last-Event-ID")
        .and_then(|v| v.to_str().ok());
    if room::is_final(&first) && seen == Some(first.state.as_str()) {
        return Ok(HttpResponse::NoContent().finish());
    }
    let slot = open_stream(&state, &format!("q:{product}:{queue_id}"), user.get())?;
    let following = state.rooms.follow(product, user, &queue_id, &first, &found);
    let place = Place {
        slot,
        following,
        first: Some(first),
        sent: 0,
        heartbeat: tokio::time::interval_at(
            tokio::time::Instant::now() + state.sse_heartbeat,
            state.sse_heartbeat,
        ),
        done: false,
    };
    let stream = futures::stream::unfold(place, |mut p| async move {
        let chunk = p.next().await?;
        Some((Ok::<_, actix_web::Error>(chunk), p))
    });
    Ok(event_stream(stream))
}

/// One waiting-room stream's state.
struct Place {
    /// Its place among the gateway's streams (freed on drop).
    slot: Subscription,
    following: Following,
    first: Option<QueueBody>,
    /// Events sent: each event's `id`.
    sent: u64,
    heartbeat: tokio::time::Interval,
    done: bool,
}

impl Place {
    async fn next(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        if let Some(first) = self.first.take() {
            let mut out = b"retry: 1000\n\n".to_vec();
            out.extend_from_slice(&self.event(&first));
            return Some(Bytes::from(out));
        }
        tokio::select! {
            _ = self.slot.ended.cancelled() => {
                self.done = true;
                self.slot.last_words()
            }
            changed = self.following.changes.changed() => {
                changed.ok()?;
                let body = self.following.changes.borrow_and_update().clone();
                self.heartbeat.reset();
                Some(self.event(&body))
            }
            _ = self.heartbeat.tick() => Some(Bytes::from_static(b": keep-alive\n\n")),
        }
    }

    /// An event: its `id` is a count, or the state's name for a final one (a reconnect
    /// with it gets `204`).
    fn event(&mut self, body: &QueueBody) -> Bytes {
        self.sent += 1;
        self.done = room::is_final(body);
        let data = serde_json::to_string(body).expect("an entry serialises");
        let id = match self.done {
            true => body.state.clone(),
            false => self.sent.to_string(),
        };
        Bytes::from(format!("id: {id}\ndata: {data}\n\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_only_move_up_to_the_final_states() {
        use TicketStatus::*;
        assert!(rank(Pending, true) < rank(Confirmed, true));
        assert!(rank(Confirmed, true) < FINAL);
        for end in [Paid, Cancelled, Failed] {
            assert_eq!(rank(end, true), FINAL);
        }
        // No payment window: nothing follows a confirmation.
        assert_eq!(rank(Confirmed, false), FINAL);
    }

    #[test]
    fn a_pushed_state_is_sent_as_is_only_when_it_tells_all() {
        let ticket = Ticket::parse("1-00000000000000000000000000000001").unwrap();
        let me = Some(UserId::new(7).unwrap());
        let push = |fields: &str| Pushed::parse(fields).unwrap();
        // A worker's confirmation: the deadline rides the message.
        let (body, r) = pushed_ranked(
            &ticket,
            me,
            &push(r#"["status","confirmed","user_id","7","created_at","5","order_id","3","confirmed_at","9","pay_by","99"]"#),
        )
        .unwrap();
        assert_eq!((r, body.pay_by_ms, body.order_id), (2, Some(99), Some(3)));
        assert_eq!(
            (body.reserved_at_ms, body.confirmed_at_ms),
            (Some(5), Some(9))
        );
        // No payment window: final.
        let pushed = push(r#"["status","confirmed","user_id","7","pay_by",""]"#);
        assert_eq!(pushed_ranked(&ticket, me, &pushed).unwrap().1, FINAL);
        // Failed and cancelled: final, as their record says.
        for status in ["failed", "cancelled"] {
            let pushed = push(&format!(r#"["status","{status}","user_id","7"]"#));
            assert_eq!(pushed_ranked(&ticket, me, &pushed).unwrap().1, FINAL);
        }
        // A rebuild's confirmation (no deadline), a payment, another buyer's record: read.
        for fields in [
            r#"["status","confirmed","user_id","7"]"#,
            r#"["status","paid","user_id","7","pay_by","99"]"#,
            r#"["status","failed","user_id","8"]"#,
        ] {
            assert!(
                pushed_ranked(&ticket, me, &push(fields)).is_none(),
                "{fields}"
            );
        }
        // Authentication off: anyone is the owner.
        assert!(
            pushed_ranked(&ticket, None, &push(r#"["status","failed","user_id","8"]"#)).is_some()
        );
    }
}
