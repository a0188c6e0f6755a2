//! `--until-sold-out`: offering fresh buyers until the sale is really over.
//!
//! A round in which every gateway answers 409 is not the end of a sale: the unit of an order
//! that fails (a chaos failure, an expired reservation) comes back to stock after the buyers
//! who would have taken it are gone. So that round starts a check ([`Phase::Checking`]): the
//! workers holding fresh users wait, and [`SaleEnd::judge`] looks, once none of the load's
//! requests is in flight:
//!
//! - with `--admin-token`, at `GET /admin/products/{id}`, every [`POLL_INTERVAL`] at most:
//!   stock in Redis means units came back, and fresh buyers are offered again; no stock in
//!   Redis nor MySQL and nothing pending, [`CONFIRMATIONS`] looks in a row, ends the sale;
//!   pending orders (and a Redis that lost the product) are waited for;
//! - without, by probes: after [`POLL_INTERVAL`] fresh buyers are offered again, and the sale
//!   ends once none has bought for `--sold-out-quiet`. Pending orders are not seen.
//!
//! Fresh buyers are offered until `--sold-out-timeout` after the start, or until
//! `--sold-out-wait` after every gateway first answered 409, whichever is later. A sale still
//! not over then is reported as not sold out ([`Ended::TimedOut`]).

use super::admin_api::{AdminApi, Reading, StockView};
use super::plan::{Outcome, SoldOutTracker};
use crate::history::SaleEndCheck;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Looks at the admin API, and probe rounds, are at least this far apart.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// Looks in a row that must find no stock and nothing pending.
pub const CONFIRMATIONS: u32 = 2;
/// One admin API call, all gateways tried.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the judge looks whether the load's last requests were answered.
const IN_FLIGHT_POLL: Duration = Duration::from_millis(20);
/// `first_all_409_us` before it happened.
const NEVER: u64 = u64::MAX;

/// Where the sale stands, as the workers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Fresh buyers go out.
    Selling,
    /// Every gateway answered 409: fresh buyers wait for the judge.
    Checking,
    /// No more fresh buyers.
    Over,
}

/// Why fresh buyers stopped coming.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    /// The check found the sale over.
    SoldOut,
    /// `--sold-out-timeout` and `--sold-out-wait` passed before.
    TimedOut,
    /// `--max-users` distinct users were used before.
    MaxUsers,
}

impl Ended {
    pub fn describe(self) -> &'static str {
        match self {
            Self::SoldOut => "sold out",
            Self::TimedOut => "timed out",
            Self::MaxUsers => "out of users (--max-users)",
        }
    }
}

/// How the judge finds out whether the sale is over.
pub enum Look {
    AdminApi(AdminApi),
    /// Over once no buyer has bought for this long.
    Probes {
        quiet: Duration,
    },
}

impl Look {
    pub fn kind(&self) -> SaleEndCheck {
        match self {
            Self::AdminApi(_) => SaleEndCheck::AdminApi,
            Self::Probes { .. } => SaleEndCheck::Probes,
        }
    }
}

/// What a worker holding a fresh user does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Send it. `waited`: it was held during a check, so a `--rate` schedule has moved on.
    Go {
        waited: bool,
    },
    Stop,
}

enum Verdict {
    Resume,
    End(Ended),
}

/// What changes only at checks.
#[derive(Default)]
struct Checks {
    /// When the check under way started, µs after the start.
    started_us: u64,
    count: u64,
    resumed: u64,
    ended: Option<(Ended, u64)>,
    last_seen: Option<StockView>,
    last_error: Option<String>,
}

/// The summary's `sale_end`: how `--until-sold-out` made sure the sale was over.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SaleEndReport {
    /// `admin_api` or `probes`.
    pub checked_by: SaleEndCheck,
    /// `sold_out`, `timed_out` or `max_users`.
    pub ended: Ended,
    /// When every gateway first answered 409 after its last sale, s after the start.
    pub first_all_409_s: Option<f64>,
    /// When fresh buyers stopped, s after the start.
    pub ended_s: f64,
    /// Rounds of 409s from every gateway that were checked.
    pub checks: u64,
    /// Checks after which fresh buyers were offered again: units had come back (or, by
    /// probes, the gateways had not been quiet for long enough).
    pub resumed: u64,
    /// Units sold (202 or 201) after the first round of 409s.
    pub sold_after_first_409: u64,
    /// Time fresh buyers were held while checking, s.
    pub paused_s: f64,
    /// The admin API's last answer.
    pub last_seen: Option<StockView>,
    /// The admin API's last error, if any.
    pub last_error: Option<String>,
}

