//! `--cancel-rate`: buyers who cancel their order as soon as the gateway lets them.
//!
//! Which buyers cancel is decided once per user from the run's seed ([`cancels`]), apart from
//! who pays: the same seed picks the same buyers. A buyer who cancels starts at its `202` and
//! calls `POST /v1/orders/{ticket}/cancel` in a loop, [`pause`] (20 to 50 ms) apart, deciding
//! after each answer with the pure [`next_try`]:
//!
//! - `200`: cancelled (its unit is on sale again): done;
//! - `409 not_cancellable` with the state `pending`: not confirmed yet, try again;
//! - `409` with any other state (`failed`, `paid`, `cancelled`, or `confirmed` without a
//!   payment window): a final refusal, done;
//! - `503`, `429`, another `5xx`, a `404` (a store that lost the ticket for a moment) or no
//!   answer: try again;
//! - anything else: given up.
//!
//! A buyer tries until `--settle-timeout` after its buy. Each try is a `cancel` line of the
//! history ([`crate::history::CancelLine`]), so an audit can tell each `buyer_cancelled` order
//! from the request that cancelled it. The loop itself runs in [`super::payment::Payers`],
//! with the paying buyers.

use seckill_shared::api::{ErrorBody, TicketBody};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// The shortest pause between two tries of one buyer...
pub const PAUSE_MIN: Duration = Duration::from_millis(20);
/// ...and the longest.
pub const PAUSE_MAX: Duration = Duration::from_millis(50);

/// The state a `409 not_cancellable` names while the order awaits its confirmation.
const NOT_YET: &str = "pending";

/// Whether `user` cancels, at `rate` (0 to 1), for the run seeded with `seed`: a draw of its
/// own, independent of [`super::draw::pays`]'s.
pub fn cancels(seed: u64, user: u64, rate: f64) -> bool {
    super::draw::picked(seed, user, CANCEL_STREAM, rate)
}

/// Sets the cancel draw apart from the pay draw (stream 0).
const CANCEL_STREAM: u64 = 0x6361_6e63_656c_0001;

/// The pause before the next try, from `jitter` in [0, 1): [`PAUSE_MIN`] to [`PAUSE_MAX`].
pub fn pause(jitter: f64) -> Duration {
    let span_us = (PAUSE_MAX - PAUSE_MIN).as_micros() as f64;
    let extra_us = (span_us * jitter.clamp(0.0, 1.0)) as u64;
    PAUSE_MIN + Duration::from_micros(extra_us)
}

/// What an answer to `POST /v1/orders/{ticket}/cancel` means to the buyer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelAnswer {
    /// `200`: the ticket, now `cancelled` (`state`), for `reason` (`buyer_cancelled`).
    Cancelled {
        state: Option<String>,
        reason: Option<String>,
    },
    /// `409`: the error code (`not_cancellable`) and the order's state.
    Refused { code: String, state: Option<String> },
    /// Unavailable for now (`503`, `429`, another `5xx`, `404`) or no answer: try again.
    Retry,
    /// Anything else: given up.
    Other,
}

impl CancelAnswer {
    pub fn classify(status: Option<u16>, body: &[u8]) -> Self {
        match status {
            Some(200) => match serde_json::from_slice::<TicketBody>(body) {
                Ok(t) => Self::Cancelled {
                    state: Some(t.status.as_str().to_owned()),
                    reason: t.reason,
                },
                Err(_) => Self::Cancelled {
                    state: None,
                    reason: None,
                },
            },
            Some(409) => match serde_json::from_slice::<ErrorBody>(body) {
                Ok(e) => Self::Refused {
                    code: e.error,
                    state: e.state.map(|s| s.as_str().to_owned()),
                },
                Err(_) => Self::Refused {
                    code: "unknown".into(),
                    state: None,
                },
            },
            None | Some(404) | Some(429) => Self::Retry,
            Some(s) if s >= 500 => Self::Retry,
            Some(_) => Self::Other,
        }
    }

