//! `--until-all-paid`: offering fresh buyers until every unit is paid.
//!
//! With a payment window, a sold-out sale is not the end: orders not paid in time are
//! cancelled and their units go back on sale. So fresh buyers keep coming at `--rate`, most of
//! them answered 409 while unpaid orders hold the units, and [`AllPaid::watch`] looks at
//! `GET /admin/products/{id}` every [`POLL_INTERVAL`] until MySQL holds as many paid orders as
//! the product had units (`orders_db.paid == initial_stock`), or `--all-paid-wait-secs` has
//! passed since the start. Either ends the load. After the paying buyers are done, one more
//! look ([`AllPaid::last_look`]) says whether every unit ended paid.

use super::admin_api::AdminApi;
use seckill_shared::api::ProductView;
use serde::{Deserialize, Serialize};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Looks at the admin API are this far apart.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// One look, all gateways tried.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(5);

/// MySQL's orders of the product, by state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrdersDb {
    pub confirmed: i64,
    pub paid: i64,
    pub cancelled: i64,
}

/// The part of `GET /admin/products/{id}` that says whether every unit is paid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaidView {
    pub initial_stock: i64,
    /// `None` while Redis has lost the product.
    pub stock_redis: Option<i64>,
    pub stock_db: i64,
    /// `None` from a gateway that predates payments.
    #[serde(default)]
    pub orders_db: Option<OrdersDb>,
}

impl PaidView {
    /// What an admin view says of the payments.
    pub fn of(v: &ProductView) -> Self {
        Self {
            initial_stock: v.initial_stock,
            stock_redis: v.stock_redis,
            stock_db: v.stock_db,
            orders_db: Some(OrdersDb {
                confirmed: v.orders_db.confirmed,
                paid: v.orders_db.paid,
                cancelled: v.orders_db.cancelled,
            }),
        }
    }

    /// Every unit the sale started with is in a paid order: MySQL's stock is spent, and no
    /// order is left confirmed and unpaid (in units, whatever each order holds: `orders_db`
    /// counts orders).
    pub fn all_paid(&self) -> bool {
        self.orders_db
            .is_some_and(|o| self.stock_db == 0 && o.confirmed == 0)
    }
}

/// Why fresh buyers stopped coming.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stopped {
    /// The admin API showed every unit paid.
    AllPaid,
    /// `--all-paid-wait-secs` passed first.
    TimedOut,
    /// `--max-users` distinct users were used first.
    MaxUsers,
}

impl Stopped {
    pub fn describe(self) -> &'static str {
        match self {
            Self::AllPaid => "all paid",
            Self::TimedOut => "timed out",
            Self::MaxUsers => "out of users (--max-users)",
        }
    }
}

/// The summary's `all_paid`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AllPaidReport {
    /// Every unit ended paid: seen by the watch, or by the last look after the paying buyers
    /// were done.
    pub reached: bool,
    /// When every unit was first seen paid, s after the start.
    pub reached_s: Option<f64>,
    /// Why fresh buyers stopped coming, and when (s after the start).
    pub stopped: Stopped,
    pub stopped_s: f64,
    /// Looks at the admin API.
    pub checks: u64,
    pub last_seen: Option<PaidView>,
    pub last_error: Option<String>,
}

#[derive(Default)]
struct State {
    checks: u64,
    reached_us: Option<u64>,
    stopped: Option<(Stopped, u64)>,
    last_seen: Option<PaidView>,
    last_error: Option<String>,
}

/// The state of an `--until-all-paid` run.
pub struct AllPaid {
    started: Instant,
    wait: Duration,
    state: Mutex<State>,
}

fn micros(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}

