//! What request number `i` is: which user, and when the run stops. Pure, so it is tested
//! without a network.

use std::sync::atomic::{AtomicU64, Ordering};

/// How a request was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// `202`: reserved and on Kafka.
    Accepted,
    /// `200`: the user already holds a live ticket (or a `--path-get` success).
    Ok,
    /// `201`: settled inside the request (sync mode).
    Created,
    /// `409`: sold out.
    SoldOut,
    /// Any other `4xx`.
    Client,
    /// `503`: a dependency is down.
    Unavailable,
    /// Any other status (`5xx` but 503, `3xx`, other `2xx`).
    Other,
    /// No HTTP answer: connect, timeout or body read failed.
    Error,
}

impl Outcome {
    pub const ALL: [Outcome; 8] = [
        Outcome::Accepted,
        Outcome::Ok,
        Outcome::Created,
        Outcome::SoldOut,
        Outcome::Client,
        Outcome::Unavailable,
        Outcome::Other,
        Outcome::Error,
    ];
    pub const COUNT: usize = Self::ALL.len();

    pub fn classify(status: Option<u16>) -> Self {
        match status {
            None => Self::Error,
            Some(202) => Self::Accepted,
            Some(200) => Self::Ok,
            Some(201) => Self::Created,
            Some(409) => Self::SoldOut,
            Some(503) => Self::Unavailable,
            Some(400..=499) => Self::Client,
            Some(_) => Self::Other,
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn label(self) -> &'static str {
        match self {
            Self::Accepted => "202",
            Self::Ok => "200",
            Self::Created => "201",
            Self::SoldOut => "409",
            Self::Client => "4xx",
            Self::Unavailable => "503",
            Self::Other => "other",
            Self::Error => "error",
        }
    }

    /// A buy answered with a ticket to poll.
    pub fn has_ticket(self) -> bool {
        matches!(self, Self::Accepted | Self::Ok | Self::Created)
    }

    /// A fresh unit was handed out: resets a gateway's sold-out streak.
    pub fn is_sale(self) -> bool {
        matches!(self, Self::Accepted | Self::Created)
    }
}

/// When a run stops taking new request numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopRule {
    /// Every planned user makes its requests once.
    Planned,
    /// This many requests, cycling through the users.
    Total(u64),
    /// Until a timer fires, cycling through the users.
    Duration,
    /// The planned requests, then one request per fresh user until the gateways are sold out
    /// (checked by the caller) or `max_users` distinct users have been used.
    UntilSoldOut { max_users: u64 },
    /// The same requests as `UntilSoldOut`, until every unit is paid (checked by the caller).
    UntilAllPaid { max_users: u64 },
}

/// Request number `i` → user id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub first_user: u64,
    pub users: u64,
    pub requests_per_user: u64,
    pub stop: StopRule,
}

/// One request to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub user: u64,
    /// A user brought in after the planned ones (`--until-sold-out`).
    pub fresh: bool,
}

impl Plan {
    pub fn new(
        first_user: u64,
        users: u64,
        requests_per_user: u64,
        stop: StopRule,
    ) -> anyhow::Result<Self> {
        anyhow::ensure!(first_user >= 1, "--first-user must be at least 1");
        anyhow::ensure!(
            requests_per_user >= 1,
            "--requests-per-user must be at least 1"
        );
        let span = match stop {
            StopRule::UntilSoldOut { max_users } | StopRule::UntilAllPaid { max_users } => {
                anyhow::ensure!(
                    max_users >= users,
                    "--max-users ({max_users}) is below --users ({users})"
                );
                max_users
            }
            _ => {
                anyhow::ensure!(users >= 1, "--users must be at least 1");
                users
            }
        };
        anyhow::ensure!(
            first_user
                .checked_add(span)
                .is_some_and(|end| end - 1 <= seckill_shared::domain::MAX_ID),
            "user ids from {first_user} for {span} users go past {}",
            seckill_shared::domain::MAX_ID
        );
        users
            .checked_mul(requests_per_user)
            .ok_or_else(|| anyhow::anyhow!("--users × --requests-per-user overflows"))?;
        Ok(Self {
            first_user,
            users,
            requests_per_user,
            stop,
        })
    }

