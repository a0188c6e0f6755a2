//! The body of every error answer.

use crate::TicketStatus;
use serde::{Deserialize, Serialize};

/// `{"error": code, "message": text}`, and for `not_payable` and `not_cancellable` the
/// ticket's `state`, for `challenge_required` the `challenge`. Its schema in the document is written out by the gateway's
/// `error::documented`, one per answer, with the codes each can carry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorBody {
    /// The code: what a client branches on (`sold_out`, `rate_limited`, ...).
    pub error: String,
    /// Human-readable; do not parse.
    pub message: String,
    /// The ticket's state, for `not_payable` and `not_cancellable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<TicketStatus>,
    /// The proof of work to do, for `challenge_required`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub challenge: Option<crate::api::waiting_room::PowChallenge>,
    /// Units left, for `not_enough_stock`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left: Option<u64>,
    /// The product's limit, for `quantity_over_limit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_per_buyer: Option<u16>,
}

impl ErrorBody {
    pub fn new(error: &str, message: impl Into<String>) -> Self {
        Self {
            error: error.to_owned(),
            message: message.into(),
            state: None,
            challenge: None,
            left: None,
            max_per_buyer: None,
        }
    }

    /// The code of an error answer's body, if it is one.
    pub fn code_of(body: &[u8]) -> Option<String> {
        serde_json::from_slice::<Self>(body).ok().map(|e| e.error)
    }
}
