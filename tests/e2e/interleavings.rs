//! Interleavings against the real stores (issue 32). A step harness runs the real Lua scripts
//! and MySQL transactions of several actors that meet on the same tickets (workers, sweepers,
//! the buyer's cancel, the payment expiry), one step at a time, in an order the test or
//! proptest chooses, and checks the lifecycle's invariants against Redis and MySQL after every
//! step and once everything is quiet.
//!
//! One step is one atomic unit of the real code: a Lua script, or a MySQL transaction. An
//! actor may also crash between two steps; a crashed worker's message is delivered again.

use crate::helpers::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use reqwest::StatusCode;
use seckill_shared::locations::Located;
use seckill_shared::payments as payment;
use seckill_shared::payments::attempts as payments;
use seckill_shared::payments::cancel::{self, BuyerCancel, Cancelled};
use seckill_shared::recovery::{self, SweepAction, SweepRules};
use seckill_shared::settle::{Claimed, Outcome, Settler};
use seckill_shared::store::RecordStatus;
use seckill_shared::{now_ms, OrderMessage, ProductId, UserId};
use serde_json::{json, Value};
use sqlx::Row;
use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

/// The sweeper's rules in the harness: every unsettled ticket is due at once.
const DUE_NOW: SweepRules = SweepRules {
    timeout: Duration::ZERO,
    last_resort: Duration::from_secs(3600),
};

/// The expiry runs this far ahead of the clock, so that every payment deadline has passed;
/// its cancels are stamped with that time.
const EXPIRY_AHEAD_MS: i64 = 86_400_000;

/// One ticket of the sale, as its buyer got it.
#[derive(Clone)]
struct Bought {
    order: OrderMessage,
    /// Kafka acknowledged its order, at this offset of partition 0: the buyer holds a `202`,
    /// and the sweeper knows the location.
    offset: Option<i64>,
}

/// A sale on the real stores: one product with a payment window, and its tickets.
struct Sale {
    product: ProductId,
    initial: i64,
    bought: Vec<Bought>,
    settler: Settler,
}

/// The harness's next move.
#[derive(Debug, Clone, Copy)]
enum Pick {
    /// The n-th (modulo) of the actors not done yet takes its next step, or crashes.
    Nth(u8, bool),
    /// This actor takes its next step.
    Actor(usize),
    /// This actor crashes.
    Crash(usize),
}

/// Where one actor is.
enum Step {
    Start,
    Claimed(Claimed),
    Persisted(Claimed, Vec<Outcome>),
    Cancelled(Vec<Cancelled>),
    /// A payment sent to the provider.
    Paying(String),
    /// A payment that paid this order.
    Paid(u64),
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Settles one order message: claim, the batch transaction, confirm or compensate.
    Worker,
    /// Sweeps one ticket: reads it, decides, then expires it or completes it (as a worker).
    Sweeper,
    /// The buyer cancels their order: the MySQL transaction, then Redis follows.
    Buyer,
    /// The payment expiry (every deadline passed): the MySQL transaction, then Redis follows.
    Expiry,
    /// One whole sweep of every live product ([`recovery::sweep`]), as one step.
    Sweep,
    /// The buyer pays (the gateway records the attempt under the order's lock), the provider
    /// calls back a success (MySQL), then Redis follows (`paid.lua`).
    Payer,
}

struct Actor {
    role: Role,
    /// The ticket it works on (index into `Sale::bought`); the expiry takes every order.
    ticket: usize,
    step: Step,
    /// A worker whose message comes again after it crashed.
    redelivered: bool,
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.role {
            Role::Expiry => write!(f, "expiry"),
            Role::Sweep => write!(f, "sweep"),
            r => write!(
                f,
                "{r:?}{} t{}",
                if self.redelivered { " (again)" } else { "" },
                self.ticket + 1
            ),
        }
    }
}

impl Actor {
    fn new(role: Role, ticket: usize) -> Self {
        Self {
            role,
            ticket,
            step: Step::Start,
            redelivered: false,
        }
    }

    fn done(&self) -> bool {
        matches!(self.step, Step::Done)
    }