    /// `409` refusing while the order is not confirmed yet: the cancel may go through later.
    pub fn not_yet(&self) -> bool {
        matches!(self, Self::Refused { state: Some(s), .. } if s == NOT_YET)
    }
}

/// How a buyer's cancelling ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelEnd {
    /// Answered `200`.
    Cancelled,
    /// Refused for good: the order's state (`failed`, `paid`, ...), or the error code.
    Refused(String),
    /// Still refused as `pending`, or unanswered, when its time ran out; or an answer this
    /// tool does not know.
    GaveUp,
}

/// What the buyer does after an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelStep {
    /// Try again after this pause.
    Again(Duration),
    /// Stop.
    Done(CancelEnd),
}

/// The buyer's next step after `answer`, at `now_ms`; it tries until `give_up_at_ms`, each
/// try [`pause`]`(jitter)` after the last.
pub fn next_try(answer: &CancelAnswer, now_ms: i64, give_up_at_ms: i64, jitter: f64) -> CancelStep {
    let again = || {
        let wait = pause(jitter);
        if now_ms.saturating_add(wait.as_millis() as i64) < give_up_at_ms {
            CancelStep::Again(wait)
        } else {
            CancelStep::Done(CancelEnd::GaveUp)
        }
    };
    match answer {
        CancelAnswer::Cancelled { .. } => CancelStep::Done(CancelEnd::Cancelled),
        a if a.not_yet() => again(),
        CancelAnswer::Refused { code, state } => CancelStep::Done(CancelEnd::Refused(
            state.clone().unwrap_or_else(|| code.clone()),
        )),
        CancelAnswer::Retry => again(),
        CancelAnswer::Other => CancelStep::Done(CancelEnd::GaveUp),
    }
}

/// How the cancelling buyers' tries ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CancelEnds {
    /// Answered `200`...
    pub cancelled: u64,
    /// ...of which after at least one `409` as `pending`: the cancel came as the order was
    /// being confirmed.
    pub cancelled_after_pending: u64,
    /// Refused for good, by the order's state.
    pub refused: BTreeMap<String, u64>,
    /// Out of time, or an unknown answer.
    pub gave_up: u64,
}

