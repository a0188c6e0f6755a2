//! The provider's book: every charge by `payment_id`, what was decided for it, how many of its
//! callbacks were delivered, and the totals `GET /stats` shows. It also draws each new charge's
//! plan (outcome, delay, duplicate) from one seeded generator, in the order charges arrive.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use seckill_shared::payments::{Charge, ChargeOutcome};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// The chances the command line sets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Odds {
    pub decline_rate: f64,
    pub delay: Duration,
    pub late_rate: f64,
    pub late_delay: Duration,
    pub duplicate_rate: f64,
}

/// What the provider will do with one charge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub outcome: ChargeOutcome,
    /// From the charge to its decision and first callback.
    pub after: Duration,
    /// `after` is the late delay.
    pub late: bool,
    /// Send the same signed callback twice.
    pub duplicate: bool,
}

/// The test hooks' choices for one charge (`Provider-Decision`, `Provider-Delay-Ms`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Overrides {
    pub outcome: Option<ChargeOutcome>,
    pub delay: Option<Duration>,
}

/// What [`Ledger::open`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opened {
    /// A new charge: its callback is to be scheduled with this plan.
    New(Plan),
    /// The same charge again: nothing more to do.
    Repeat,
    /// The `payment_id` is known with a different body.
    Conflict,
}

/// `GET /charges/{payment_id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChargeView {
    pub payment_id: String,
    pub ticket: String,
    pub amount: i64,
    pub currency: String,
    /// `None` until the delay is over.
    pub decision: Option<ChargeOutcome>,
    /// Callbacks the receiver answered with a 2xx (a duplicate counts twice).
    pub callbacks_sent: u64,
}

/// `GET /stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    pub charges: u64,
    pub succeeded: u64,
    pub declined: u64,
    /// Charges planned with the late delay.
    pub late: u64,
    /// Callbacks the receiver answered with a 2xx.
    pub callbacks_sent: u64,
    /// Callback attempts that failed (connection error or not 2xx), retries included.
    pub callback_failures: u64,
}

#[derive(Debug)]
struct Entry {
    charge: Charge,
    decision: Option<ChargeOutcome>,
    callbacks_sent: u64,
}

#[derive(Debug)]
struct Book {
    charges: HashMap<String, Entry>,
    stats: Stats,
    rng: StdRng,
}

#[derive(Debug)]
pub struct Ledger {
    odds: Odds,
    book: Mutex<Book>,
}

impl Ledger {
    /// With a seed, the same charges in the same order get the same plans.
    pub fn new(odds: Odds, seed: Option<u64>) -> Self {
        let rng = match seed {
            Some(s) => StdRng::seed_from_u64(s),
            None => StdRng::from_os_rng(),
        };
        Self {
            odds,
            book: Mutex::new(Book {
                charges: HashMap::new(),
                stats: Stats::default(),
                rng,
            }),
        }
    }

    /// Records `charge` unless its `payment_id` is known, and plans it.
    pub fn open(&self, charge: Charge, overrides: Overrides) -> Opened {
        let mut book = self.book();
        if let Some(known) = book.charges.get(&charge.payment_id) {
            return if known.charge == charge {
                Opened::Repeat
            } else {
                Opened::Conflict
            };
        }
        let plan = self.draw(&mut book.rng, overrides);
        book.stats.charges += 1;
        book.stats.late += u64::from(plan.late);
        book.charges.insert(
            charge.payment_id.clone(),
            Entry {
                charge,
                decision: None,
                callbacks_sent: 0,
            },
        );
        Opened::New(plan)
    }

    /// Every charge draws the same three numbers, overridden or not, so a seed's sequence does
    /// not depend on the test hooks.
    fn draw(&self, rng: &mut StdRng, overrides: Overrides) -> Plan {
        let (decline, late, duplicate) = (
            rng.random::<f64>() < self.odds.decline_rate,
            rng.random::<f64>() < self.odds.late_rate,
            rng.random::<f64>() < self.odds.duplicate_rate,
        );
        let outcome = overrides.outcome.unwrap_or(if decline {
            ChargeOutcome::Declined
        } else {
            ChargeOutcome::Succeeded
        });
        let (after, late) = match overrides.delay {
            Some(d) => (d, false),
            None if late => (self.odds.late_delay, true),
            None => (self.odds.delay, false),
        };
        Plan {
            outcome,
            after,
            late,
            duplicate,
        }
    }

    /// The delay is over: `payment_id` is decided.
    pub fn decide(&self, payment_id: &str, outcome: ChargeOutcome) {
        let mut book = self.book();
        let Some(entry) = book.charges.get_mut(payment_id) else {
            return;
        };
        if entry.decision.replace(outcome).is_some() {
            return;
        }
        match outcome {
            ChargeOutcome::Succeeded => book.stats.succeeded += 1,
            ChargeOutcome::Declined => book.stats.declined += 1,
        }
    }

    /// The receiver answered one of `payment_id`'s callbacks with a 2xx.
    pub fn callback_sent(&self, payment_id: &str) {
        let mut book = self.book();
        book.stats.callbacks_sent += 1;
        if let Some(entry) = book.charges.get_mut(payment_id) {
            entry.callbacks_sent += 1;
        }
    }

