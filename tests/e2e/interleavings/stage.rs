//! The harness: a sale and its actors on the real services, the steps run in a given order,
//! and the lifecycle's invariants checked against Redis and MySQL after every step.

use crate::helpers::*;
use crate::interleavings::actors::{
    Actor, Bought, Pick, Role, Sale, Step, DUE_NOW, EXPIRY_AHEAD_MS,
};
use reqwest::StatusCode;
use seckill_shared::locations::Located;
use seckill_shared::payments::cancel;
use seckill_shared::recovery;
use seckill_shared::reservation::failed_publish::Verdict;
use seckill_shared::reservation::Reservation;
use seckill_shared::settle::Settler;
use seckill_shared::store::RecordStatus;
use seckill_shared::{now_ms, OrderMessage, ProductId, UserId};
use serde_json::{json, Value};
use sqlx::Row;
use std::collections::HashMap;

impl Stage {
    /// A worker that crashed: its message comes again, once (every time, if messages
    /// survive).
    fn crash(&mut self, i: usize) -> String {
        let a = &mut self.actors[i];
        let was = a.to_string();
        a.step = Step::Done;
        if a.role == Role::Worker && (!a.redelivered || self.messages_survive) {
            let mut again = Actor::new(Role::Worker, a.ticket);
            again.redelivered = true;
            self.actors.push(again);
        }
        format!("{was}: crashes")
    }
}

/// The harness: the sale, its actors, and the trace of what ran.
pub(crate) struct Stage {
    pub(crate) sale: Sale,
    actors: Vec<Actor>,
    trace: Vec<String>,
    /// A crashed worker's message comes again every time, not once: Kafka loses none (with
    /// Redis faults, as in the model: a message lost with its Redis record leaves nothing).
    messages_survive: bool,
}

/// Sets up the shared services once: a gateway (for the admin API) and its environment.
pub(crate) struct Bench {
    pub(crate) env: TestEnv,
    gw: TestGateway,
}

impl Bench {
    pub(crate) async fn new() -> Self {
        let env = TestEnv::new().await;
        let gw = env
            .gateway_with(|s| {
                s.payment.provider_url = "http://127.0.0.1:9".into();
                s.payment.callback_url = "http://gateway.invalid/v1/payments/callback".into();
                s.payment.webhook_secret = WEBHOOK_SECRET.into();
            })
            .await;
        Self { env, gw }
    }

    /// A new sale of `stock` units with a payment window, and one reservation of one unit per
    /// entry of `located` (`true`: Kafka acknowledged it and the location is known).
    pub(crate) async fn sale(&self, stock: i64, located: &[bool]) -> Sale {
        let orders: Vec<(bool, u16)> = located.iter().map(|&l| (l, 1)).collect();
        self.sale_of(stock, &orders).await
    }