/// The state of an `--until-sold-out` run, shared by the workers and the judge.
pub struct SaleEnd {
    phase: watch::Sender<Phase>,
    tracker: SoldOutTracker,
    streak: u64,
    started: Instant,
    wait_us: u64,
    /// No fresh users after this, µs after the start.
    deadline_us: AtomicU64,
    /// µs after the start, or [`NEVER`].
    first_all_409_us: AtomicU64,
    /// The last 202 or 201, µs after the start.
    last_sale_us: AtomicU64,
    sold_after_first: AtomicU64,
    /// Time fresh users were held by finished checks, µs.
    paused_us: AtomicU64,
    checks: Mutex<Checks>,
}

fn micros(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}

impl SaleEnd {
    /// `streak`: 409s in a row after its last sale that make a gateway sold out. `timeout`
    /// and `wait`: `--sold-out-timeout` and `--sold-out-wait`.
    pub fn new(
        gateways: usize,
        streak: u64,
        started: Instant,
        timeout: Duration,
        wait: Duration,
    ) -> Self {
        Self {
            phase: watch::Sender::new(Phase::Selling),
            tracker: SoldOutTracker::new(gateways),
            streak,
            started,
            wait_us: micros(wait),
            deadline_us: AtomicU64::new(micros(timeout)),
            first_all_409_us: AtomicU64::new(NEVER),
            last_sale_us: AtomicU64::new(0),
            sold_after_first: AtomicU64::new(0),
            paused_us: AtomicU64::new(0),
            checks: Mutex::default(),
        }
    }

    fn now_us(&self) -> u64 {
        micros(self.started.elapsed())
    }

    fn checks(&self) -> std::sync::MutexGuard<'_, Checks> {
        self.checks.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn past_deadline(&self) -> bool {
        self.now_us() >= self.deadline_us.load(Ordering::Relaxed)
    }

    fn until_deadline(&self) -> Duration {
        Duration::from_micros(
            self.deadline_us
                .load(Ordering::Relaxed)
                .saturating_sub(self.now_us()),
        )
    }

    pub fn phase(&self) -> Phase {
        *self.phase.borrow()
    }

    /// Gateways that have answered `streak` 409s since their last sale.
    pub fn sold_out_gateways(&self) -> usize {
        self.tracker.sold_out_gateways(self.streak)
    }

    /// How long fresh users were held by checks: a `--rate` schedule moves by as much.
    pub fn paused(&self) -> Duration {
        Duration::from_micros(self.paused_us.load(Ordering::Relaxed))
    }

