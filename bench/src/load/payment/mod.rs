//! `--pay-rate`: buyers who pay for their order, or do not.
//!
//! Every distinct ticket the load is handed goes to [`Payers::offer`]. Whether its buyer pays
//! is decided once per user from the run's seed ([`pays`]), so the same seed picks the same
//! buyers whatever order the answers come in. A buyer who does not pay is left alone: the
//! system cancels its order when the payment window closes, and its unit goes back on sale.
//!
//! A paying buyer runs in its own task, looking at its ticket (`GET /v1/orders/{ticket}`) and
//! deciding what to do next with the pure [`next_step`]:
//!
//! - `pending`: look again, until `--settle-timeout` after the buy;
//! - `confirmed` with a `pay_by_ms`: pay (`POST /v1/orders/{ticket}/pay`, a fresh
//!   `Idempotency-Key`; a `503` or no answer is retried with the same key, [`retry_delay`]);
//!   still `confirmed` `--pay-retry-after-ms` after an attempt (the provider declined, or
//!   another payment was in progress), pay again with a new key: at most [`MAX_PAYMENTS`]
//!   payments and [`MAX_KEYS`] keys, and only before `pay_by_ms`;
//! - then look until the ticket is `paid` or `cancelled`, at most `--pay-grace-secs` past
//!   `pay_by_ms`;
//! - `confirmed` without `pay_by_ms` (no payment window), `failed`, `paid`, `cancelled`: stop.
//!
//! With `--double-pay`, each payment attempt is two requests at once, each with its own key
//! and on its own gateway, as a buyer paying from two tabs: the gateway must take one and
//! answer the other `409 payment_in_progress` ([`PairOutcome`]).
//!
//! With `--cancel-rate`, a buyer picked by [`super::cancel::cancels`] cancels instead of paying,
//! from its `202` on ([`super::cancel`]); the others pay at `--pay-rate`.
//!
//! Each request to pay is a `pay` line of the history, each paying buyer's last look a
//! `pay_end` line, and each request to cancel a `cancel` line
//! ([`crate::history::PaymentLine`]). HTTP calls of all the buyers together are bounded by
//! `--settle-concurrency`.

mod answers;
mod payers;
mod steps;
mod summary;

pub use super::draw::pays;
pub use answers::PairOutcome;
pub use payers::Payers;
pub use steps::{next_step, retry_delay, role, PayPolicy, KEY_RETRIES, MAX_KEYS, MAX_PAYMENTS};
pub use summary::PaymentSummary;