    /// Requests of the planned phase.
    pub fn planned_requests(&self) -> u64 {
        self.users * self.requests_per_user
    }

    /// The number of requests the run makes, when it is known up front.
    pub fn known_length(&self) -> Option<u64> {
        match self.stop {
            StopRule::Planned => Some(self.planned_requests()),
            StopRule::Total(n) => Some(n),
            StopRule::Duration | StopRule::UntilSoldOut { .. } | StopRule::UntilAllPaid { .. } => {
                None
            }
        }
    }

    /// The request numbered `i`, or `None` when the plan has none (every later number has
    /// none either). Users are taken in rounds: each user's first request, then each user's
    /// second, and so on.
    pub fn slot(&self, i: u64) -> Option<Slot> {
        let cycled = |i: u64| Slot {
            user: self.first_user + i % self.users,
            fresh: false,
        };
        match self.stop {
            StopRule::Planned => (i < self.planned_requests()).then(|| cycled(i)),
            StopRule::Total(n) => (i < n).then(|| cycled(i)),
            StopRule::Duration => Some(cycled(i)),
            StopRule::UntilSoldOut { max_users } | StopRule::UntilAllPaid { max_users } => {
                let planned = self.planned_requests();
                if i < planned {
                    return Some(cycled(i));
                }
                let k = self.users + (i - planned);
                (k < max_users).then_some(Slot {
                    user: self.first_user + k,
                    fresh: true,
                })
            }
        }
    }

    /// Distinct users that `n` requests (numbers `0..n`) used.
    pub fn users_used(&self, n: u64) -> u64 {
        let planned = self.planned_requests();
        match self.stop {
            StopRule::UntilSoldOut { .. } | StopRule::UntilAllPaid { .. } if n > planned => {
                self.users + (n - planned)
            }
            _ => n.min(self.users),
        }
    }
}

/// Per gateway: how many 409s in a row it has answered since its last sale.
pub struct SoldOutTracker {
    streaks: Vec<AtomicU64>,
}