    /// Records a buy's answer.
    pub fn record(&self, gateway: usize, outcome: Outcome) {
        self.tracker.record(gateway, outcome);
        if outcome.is_sale() {
            self.last_sale_us
                .fetch_max(self.now_us(), Ordering::Relaxed);
            if self.first_all_409_us.load(Ordering::Relaxed) != NEVER {
                self.sold_after_first.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// A worker holding a fresh user asks whether to send it. Waits while a check is under way.
    pub async fn gate(&self) -> Gate {
        let mut rx = self.phase.subscribe();
        let mut waited = false;
        loop {
            let phase = *rx.borrow_and_update();
            match phase {
                Phase::Over => return Gate::Stop,
                Phase::Checking => {
                    waited = true;
                    // The judge ends the check; the deadline is only a safety net.
                    let left = self.until_deadline() + Duration::from_secs(1);
                    if tokio::time::timeout(left, rx.changed()).await.is_err()
                        && self.past_deadline()
                    {
                        self.end(Ended::TimedOut);
                    }
                    continue;
                }
                Phase::Selling => {}
            }
            if self.past_deadline() {
                self.end(Ended::TimedOut);
                return Gate::Stop;
            }
            if self.tracker.all_sold_out(self.streak) {
                self.begin_check();
                continue;
            }
            return Gate::Go { waited };
        }
    }

    fn begin_check(&self) {
        let now = self.now_us();
        self.phase.send_if_modified(|p| {
            if *p != Phase::Selling {
                return false;
            }
            *p = Phase::Checking;
            let mut c = self.checks();
            c.count += 1;
            c.started_us = now;
            if self.first_all_409_us.load(Ordering::Relaxed) == NEVER {
                self.first_all_409_us.store(now, Ordering::Relaxed);
                self.deadline_us
                    .fetch_max(now.saturating_add(self.wait_us), Ordering::Relaxed);
            }
            true
        });
    }

    /// Ends a check: fresh buyers go out again, and every gateway has to answer 409 again.
    fn resume(&self) {
        self.tracker.reset();
        let now = self.now_us();
        self.phase.send_if_modified(|p| {
            if *p != Phase::Checking {
                return false;
            }
            *p = Phase::Selling;
            let mut c = self.checks();
            c.resumed += 1;
            self.paused_us
                .fetch_add(now.saturating_sub(c.started_us), Ordering::Relaxed);
            true
        });
    }

    /// No more fresh buyers; the first reason given is kept.
    pub fn end(&self, how: Ended) {
        let now = self.now_us();
        self.checks().ended.get_or_insert((how, now));
        self.phase.send_replace(Phase::Over);
    }

    /// Runs the checks until the sale ends. `in_flight` counts the load's requests awaiting
    /// an answer: a look is only taken when it is 0, so no late sale slips past it.
    pub async fn judge(&self, mut look: Look, in_flight: impl Fn() -> u64) {
        let mut rx = self.phase.subscribe();
        let mut next_look = Instant::now();
        loop {
            let over = match rx.wait_for(|p| *p != Phase::Selling).await {
                Ok(p) => *p == Phase::Over,
                Err(_) => true,
            };
            if over {
                return;
            }
            match self.check(&mut look, &in_flight, &mut next_look).await {
                Verdict::Resume => self.resume(),
                Verdict::End(how) => {
                    self.end(how);
                    return;
                }
            }
        }
    }

    async fn check(
        &self,
        look: &mut Look,
        in_flight: &impl Fn() -> u64,
        next_look: &mut Instant,
    ) -> Verdict {
        let mut empty = 0;
        loop {
            if self.past_deadline() {
                return Verdict::End(Ended::TimedOut);
            }
            if in_flight() > 0 {
                tokio::time::sleep(IN_FLIGHT_POLL).await;
                continue;
            }
            match look {
                Look::AdminApi(api) => {
                    tokio::time::sleep_until((*next_look).into()).await;
                    *next_look = Instant::now() + POLL_INTERVAL;
                    let seen = match tokio::time::timeout(ADMIN_TIMEOUT, api.stock()).await {
                        Ok(Ok(view)) => Ok(view),
                        Ok(Err(e)) => Err(format!("{e:#}")),
                        Err(_) => Err(format!("no answer within {ADMIN_TIMEOUT:?}")),
                    };
                    let mut c = self.checks();
                    match seen {
                        Ok(view) => {
                            c.last_seen = Some(view);
                            match view.reading() {
                                Reading::UnitsBack => return Verdict::Resume,
                                Reading::Empty => {
                                    empty += 1;
                                    if empty >= CONFIRMATIONS {
                                        return Verdict::End(Ended::SoldOut);
                                    }
                                }
                                Reading::Wait => empty = 0,
                            }
                        }
                        Err(e) => {
                            c.last_error = Some(e);
                            empty = 0;
                        }
                    }
                }
                Look::Probes { quiet } => {
                    let since_sale = Duration::from_micros(
                        self.now_us()
                            .saturating_sub(self.last_sale_us.load(Ordering::Relaxed)),
                    );
                    if since_sale >= *quiet {
                        return Verdict::End(Ended::SoldOut);
                    }
                    tokio::time::sleep(POLL_INTERVAL.min(*quiet - since_sale)).await;
                    return Verdict::Resume;
                }
            }
        }
    }

    /// The summary's `sale_end`, once the workers have stopped. A run that ended without a
    /// verdict ran out of users.
    pub fn report(&self, checked_by: SaleEndCheck) -> SaleEndReport {
        let now = self.now_us();
        let c = self.checks();
        let (ended, ended_us) = c.ended.unwrap_or((Ended::MaxUsers, now));
        let first = self.first_all_409_us.load(Ordering::Relaxed);
        // Every check but the last resumed the sale; a last one that ended it held fresh
        // buyers until then.
        let open_check = if c.count > c.resumed {
            ended_us.saturating_sub(c.started_us)
        } else {
            0
        };
        SaleEndReport {
            checked_by,
            ended,
            first_all_409_s: (first != NEVER).then(|| first as f64 / 1e6),
            ended_s: ended_us as f64 / 1e6,
            checks: c.count,
            resumed: c.resumed,
            sold_after_first_409: self.sold_after_first.load(Ordering::Relaxed),
            paused_s: (self.paused_us.load(Ordering::Relaxed) + open_check) as f64 / 1e6,
            last_seen: c.last_seen,
            last_error: c.last_error.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn sale(timeout: Duration, wait: Duration) -> Arc<SaleEnd> {
        Arc::new(SaleEnd::new(2, 1, Instant::now(), timeout, wait))
    }

    #[tokio::test]
    async fn every_gateway_answering_409_holds_fresh_buyers_until_the_check_ends() {
        let s = sale(Duration::from_secs(60), Duration::from_secs(60));
        assert_eq!(s.gate().await, Gate::Go { waited: false });
        s.record(0, Outcome::SoldOut);
        assert_eq!(s.gate().await, Gate::Go { waited: false });
        s.record(1, Outcome::SoldOut);
        let held = tokio::spawn({
            let s = s.clone();
            async move { s.gate().await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(s.phase(), Phase::Checking);
        assert!(!held.is_finished());
        // Units came back: the buyer goes, and the gateways have to answer 409 again.
        s.resume();
        assert_eq!(held.await.unwrap(), Gate::Go { waited: true });
        assert_eq!(s.sold_out_gateways(), 0);
        s.record(0, Outcome::Accepted);
        s.record(0, Outcome::SoldOut);
        s.record(1, Outcome::SoldOut);
        let held = tokio::spawn({
            let s = s.clone();
            async move { s.gate().await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        s.end(Ended::SoldOut);
        assert_eq!(held.await.unwrap(), Gate::Stop);
        assert_eq!(s.gate().await, Gate::Stop);
        // A later reason does not replace the first.
        s.end(Ended::TimedOut);
        let r = s.report(SaleEndCheck::AdminApi);
        assert_eq!(r.ended, Ended::SoldOut);
        assert_eq!((r.checks, r.resumed, r.sold_after_first_409), (2, 1, 1));
        assert!(r.first_all_409_s.is_some());
        assert!(r.paused_s >= 0.08, "{r:?}");
    }

    #[tokio::test]
    async fn fresh_buyers_stop_at_the_deadline() {
        let s = sale(Duration::ZERO, Duration::from_secs(60));
        assert_eq!(s.gate().await, Gate::Stop);
        assert_eq!(s.report(SaleEndCheck::Probes).ended, Ended::TimedOut);
        // Never checked and never ended: the users ran out.
        let s = sale(Duration::from_secs(60), Duration::from_secs(60));
        let r = s.report(SaleEndCheck::Probes);
        assert_eq!((r.ended, r.first_all_409_s), (Ended::MaxUsers, None));
    }

    #[tokio::test]
    async fn the_first_round_of_409s_gives_the_check_its_own_wait() {
        // --sold-out-timeout has passed by the time of the first round, --sold-out-wait not.
        let s = sale(Duration::from_millis(20), Duration::from_secs(60));
        s.record(0, Outcome::SoldOut);
        s.record(1, Outcome::SoldOut);
        tokio::time::sleep(Duration::from_millis(30)).await;
        // The deadline is checked before the round of 409s: the sale was not over in time.
        assert_eq!(s.gate().await, Gate::Stop);

        let s = sale(Duration::from_millis(100), Duration::from_secs(60));
        s.record(0, Outcome::SoldOut);
        s.record(1, Outcome::SoldOut);
        let held = tokio::spawn({
            let s = s.clone();
            async move { s.gate().await }
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        // Past --sold-out-timeout, but the check may go on.
        assert!(!held.is_finished());
        s.resume();
        assert_eq!(held.await.unwrap(), Gate::Go { waited: true });
    }

    #[tokio::test]
    async fn probes_end_the_sale_once_no_buyer_has_bought_for_the_quiet_time() {
        let s = sale(Duration::from_secs(60), Duration::from_secs(60));
        let judge = tokio::spawn({
            let s = s.clone();
            async move {
                s.judge(
                    Look::Probes {
                        quiet: Duration::from_millis(300),
                    },
                    || 0,
                )
                .await
            }
        });
        s.record(0, Outcome::Accepted);
        let mut rounds = 0;
        loop {
            s.record(0, Outcome::SoldOut);
            s.record(1, Outcome::SoldOut);
            match s.gate().await {
                Gate::Go { waited } => {
                    assert!(waited);
                    rounds += 1;
                }
                Gate::Stop => break,
            }
        }
        judge.await.unwrap();
        let r = s.report(SaleEndCheck::Probes);
        assert_eq!(r.ended, Ended::SoldOut);
        assert!(rounds >= 1, "{r:?}");
        assert_eq!(r.resumed, rounds);
        assert!(r.ended_s >= 0.3, "{r:?}");
    }
}
