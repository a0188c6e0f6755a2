//! A buy whose publish Kafka reported failed. The message may have reached Kafka all the same
//! (a report can time out after the write), and a worker may have it already or get it later.
//!
//! Two steps, each one atomic unit that the step harness can interleave with the others:
//! 1. [`release`]: Redis gives the unit back if the reservation is still pending
//!    (`release.lua`).
//! 2. [`decide`]: a record another actor failed is `503`; one a buy again located (it
//!    published the order and answered `200`) is `202`. Otherwise MySQL decides, under the
//!    product's row lock: an order row holding a unit means the buyer has it (`202`); anything
//!    else gets a `failed_tickets(kafka_unavailable)` row (`503`), so that a worker given the
//!    message, now or later, fails the ticket. A failure known
//!    to Redis alone would be undone by a Redis that loses it or comes back old: the message,
//!    delivered after that, would be adopted by a claim and confirmed for a buyer told `503`
//!    (found by the lifecycle model).

use crate::db::{self, Recorded};
use crate::domain::{FailureReason, OrderMessage, OrderStatus};
use crate::store::{RecordStatus, TicketStore};
use sqlx::MySqlPool;

/// What [`release`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// The reservation was pending: failed, its buyer freed and its unit back.
    Released,
    /// It had moved on (a worker or the sweeper has it, or Redis's state is another run's).
    MovedOn,
    /// Redis could not be asked.
    Unknown,
}

/// What the buyer is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The order stands (`202`): a worker has it, and MySQL says so.
    Held,
    /// No unit is the buyer's (`503`).
    NotHeld,
}

/// Step one: `release.lua`.
pub async fn release(store: &TicketStore, order: &OrderMessage, admission_ttl_ms: u64) -> Release {
    match store
        .release(
            &order.ticket,
            order.user_id,
            FailureReason::KafkaUnavailable,
            admission_ttl_ms,
        )
        .await
    {
        Ok(true) => Release::Released,
        Ok(false) => Release::MovedOn,
        Err(e) => {
            tracing::error!(
                error = format!("{e:#}"),
                ticket = %order.ticket,
                "could not release a reservation; MySQL decides"
            );
            Release::Unknown
        }
    }
}

/// Whether a record says a worker has the order (claimed, or settled for the buyer).
pub fn still_held(status: RecordStatus) -> bool {
    matches!(
        status,
        RecordStatus::Processing | RecordStatus::Confirmed | RecordStatus::Paid
    )
}

/// Step two: MySQL decides (see the module's notes).
pub async fn decide(
    store: &TicketStore,
    db: &MySqlPool,
    order: &OrderMessage,
    released: Release,
) -> Verdict {
    let ticket = &order.ticket;
    let record = match released {
        Release::MovedOn => match store.ticket(ticket).await {
            Ok(r) => r.filter(|r| r.user_id == order.user_id.get()),
            Err(e) => {
                tracing::warn!(error = format!("{e:#}"), %ticket, "could not read a ticket whose publish failed");
                None
            }
        },
        _ => None,
    };
    if let Some(r) = &record {
        // A failure another actor made (the sweeper's expire, a worker's) is theirs to record.
        if r.state == RecordStatus::Failed {
            return Verdict::NotHeld;
        }
        // Located on its record: a buy again published the order and answered 200 while this
        // publish was failing (release.lua spares it). The order is in Kafka, and promised.
        if r.location.is_some() {
            return Verdict::Held;
        }
    }
    let recorded = db::record_failure(
        db,
        ticket,
        order.user_id.get(),
        order.quantity,
        FailureReason::KafkaUnavailable,
    )
    .await;
    match recorded {
        Ok(Recorded::Order(OrderStatus::Confirmed | OrderStatus::Paid)) => Verdict::Held,
        Ok(Recorded::Order(OrderStatus::Cancelled) | Recorded::Failed(_)) => Verdict::NotHeld,
        Err(e) => {
            // MySQL down: the record alone decides, as before the row existed. Only a Redis
            // that also loses it before a worker gets the message can then undo a 503.
            tracing::warn!(error = format!("{e:#}"), %ticket, "could not record a failed publish in MySQL; the record decides");
            if record.is_some_and(|r| still_held(r.state)) {
                Verdict::Held
            } else {
                Verdict::NotHeld
            }
        }
    }
}
