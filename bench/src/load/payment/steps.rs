//! What a buyer does with its ticket ([`role`]), and what a paying buyer does next
//! ([`next_step`]): pure decisions, from what it saw and did so far.

use super::answers::{PayState, TicketView};
use crate::load::cancel;
use crate::load::draw::pays;
use seckill_shared::TicketStatus;
use std::time::Duration;

/// Most payments (keys answered `202`) one buyer makes.
pub const MAX_PAYMENTS: u32 = 3;
/// Most `Idempotency-Key`s one buyer tries, refused ones included.
pub const MAX_KEYS: u32 = 8;
/// Looks at a ticket are this far apart while something is expected soon...
pub const POLL_EVERY: Duration = Duration::from_millis(200);
/// ...and this far apart while the buyer only waits for its deadline to pass.
pub const POLL_IDLE: Duration = Duration::from_secs(1);
/// Tries of one key after the first that a `503` (or no answer) brings.
pub const KEY_RETRIES: u32 = 5;

/// What a buyer is to do with its ticket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Cancel it as soon as the gateway lets it (`--cancel-rate`).
    Cancels,
    /// Pay for it (`--pay-rate`).
    Pays,
    /// Nothing: the payment window closes on it.
    Idle,
}

/// The role of `user` in the run seeded with `seed`: cancelling first, then paying, each its
/// own draw.
pub fn role(seed: u64, user: u64, cancel_rate: f64, pay_rate: f64) -> Role {
    if cancel::cancels(seed, user, cancel_rate) {
        Role::Cancels
    } else if pays(seed, user, pay_rate) {
        Role::Pays
    } else {
        Role::Idle
    }
}

/// The wait before retry number `retry` (1, 2, ...) of a key answered `503` or not at all:
/// 100 ms, doubling; `None` once [`KEY_RETRIES`] retries are spent.
pub fn retry_delay(retry: u32) -> Option<Duration> {
    (1..=KEY_RETRIES)
        .contains(&retry)
        .then(|| Duration::from_millis(100 << (retry - 1)))
}

/// The run's rules for paying buyers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayPolicy {
    /// `--pay-retry-after-ms`.
    pub retry_after_ms: i64,
    /// `--pay-grace-secs`, in ms.
    pub grace_ms: i64,
    /// `--double-pay`: each attempt is two requests at once, with two keys.
    pub double_pay: bool,
}

/// What a buyer does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Pay with a new key.
    Pay,
    /// Look at the ticket again after this long.
    Look(Duration),
    /// Nothing more to do or to wait for.
    Stop,
}

/// The buyer's next step, from its last look at the ticket (`None`: no look answered yet),
/// the time (ms since the epoch), when it gives up waiting for a confirmation, and what it has
/// done so far.
pub fn next_step(
    seen: Option<&TicketView>,
    now_ms: i64,
    confirm_by_ms: i64,
    st: &PayState,
    policy: &PayPolicy,
) -> Step {
    let waiting = || {
        if now_ms >= confirm_by_ms {
            Step::Stop
        } else {
            Step::Look(POLL_EVERY)
        }
    };
    let Some(v) = seen else {
        return waiting();
    };
    match v.status {
        TicketStatus::Pending => waiting(),
        TicketStatus::Paid | TicketStatus::Cancelled | TicketStatus::Failed => Step::Stop,
        TicketStatus::Confirmed => {
            // No payment window: the order is final once confirmed.
            let Some(pay_by) = v.pay_by_ms else {
                return Step::Stop;
            };
            if now_ms >= pay_by.saturating_add(policy.grace_ms) {
                return Step::Stop;
            }
            if now_ms >= pay_by || st.window_closed {
                // The window closed: the cancel is due any moment.
                return Step::Look(POLL_EVERY);
            }
            if st.accepted >= MAX_PAYMENTS || st.keys >= MAX_KEYS {
                // Out of tries: a late success may still come; else the window closes.
                let until_pay_by = Duration::from_millis((pay_by - now_ms) as u64);
                return Step::Look(POLL_IDLE.min(until_pay_by).max(POLL_EVERY));
            }
            match st.last_attempt_ms {
                Some(at) if now_ms - at < policy.retry_after_ms => Step::Look(POLL_EVERY),
                _ => Step::Pay,
            }
        }
    }
}