/// The summary's `payments.cancels`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CancelSummary {
    /// `--cancel-rate`.
    pub cancel_rate: f64,
    /// Distinct tickets whose buyer cancels.
    pub buyers_cancelling: u64,
    /// Requests to cancel sent.
    pub requests: u64,
    /// Answered `200`.
    pub cancelled: u64,
    /// Answered `409`, by the state named (`pending`: not confirmed yet, tried again).
    pub refused: BTreeMap<String, u64>,
    /// Answered `503`, `429`, another `5xx` or `404`.
    pub unavailable: u64,
    /// Answered with another status.
    pub other_status: u64,
    /// Not answered (transport error).
    pub no_answer: u64,
    /// The cancelling buyers' last answers.
    pub ended: CancelEnds,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_picks_the_same_cancelling_buyers_apart_from_the_paying_ones() {
        let picked = |seed, rate| (1..=10_000u64).filter(|u| cancels(seed, *u, rate)).count();
        assert_eq!(picked(7, 0.0), 0);
        assert_eq!(picked(7, 1.0), 10_000);
        let n = picked(7, 0.5);
        assert!((4_800..5_200).contains(&n), "{n}");
        assert_eq!(picked(7, 0.5), n);
        // Independent of who pays: about half of the half who pay cancel too.
        let both = (1..=10_000u64)
            .filter(|u| cancels(7, *u, 0.5) && super::super::draw::pays(7, *u, 0.5))
            .count();
        assert!((2_300..2_700).contains(&both), "{both}");
    }

    #[test]
    fn the_pause_between_tries_is_20_to_50_ms() {
        assert_eq!(pause(0.0), PAUSE_MIN);
        assert_eq!(pause(0.5), Duration::from_millis(35));
        assert!(pause(0.999_999) <= PAUSE_MAX);
        assert_eq!(pause(7.0), PAUSE_MAX);
        assert_eq!(pause(-1.0), PAUSE_MIN);
    }

    #[test]
    fn answers_to_cancel_are_classified() {
        assert_eq!(
            CancelAnswer::classify(
                Some(200),
                br#"{"ticket":"3-9f86d081884c7d659a2feaa0c55ad015","status":"cancelled","product_id":3,"user_id":1,"reason":"buyer_cancelled"}"#
            ),
            CancelAnswer::Cancelled {
                state: Some("cancelled".into()),
                reason: Some("buyer_cancelled".into())
            }
        );
        let pending = CancelAnswer::classify(
            Some(409),
            br#"{"error":"not_cancellable","message":"m","state":"pending"}"#,
        );
        assert!(pending.not_yet());
        let paid = CancelAnswer::classify(
            Some(409),
            br#"{"error":"not_cancellable","message":"m","state":"paid"}"#,
        );
        assert_eq!(
            paid,
            CancelAnswer::Refused {
                code: "not_cancellable".into(),
                state: Some("paid".into())
            }
        );
        assert!(!paid.not_yet());
        assert_eq!(
            CancelAnswer::classify(Some(409), b"<html>"),
            CancelAnswer::Refused {
                code: "unknown".into(),
                state: None
            }
        );
        for status in [None, Some(404), Some(429), Some(500), Some(503)] {
            assert_eq!(CancelAnswer::classify(status, b""), CancelAnswer::Retry);
        }
        for status in [400, 401, 403] {
            assert_eq!(
                CancelAnswer::classify(Some(status), b"{}"),
                CancelAnswer::Other
            );
        }
    }

    #[test]
    fn a_buyer_cancels_again_while_pending_until_a_final_answer_or_its_time_runs_out() {
        let step = |a: &CancelAnswer, now| next_try(a, now, 10_000, 0.5);
        let wait = Duration::from_millis(35);
        let pending = CancelAnswer::Refused {
            code: "not_cancellable".into(),
            state: Some("pending".into()),
        };
        // Not confirmed yet: again, after the pause, while there is time for it.
        assert_eq!(step(&pending, 0), CancelStep::Again(wait));
        assert_eq!(step(&pending, 9_964), CancelStep::Again(wait));
        assert_eq!(step(&pending, 9_965), CancelStep::Done(CancelEnd::GaveUp));
        // Unavailable or unanswered: the same.
        assert_eq!(step(&CancelAnswer::Retry, 0), CancelStep::Again(wait));
        assert_eq!(
            step(&CancelAnswer::Retry, 10_000),
            CancelStep::Done(CancelEnd::GaveUp)
        );
        // Cancelled: done, whatever the time.
        let ok = CancelAnswer::Cancelled {
            state: Some("cancelled".into()),
            reason: Some("buyer_cancelled".into()),
        };
        assert_eq!(step(&ok, 20_000), CancelStep::Done(CancelEnd::Cancelled));
        // A final refusal names the order's state (or the code, without one).
        for state in ["failed", "paid", "cancelled", "confirmed"] {
            let refused = CancelAnswer::Refused {
                code: "not_cancellable".into(),
                state: Some(state.into()),
            };
            assert_eq!(
                step(&refused, 0),
                CancelStep::Done(CancelEnd::Refused(state.into()))
            );
        }
        let bare = CancelAnswer::Refused {
            code: "unknown".into(),
            state: None,
        };
        assert_eq!(
            step(&bare, 0),
            CancelStep::Done(CancelEnd::Refused("unknown".into()))
        );
        // An answer this tool does not know: given up at once.
        assert_eq!(
            step(&CancelAnswer::Other, 0),
            CancelStep::Done(CancelEnd::GaveUp)
        );
    }
}
