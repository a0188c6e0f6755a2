//! What crosses a process boundary: the order message on Kafka, and a buyer's token claims.

use super::{ProductId, Ticket, UserId};
use serde::{Deserialize, Serialize};

/// The message the gateway puts on Kafka for each reserved order.
///
/// An order of one unit is written as before quantities existed (`v: 1`, no `quantity`), so
/// that it reads the same to every build. An order of more is `v: 2` with its `quantity`: a
/// worker built before quantities refuses it rather than settle one unit of it (upgrade the
/// workers first).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderMessage {
    /// Format version: 1, or 2 for an order of more than one unit.
    pub v: u32,
    pub ticket: Ticket,
    pub product_id: ProductId,
    pub user_id: UserId,
    /// When the units were reserved in Redis, ms since the epoch.
    pub reserved_at_ms: i64,
    /// Units the order holds, 1 to [`MAX_PER_BUYER`]: all reserved at once, or none.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub quantity: u16,
    /// The order's trace (W3C `traceparent`), from the message's headers, not its payload:
    /// kept in its MySQL row so that its payment and expiry link to it.
    #[serde(skip)]
    pub traceparent: Option<String>,
}

/// The most units one order may hold (`max_per_buyer` at a product's creation).
pub const MAX_PER_BUYER: u16 = 100;

fn one() -> u16 {
    1
}

fn is_one(q: &u16) -> bool {
    *q == 1
}

impl OrderMessage {
    /// The version of an order of one unit.
    pub const VERSION: u32 = 1;
    /// The version of an order of more than one unit.
    pub const VERSION_QUANTITY: u32 = 2;

    /// An order of one unit.
    pub fn new(ticket: Ticket, user_id: UserId, reserved_at_ms: i64) -> Self {
        Self::of(ticket, user_id, reserved_at_ms, 1)
    }

    /// An order of `quantity` units.
    pub fn of(ticket: Ticket, user_id: UserId, reserved_at_ms: i64, quantity: u16) -> Self {
        Self {
            v: if quantity == 1 {
                Self::VERSION
            } else {
                Self::VERSION_QUANTITY
            },
            product_id: ticket.product(),
            ticket,
            user_id,
            reserved_at_ms,
            quantity,
            traceparent: None,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("an order message always serialises")
    }

    /// Decodes and checks a message: a known version, and a ticket that belongs to its product.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        let m: OrderMessage = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if m.v != Self::VERSION && m.v != Self::VERSION_QUANTITY {
            return Err(format!("unsupported message version {}", m.v));
        }
        if !(1..=MAX_PER_BUYER).contains(&m.quantity) {
            return Err(format!("quantity {} out of range", m.quantity));
        }
        if m.ticket.product() != m.product_id {
            return Err("ticket does not belong to product".into());
        }
        Ok(m)
    }
}

/// The claims of a buyer's token (JWT) that this system writes and reads: the buyer (`sub`, a
/// user id in decimal), expiry and issue time (seconds since the epoch), and an optional
/// issuer and audience. The gateway verifies them (`gateway::auth`); `gateway token` and
/// `seckill-bench load` sign them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuyerClaims {
    pub sub: String,
    pub exp: u64,
    #[serde(default)]
    pub iat: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iss: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aud: Option<String>,
}

impl BuyerClaims {
    /// `user`'s claims, issued at `now_s` and valid for `ttl_s`.
    pub fn new(
        user: u64,
        now_s: u64,
        ttl_s: u64,
        issuer: Option<String>,
        audience: Option<String>,
    ) -> Self {
        Self {
            sub: user.to_string(),
            exp: now_s.saturating_add(ttl_s),
            iat: now_s,
            iss: issuer,
            aud: audience,
        }
    }
}