    /// Runs this actor's next step; returns what it did, for the trace.
    async fn step(&mut self, sale: &Sale, env: &TestEnv) -> anyhow::Result<String> {
        let b = &sale.bought[self.ticket];
        let t = &b.order.ticket;
        let now = now_ms();
        let step = std::mem::replace(&mut self.step, Step::Done);
        let (next, did) = match (self.role, step) {
            (Role::Worker, Step::Start) => {
                let claimed = sale.settler.claim(std::slice::from_ref(&b.order)).await?;
                let did = format!("claim.lua: {}", claimed.claimed().len());
                if claimed.claimed().is_empty() {
                    (Step::Done, did)
                } else {
                    (Step::Claimed(claimed), did)
                }
            }
            (Role::Sweeper, Step::Start) => {
                let Some(record) = env.store.ticket(t).await? else {
                    return Ok("reads no record".into());
                };
                let committed = HashMap::from([(0, b.offset.map_or(0, |o| o + 1))]);
                let location = b.offset.map(|o| (0, o));
                let action = recovery::decide(&record, location, now, DUE_NOW, Some(&committed));
                let did = format!("reads {:?}: {action:?}", record.state);
                match action {
                    SweepAction::Leave => (Step::Done, did),
                    SweepAction::Expire => {
                        let expired =
                            recovery::expire(&env.store, &env.db, t, record.user_id, now).await?;
                        (Step::Done, format!("{did}, expired: {expired:?}"))
                    }
                    SweepAction::Complete => {
                        let order = recovery::from_reservation(t, &record)?;
                        let claimed = sale.settler.claim(std::slice::from_ref(&order)).await?;
                        let n = claimed.claimed().len();
                        let did = format!("{did}, claim.lua: {n}");
                        if n == 0 {
                            (Step::Done, did)
                        } else {
                            (Step::Claimed(claimed), did)
                        }
                    }
                }
            }
            (Role::Worker | Role::Sweeper, Step::Claimed(claimed)) => {
                let decided = sale.settler.persist(&claimed).await?;
                let did = format!("MySQL: {decided:?}");
                (Step::Persisted(claimed, decided), did)
            }
            (Role::Worker | Role::Sweeper, Step::Persisted(claimed, decided)) => {
                let report = sale.settler.finish(&claimed, &decided).await?;
                (
                    Step::Done,
                    format!(
                        "Redis follows: {} confirmed, {:?} back",
                        report.newly_confirmed, report.given_back
                    ),
                )
            }
            (Role::Buyer, Step::Start) => {
                match cancel::cancel_by_buyer(&env.db, t, b.order.user_id, now).await? {
                    BuyerCancel::Cancelled(c) => {
                        (Step::Cancelled(vec![c]), "MySQL: cancelled".to_owned())
                    }
                    other => (Step::Done, format!("MySQL: {other:?}")),
                }
            }
            (Role::Expiry, Step::Start) => {
                let due = cancel::cancel_overdue(&env.db, now + EXPIRY_AHEAD_MS, 100).await?;
                let did = format!("MySQL: {} cancelled", due.len());
                if due.is_empty() {
                    (Step::Done, did)
                } else {
                    (Step::Cancelled(due), did)
                }
            }
            (Role::Sweep, Step::Start) => {
                let committed = HashMap::from([(0, i64::MAX)]);
                let report =
                    recovery::sweep(&env.store, &env.db, DUE_NOW, Some(&committed), None).await?;
                (Step::Done, format!("{report:?}"))
            }
            (Role::Payer, Step::Start) => {
                let p = payments::Payment {
                    payment_id: payments::new_payment_id(),
                    ticket: t.to_string(),
                    user_id: b.order.user_id.get(),
                    status: payment::PaymentStatus::Unsent,
                    amount: 500,
                    currency: "EUR".into(),
                };
                let key = format!("key-{}", p.payment_id);
                match payments::record(&env.db, &p, &key, now - 60_000).await? {
                    payments::Recorded::New => {
                        payments::mark_sent(&env.db, &p.payment_id).await?;
                        (Step::Paying(p.payment_id), "pays: sent".to_owned())
                    }
                    other => (Step::Done, format!("pays: {other:?}")),
                }
            }
            (Role::Payer, Step::Paying(payment_id)) => {
                let settled =
                    payments::settle(&env.db, &payment_id, payment::ChargeOutcome::Succeeded, now)
                        .await?
                        .expect("a recorded payment");
                let did = format!("callback: {:?}", settled.payment.status);
                match settled.paid_order {
                    Some(order) => (Step::Paid(order), did),
                    None => (Step::Done, did),
                }
            }
            (Role::Payer, Step::Paid(order)) => {
                let paid = cancel::PaidOrder {
                    id: order,
                    ticket: t.clone(),
                    user_id: b.order.user_id.get(),
                };
                cancel::follow_paid(&env.store, &env.db, &[paid], now).await?;
                (Step::Done, "paid.lua, restore_due cleared".to_owned())
            }
            (Role::Buyer | Role::Expiry, Step::Cancelled(due)) => {
                let back = cancel::give_back(&env.store, &env.db, &due, now).await?;
                (Step::Done, format!("cancel.lua: {back:?} back"))
            }
            (role, _) => anyhow::bail!("{role:?} has no such step"),
        };
        self.step = next;
        Ok(did)
    }
}

