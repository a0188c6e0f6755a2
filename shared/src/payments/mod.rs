//! The payment window: a confirmed order is paid within its window or cancelled. Here: the
//! states of a payment attempt and the signature of the provider's callback; the attempts in
//! MySQL and the provider call ([`attempts`]); cancelling unpaid or buyer-cancelled orders and
//! giving their units back ([`cancel`]); and the Redis steps ([`TicketStore::cancel`],
//! [`TicketStore::paid`]).
//!
//! [`TicketStore::cancel`]: crate::store::TicketStore::cancel
//! [`TicketStore::paid`]: crate::store::TicketStore::paid
//!
//! The provider signs each callback with the shared webhook secret:
//! `Seckill-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`. The
//! gateway refuses a callback whose signature does not match, or whose `t` is more than
//! [`MAX_SKEW_SECS`] away from its clock, so a captured callback cannot be replayed later.

pub mod attempts;
pub mod cancel;
mod redis_ops;
pub mod scripts;

use hmac::{KeyInit, Mac};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

/// The callback's signature header.
pub const SIGNATURE_HEADER: &str = "Seckill-Signature";

/// How far `t` may be from the gateway's clock.
pub const MAX_SKEW_SECS: i64 = 300;

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// The state of a payment attempt (`payments.status`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::Display,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum PaymentStatus {
    /// Recorded, but the provider could not be reached; a retry with the same key sends it.
    Unsent,
    /// Sent to the provider; waiting for its callback.
    Processing,
    /// Paid, and the order is `paid`.
    Succeeded,
    Declined,
    /// The provider took the money, but the order was no longer payable (cancelled, or paid
    /// by another attempt): it must be refunded.
    RefundDue,
}

impl PaymentStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }

    /// Whether the buyer is (or may be about to be) charged by this attempt.
    pub fn charges(self) -> bool {
        matches!(self, Self::Processing | Self::Succeeded)
    }

    /// Whether the attempt is still waiting for the provider.
    pub fn in_progress(self) -> bool {
        matches!(self, Self::Unsent | Self::Processing)
    }
}

/// What the provider's callback reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChargeOutcome {
    Succeeded,
    Declined,
}

/// The body of `POST /v1/payments/callback`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Callback {
    pub payment_id: String,
    pub status: ChargeOutcome,
}

/// The body the gateway sends to `POST {provider}/charges`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Charge {
    pub payment_id: String,
    pub ticket: String,
    pub amount: i64,
    pub currency: String,
    pub callback_url: String,
}

/// The `Seckill-Signature` value for `body` sent at `t` (unix seconds).
pub fn sign(secret: &[u8], t: i64, body: &[u8]) -> String {
    format!("t={t},v1={}", hex::encode(mac(secret, t, body)))
}

fn mac(secret: &[u8], t: i64, body: &[u8]) -> Vec<u8> {
    let mut m = HmacSha256::new_from_slice(secret).expect("HMAC takes a key of any size");
    m.update(t.to_string().as_bytes());
    m.update(b".");
    m.update(body);
    m.finalize().into_bytes().to_vec()
}

/// Why a callback's signature was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the Seckill-Signature header is missing or malformed")]
    Malformed,
    #[error("the signature's timestamp is more than 300 s from the server's clock")]
    Stale,
    #[error("the signature does not match the body")]
    Mismatch,
}

/// Checks `header` for `body` at `now` (unix seconds). Any `v1` entry may match, so a
/// provider can sign with the old and the new secret while they rotate.
pub fn verify(secret: &[u8], header: &str, body: &[u8], now: i64) -> Result<(), SignatureError> {
    let mut t = None;
    let mut sigs = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => t = Some(v.parse::<i64>().map_err(|_| SignatureError::Malformed)?),
            Some(("v1", v)) => sigs.push(hex::decode(v).map_err(|_| SignatureError::Malformed)?),
            Some(_) => {}
            None => return Err(SignatureError::Malformed),
        }
    }
    let t = t.ok_or(SignatureError::Malformed)?;
    if sigs.is_empty() {
        return Err(SignatureError::Malformed);
    }
    // Not `(now - t).abs()`: `t` is the caller's, and an extreme one would overflow.
    if now.abs_diff(t) > MAX_SKEW_SECS.unsigned_abs() {
        return Err(SignatureError::Stale);
    }
    let expected = mac(secret, t, body);
    if sigs.iter().any(|s| bool::from(s.ct_eq(&expected))) {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"whsec-test-secret";

    /// The text of each payment state, pinned: it is `payments.status` in MySQL and the API's.
    #[test]
    fn payment_statuses_are_pinned_and_round_trip() {
        use strum::VariantArray;
        let pinned = [
            (PaymentStatus::Unsent, "unsent"),
            (PaymentStatus::Processing, "processing"),
            (PaymentStatus::Succeeded, "succeeded"),
            (PaymentStatus::Declined, "declined"),
            (PaymentStatus::RefundDue, "refund_due"),
        ];
        assert_eq!(pinned.len(), PaymentStatus::VARIANTS.len());
        for (s, text) in pinned {
            assert_eq!(s.as_str(), text);
            assert_eq!(s.to_string(), text);
            assert_eq!(PaymentStatus::parse(text), Some(s));
            assert_eq!(serde_json::to_value(s).unwrap(), text);
        }
        assert_eq!(PaymentStatus::parse("paid"), None);
    }

    /// A caller's `t` at the ends of i64 is stale, not an overflow (a panic in debug builds).
    #[test]
    fn extreme_timestamps_are_stale_not_an_overflow() {
        for (t, now) in [(i64::MIN, 1_000), (i64::MIN + 1, 1_000), (i64::MAX, -1_000)] {
            let h = format!("t={t},v1=00");
            assert_eq!(
                verify(SECRET, &h, b"{}", now),
                Err(SignatureError::Stale),
                "{t}"
            );
        }
    }

    #[test]
    fn a_signature_verifies_for_its_body_only() {
        let body = br#"{"payment_id":"pay_1","status":"succeeded"}"#;
        let h = sign(SECRET, 1_000, body);
        assert_eq!(verify(SECRET, &h, body, 1_000), Ok(()));
        assert_eq!(verify(SECRET, &h, body, 1_300), Ok(()));
        assert_eq!(
            verify(SECRET, &h, b"{}", 1_000),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(b"other", &h, body, 1_000),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(verify(SECRET, &h, body, 1_301), Err(SignatureError::Stale));
        assert_eq!(verify(SECRET, &h, body, 699), Err(SignatureError::Stale));
    }

    #[test]
    fn the_timestamp_is_part_of_what_is_signed() {
        let body = b"{}";
        let h = sign(SECRET, 1_000, body);
        let moved = h.replace("t=1000", "t=1001");
        assert_eq!(
            verify(SECRET, &moved, body, 1_000),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn a_known_vector() {
        // printf '1700000000.{}' | openssl dgst -sha256 -hmac whsec-test-secret
        assert_eq!(
            sign(SECRET, 1_700_000_000, b"{}"),
            "t=1700000000,v1=422be73252b72d584ae8317043052ab8ca55cd1d01fc9f8504301c3ebd405ef9"
        );
    }

    #[test]
    fn malformed_headers_are_refused() {
        for h in ["", "t=1", "v1=00", "t=x,v1=00", "t=1,v1=zz", "garbage"] {
            assert_eq!(
                verify(SECRET, h, b"{}", 1),
                Err(SignatureError::Malformed),
                "{h}"
            );
        }
    }
}