impl AllPaid {
    /// `wait`: `--all-paid-wait-secs`, from `started`.
    pub fn new(started: Instant, wait: Duration) -> Self {
        Self {
            started,
            wait,
            state: Mutex::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now_us(&self) -> u64 {
        micros(self.started.elapsed())
    }

    /// Fresh buyers stopped; the first reason given is kept.
    pub fn stop(&self, how: Stopped) {
        let now = self.now_us();
        self.state().stopped.get_or_insert((how, now));
    }

    /// One look; whether every unit is paid.
    async fn look(&self, api: &mut AdminApi) -> bool {
        let seen = match tokio::time::timeout(ADMIN_TIMEOUT, api.view()).await {
            Ok(Ok(v)) => Ok(PaidView::of(&v)),
            Ok(Err(e)) => Err(format!("{e:#}")),
            Err(_) => Err(format!("no answer within {ADMIN_TIMEOUT:?}")),
        };
        let now = self.now_us();
        let mut s = self.state();
        s.checks += 1;
        match seen {
            Ok(v) => {
                s.last_seen = Some(v);
                if v.all_paid() {
                    s.reached_us.get_or_insert(now);
                    return true;
                }
            }
            Err(e) => s.last_error = Some(e),
        }
        false
    }

    /// Looks until every unit is paid or the wait is over, then calls `stop`.
    pub async fn watch(&self, mut api: AdminApi, stop: impl Fn()) {
        let mut next = Instant::now();
        loop {
            if self.started.elapsed() >= self.wait {
                self.stop(Stopped::TimedOut);
                break;
            }
            tokio::time::sleep_until(next.into()).await;
            next = Instant::now() + POLL_INTERVAL;
            if self.look(&mut api).await {
                self.stop(Stopped::AllPaid);
                break;
            }
        }
        stop();
    }

    /// After the paying buyers are done: one more look, unless every unit was seen paid.
    pub async fn last_look(&self, api: &mut AdminApi) {
        if self.state().reached_us.is_none() {
            self.look(api).await;
        }
    }

    /// The summary's `all_paid`, once the load has stopped. A watch that never stopped ran
    /// out of users.
    pub fn report(&self) -> AllPaidReport {
        let now = self.now_us();
        let s = self.state();
        let (stopped, stopped_us) = s.stopped.unwrap_or((Stopped::MaxUsers, now));
        AllPaidReport {
            reached: s.reached_us.is_some(),
            reached_s: s.reached_us.map(|us| us as f64 / 1e6),
            stopped,
            stopped_s: stopped_us as f64 / 1e6,
            checks: s.checks,
            last_seen: s.last_seen,
            last_error: s.last_error.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_is_paid_once_mysql_holds_as_many_paid_orders() {
        let v = |initial_stock, paid| PaidView {
            initial_stock,
            stock_redis: Some(0),
            stock_db: 0,
            orders_db: Some(OrdersDb {
                confirmed: initial_stock - paid,
                paid,
                cancelled: 3,
            }),
        };
        assert!(!v(10, 9).all_paid());
        assert!(v(10, 10).all_paid());
        assert!(v(0, 0).all_paid());
        // Orders of several units: 3 paid orders may hold all 10 units.
        let units = PaidView {
            initial_stock: 10,
            stock_redis: Some(0),
            stock_db: 0,
            orders_db: Some(OrdersDb {
                confirmed: 0,
                paid: 3,
                cancelled: 1,
            }),
        };
        assert!(units.all_paid());
        assert!(!PaidView {
            stock_db: 2,
            ..units
        }
        .all_paid());
        // A gateway that predates payments cannot say.
        let old: PaidView = serde_json::from_str(
            r#"{"initial_stock":5,"stock_redis":0,"stock_db":0,"pending":0,"confirmed":5}"#,
        )
        .unwrap();
        assert_eq!(old.orders_db, None);
        assert!(!old.all_paid());
    }

    #[test]
    fn the_first_reason_to_stop_is_kept() {
        let a = AllPaid::new(Instant::now(), Duration::from_secs(60));
        assert_eq!(a.report().stopped, Stopped::MaxUsers);
        a.stop(Stopped::TimedOut);
        a.stop(Stopped::AllPaid);
        let r = a.report();
        assert_eq!(
            (r.stopped, r.reached, r.reached_s),
            (Stopped::TimedOut, false, None)
        );
    }
}