impl Stage {
    /// A worker that crashed: its message comes again, once.
    fn crash(&mut self, i: usize) -> String {
        let a = &mut self.actors[i];
        let was = a.to_string();
        a.step = Step::Done;
        if a.role == Role::Worker && !a.redelivered {
            let mut again = Actor::new(Role::Worker, a.ticket);
            again.redelivered = true;
            self.actors.push(again);
        }
        format!("{was}: crashes")
    }
}

/// The harness: the sale, its actors, and the trace of what ran.
struct Stage {
    sale: Sale,
    actors: Vec<Actor>,
    trace: Vec<String>,
}

/// Sets up the shared services once: a gateway (for the admin API) and its environment.
struct Bench {
    env: TestEnv,
    gw: TestGateway,
}

impl Bench {
    async fn new() -> Self {
        let env = TestEnv::new().await;
        let gw = env
            .gateway_with(|s| {
                s.payment_provider_url = "http://127.0.0.1:9".into();
                s.payment_callback_url = "http://gateway.invalid/v1/payments/callback".into();
                s.payment_webhook_secret = WEBHOOK_SECRET.into();
            })
            .await;
        Self { env, gw }
    }

    /// A new sale of `stock` units with a payment window, and one reservation per entry of
    /// `located` (`true`: Kafka acknowledged it and the location is known).
    async fn sale(&self, stock: i64, located: &[bool]) -> Sale {
        let (status, body) = self
            .gw
            .admin_post(
                "/admin/products",
                json!({"name": "raced item", "stock": stock, "price": 500, "currency": "EUR", "payment_window_secs": 600}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let product = ProductId::new(body["id"].as_u64().unwrap()).unwrap();
        let (status, body) = self
            .gw
            .admin_post(&format!("/admin/products/{product}/preload"), Value::Null)
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let mut bought = Vec::new();
        for (i, &located) in located.iter().enumerate() {
            let user = UserId::new(100 + i as u64).unwrap();
            // Reserved a moment ago, so that every deadline of the sweeper has passed.
            let at = now_ms() - 10;
            let (ticket, _) = self
                .env
                .store
                .reserve(product, user, at, false)
                .await
                .unwrap();
            let offset = located.then_some(i as i64);
            if let Some(offset) = offset {
                let l = Located {
                    ticket: ticket.clone(),
                    reserved_at_ms: at,
                    partition: 0,
                    offset,
                };
                self.env.store.locate(product, &[l]).await.unwrap();
            }
            bought.push(Bought {
                order: OrderMessage::new(ticket, user, at),
                offset,
            });
        }
        Sale {
            product,
            initial: stock,
            bought,
            settler: Settler {
                store: self.env.store.clone(),
                db: self.env.db.clone(),
                chaos: Default::default(),
                ids: Default::default(),
            },
        }
    }
}

/// What the stores say of one ticket.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    redis: Option<RecordStatus>,
    redis_reason: Option<String>,
    redis_order_id: Option<u64>,
    order: Option<(String, bool)>,
    order_id: Option<u64>,
    failed: Option<String>,
    /// Payments of the ticket: (in progress, succeeded).
    payments: (i64, i64),
}

fn holds_unit(s: Option<RecordStatus>) -> bool {
    matches!(
        s,
        Some(
            RecordStatus::Pending
                | RecordStatus::Processing
                | RecordStatus::Confirmed
                | RecordStatus::Paid
        )
    )
}

impl Stage {
    async fn seen(&self, env: &TestEnv) -> anyhow::Result<Vec<Seen>> {
        let mut out = Vec::new();
        for b in &self.sale.bought {
            let t = b.order.ticket.as_str();
            let record = env.store.ticket(&b.order.ticket).await?;
            let row = sqlx::query("SELECT id, status, restore_due FROM orders WHERE ticket = ?")
                .bind(t)
                .fetch_optional(&env.db)
                .await?;
            let order_id = row.as_ref().map(|r| r.get::<i64, _>("id") as u64);
            let order = row.map(|r| {
                (
                    r.get::<String, _>("status"),
                    r.get::<i8, _>("restore_due") != 0,
                )
            });
            let payments: (i64, i64) = sqlx::query_as(
                "SELECT CAST(COALESCE(SUM(status IN ('unsent', 'processing')), 0) AS SIGNED), \
                 CAST(COALESCE(SUM(status = 'succeeded'), 0) AS SIGNED) FROM payments WHERE ticket = ?",
            )
            .bind(t)
            .fetch_one(&env.db)
            .await?;
            let failed = sqlx::query("SELECT reason FROM failed_tickets WHERE ticket = ?")
                .bind(t)
                .fetch_optional(&env.db)
                .await?
                .map(|r| r.get::<String, _>("reason"));
            out.push(Seen {
                redis: record.as_ref().map(|r| r.state),
                redis_order_id: record.as_ref().and_then(|r| r.order_id),
                redis_reason: record.and_then(|r| r.reason),
                order,
                order_id,
                failed,
                payments,
            });
        }
        Ok(out)
    }

