//! A waiting room's entry, as a join or a poll answers it.

use super::schema;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The answer to a join or a poll.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueBody {
    #[schema(pattern = "^[0-9a-f]{32}$")]
    pub queue_id: String,
    /// `waiting` in line; `admitted`: buy now, with `admission_token` in the
    /// `Seckill-Admission` header, before `admitted_until_ms`; `sold_out`: no unit left and
    /// none in flight (units that come back reopen admission, so keep polling slowly);
    /// `expired`: admitted, but did not buy in time, so the place was given up; `bought`;
    /// `ended`: the sale is past its `ends_at` before this place bought (final: nobody is
    /// admitted after the end).
    #[schema(schema_with = schema::queue_state)]
    pub state: String,
    /// 1-based place in line once the sale has started; `null` before (places are drawn at
    /// random among those who joined before the start) and once out of the line.
    #[schema(required = true)]
    pub position: Option<u64>,
    /// Entries ahead in line.
    #[schema(required = true)]
    pub ahead: Option<u64>,
    /// Until admission, at the admission rate actually measured (the configured one until a
    /// measurement exists); `null` before the sale starts, or while admission is stalled.
    #[schema(required = true)]
    pub estimated_wait_ms: Option<u64>,
    /// `waiting` only, when true: the places ahead and the admitted buyers who have not bought
    /// outnumber the units left and in flight. A unit reaches this place only if some of them
    /// do not buy; `sold_out` follows once no unit is left or in flight.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unlikely: bool,
    /// When to poll again.
    pub refresh_after_ms: u64,
    /// `admitted` only: the token for the buy's `Seckill-Admission` header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admission_token: Option<String>,
    /// `admitted` only: when the admission lapses, ms since the epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admitted_until_ms: Option<i64>,
}

/// A proof-of-work challenge, in the body of `428 challenge_required` to a join: find a whole
/// number `n` such that SHA-256 of the ASCII text `<token>:<n>` starts with `bits` zero bits,
/// and join again with that text in the `Seckill-Pow` header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PowChallenge {
    /// Signed by the gateway, bound to the buyer, the product, `bits` and `expires_at_ms`.
    #[schema(pattern = r"^v1\.[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+\.[0-9a-f]{32}\.[0-9a-f]{64}$")]
    pub token: String,
    /// `sha256-leading-zero-bits`.
    #[schema(examples("sha256-leading-zero-bits"))]
    pub algorithm: String,
    /// Leading zero bits the hash must have: about 2^bits hashes of work.
    #[schema(minimum = 0, maximum = 32)]
    pub bits: u8,
    /// The solution is refused from this time on (ms since the epoch); ask again after it.
    pub expires_at_ms: i64,
}
