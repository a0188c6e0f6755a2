//! The payment window (issue 12): paying in time, idempotent payments, declines, expiry that
//! resells the unit, buyer cancels, the pay/cancel race, and signed callbacks.
//!
//! The test plays the payment provider: a real HTTP server takes the gateway's charges, and
//! the test sends the provider's signed callbacks when it chooses, so each race is exact
//! ([`sale`]). The tests are in the other files.

pub(crate) mod sale;

mod attempts;
mod cancelling;
mod paying;
mod rebuild;