    /// The invariants that hold after every step. Returns the first broken one.
    async fn check_always(&self, env: &TestEnv) -> anyhow::Result<Option<String>> {
        let seen = self.seen(env).await?;
        let p = self.sale.product;
        let held = seen.iter().filter(|s| holds_unit(s.redis)).count() as i64;
        let redis_stock = env.store.stock(p).await?.unwrap_or(-1);
        if redis_stock + held != self.sale.initial {
            return Ok(Some(format!(
                "a unit in two places (or none) in Redis: stock {redis_stock} + {held} held != {}",
                self.sale.initial
            )));
        }
        let sold = seen
            .iter()
            .filter(|s| matches!(&s.order, Some((st, _)) if st != "cancelled"))
            .count() as i64;
        let mysql_stock = env.mysql_stock(p).await;
        if mysql_stock + sold != self.sale.initial {
            return Ok(Some(format!(
                "a unit in two places (or none) in MySQL: stock {mysql_stock} + {sold} sold != {}",
                self.sale.initial
            )));
        }
        for (s, b) in seen.iter().zip(&self.sale.bought) {
            if s.payments.0 > 1 || s.payments.1 > 1 {
                return Ok(Some(format!(
                    "{}: two payments in progress or succeeded at once: {s:?}",
                    b.order.ticket
                )));
            }
            if s.order.is_some() && s.failed.is_some() {
                return Ok(Some(format!(
                    "{} is both an order and a failure in MySQL: {s:?}",
                    b.order.ticket
                )));
            }
        }
        Ok(None)
    }