    /// [`Bench::sale`] with orders of several units: one reservation per entry of `orders`,
    /// (located, units); the product sells up to the largest of them per buyer.
    pub(crate) async fn sale_of(&self, stock: i64, orders: &[(bool, u16)]) -> Sale {
        let most = orders.iter().map(|o| o.1).max().unwrap_or(1);
        let (status, body) = self
            .gw
            .admin_post(
                "/admin/products",
                json!({"name": "raced item", "stock": stock, "price": 500, "currency": "EUR",
                       "payment_window_secs": 600, "max_per_buyer": most}),
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
        for (i, &(located, quantity)) in orders.iter().enumerate() {
            let user = UserId::new(100 + i as u64).unwrap();
            // Reserved a moment ago, so that every deadline of the sweeper has passed.
            let at = now_ms() - 10;
            let (ticket, reserved) = self
                .env
                .store
                .reserve_units(product, user, at, false, None, quantity)
                .await
                .unwrap();
            assert_eq!(
                reserved,
                Reservation::Reserved,
                "the sale's stock fits its orders"
            );
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
                order: OrderMessage::of(ticket, user, at, quantity),
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
pub(crate) struct Seen {
    redis: Option<RecordStatus>,
    redis_reason: Option<String>,
    redis_order_id: Option<u64>,
    pub(crate) order: Option<(String, bool)>,
    order_id: Option<u64>,
    failed: Option<String>,
    /// The units the Redis record, the order row or the failure row holds.
    redis_units: Option<u16>,
    mysql_units: Option<u16>,
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
            let row = sqlx::query(
                "SELECT id, status, restore_due, quantity FROM orders WHERE ticket = ?",
            )
            .bind(t)
            .fetch_optional(&env.db)
            .await?;
            let order_units = row.as_ref().map(|r| r.get::<u16, _>("quantity"));
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
            let failed_row =
                sqlx::query("SELECT reason, quantity FROM failed_tickets WHERE ticket = ?")
                    .bind(t)
                    .fetch_optional(&env.db)
                    .await?;
            let failed_units = failed_row.as_ref().map(|r| r.get::<u16, _>("quantity"));
            let failed = failed_row.map(|r| r.get::<String, _>("reason"));
            out.push(Seen {
                redis_units: record.as_ref().map(|r| r.quantity),
                mysql_units: order_units.or(failed_units),
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
        let held: i64 = seen
            .iter()
            .filter(|s| holds_unit(s.redis))
            .map(|s| i64::from(s.redis_units.unwrap_or(1)))
            .sum();
        let redis_stock = env.store.stock(p).await?.unwrap_or(-1);
        if redis_stock + held != self.sale.initial {
            return Ok(Some(format!(
                "a unit in two places (or none) in Redis: stock {redis_stock} + {held} held != {}",
                self.sale.initial
            )));
        }
        let sold: i64 = seen
            .iter()
            .filter(|s| matches!(&s.order, Some((st, _)) if st != "cancelled"))
            .map(|s| i64::from(s.mysql_units.unwrap_or(1)))
            .sum();
        let mysql_stock = env.mysql_stock(p).await;
        if mysql_stock + sold != self.sale.initial {
            return Ok(Some(format!(
                "a unit in two places (or none) in MySQL: stock {mysql_stock} + {sold} sold != {}",
                self.sale.initial
            )));
        }
        for (s, b) in seen.iter().zip(&self.sale.bought) {
            let q = b.order.quantity;
            if s.redis_units.is_some_and(|u| u != q) || s.mysql_units.is_some_and(|u| u != q) {
                return Ok(Some(format!(
                    "{}: an order of {q} units is held as another number: {s:?}",
                    b.order.ticket
                )));
            }
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
        // What each gateway whose publish failed told its buyer.
        for a in &self.actors {
            let (Role::Gateway, Step::Told(told)) = (a.role, &a.step) else {
                continue;
            };
            let s = &seen[a.ticket];
            let t = &self.sale.bought[a.ticket].order.ticket;
            let order_holds = matches!(&s.order, Some((st, _)) if st != "cancelled");
            match told {
                Verdict::NotHeld if order_holds || holds_unit(s.redis) => {
                    return Ok(Some(format!(
                        "{t}: its buyer was told 503, and holds the unit: {s:?}"
                    )));
                }
                Verdict::Held if s.order.is_none() => {
                    return Ok(Some(format!(
                        "{t}: its buyer was told 202, and has no order: {s:?}"
                    )));
                }
                _ => {}
            }
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
            // A failure whose record Redis lost after the release or expire, its row written
            // after the rebuild read MySQL, or a reservation never promised (no 202) that a
            // Redis loss took: no record, no order (the model allows the same).
            let lost_after_failing = s.redis.is_none()
                && s.order.is_none()
                && (s.failed.is_some() || b.offset.is_none());
            if s.redis != want && !lost_after_failing {
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
    pub(crate) async fn run(
        mut self,
        env: &TestEnv,
        order: &[Pick],
    ) -> Result<Vec<String>, String> {
        let mut choices = order.iter().copied();
        loop {
            // The rebuild after a Redis loss waits, behind the fence, for every settle under
            // way (a worker's uncommitted message): no loss while one is.
            let settling = self
                .actors
                .iter()
                .any(|a| matches!(a.step, Step::Claimed(_) | Step::Persisted(..)));
            let live: Vec<usize> = (0..self.actors.len())
                .filter(|&i| !self.actors[i].done())
                .filter(|&i| !(settling && self.actors[i].role == Role::RedisLoss))
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

impl Stage {
    /// Kafka loses no message: every crashed worker's message comes again.
    pub(crate) fn messages_survive(mut self) -> Self {
        self.messages_survive = true;
        self
    }
}

pub(crate) fn stage(sale: Sale, actors: &[(Role, usize)]) -> Stage {
    Stage {
        sale,
        actors: actors.iter().map(|&(r, t)| Actor::new(r, t)).collect(),
        trace: Vec::new(),
        messages_survive: false,
    }
}

/// Runs `actors` in the fixed `schedule` (actor indices, in order) and fails with the trace if
/// a promise broke.
pub(crate) async fn exact(
    bench: &Bench,
    located: &[bool],
    actors: &[(Role, usize)],
    schedule: &[usize],
) {
    let sale = bench.sale(2, located).await;
    let order: Vec<Pick> = schedule.iter().map(|&i| Pick::Actor(i)).collect();
    if let Err(e) = stage(sale, actors).run(&bench.env, &order).await {
        panic!("{e}");
    }
}
