//! What a paying buyer is answered: a look at its ticket, an answer to pay, the two answers of
//! a double pay; and what its answers add up to ([`PayState`]).

use seckill_shared::api::{ErrorBody, PaymentBody, TicketBody};

/// A ticket as a look at `GET /v1/orders/{ticket}` saw it.
pub type TicketView = TicketBody;

/// Why a `409` refused a payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// `not_payable`: the ticket is not a confirmed order with a payment window.
    NotPayable,
    /// `payment_window_closed`: `pay_by_ms` has passed.
    WindowClosed,
    /// `payment_in_progress`: another payment of the ticket awaits the provider.
    InProgress,
    /// A code this tool does not know.
    Other(String),
}

impl Refusal {
    fn parse(code: &str) -> Self {
        match code {
            "not_payable" => Self::NotPayable,
            "payment_window_closed" => Self::WindowClosed,
            "payment_in_progress" => Self::InProgress,
            other => Self::Other(other.to_owned()),
        }
    }

    pub fn code(&self) -> &str {
        match self {
            Self::NotPayable => "not_payable",
            Self::WindowClosed => "payment_window_closed",
            Self::InProgress => "payment_in_progress",
            Self::Other(code) => code,
        }
    }
}

/// What an answer to `POST /v1/orders/{ticket}/pay` means to the buyer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PayAnswer {
    /// `202`: sent to the provider.
    Accepted { payment_id: Option<String> },
    /// `409`.
    Refused { why: Refusal, state: Option<String> },
    /// `503` (the provider or a store is unreachable), `429`, or no answer: the same key
    /// again, after [`retry_delay`].
    ///
    /// [`retry_delay`]: super::steps::retry_delay
    Retry,
    /// Anything else: this key is given up.
    Other,
}

impl PayAnswer {
    pub fn classify(status: Option<u16>, body: &[u8]) -> Self {
        match status {
            Some(202) => Self::Accepted {
                payment_id: serde_json::from_slice::<PaymentBody>(body)
                    .ok()
                    .map(|p| p.payment_id),
            },
            Some(409) => {
                let e = serde_json::from_slice::<ErrorBody>(body).ok();
                Self::Refused {
                    why: Refusal::parse(e.as_ref().map_or("unknown", |e| e.error.as_str())),
                    state: e.and_then(|e| e.state).map(|s| s.as_str().to_owned()),
                }
            }
            None | Some(429) | Some(503) => Self::Retry,
            Some(_) => Self::Other,
        }
    }
}

/// How the two requests of one `--double-pay` attempt were answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairOutcome {
    /// Both `202`, with two payments: two charges in progress at once.
    BothAccepted,
    /// One `202`, the other `409 payment_in_progress`: what the API promises.
    OneInProgress,
    /// Anything else (both refused, one unavailable...).
    Other,
}

impl PairOutcome {
    pub fn of(a: &PayAnswer, b: &PayAnswer) -> Self {
        use PayAnswer::{Accepted, Refused};
        let in_progress = |x: &PayAnswer| {
            matches!(
                x,
                Refused {
                    why: Refusal::InProgress,
                    ..
                }
            )
        };
        match (a, b) {
            (Accepted { payment_id: x }, Accepted { payment_id: y }) if x.is_none() || x != y => {
                Self::BothAccepted
            }
            (Accepted { .. }, o) | (o, Accepted { .. }) if in_progress(o) => Self::OneInProgress,
            _ => Self::Other,
        }
    }
}

/// What one buyer has done so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PayState {
    /// `Idempotency-Key`s used.
    pub keys: u32,
    /// Of those, answered `202`.
    pub accepted: u32,
    /// When the last key's tries ended, ms since the epoch (client clock).
    pub last_attempt_ms: Option<i64>,
    /// A `409 payment_window_closed` was seen.
    pub window_closed: bool,
}

impl PayState {
    /// The last answers of the keys of one attempt (two with `--double-pay`), whose tries
    /// ended at `now_ms`.
    pub fn record<'a>(&mut self, answers: impl IntoIterator<Item = &'a PayAnswer>, now_ms: i64) {
        for a in answers {
            self.keys += 1;
            match a {
                PayAnswer::Accepted { .. } => self.accepted += 1,
                PayAnswer::Refused {
                    why: Refusal::WindowClosed,
                    ..
                } => self.window_closed = true,
                _ => {}
            }
        }
        self.last_attempt_ms = Some(now_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_answers_of_a_double_pay_are_told_apart() {
        let ok = |id: &str| PayAnswer::Accepted {
            payment_id: Some(id.into()),
        };
        let busy = PayAnswer::Refused {
            why: Refusal::InProgress,
            state: None,
        };
        assert_eq!(
            PairOutcome::of(&ok("pay_1"), &busy),
            PairOutcome::OneInProgress
        );
        assert_eq!(
            PairOutcome::of(&busy, &ok("pay_1")),
            PairOutcome::OneInProgress
        );
        assert_eq!(
            PairOutcome::of(&ok("pay_1"), &ok("pay_2")),
            PairOutcome::BothAccepted
        );
        let unnamed = PayAnswer::Accepted { payment_id: None };
        assert_eq!(
            PairOutcome::of(&unnamed, &unnamed),
            PairOutcome::BothAccepted
        );
        // The same payment answered twice is one charge.
        assert_eq!(
            PairOutcome::of(&ok("pay_1"), &ok("pay_1")),
            PairOutcome::Other
        );
        let closed = PayAnswer::Refused {
            why: Refusal::WindowClosed,
            state: None,
        };
        assert_eq!(PairOutcome::of(&ok("pay_1"), &closed), PairOutcome::Other);
        assert_eq!(PairOutcome::of(&busy, &busy), PairOutcome::Other);
        assert_eq!(
            PairOutcome::of(&PayAnswer::Retry, &ok("pay_1")),
            PairOutcome::Other
        );
    }

    #[test]
    fn answers_to_pay_are_classified() {
        assert_eq!(
            PayAnswer::classify(
                Some(202),
                br#"{"payment_id":"pay_01","status":"processing"}"#
            ),
            PayAnswer::Accepted {
                payment_id: Some("pay_01".into())
            }
        );
        assert_eq!(
            PayAnswer::classify(
                Some(409),
                br#"{"error":"not_payable","message":"m","state":"paid"}"#
            ),
            PayAnswer::Refused {
                why: Refusal::NotPayable,
                state: Some("paid".into())
            }
        );
        for (code, why) in [
            ("payment_window_closed", Refusal::WindowClosed),
            ("payment_in_progress", Refusal::InProgress),
            ("sold_out", Refusal::Other("sold_out".into())),
        ] {
            let body = format!(r#"{{"error":"{code}","message":"m"}}"#);
            assert_eq!(
                PayAnswer::classify(Some(409), body.as_bytes()),
                PayAnswer::Refused { why, state: None }
            );
        }
        assert_eq!(
            PayAnswer::classify(Some(409), b"<html>"),
            PayAnswer::Refused {
                why: Refusal::Other("unknown".into()),
                state: None
            }
        );
        for status in [None, Some(503), Some(429)] {
            assert_eq!(PayAnswer::classify(status, b""), PayAnswer::Retry);
        }
        for status in [400, 401, 404, 500] {
            assert_eq!(PayAnswer::classify(Some(status), b"{}"), PayAnswer::Other);
        }
    }
}