    /// The invariants once every actor is done and the recovery round ran.
    async fn check_quiet(&self, env: &TestEnv) -> anyhow::Result<Option<String>> {
        if let Some(broken) = self.check_always(env).await? {
            return Ok(Some(broken));
        }
        let seen = self.seen(env).await?;
        let p = self.sale.product;
        let redis_stock = env.store.stock(p).await?.unwrap_or(-1);
        let mysql_stock = env.mysql_stock(p).await;
        if redis_stock != mysql_stock {
            return Ok(Some(format!(
                "the stores disagree once quiet: Redis stock {redis_stock}, MySQL {mysql_stock}"
            )));
        }
        for (s, b) in seen.iter().zip(&self.sale.bought) {
            let t = &b.order.ticket;
            let want = match (&s.order, &s.failed) {
                (Some((status, restore_due)), _) => {
                    if *restore_due {
                        return Ok(Some(format!("{t}: restore_due still set: {s:?}")));
                    }
                    RecordStatus::parse(status)
                }
                (None, Some(_)) => Some(RecordStatus::Failed),
                // Never written to MySQL: its unit must be back in Redis.
                (None, None) => Some(RecordStatus::Failed),
            };
            if s.redis != want {
                return Ok(Some(format!("{t}: Redis says {:?}, MySQL {s:?}", s.redis)));
            }
            if s.order_id.is_some() && s.redis_order_id != s.order_id {
                return Ok(Some(format!("{t}: Redis holds another order id: {s:?}")));
            }
            let reason = s.failed.as_deref().or(s.redis_reason.as_deref());
            if s.redis == Some(RecordStatus::Failed)
                && b.offset.is_some()
                && matches!(reason, Some("lost" | "expired"))
            {
                return Ok(Some(format!(
                    "{t}: its buyer held a 202, and it ended failed ({reason:?})"
                )));
            }
            let buyer = env.store.buyer(p, b.order.user_id).await?;
            let holds = holds_unit(s.redis);
            if holds != (buyer.as_deref() == Some(t.as_str())) {
                return Ok(Some(format!(
                    "{t}: the buyers hash says {buyer:?}, the ticket is {:?}",
                    s.redis
                )));
            }
        }
        Ok(None)
    }

    /// Runs the actors in `order` (each entry picks among the actors not done yet; a crash
    /// entry stops one), then every actor to its end, then the recovery round of a quiet
    /// fleet. Checks after every step. `Err` with the trace when an invariant broke.
    async fn run(mut self, env: &TestEnv, order: &[Pick]) -> Result<Vec<String>, String> {
        let mut choices = order.iter().copied();
        loop {
            let live: Vec<usize> = (0..self.actors.len())
                .filter(|&i| !self.actors[i].done())
                .collect();
            let Some(&first) = live.first() else { break };
            let (i, crash) = match choices.next() {
                Some(Pick::Nth(c, crash)) => (live[c as usize % live.len()], crash),
                Some(Pick::Actor(i)) if self.actors[i].done() => {
                    let name = self.actors[i].to_string();
                    return Err(self.failed(format!("the schedule runs {name} after its end")));
                }
                Some(Pick::Actor(i)) => (i, false),
                Some(Pick::Crash(i)) => (i, true),
                None => (first, false),
            };
            let line = if crash {
                self.crash(i)
            } else {
                let name = self.actors[i].to_string();
                let sale = &self.sale;
                match self.actors[i].step(sale, env).await {
                    Ok(did) => format!("{name}: {did}"),
                    Err(e) => return Err(self.failed(format!("{name} failed: {e:#}"))),
                }
            };
            self.trace.push(line);
            match self.check_always(env).await {
                Ok(None) => {}
                Ok(Some(broken)) => return Err(self.failed(broken)),
                Err(e) => return Err(self.failed(format!("reading the stores: {e:#}"))),
            }
        }
        // A quiet fleet: the restore_due round, then a sweep with every deadline passed.
        let now = now_ms();
        let quiet = async {
            // On the expiry's clock: the cancels it stamped ahead are due too.
            let due = cancel::restore_due(&env.db, now + EXPIRY_AHEAD_MS, 100).await?;
            cancel::give_back(&env.store, &env.db, &due, now).await?;
            let paid = cancel::paid_due(&env.db, now, 100).await?;
            cancel::follow_paid(&env.store, &env.db, &paid, now).await?;
            let committed: HashMap<i32, i64> = HashMap::from([(0, i64::MAX)]);
            recovery::sweep(&env.store, &env.db, DUE_NOW, Some(&committed), None).await
        };
        match quiet.await {
            Ok(report) => self.trace.push(format!("recovery round: {report:?}")),
            Err(e) => return Err(self.failed(format!("the recovery round failed: {e:#}"))),
        }
        match self.check_quiet(env).await {
            Ok(None) => Ok(self.trace),
            Ok(Some(broken)) => Err(self.failed(broken)),
            Err(e) => Err(self.failed(format!("reading the stores: {e:#}"))),
        }
    }