impl SoldOutTracker {
    pub fn new(gateways: usize) -> Self {
        Self {
            streaks: (0..gateways).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    pub fn record(&self, gateway: usize, outcome: Outcome) {
        let s = &self.streaks[gateway];
        if outcome.is_sale() {
            s.store(0, Ordering::Relaxed);
        } else if outcome == Outcome::SoldOut {
            s.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Gateways whose streak has reached `streak`.
    pub fn sold_out_gateways(&self, streak: u64) -> usize {
        self.streaks
            .iter()
            .filter(|s| s.load(Ordering::Relaxed) >= streak)
            .count()
    }

    pub fn all_sold_out(&self, streak: u64) -> bool {
        self.sold_out_gateways(streak) == self.streaks.len()
    }

    /// Units may be back: every gateway has to answer 409 again.
    pub fn reset(&self) {
        for s in &self.streaks {
            s.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classified() {
        assert_eq!(Outcome::classify(Some(202)), Outcome::Accepted);
        assert_eq!(Outcome::classify(Some(200)), Outcome::Ok);
        assert_eq!(Outcome::classify(Some(409)), Outcome::SoldOut);
        assert_eq!(Outcome::classify(Some(404)), Outcome::Client);
        assert_eq!(Outcome::classify(Some(429)), Outcome::Client);
        assert_eq!(Outcome::classify(Some(503)), Outcome::Unavailable);
        assert_eq!(Outcome::classify(Some(500)), Outcome::Other);
        assert_eq!(Outcome::classify(None), Outcome::Error);
        for (i, o) in Outcome::ALL.iter().enumerate() {
            assert_eq!(o.index(), i);
        }
    }

    #[test]
    fn planned_runs_take_users_in_rounds() {
        let p = Plan::new(10, 3, 2, StopRule::Planned).unwrap();
        let users: Vec<u64> = (0..).map_while(|i| p.slot(i)).map(|s| s.user).collect();
        assert_eq!(users, [10, 11, 12, 10, 11, 12]);
        assert_eq!(p.known_length(), Some(6));
        assert_eq!(p.users_used(6), 3);
        assert_eq!(p.users_used(2), 2);
    }

    #[test]
    fn total_and_duration_cycle_users() {
        let p = Plan::new(1, 2, 1, StopRule::Total(5)).unwrap();
        let users: Vec<u64> = (0..).map_while(|i| p.slot(i)).map(|s| s.user).collect();
        assert_eq!(users, [1, 2, 1, 2, 1]);
        let p = Plan::new(1, 2, 1, StopRule::Duration).unwrap();
        assert_eq!(p.slot(1_000_001).unwrap().user, 2);
        assert_eq!(p.known_length(), None);
    }

    #[test]
    fn until_sold_out_brings_fresh_users_up_to_the_maximum() {
        let p = Plan::new(5, 2, 2, StopRule::UntilSoldOut { max_users: 4 }).unwrap();
        let slots: Vec<Slot> = (0..).map_while(|i| p.slot(i)).collect();
        let users: Vec<u64> = slots.iter().map(|s| s.user).collect();
        assert_eq!(users, [5, 6, 5, 6, 7, 8]);
        assert_eq!(
            slots.iter().map(|s| s.fresh).collect::<Vec<_>>(),
            [false, false, false, false, true, true]
        );
        assert_eq!(p.users_used(6), 4);
        assert_eq!(p.users_used(3), 2);
        // Until every unit is paid: the same users.
        let q = Plan::new(5, 2, 2, StopRule::UntilAllPaid { max_users: 4 }).unwrap();
        assert_eq!((0..).map_while(|i| q.slot(i)).collect::<Vec<_>>(), slots);
        assert_eq!((q.users_used(6), q.known_length()), (4, None));
        assert!(Plan::new(1, 5, 1, StopRule::UntilAllPaid { max_users: 4 }).is_err());
    }

    #[test]
    fn bad_plans_are_refused() {
        assert!(Plan::new(0, 1, 1, StopRule::Planned).is_err());
        assert!(Plan::new(1, 0, 1, StopRule::Planned).is_err());
        assert!(Plan::new(1, 1, 0, StopRule::Planned).is_err());
        assert!(Plan::new(1, 5, 1, StopRule::UntilSoldOut { max_users: 4 }).is_err());
        assert!(Plan::new(i64::MAX as u64, 2, 1, StopRule::Planned).is_err());
        assert!(Plan::new(i64::MAX as u64, 1, 1, StopRule::Planned).is_ok());
        // Only fresh users: allowed when running until sold out.
        assert!(Plan::new(1, 0, 1, StopRule::UntilSoldOut { max_users: 9 }).is_ok());
    }

    #[test]
    fn a_gateway_is_sold_out_after_409s_following_its_last_sale() {
        let t = SoldOutTracker::new(2);
        t.record(0, Outcome::SoldOut);
        assert!(!t.all_sold_out(1));
        t.record(1, Outcome::Accepted);
        t.record(1, Outcome::SoldOut);
        assert!(t.all_sold_out(1));
        assert!(!t.all_sold_out(2));
        // A unit came back and was sold again: gateway 1 is no longer sold out.
        t.record(1, Outcome::Accepted);
        assert_eq!(t.sold_out_gateways(1), 1);
        // Errors and repeated-ticket answers neither reset nor count.
        t.record(1, Outcome::Error);
        t.record(1, Outcome::Ok);
        assert_eq!(t.sold_out_gateways(1), 1);
        t.reset();
        assert_eq!(t.sold_out_gateways(1), 0);
    }
}