    /// One callback attempt failed.
    pub fn callback_failed(&self) {
        self.book().stats.callback_failures += 1;
    }

    pub fn view(&self, payment_id: &str) -> Option<ChargeView> {
        self.book().charges.get(payment_id).map(|e| ChargeView {
            payment_id: e.charge.payment_id.clone(),
            ticket: e.charge.ticket.clone(),
            amount: e.charge.amount,
            currency: e.charge.currency.clone(),
            decision: e.decision,
            callbacks_sent: e.callbacks_sent,
        })
    }

    pub fn stats(&self) -> Stats {
        self.book().stats
    }

    /// Nothing panics while holding the lock, but a poisoned book is still a consistent one.
    fn book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn odds() -> Odds {
        Odds {
            decline_rate: 0.5,
            delay: Duration::from_millis(200),
            late_rate: 0.3,
            late_delay: Duration::from_secs(5),
            duplicate_rate: 0.2,
        }
    }

    fn charge(id: &str) -> Charge {
        Charge {
            payment_id: id.into(),
            ticket: "t-1".into(),
            amount: 1999,
            currency: "CNY".into(),
            callback_url: "http://127.0.0.1:1/cb".into(),
        }
    }

    fn plans(ledger: &Ledger, n: usize) -> Vec<Plan> {
        (0..n)
            .map(
                |i| match ledger.open(charge(&format!("p{i}")), Overrides::default()) {
                    Opened::New(p) => p,
                    other => panic!("{other:?}"),
                },
            )
            .collect()
    }

    #[test]
    fn the_same_seed_plans_the_same_charges_the_same_way() {
        let a = plans(&Ledger::new(odds(), Some(7)), 200);
        assert_eq!(a, plans(&Ledger::new(odds(), Some(7)), 200));
        assert_ne!(a, plans(&Ledger::new(odds(), Some(8)), 200));
        // Every choice happens with those odds.
        assert!(a.iter().any(|p| p.outcome == ChargeOutcome::Declined));
        assert!(a.iter().any(|p| p.outcome == ChargeOutcome::Succeeded));
        assert!(a
            .iter()
            .any(|p| p.late && p.after == Duration::from_secs(5)));
        assert!(a
            .iter()
            .any(|p| !p.late && p.after == Duration::from_millis(200)));
        assert!(a.iter().any(|p| p.duplicate));
    }

    #[test]
    fn overrides_win_and_leave_the_seeded_sequence_alone() {
        let odds = Odds {
            decline_rate: 1.0,
            late_rate: 1.0,
            ..odds()
        };
        let ledger = Ledger::new(odds, Some(1));
        let forced = Overrides {
            outcome: Some(ChargeOutcome::Succeeded),
            delay: Some(Duration::from_millis(3)),
        };
        let Opened::New(p) = ledger.open(charge("forced"), forced) else {
            panic!("not new")
        };
        assert_eq!(
            (p.outcome, p.after, p.late),
            (ChargeOutcome::Succeeded, Duration::from_millis(3), false)
        );
        let Opened::New(p) = ledger.open(charge("free"), Overrides::default()) else {
            panic!("not new")
        };
        assert_eq!((p.outcome, p.late), (ChargeOutcome::Declined, true));
        assert_eq!(ledger.stats().late, 1);

        let with_hooks = Ledger::new(self::odds(), Some(3));
        let without = Ledger::new(self::odds(), Some(3));
        with_hooks.open(charge("x"), forced);
        without.open(charge("x"), Overrides::default());
        assert_eq!(plans(&with_hooks, 50)[1..], plans(&without, 50)[1..]);
    }

    #[test]
    fn a_known_payment_id_is_a_repeat_or_a_conflict() {
        let ledger = Ledger::new(odds(), Some(1));
        assert!(matches!(
            ledger.open(charge("p"), Overrides::default()),
            Opened::New(_)
        ));
        assert_eq!(
            ledger.open(charge("p"), Overrides::default()),
            Opened::Repeat
        );
        let other = Charge {
            amount: 1,
            ..charge("p")
        };
        assert_eq!(ledger.open(other, Overrides::default()), Opened::Conflict);
        assert_eq!(ledger.stats().charges, 1);
    }

    #[test]
    fn a_charge_is_decided_once_and_counts_its_callbacks() {
        let ledger = Ledger::new(odds(), Some(1));
        ledger.open(charge("p"), Overrides::default());
        assert_eq!(ledger.view("p").unwrap().decision, None);
        ledger.decide("p", ChargeOutcome::Declined);
        ledger.decide("p", ChargeOutcome::Declined);
        ledger.callback_sent("p");
        ledger.callback_failed();
        let v = ledger.view("p").unwrap();
        assert_eq!(
            (v.decision, v.callbacks_sent),
            (Some(ChargeOutcome::Declined), 1)
        );
        let s = ledger.stats();
        assert_eq!(
            (
                s.charges,
                s.declined,
                s.succeeded,
                s.callbacks_sent,
                s.callback_failures
            ),
            (1, 1, 0, 1, 1)
        );
        assert!(ledger.view("q").is_none());
    }
}