    fn failed(&self, why: String) -> String {
        format!("{why}\ntrace:\n  {}", self.trace.join("\n  "))
    }
}

fn stage(sale: Sale, actors: &[(Role, usize)]) -> Stage {
    Stage {
        sale,
        actors: actors.iter().map(|&(r, t)| Actor::new(r, t)).collect(),
        trace: Vec::new(),
    }
}

/// Runs `actors` in the fixed `schedule` (actor indices, in order) and fails with the trace if
/// a promise broke.
async fn exact(bench: &Bench, located: &[bool], actors: &[(Role, usize)], schedule: &[usize]) {
    let sale = bench.sale(2, located).await;
    let order: Vec<Pick> = schedule.iter().map(|&i| Pick::Actor(i)).collect();
    if let Err(e) = stage(sale, actors).run(&bench.env, &order).await {
        panic!("{e}");
    }
}

/// Bug 1 of issue 32: the buyer cancels between the worker's MySQL commit and its confirm.
/// Before the fix `cancel.lua` took only a `confirmed` ticket, `restore_due` was cleared
/// anyway, and the confirm made it `confirmed` again: Redis never got the unit back and the
/// buyer could never buy again.
#[tokio::test]
async fn a_cancel_between_the_commit_and_the_confirm_gives_the_unit_back() {
    let bench = Bench::new().await;
    let actors = [(Role::Worker, 0), (Role::Buyer, 0)];
    // worker: claim, commit; buyer: cancel's commit, cancel.lua; worker: confirm.
    exact(&bench, &[true], &actors, &[0, 0, 1, 1, 0]).await;
    // And the payment expiry in the same place.
    let actors = [(Role::Worker, 0), (Role::Expiry, 0)];
    exact(&bench, &[true], &actors, &[0, 0, 1, 1, 0]).await;
}

/// Found by the model checker: a payment lands between the worker's MySQL commit and its
/// confirm (the pay reads MySQL, which has the order). `paid.lua` took only a `confirmed`
/// ticket, and the confirm then left Redis `confirmed` for a paid order (or, had the worker
/// died, `processing` for good).
#[tokio::test]
async fn a_payment_between_the_commit_and_the_confirm_is_followed_by_redis() {
    let bench = Bench::new().await;
    let actors = [(Role::Worker, 0), (Role::Payer, 0)];
    // worker: claim, commit; payer: record, callback, paid.lua; worker: confirm.
    exact(&bench, &[true], &actors, &[0, 0, 1, 1, 1, 0]).await;
}

/// Found by the step harness: the gateway that applied a payment stops between its MySQL
/// commit and `paid.lua`, and the worker's confirm then leaves Redis `confirmed` for a paid
/// order. The commit now sets `restore_due` with `paid`, and a worker's round makes Redis
/// follow.
#[tokio::test]
async fn a_payment_whose_gateway_stops_before_redis_is_followed_later() {
    let bench = Bench::new().await;
    let sale = bench.sale(2, &[true]).await;
    let actors = [(Role::Worker, 0), (Role::Payer, 0)];
    // worker: claim, commit; payer: record, callback, then it stops; worker: confirm.
    let order = [
        Pick::Actor(0),
        Pick::Actor(0),
        Pick::Actor(1),
        Pick::Actor(1),
        Pick::Crash(1),
        Pick::Actor(0),
    ];
    if let Err(e) = stage(sale, &actors).run(&bench.env, &order).await {
        panic!("{e}");
    }
}

/// Bug 2 of issue 32: two sweepers. One completes an acknowledged order whose message Kafka
/// lost (its claim makes the ticket `processing`); the other reads `processing` before the
/// first one's commit. Before the fix it wrote `lost` and gave the unit back: the buyer's
/// `202` ended failed.
#[tokio::test]
async fn two_sweepers_complete_an_acknowledged_order_once() {
    let bench = Bench::new().await;
    let actors = [(Role::Sweeper, 0), (Role::Sweeper, 0)];
    // first: read + claim; second: read (processing) + act; first: commit, confirm.
    exact(&bench, &[true], &actors, &[0, 1, 1, 1, 0, 0]).await;
    // The same with a worker that read the message and claimed it, then stalled.
    let actors = [(Role::Worker, 0), (Role::Sweeper, 0)];
    exact(&bench, &[true], &actors, &[0, 1, 1, 1, 0, 0]).await;
    // And with the whole of the real sweep (every live product) as the second sweeper.
    let actors = [(Role::Sweeper, 0), (Role::Sweep, 0)];
    exact(&bench, &[true], &actors, &[0, 1, 0, 0]).await;
}

/// A sweeper that read a `pending` ticket without a location decides to expire it; a worker
/// claims it first (its message was in Kafka after all). Before the fix the sweeper wrote an
/// `expired` failure row anyway, and the worker's transaction then failed the order.
#[tokio::test]
async fn a_sweeper_that_loses_to_a_worker_leaves_no_failure_row() {
    let bench = Bench::new().await;
    let sale = bench.sale(2, &[false]).await;
    let t = sale.bought[0].order.ticket.clone();
    let record = bench.env.store.ticket(&t).await.unwrap().unwrap();
    let action = recovery::decide(&record, None, now_ms(), DUE_NOW, None);
    assert_eq!(action, SweepAction::Expire);
    let claimed = sale
        .settler
        .claim(std::slice::from_ref(&sale.bought[0].order))
        .await
        .unwrap();
    assert_eq!(claimed.claimed().len(), 1);
    let expired = recovery::expire(
        &bench.env.store,
        &bench.env.db,
        &t,
        record.user_id,
        now_ms(),
    )
    .await
    .unwrap();
    assert_eq!(expired, None, "the worker claimed it first");
    let decided = sale.settler.persist(&claimed).await.unwrap();
    assert!(
        matches!(decided[..], [Outcome::Confirmed { .. }]),
        "{decided:?}"
    );
    sale.settler.finish(&claimed, &decided).await.unwrap();
    let record = bench.env.store.ticket(&t).await.unwrap().unwrap();
    assert_eq!(record.state, RecordStatus::Confirmed);
}

/// A redelivered message of an order MySQL cancelled since (a Redis that came back old holds
/// its ticket `pending`): the worker's batch finds the cancelled row and Redis follows it
/// (`cancelled`, the unit back), instead of confirming a cancelled order.
#[tokio::test]
async fn a_claim_of_an_order_cancelled_since_makes_redis_follow_the_cancel() {
    let bench = Bench::new().await;
    let sale = bench.sale(2, &[true]).await;
    let env = &bench.env;
    let order = &sale.bought[0].order;
    sale.settler
        .settle(std::slice::from_ref(order))
        .await
        .unwrap();
    let BuyerCancel::Cancelled(c) =
        cancel::cancel_by_buyer(&env.db, &order.ticket, order.user_id, now_ms())
            .await
            .unwrap()
    else {
        panic!("not cancelled");
    };
    cancel::give_back(&env.store, &env.db, &[c], now_ms())
        .await
        .unwrap();
    assert_eq!(env.redis_stock(sale.product).await, 2);
    // Redis comes back old: the ticket is `pending` again, holding a unit, its buyer held.
    let keys = env.store.ticket_keys(&order.ticket);
    let mut conn = env.store.connection();
    let _: () = redis::pipe()
        .hset(keys.ticket(&order.ticket), "status", "pending")
        .hset(keys.buyers(), order.user_id.get(), order.ticket.as_str())
        .zadd(keys.pending(), order.ticket.as_str(), order.reserved_at_ms)
        .decr(keys.stock(), 1)
        .query_async(&mut conn)
        .await
        .unwrap();
    let report = sale
        .settler
        .settle(std::slice::from_ref(order))
        .await
        .unwrap();
    assert!(
        matches!(report.outcomes[..], [(_, Outcome::Cancelled { .. })]),
        "{:?}",
        report.outcomes
    );
    let record = env.store.ticket(&order.ticket).await.unwrap().unwrap();
    assert_eq!(record.state, RecordStatus::Cancelled);
    assert_eq!(env.redis_stock(sale.product).await, 2);
    assert_eq!(
        env.store.buyer(sale.product, order.user_id).await.unwrap(),
        None
    );
}

/// proptest chooses the order of the steps of a worker, two sweepers, the buyer's cancel and
/// the expiry on one acknowledged ticket, of a worker and a sweeper on a ticket whose
/// location is unknown, and of a worker on a third; any of them may crash between steps
/// (a crashed worker's message comes again). After every step and once quiet, every
/// invariant holds.
#[test]
fn every_order_of_the_actors_keeps_every_promise() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let bench = rt.block_on(Bench::new());
    let cases = std::env::var("INTERLEAVING_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let actors = [
        (Role::Worker, 0),
        (Role::Sweeper, 0),
        (Role::Sweeper, 0),
        (Role::Buyer, 0),
        (Role::Expiry, 0),
        (Role::Payer, 2),
        (Role::Payer, 2),
        (Role::Worker, 1),
        (Role::Sweeper, 1),
        (Role::Worker, 2),
    ];
    let order = prop::collection::vec(
        (any::<u8>(), prop::bool::weighted(0.05)).prop_map(|(n, crash)| Pick::Nth(n, crash)),
        0..30,
    );
    let runs = std::sync::atomic::AtomicU32::new(0);
    runner
        .run(&order, |order| {
            runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            rt.block_on(async {
                let sale = bench.sale(3, &[true, false, true]).await;
                stage(sale, &actors).run(&bench.env, &order).await
            })
            .map(|_| ())
            .map_err(TestCaseError::fail)
        })
        .unwrap();
    let runs = runs.into_inner();
    assert!(runs >= cases, "ran {runs} of {cases} cases");
}

