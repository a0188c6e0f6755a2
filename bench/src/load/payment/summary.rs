//! The summary's `payments`.

use crate::load::cancel::CancelSummary;
use serde::Serialize;
use std::collections::BTreeMap;

/// How the paying buyers' tickets ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PayEnds {
    pub paid: u64,
    pub cancelled: u64,
    /// Still unpaid when the buyer stopped looking, past its deadline and the grace.
    pub confirmed: u64,
    /// Never payable: failed, never confirmed in time, or never seen.
    pub other: u64,
}

/// The summary's `payments`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PaymentSummary {
    /// `--pay-rate`.
    pub pay_rate: f64,
    /// The seed that picked the paying buyers (`--seed`, or drawn at random).
    pub seed: u64,
    /// Distinct tickets whose buyer pays, and whose buyer neither pays nor cancels.
    pub buyers_paying: u64,
    pub buyers_not_paying: u64,
    /// `Idempotency-Key`s used: payment attempts.
    pub attempts: u64,
    /// Requests to pay sent, retries of a key included.
    pub requests: u64,
    /// Answered `202`.
    pub accepted: u64,
    /// Answered `409`, by error code.
    pub refused: BTreeMap<String, u64>,
    /// Answered `503`.
    pub unavailable: u64,
    /// Answered with another status.
    pub other_status: u64,
    /// Not answered (transport error).
    pub no_answer: u64,
    /// The paying buyers' tickets when they stopped looking.
    pub ended: PayEnds,
    /// Tickets (of all buyers) the polling after the load saw `paid` and `cancelled`; they are
    /// not among the summary's `tickets`.
    pub settled_paid: u64,
    pub settled_cancelled: u64,
    /// `--double-pay`: how the pairs of requests were answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub double_pay: Option<DoublePaySummary>,
    /// `--cancel-rate`: the buyers who cancel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancels: Option<CancelSummary>,
}

/// The summary's `payments.double_pay`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DoublePaySummary {
    /// Attempts made as two requests at once.
    pub pairs: u64,
    /// Pairs both answered `202` with two payments ([`PairOutcome::BothAccepted`]).
    ///
    /// [`PairOutcome::BothAccepted`]: super::answers::PairOutcome::BothAccepted
    pub both_accepted: u64,
    /// Pairs answered `202` and `409 payment_in_progress`.
    pub one_in_progress: u64,
}