/// A paying buyer's last look, as its `pay_end` line says: `paid`, `cancelled`, `confirmed`,
/// `failed`, `pending` or `unknown`.
pub fn end_status(seen: Option<&TicketView>) -> &'static str {
    seen.map_or("unknown", |v| v.status.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::payment::answers::{PayAnswer, Refusal};

    const POLICY: PayPolicy = PayPolicy {
        retry_after_ms: 1000,
        grace_ms: 5000,
        double_pay: false,
    };

    fn view(status: TicketStatus, pay_by_ms: Option<i64>) -> TicketView {
        let ticket = seckill_shared::Ticket::parse("1-9f86d081884c7d659a2feaa0c55ad015").unwrap();
        TicketView {
            status,
            pay_by_ms,
            ..TicketView::pending(&ticket, seckill_shared::UserId::new(1).unwrap(), 1)
        }
    }

    #[test]
    fn the_same_seed_picks_the_same_buyers_and_about_the_rate() {
        let picked = |seed, rate| (1..=10_000u64).filter(|u| pays(seed, *u, rate)).count();
        assert_eq!(picked(7, 0.0), 0);
        assert_eq!(picked(7, 1.0), 10_000);
        let n = picked(7, 0.3);
        assert!((2_800..3_200).contains(&n), "{n}");
        assert_eq!(picked(7, 0.3), n);
        // Another seed, other buyers.
        let a: Vec<u64> = (1..=200).filter(|u| pays(1, *u, 0.5)).collect();
        let b: Vec<u64> = (1..=200).filter(|u| pays(2, *u, 0.5)).collect();
        assert_ne!(a, b);
        // A buyer who pays at a rate pays at every higher rate.
        for u in 1..=1000 {
            assert!(!pays(3, u, 0.2) || pays(3, u, 0.6), "user {u}");
        }
    }

    #[test]
    fn a_buyer_cancels_pays_or_idles_and_paying_buyers_stay_as_they_were_without_cancels() {
        // Without cancels, the buyers who pay are those of `pays`, as before --cancel-rate.
        for u in 1..=2_000 {
            let expected = if pays(5, u, 0.7) {
                Role::Pays
            } else {
                Role::Idle
            };
            assert_eq!(role(5, u, 0.0, 0.7), expected, "user {u}");
        }
        // Half cancel; the others all pay at --pay-rate 1.
        let roles: Vec<Role> = (1..=10_000).map(|u| role(5, u, 0.5, 1.0)).collect();
        let n = |r| roles.iter().filter(|x| **x == r).count();
        assert!(
            (4_800..5_200).contains(&n(Role::Cancels)),
            "{}",
            n(Role::Cancels)
        );
        assert_eq!(n(Role::Cancels) + n(Role::Pays), 10_000);
        // Cancelling comes first: a buyer drawn to both cancels.
        let both = (1..=10_000).find(|u| pays(5, *u, 0.5) && cancel::cancels(5, *u, 0.5));
        let both = both.expect("some buyer is drawn to both");
        assert_eq!(role(5, both, 0.5, 0.5), Role::Cancels);
        assert_eq!(role(5, both, 0.0, 0.5), Role::Pays);
    }

    #[test]
    fn both_keys_of_a_double_pay_count_towards_the_buyers_tries() {
        let mut st = PayState::default();
        let busy = PayAnswer::Refused {
            why: Refusal::InProgress,
            state: None,
        };
        let ok = PayAnswer::Accepted {
            payment_id: Some("pay_1".into()),
        };
        st.record([&ok, &busy], 1_000);
        assert_eq!(
            st,
            PayState {
                keys: 2,
                accepted: 1,
                last_attempt_ms: Some(1_000),
                window_closed: false
            }
        );
        // Declined, paid again twice: four keys, and a pair in the window's last moment.
        let closed = PayAnswer::Refused {
            why: Refusal::WindowClosed,
            state: None,
        };
        st.record([&ok, &closed], 2_000);
        assert_eq!((st.keys, st.accepted, st.window_closed), (4, 2, true));
        assert_eq!(st.last_attempt_ms, Some(2_000));
        // Two more pairs use the buyer's keys up: it pays no more.
        let confirmed = view(TicketStatus::Confirmed, Some(60_000));
        st.window_closed = false;
        st.record([&busy, &busy], 3_000);
        st.record([&PayAnswer::Other, &busy], 4_000);
        assert_eq!(st.keys, MAX_KEYS);
        let policy = PayPolicy {
            double_pay: true,
            ..POLICY
        };
        assert_eq!(
            next_step(Some(&confirmed), 10_000, 0, &st, &policy),
            Step::Look(POLL_IDLE)
        );
    }

    #[test]
    fn an_unavailable_key_is_retried_a_few_times_with_a_growing_wait() {
        let waits: Vec<Duration> = (1..).map_while(retry_delay).collect();
        assert_eq!(waits.len(), KEY_RETRIES as usize);
        assert_eq!(waits[0], Duration::from_millis(100));
        assert_eq!(waits[4], Duration::from_millis(1600));
        assert_eq!(retry_delay(0), None);
    }

    #[test]
    fn a_buyer_waits_for_its_confirmation_then_pays_once_in_the_window() {
        let fresh = PayState::default();
        let step = |seen: Option<&TicketView>, now, st: &PayState| {
            next_step(seen, now, 10_000, st, &POLICY)
        };
        // Not seen yet, or pending: look again until the confirmation deadline.
        assert_eq!(step(None, 0, &fresh), Step::Look(POLL_EVERY));
        assert_eq!(step(None, 10_000, &fresh), Step::Stop);
        let pending = view(TicketStatus::Pending, None);
        assert_eq!(step(Some(&pending), 9_999, &fresh), Step::Look(POLL_EVERY));
        assert_eq!(step(Some(&pending), 10_000, &fresh), Step::Stop);
        // Confirmed in a window: pay.
        let confirmed = view(TicketStatus::Confirmed, Some(60_000));
        assert_eq!(step(Some(&confirmed), 100, &fresh), Step::Pay);
        // Confirmed long after the confirmation deadline: still pay, the window decides.
        assert_eq!(step(Some(&confirmed), 20_000, &fresh), Step::Pay);
        // No window: nothing to pay. Failed: nothing to pay.
        let final_order = view(TicketStatus::Confirmed, None);
        assert_eq!(step(Some(&final_order), 100, &fresh), Step::Stop);
        let failed = view(TicketStatus::Failed, None);
        assert_eq!(step(Some(&failed), 100, &fresh), Step::Stop);
    }

    #[test]
    fn a_declined_buyer_pays_again_with_a_new_key_until_its_tries_or_window_run_out() {
        let confirmed = view(TicketStatus::Confirmed, Some(60_000));
        let step = |now, st: &PayState| next_step(Some(&confirmed), now, 0, st, &POLICY);
        let mut st = PayState {
            keys: 1,
            accepted: 1,
            last_attempt_ms: Some(1_000),
            window_closed: false,
        };
        // The provider has not decided yet.
        assert_eq!(step(1_500, &st), Step::Look(POLL_EVERY));
        // Still confirmed --pay-retry-after-ms later: declined. Pay again.
        assert_eq!(step(2_000, &st), Step::Pay);
        // A refusal (another payment in progress) waits as long.
        st.keys = 2;
        st.last_attempt_ms = Some(2_000);
        assert_eq!(step(2_500, &st), Step::Look(POLL_EVERY));
        assert_eq!(step(3_000, &st), Step::Pay);
        // Three payments made: only look, idly, until the deadline and the grace pass.
        st.accepted = MAX_PAYMENTS;
        assert_eq!(step(10_000, &st), Step::Look(POLL_IDLE));
        assert_eq!(step(59_900, &st), Step::Look(POLL_EVERY));
        st.accepted = 1;
        st.keys = MAX_KEYS;
        assert_eq!(step(10_000, &st), Step::Look(POLL_IDLE));
        // Past pay_by: no more paying; the cancel is due.
        st.keys = 1;
        assert_eq!(step(60_000, &st), Step::Look(POLL_EVERY));
        assert_eq!(step(64_999, &st), Step::Look(POLL_EVERY));
        assert_eq!(step(65_000, &st), Step::Stop);
        // The gateway said the window closed (its clock ahead of ours): no more paying either.
        st.window_closed = true;
        assert_eq!(step(30_000, &st), Step::Look(POLL_EVERY));
    }

    #[test]
    fn paid_and_cancelled_tickets_end_the_buyer() {
        let st = PayState {
            keys: 1,
            accepted: 1,
            last_attempt_ms: Some(0),
            window_closed: false,
        };
        for status in [TicketStatus::Paid, TicketStatus::Cancelled] {
            let v = view(status, Some(60_000));
            assert_eq!(next_step(Some(&v), 100, 0, &st, &POLICY), Step::Stop);
            assert_eq!(end_status(Some(&v)), status.as_str());
        }
        assert_eq!(end_status(None), "unknown");
    }
}