/// Found from outside (issue 32): an attempt the provider never took (it was down) is `unsent`,
/// and two pays of the order then come at once. Their transactions run one after the other
/// under the order's lock; before the claim, both read the old attempt as free and both sent
/// it (the provider asked twice). Here, step by step on the real transactions: the first
/// claims it, the second finds it being sent; a failed send gives the claim back.
#[tokio::test]
async fn two_pays_after_an_unsent_attempt_send_it_once() {
    let bench = Bench::new().await;
    let sale = bench.sale(2, &[true]).await;
    let order = sale.bought[0].order.clone();
    // The worker settles the order: claim, commit, confirm.
    let settled = [Pick::Actor(0), Pick::Actor(0), Pick::Actor(0)];
    if let Err(e) = stage(sale, &[(Role::Worker, 0)])
        .run(&bench.env, &settled)
        .await
    {
        panic!("{e}");
    }
    let db = &bench.env.db;
    // A provider call may take this long: an attempt stamped later is being sent.
    const CALL_MS: i64 = 4_000;
    let attempt = || payments::Payment {
        payment_id: payments::new_payment_id(),
        ticket: order.ticket.to_string(),
        user_id: order.user_id.get(),
        status: payment::PaymentStatus::Unsent,
        amount: 500,
        currency: "EUR".into(),
    };
    let record = |p: payments::Payment, key: &'static str| async move {
        payments::record(db, &p, key, now_ms() - CALL_MS)
            .await
            .unwrap()
    };
    // Pay 0: recorded; its send fails (the provider is down), and it gives its claim back.
    let first = attempt();
    assert_eq!(record(first.clone(), "k0").await, payments::Recorded::New);
    payments::release(db, &first.payment_id, CALL_MS)
        .await
        .unwrap();
    // Pays 1 and 2, with new keys, one transaction after the other.
    let one = record(attempt(), "k1").await;
    let two = record(attempt(), "k2").await;
    assert_eq!(
        one,
        payments::Recorded::Unsent(first.clone()),
        "pay 1 sends it"
    );
    assert_eq!(two, payments::Recorded::InProgress, "pay 2 waits");
    // Pay 1's send fails too: the claim goes back, and pay 2 again sends it.
    payments::release(db, &first.payment_id, CALL_MS)
        .await
        .unwrap();
    assert_eq!(
        record(attempt(), "k2").await,
        payments::Recorded::Unsent(first.clone())
    );
    // The same key twice while it is being sent: the second waits too.
    assert_eq!(
        record(first.clone(), "k0").await,
        payments::Recorded::InProgress
    );
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM payments WHERE ticket = ?")
        .bind(order.ticket.to_string())
        .fetch_one(db)
        .await
        .unwrap();
    assert_eq!(n, 1, "one attempt, never a second beside it");
}
