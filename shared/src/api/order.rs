//! A buyer's order: the buy, the ticket, the payment and its callback.

use super::{schema, whole};
use crate::payments::attempts::Payment;
use crate::payments::PaymentStatus;
use crate::store::TicketRecord;
use crate::{db, Ticket, TicketStatus, UserId};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The buyer is the token's `sub`. `user_id` is optional; when present it must equal
/// `sub` (`403 user_mismatch`). Without authentication (`SECKILL_AUTH_MODE=none`, `--dev`
/// only) it is required and trusted.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BuyRequest {
    #[serde(default, deserialize_with = "whole::optional_user_id")]
    #[schema(schema_with = schema::id)]
    pub user_id: Option<UserId>,
    /// Units to buy in this order, 1 to the product's `max_per_buyer` (default 1): all of
    /// them are reserved at once, or none (`409 not_enough_stock` says how many are left).
    #[serde(default, deserialize_with = "whole::optional_i64")]
    #[schema(nullable = false, minimum = 1, maximum = 100, examples(1))]
    pub quantity: Option<i64>,
}

/// The body of `202`, `200` and `GET /v1/orders/{ticket}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = Ticket)]
pub struct TicketBody {
    #[schema(schema_with = schema::ticket)]
    pub ticket: String,
    #[schema(schema_with = schema::ticket_status)]
    pub status: TicketStatus,
    #[schema(schema_with = schema::id)]
    pub product_id: u64,
    #[schema(schema_with = schema::id)]
    pub user_id: u64,
    /// Units the order holds. (Read as 1 from a gateway built before quantities.)
    #[serde(default = "crate::api::whole::one")]
    #[schema(required = true, minimum = 1, maximum = 100)]
    pub quantity: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = schema::order_id)]
    pub order_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = schema::failure_reason)]
    pub reason: Option<String>,
    /// When the unit was reserved, ms since the Unix epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub reserved_at_ms: Option<i64>,
    /// When the order was confirmed, ms since the Unix epoch (while the Redis copy lives).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub confirmed_at_ms: Option<i64>,
    /// The payment deadline of an order, ms since the Unix epoch: pay by then or it is
    /// cancelled. Absent when the product has no payment window (the order is final).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub pay_by_ms: Option<i64>,
    /// When the order was paid, ms since the Unix epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub paid_at_ms: Option<i64>,
    /// When the order was cancelled, ms since the Unix epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub cancelled_at_ms: Option<i64>,
}

impl TicketBody {
    /// A pending ticket of `quantity` units.
    pub fn pending(ticket: &Ticket, user: UserId, quantity: u16) -> Self {
        Self::new(ticket, TicketStatus::Pending, user.get(), quantity)
    }

    fn new(ticket: &Ticket, status: TicketStatus, user_id: u64, quantity: u16) -> Self {
        Self {
            ticket: ticket.as_str().to_owned(),
            status,
            product_id: ticket.product().get(),
            user_id,
            quantity,
            order_id: None,
            reason: None,
            reserved_at_ms: None,
            confirmed_at_ms: None,
            pay_by_ms: None,
            paid_at_ms: None,
            cancelled_at_ms: None,
        }
    }

    /// From the fast Redis copy.
    pub fn from_record(ticket: &Ticket, r: TicketRecord) -> Self {
        Self {
            order_id: r.order_id,
            reason: r.reason,
            reserved_at_ms: Some(r.created_at_ms).filter(|t| *t > 0),
            confirmed_at_ms: r.confirmed_at_ms,
            paid_at_ms: r.paid_at_ms,
            cancelled_at_ms: r.cancelled_at_ms,
            ..Self::new(ticket, r.status, r.user_id, r.quantity)
        }
    }

    /// From the Redis copy, with what MySQL says of the order's payment: MySQL decides
    /// `paid` and `cancelled`, and holds `pay_by_ms`.
    pub fn from_record_and_order(ticket: &Ticket, r: TicketRecord, s: db::SettledTicket) -> Self {
        let confirmed_at_ms = r.confirmed_at_ms;
        Self {
            confirmed_at_ms,
            ..Self::from_settled(ticket, s)
        }
    }

    /// From MySQL, once the Redis copy has expired.
    pub fn from_settled(ticket: &Ticket, s: db::SettledTicket) -> Self {
        Self {
            order_id: s.order_id,
            reason: s.reason,
            reserved_at_ms: s.reserved_at_ms,
            pay_by_ms: s.pay_by_ms,
            paid_at_ms: s.paid_at_ms,
            cancelled_at_ms: s.cancelled_at_ms,
            ..Self::new(ticket, s.status, s.user_id, s.quantity)
        }
    }
}

/// The query of `GET /v1/seckill/{product_id}/order`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct MyOrderQuery {
    /// Optional; must be the token's user. Required only without authentication.
    #[param(schema_with = schema::id)]
    pub user_id: Option<String>,
}

/// The body of `POST /v1/payments/callback` (`seckill_shared::payments::Callback`).
#[derive(Debug, ToSchema)]
#[allow(dead_code)] // documents the body the handler parses as `Callback`
pub struct CallbackBody {
    /// As the gateway sent it with the charge.
    #[schema(pattern = "^pay_[0-9a-f]{32}$")]
    pub payment_id: String,
    #[schema(schema_with = schema::charge_outcome)]
    pub status: String,
}

/// The body of `202` to a payment, and of `200` to a callback.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PaymentBody {
    #[schema(pattern = "^pay_[0-9a-f]{32}$")]
    pub payment_id: String,
    /// `processing` until the provider calls back; then `succeeded`, `declined` or
    /// `refund_due` (the order was no longer payable: cancelled, or paid by another payment).
    #[schema(schema_with = schema::payment_status)]
    pub status: String,
}

impl PaymentBody {
    pub fn of(p: &Payment) -> Self {
        Self {
            payment_id: p.payment_id.clone(),
            // An attempt the provider has not confirmed is shown as `processing` too.
            status: match p.status {
                PaymentStatus::Unsent => PaymentStatus::Processing,
                s => s,
            }
            .as_str()
            .to_owned(),
        }
    }
}
