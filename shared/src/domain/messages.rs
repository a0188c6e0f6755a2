//! What crosses a process boundary: the order message on Kafka, and a buyer's token claims.

use super::{ProductId, Ticket, UserId};
use serde::{Deserialize, Serialize};

/// The message the gateway puts on Kafka for each reserved unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderMessage {
    /// Format version. Bump it when a field changes meaning.
    pub v: u32,
    pub ticket: Ticket,
    pub product_id: ProductId,
    pub user_id: UserId,
    /// When the unit was reserved in Redis, ms since the epoch.
    pub reserved_at_ms: i64,
    /// The order's trace (W3C `traceparent`), from the message's headers, not its payload:
    /// kept in its MySQL row so that its payment and expiry link to it.
    #[serde(skip)]
    pub traceparent: Option<String>,
}

impl OrderMessage {
    pub const VERSION: u32 = 1;

    pub fn new(ticket: Ticket, user_id: UserId, reserved_at_ms: i64) -> Self {
        Self {
            v: Self::VERSION,
            product_id: ticket.product(),
            ticket,
            user_id,
            reserved_at_ms,
            traceparent: None,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("an order message always serialises")
    }

    /// Decodes and checks a message: a known version, and a ticket that belongs to its product.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        let m: OrderMessage = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if m.v != Self::VERSION {
            return Err(format!("unsupported message version {}", m.v));
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
