//! `seckill-bench audit`: gathers the facts ([`gather`]) and runs the pure
//! [`checks`] over them.

pub mod args;
pub mod checks;
mod room_redis;

use crate::history::{self, Line, SettledLine};
use anyhow::Context;
use args::AuditArgs;
use checks::{
    AuditInput, CheckResult, HistoryFacts, HistoryTicket, MysqlFacts, OrderRow, PaymentRow,
    Promises, RedisFacts, RoomFacts, RoomHistory, SettleMs, TicketState,
};
use futures::stream::{self, StreamExt, TryStreamExt};
use seckill_shared::payments::PaymentStatus;
use seckill_shared::store::{TicketStore, Topology};
use seckill_shared::{db, CancelReason, OrderStatus, ProductId, Ticket, TicketStatus};
use serde::Serialize;
use sqlx::mysql::MySqlPool;
use sqlx::Row;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::Duration;

/// Reduces the history's lines to the facts the checks need. Only tickets of `product` count;
/// the number of others is returned so the caller can warn.
pub fn history_facts(lines: &[Line], product: ProductId) -> anyhow::Result<(HistoryFacts, usize)> {
    let mut facts = HistoryFacts::default();
    let mut foreign = 0;
    let mut settled: Vec<&SettledLine> = vec![];
    // Each user's last request: when it was sent, and whether it went unanswered.
    let mut last_request: BTreeMap<u64, (u64, bool)> = BTreeMap::new();
    for line in lines {
        match line {
            Line::Request(r) => {
                facts.requests += 1;
                facts.last_answer_us = facts.last_answer_us.max(Some(r.recv_at_us));
                if let Some(user) = r.user_id {
                    // Unanswered: no answer, or a 2xx whose body could not be read.
                    let unanswered = r.status.is_none()
                        || (r.error.is_some() && r.status.is_some_and(|s| (200..300).contains(&s)));
                    let last = last_request
                        .entry(user)
                        .or_insert((r.sent_at_us, unanswered));
                    if r.sent_at_us >= last.0 {
                        *last = (r.sent_at_us, unanswered);
                    }
                }
                if r.status.is_none() {
                    // No answer at all (the connection broke): the buy may have gone through.
                    if let Some(user) = r.user_id {
                        facts.unanswered_users.insert(user);
                    }
                }
                let Some(status @ 200..=202) = r.status else {
                    continue;
                };
                if r.error.is_some() {
                    // A 2xx whose body could not be read: the buyer never learned their
                    // ticket, which may be held all the same. Unanswered, never dropped.
                    if let Some(user) = r.user_id {
                        facts.unanswered_users.insert(user);
                    }
                    continue;
                }
                let n = facts.requests;
                let to = r.user_id.map_or("no user".into(), |u| format!("user {u}"));
                let what = |why: String| format!("request {n}: {status} to {to} {why}");
                let Some(user) = r.user_id else {
                    facts.malformed.push(what("names no user".into()));
                    continue;
                };
                let Some(text) = &r.ticket else {
                    facts.malformed.push(what("carries no ticket".into()));
                    continue;
                };
                let Ok(ticket) = Ticket::parse(text) else {
                    facts.malformed.push(what(format!(
                        "carries ticket {text:?}, which does not parse"
                    )));
                    continue;
                };
                if ticket.product() != product {
                    foreign += 1;
                    continue;
                }
                facts
                    .tickets
                    .entry(text.clone())
                    .and_modify(|t| {
                        if t.user != user {
                            t.other_users.insert(user);
                        }
                    })
                    .or_insert_with(|| HistoryTicket {
                        user,
                        other_users: Default::default(),
                        settled: None,
                    });
            }
            Line::Settled(s) => settled.push(s),
            Line::Summary(s) => {
                if let Some(p) = s.product {
                    anyhow::ensure!(
                        p == product.get(),
                        "the history is of a run on product {p}, not {product}"
                    );
                }
                facts.has_summary = true;
                facts.until_sold_out = s.until_sold_out;
                facts.sold_out_reached = s.sold_out_reached;
                facts.sale_end_checked_by = s.sale_end.as_ref().map(|e| e.checked_by);
            }
        }
    }
    facts.last_unanswered_users = last_request
        .into_iter()
        .filter_map(|(user, (_, unanswered))| unanswered.then_some(user))
        .collect();
    // Settled lines follow the requests; match them up once every request is read.
    for s in settled {
        match facts.tickets.get_mut(&s.ticket) {
            Some(t) => t.settled = Some(s.clone()),
            None if Ticket::parse(&s.ticket).is_ok_and(|t| t.product() != product) => {}
            None => facts.stray_settled.push(s.ticket.clone()),
        }
    }
    Ok((facts, foreign))
}

/// Whether the schema under audit has `table` (with `column`, when given): a build from
/// before the payment window has no order status and no payments.
async fn schema_has(pool: &MySqlPool, table: &str, column: Option<&str>) -> anyhow::Result<bool> {
    let n: i64 = match column {
        Some(c) => sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.columns \
             WHERE table_schema = DATABASE() AND table_name = ? AND column_name = ?",
        )
        .bind(table)
        .bind(c),
        None => sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.tables \
             WHERE table_schema = DATABASE() AND table_name = ?",
        )
        .bind(table),
    }
    .fetch_one(pool)
    .await
    .with_context(|| format!("looking for {table} {column:?} in the schema"))?;
    Ok(n > 0)
}

fn order_row(r: &sqlx::mysql::MySqlRow, payment_window: bool) -> anyhow::Result<OrderRow> {
    let mut o = OrderRow::confirmed(
        r.get::<i64, _>("id") as u64,
        r.get::<String, _>("ticket"),
        r.get::<i64, _>("user_id") as u64,
    );
    if !payment_window {
        return Ok(o);
    }
    let status: String = r.get("status");
    o.status = OrderStatus::parse(&status)
        .with_context(|| format!("order {} has unknown status {status:?}", o.id))?;
    o.pay_by_ms = r.get("pay_by_ms");
    o.paid_at_ms = r.get("paid_at_ms");
    o.cancelled_at_ms = r.get("cancelled_at_ms");
    o.cancel_reason = r
        .get::<Option<String>, _>("cancel_reason")
        .map(|c| {
            CancelReason::parse(&c)
                .with_context(|| format!("order {} has unknown cancel_reason {c:?}", o.id))
        })
        .transpose()?;
    o.restore_due = r.get::<i8, _>("restore_due") != 0;
    Ok(o)
}

async fn mysql_facts(pool: &MySqlPool, product: ProductId) -> anyhow::Result<MysqlFacts> {
    // The payment columns only where the schema has them, so older builds can be audited too.
    let (stock, initial_stock): (i64, i64) =
        sqlx::query_as("SELECT stock, initial_stock FROM products WHERE id = ?")
            .bind(product.as_i64())
            .fetch_optional(pool)
            .await
            .context("reading the product")?
            .with_context(|| format!("product {product} is not in MySQL"))?;
    let closed = schema_has(pool, "products", Some("closed_at_ms")).await?
        && sqlx::query_scalar::<_, Option<i64>>("SELECT closed_at_ms FROM products WHERE id = ?")
            .bind(product.as_i64())
            .fetch_one(pool)
            .await
            .context("reading when the sale closed")?
            .is_some();
    let payment_window = schema_has(pool, "orders", Some("status")).await?;
    let buckets: u16 = if schema_has(pool, "products", Some("buckets")).await? {
        sqlx::query_scalar("SELECT buckets FROM products WHERE id = ?")
            .bind(product.as_i64())
            .fetch_one(pool)
            .await
            .context("reading the product's buckets")?
    } else {
        1
    };
    let query = if payment_window {
        "SELECT id, ticket, user_id, status, pay_by_ms, paid_at_ms, cancelled_at_ms, \
         cancel_reason, restore_due FROM orders WHERE product_id = ? ORDER BY id"
    } else {
        "SELECT id, ticket, user_id FROM orders WHERE product_id = ? ORDER BY id"
    };
    let orders = sqlx::query(query)
        .bind(product.as_i64())
        .fetch_all(pool)
        .await
        .context("reading orders")?
        .iter()
        .map(|r| order_row(r, payment_window))
        .collect::<anyhow::Result<_>>()?;
    let failed: Vec<(String, i64)> =
        sqlx::query("SELECT ticket, user_id FROM failed_tickets WHERE product_id = ?")
            .bind(product.as_i64())
            .fetch_all(pool)
            .await
            .context("reading failed tickets")?
            .into_iter()
            .map(|r| (r.get("ticket"), r.get("user_id")))
            .collect();
    let failed_users = failed.iter().map(|(_, u)| *u as u64).collect();
    let failed_tickets = failed.into_iter().map(|(t, _)| t).collect();
    let payments = if schema_has(pool, "payments", None).await? {
        // A ticket is `<product>-<hex>`: the prefix finds the product's payments, those of
        // tickets without an order row too.
        sqlx::query(
            "SELECT payment_id, ticket, user_id, status, settled_at_ms FROM payments \
             WHERE ticket LIKE ? ORDER BY created_at_ms, payment_id",
        )
        .bind(format!("{product}-%"))
        .fetch_all(pool)
        .await
        .context("reading payments")?
        .iter()
        .map(|r| {
            let payment_id: String = r.get("payment_id");
            let status: String = r.get("status");
            Ok(PaymentRow {
                status: PaymentStatus::parse(&status).with_context(|| {
                    format!("payment {payment_id} has unknown status {status:?}")
                })?,
                payment_id,
                ticket: r.get("ticket"),
                user_id: r.get::<i64, _>("user_id") as u64,
                settled_at_ms: r.get("settled_at_ms"),
            })
        })
        .collect::<anyhow::Result<_>>()?
    } else {
        vec![]
    };
    Ok(MysqlFacts {
        stock,
        initial_stock,
        orders,
        failed_tickets,
        failed_users,
        payments,
        buckets,
        closed,
    })
}

/// A ticket's final state: its Redis record, else what MySQL settled, else unknown.
/// `cancel_reason` is its order row's, for a cancelled record without one (a record rebuilt
/// from MySQL).
async fn ticket_state(
    store: &TicketStore,
    pool: &MySqlPool,
    ticket: &str,
    cancel_reason: Option<CancelReason>,
) -> anyhow::Result<TicketState> {
    let Ok(t) = Ticket::parse(ticket) else {
        return Ok(TicketState::Unknown);
    };
    let state = |status,
                 user_id,
                 order_id,
                 reason: Option<String>,
                 confirmed_at_ms|
     -> anyhow::Result<TicketState> {
        Ok(match status {
            TicketStatus::Pending => TicketState::Pending { user_id },
            TicketStatus::Confirmed => TicketState::Confirmed {
                user_id,
                order_id,
                confirmed_at_ms,
            },
            TicketStatus::Paid => TicketState::Paid {
                user_id,
                order_id,
                confirmed_at_ms,
            },
            TicketStatus::Cancelled => TicketState::Cancelled {
                user_id,
                order_id,
                confirmed_at_ms,
                reason: match reason {
                    Some(r) => Some(
                        CancelReason::parse(&r)
                            .with_context(|| format!("unknown cancel reason {r:?}"))?,
                    ),
                    None => cancel_reason,
                },
            },
            TicketStatus::Failed => TicketState::Failed { user_id, reason },
        })
    };
    if let Some(r) = store.ticket(&t).await? {
        return state(r.status, r.user_id, r.order_id, r.reason, r.confirmed_at_ms);
    }
    match db::settled_ticket(pool, &t).await? {
        Some(s) => state(s.status, s.user_id, s.order_id, s.reason, None),
        None => Ok(TicketState::Unknown),
    }
}

/// Reads the history, Redis and MySQL.
pub async fn gather(
    args: &AuditArgs,
    redis_url: &str,
    mysql_url: &str,
    namespace: &str,
) -> anyhow::Result<(AuditInput, Vec<String>)> {
    let product = ProductId::new(args.product).context("--product")?;
    let mut notes = vec![];
    let all = history::read_all(&args.history)?;
    let lines = all.lines;
    // This product's payment lines: a ticket is `<product>-<hex>`.
    let mine = |t: &str| {
        t.split_once('-')
            .is_some_and(|(p, _)| p == product.to_string())
    };
    let (mut pays, mut pay_ends) = (vec![], vec![]);
    for l in all.payments {
        match l {
            history::PaymentLine::Pay(p) if mine(&p.ticket) => pays.push(p),
            history::PaymentLine::PayEnd(e) if mine(&e.ticket) => pay_ends.push(e),
            _ => {}
        }
    }
    let (history, foreign) = history_facts(&lines, product)?;
    if foreign > 0 {
        notes.push(format!(
            "{foreign} tickets in the history are of other products; ignored"
        ));
    }
    if !history.has_summary {
        notes.push("the history has no summary line: the load did not finish".into());
    }

    let store = TicketStore::new(
        &Topology::parse(redis_url, false)?,
        namespace,
        0,
        Duration::from_secs(5),
    )?;
    // A run through a waiting room: its lines, and the room as Redis holds it.
    let waiting_room = if all.waiting_room.is_empty() {
        None
    } else {
        Some(RoomFacts {
            history: RoomHistory::from_lines(&all.waiting_room),
            redis: room_redis::read(&store, product)
                .await
                .context("reading the waiting room from Redis")?,
        })
    };
    let pool = db::pool(mysql_url, args.concurrency.clamp(1, 16) as u32)?;
    let mysql = mysql_facts(&pool, product).await?;
    store.learn_buckets(product, mysql.buckets);
    let c = store.counts(product).await?;
    let redis = RedisFacts {
        stock: c.stock,
        initial: c.initial,
        pending: c.pending,
        confirmed: c.confirmed,
        paid: c.paid,
        cancelled: c.cancelled,
        failed: c.failed,
        buckets: c.buckets.clone(),
    };
    let cancel_reasons: BTreeMap<&str, CancelReason> = mysql
        .orders
        .iter()
        .filter_map(|o| Some((o.ticket.as_str(), o.cancel_reason?)))
        .collect();

    let tickets: BTreeSet<&str> = history
        .tickets
        .keys()
        .map(String::as_str)
        .chain(mysql.orders.iter().map(|o| o.ticket.as_str()))
        .collect();
    let ticket_states = stream::iter(tickets)
        .map(|t| {
            let (store, pool) = (&store, &pool);
            let reason = cancel_reasons.get(t).copied();
            async move {
                let state = ticket_state(store, pool, t, reason)
                    .await
                    .with_context(|| format!("reading ticket {t}"))?;
                anyhow::Ok((t.to_owned(), state))
            }
        })
        .buffer_unordered(args.concurrency.max(1))
        .try_collect()
        .await?;
    pool.close().await;

    Ok((
        AuditInput {
            product: product.get(),
            initial_stock: args.initial_stock,
            allowed_failures: args.allow_failures.iter().cloned().collect(),
            allow_window: args
                .allow_window
                .map(|(from_ms, to_ms)| checks::AllowWindow {
                    from_ms,
                    to_ms,
                    at_most: args.allow_at_most,
                })
                .or(args.allow_at_most.map(|at_most| checks::AllowWindow {
                    from_ms: i64::MIN,
                    to_ms: i64::MAX,
                    at_most: Some(at_most),
                })),
            until_sold_out: args.until_sold_out,
            expect_all_paid: args.expect_all_paid,
            history,
            redis,
            mysql,
            ticket_states,
            waiting_room,
            pays,
            pay_ends,
        },
        notes,
    ))
}

/// The `--json` report. `scripts/chaos.sh` reads `ok`, `checks`, `order_rows`, `promises`
/// (`made`, `kept`, `outcomes`), `sold_out_reached` and `settle_ms` (`p99`, `max`): keep the
/// names.
#[derive(Serialize)]
struct Report<'a> {
    ok: bool,
    product: u64,
    namespace: &'a str,
    initial_stock: i64,
    allowed_failures: Vec<&'a str>,
    history_requests: u64,
    history_tickets: usize,
    order_rows: usize,
    promises: Promises,
    /// The summary's `sold_out_reached`; `null` without a summary or an `--until-sold-out` load.
    sold_out_reached: Option<bool>,
    /// How the load made sure the sale was over (`admin_api`, `probes`); `null` for a load that
    /// stopped at its first round of 409s.
    sale_end_checked_by: Option<history::SaleEndCheck>,
    /// Answer to confirmation, ms; `null` when no confirmed ticket has both times.
    settle_ms: Option<SettleMs>,
    notes: &'a [String],
    checks: &'a [CheckResult],
}

fn report<'a>(
    input: &'a AuditInput,
    namespace: &'a str,
    notes: &'a [String],
    results: &'a [CheckResult],
) -> Report<'a> {
    Report {
        ok: results.iter().all(CheckResult::passed),
        product: input.product,
        namespace,
        initial_stock: input.initial_stock,
        allowed_failures: input.allowed_failures.iter().map(String::as_str).collect(),
        history_requests: input.history.requests,
        history_tickets: input.history.tickets.len(),
        order_rows: input.mysql.orders.len(),
        promises: checks::promises(input),
        sold_out_reached: input.history.sold_out_reached,
        sale_end_checked_by: input.history.sale_end_checked_by,
        settle_ms: checks::settle_ms(input),
        notes,
        checks: results,
    }
}

/// The table `audit` prints.
pub fn table(results: &[CheckResult]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{:<2} {:<31} {:<6} found", "#", "check", "result");
    for r in results {
        let _ = writeln!(
            s,
            "{:<2} {:<31} {:<6} {}",
            r.id,
            r.name,
            r.status.label(),
            r.found
        );
        for p in &r.problems {
            let _ = writeln!(s, "{:<41}! {p}", "");
        }
        for i in &r.info {
            let _ = writeln!(s, "{:<41}i {i}", "");
        }
    }
    s
}

/// What became of the promises, one line per outcome: `confirmed`, `paid`,
/// `cancelled:<reason>`, `failed:<reason>`, `pending`, `unknown`.
pub fn outcomes_table(promises: &Promises, allowed: &BTreeSet<String>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{:<34} {:>9}  promise", "outcome", "tickets");
    for (outcome, n) in &promises.outcomes {
        let cancelled = outcome
            .strip_prefix("cancelled:")
            .is_some_and(|r| CancelReason::parse(r).is_some());
        let verdict = match outcome.strip_prefix("failed:") {
            _ if *n == 0 => "",
            None if outcome == "confirmed" || outcome == "paid" => "kept",
            None if cancelled => "kept (unit given back)",
            Some(reason) if allowed.contains(reason) => "kept (failure allowed)",
            _ => "BROKEN",
        };
        let _ = writeln!(s, "{outcome:<34} {n:>9}  {verdict}");
    }
    let _ = writeln!(
        s,
        "{:<34} {:>9}  {} kept",
        "promises made", promises.made, promises.kept
    );
    s
}

/// Runs the audit. `Ok(false)` when a check failed.
pub async fn run(args: AuditArgs) -> anyhow::Result<bool> {
    // The environment gives what the flags do not.
    let crate::stores::Stores {
        redis_url,
        mysql_url,
        namespace,
    } = crate::stores::Stores::resolve(
        args.redis_url.as_deref(),
        args.mysql_url.as_deref(),
        args.namespace.as_deref(),
    )?;

    let (input, notes) = gather(&args, &redis_url, &mysql_url, &namespace).await?;
    let results = checks::run_all(&input);
    let report = report(&input, &namespace, &notes, &results);
    let ok = report.ok;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        for n in &notes {
            eprintln!("note: {n}");
        }
        print!("{}", table(&results));
        println!();
        print!(
            "{}",
            outcomes_table(&report.promises, &input.allowed_failures)
        );
        let failed = results.iter().filter(|r| !r.passed()).count();
        println!(
            "\nproduct {} in namespace {namespace:?}: {} requests and {} tickets in {}, {} order rows: {}",
            input.product,
            input.history.requests,
            input.history.tickets.len(),
            args.history.display(),
            input.mysql.orders.len(),
            if ok {
                "all checks passed".to_owned()
            } else {
                format!("{failed} check(s) FAILED")
            }
        );
    }
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    const T1: &str = "5-00000000000000000000000000000001";
    const T2: &str = "5-00000000000000000000000000000002";

    #[test]
    fn only_a_buyer_whose_last_request_went_unanswered_may_hold_an_untold_ticket() {
        let text = r#"{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":3,"status":null,"ticket":null,"error":"reset"}
{"kind":"request","sent_at_us":5,"recv_at_us":6,"gateway":"g","user_id":3,"status":409,"ticket":null,"error":null}
{"kind":"request","sent_at_us":5,"recv_at_us":6,"gateway":"g","user_id":4,"status":409,"ticket":null,"error":null}
{"kind":"request","sent_at_us":7,"recv_at_us":9,"gateway":"g","user_id":4,"status":null,"ticket":null,"error":"reset"}
"#;
        let lines = history::parse(text.as_bytes()).unwrap();
        let (f, _) = history_facts(&lines, ProductId::new(5).unwrap()).unwrap();
        assert_eq!(
            f.unanswered_users.iter().copied().collect::<Vec<_>>(),
            vec![3, 4]
        );
        // User 3 was answered after its unanswered request; user 4's last one went unanswered.
        assert_eq!(
            f.last_unanswered_users.iter().copied().collect::<Vec<_>>(),
            vec![4]
        );
    }

    #[test]
    fn history_lines_become_facts() {
        let text = r#"{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":1,"status":202,"ticket":"5-00000000000000000000000000000001","error":null}
{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":1,"status":200,"ticket":"5-00000000000000000000000000000001","error":null}
{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":8,"status":200,"ticket":"5-00000000000000000000000000000002","error":null}
{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":9,"status":202,"ticket":"5-00000000000000000000000000000002","error":null}
{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":2,"status":409,"ticket":null,"error":null}
{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":3,"status":null,"ticket":null,"error":"refused"}
{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":4,"status":202,"ticket":"6-00000000000000000000000000000001","error":null}
{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":5,"status":202,"ticket":null,"error":null}
{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":6,"status":201,"ticket":"5-zz","error":null}
{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":10,"status":202,"ticket":null,"error":"reading the body: connection reset"}
{"kind":"settled","ticket":"5-00000000000000000000000000000001","user_id":1,"status":"failed","order_id":null,"reason":"chaos","answered_at_us":2}
{"kind":"settled","ticket":"6-00000000000000000000000000000001","user_id":4,"status":"confirmed","order_id":3,"reason":null}
{"kind":"settled","ticket":"5-00000000000000000000000000000003","user_id":7,"status":"confirmed","order_id":4,"reason":null}
{"kind":"summary","product":5,"until_sold_out":true,"sold_out_reached":true,"sale_end":{"checked_by":"probes","ended":"sold_out"},"outcomes":[]}
"#;
        let lines = history::parse(text.as_bytes()).unwrap();
        let p = ProductId::new(5).unwrap();
        let (f, foreign) = history_facts(&lines, p).unwrap();
        assert_eq!(foreign, 1);
        assert_eq!(f.requests, 10);
        // No answer, and a 202 whose body was cut off: both unanswered.
        assert_eq!(
            f.unanswered_users.iter().copied().collect::<Vec<_>>(),
            vec![3, 10]
        );

        assert_eq!(f.last_unanswered_users, f.unanswered_users);
        assert_eq!(f.last_answer_us, Some(2));
        assert_eq!(f.tickets.len(), 2);
        let t1 = &f.tickets[T1];
        assert_eq!(t1.user, 1);
        assert!(t1.other_users.is_empty());
        let s = t1.settled.as_ref().unwrap();
        assert_eq!(
            (s.status.as_str(), s.reason.as_deref()),
            ("failed", Some("chaos"))
        );
        assert_eq!(s.answered_at_us, Some(2));
        let t2 = &f.tickets[T2];
        assert_eq!(
            (t2.user, t2.other_users.iter().copied().collect::<Vec<_>>()),
            (8, vec![9])
        );
        assert_eq!(t2.settled, None);
        assert_eq!(f.malformed.len(), 2, "{:?}", f.malformed);
        assert!(
            f.malformed[0].contains("carries no ticket"),
            "{:?}",
            f.malformed
        );
        assert!(
            f.malformed[1].contains("\"5-zz\", which does not parse"),
            "{:?}",
            f.malformed
        );
        assert_eq!(
            f.stray_settled,
            vec!["5-00000000000000000000000000000003".to_owned()]
        );
        assert!(f.has_summary && f.until_sold_out);
        assert_eq!(f.sold_out_reached, Some(true));
        assert_eq!(f.sale_end_checked_by, Some(history::SaleEndCheck::Probes));
        assert!(history_facts(&lines, ProductId::new(6).unwrap()).is_err());
    }

    fn audit_args(extra: &[&str]) -> anyhow::Result<AuditArgs> {
        let mut argv = vec!["b", "audit", "--product", "5"];
        argv.extend_from_slice(extra);
        match Cli::try_parse_from(argv)?.command {
            Command::Audit(a) => Ok(a),
            other => anyhow::bail!("not audit: {other:?}"),
        }
    }

    #[test]
    fn audit_flags() {
        // The initial stock comes from the scenario, never from the database under test.
        assert!(audit_args(&[]).is_err());
        let a = audit_args(&["--initial-stock", "300"]).unwrap();
        assert_eq!(a.initial_stock, 300);
        assert!(a.allow_failures.is_empty() && !a.until_sold_out && !a.expect_all_paid);
        let a = audit_args(&[
            "--initial-stock",
            "300",
            "--allow-failure",
            "chaos",
            "--allow-failure",
            "duplicate_user",
            "--until-sold-out",
            "--expect-all-paid",
        ])
        .unwrap();
        assert_eq!(a.allow_failures, ["chaos", "duplicate_user"]);
        assert!(a.until_sold_out && a.expect_all_paid);
    }

    /// Two tickets for one unit: one confirmed, one failed with `chaos`, which is allowed.
    fn input() -> AuditInput {
        let text = format!(
            r#"{{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":1,"status":202,"ticket":"{T1}","error":null}}
{{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":2,"status":202,"ticket":"{T2}","error":null}}
{{"kind":"settled","ticket":"{T1}","user_id":1,"status":"confirmed","order_id":10,"reason":null,"answered_at_us":1000000,"confirmed_at_ms":1012}}
{{"kind":"settled","ticket":"{T2}","user_id":2,"status":"failed","order_id":null,"reason":"chaos","answered_at_us":1000000}}
{{"kind":"summary","product":5,"until_sold_out":true,"sold_out_reached":true}}
"#
        );
        let lines = history::parse(text.as_bytes()).unwrap();
        let (history, _) = history_facts(&lines, ProductId::new(5).unwrap()).unwrap();
        AuditInput {
            product: 5,
            initial_stock: 1,
            allowed_failures: ["chaos".to_owned()].into_iter().collect(),
            allow_window: None,
            until_sold_out: true,
            expect_all_paid: false,
            history,
            redis: RedisFacts {
                stock: Some(0),
                initial: Some(1),
                pending: 0,
                confirmed: 1,
                paid: 0,
                cancelled: 0,
                failed: 1,
                buckets: vec![],
            },
            mysql: MysqlFacts {
                stock: 0,
                initial_stock: 1,
                orders: vec![OrderRow::confirmed(10, T1, 1)],
                failed_tickets: [T2.to_owned()].into_iter().collect(),
                failed_users: Default::default(),
                payments: vec![],
                buckets: 1,
                closed: false,
            },
            ticket_states: [
                (
                    T1.to_owned(),
                    TicketState::Confirmed {
                        user_id: 1,
                        order_id: Some(10),
                        confirmed_at_ms: Some(1012),
                    },
                ),
                (
                    T2.to_owned(),
                    TicketState::Failed {
                        user_id: 2,
                        reason: Some("chaos".into()),
                    },
                ),
            ]
            .into_iter()
            .collect(),
            waiting_room: None,
            pays: vec![],
            pay_ends: vec![],
        }
    }

    /// `scripts/chaos.sh` reads these names.
    #[test]
    fn the_json_report_keeps_its_names() {
        let input = input();
        let results = checks::run_all(&input);
        let notes = vec![];
        let v = serde_json::to_value(report(&input, "ns", &notes, &results)).unwrap();
        assert_eq!(v["ok"], true, "{v:#}");
        assert_eq!(v["order_rows"], 1);
        assert_eq!(v["checks"].as_array().unwrap().len(), 13);
        assert_eq!(v["checks"][11]["status"], "SKIP");
        assert_eq!(v["checks"][12]["id"], 17);
        assert_eq!(v["checks"][12]["status"], "SKIP");
        assert_eq!(v["checks"][0]["id"], 1);
        assert_eq!(v["checks"][0]["status"], "PASS");
        assert_eq!(v["promises"]["made"], 2);
        assert_eq!(v["promises"]["kept"], 2);
        assert_eq!(
            v["promises"]["outcomes"],
            serde_json::json!({"confirmed": 1, "failed:chaos": 1, "pending": 0, "unknown": 0})
        );
        assert_eq!(v["sold_out_reached"], true);
        assert_eq!(v["sale_end_checked_by"], serde_json::Value::Null);
        assert_eq!(v["settle_ms"]["p99"], 12.0);
        assert_eq!(v["settle_ms"]["max"], 12.0);

        let mut bare = input;
        bare.history.sold_out_reached = None;
        bare.ticket_states.clear();
        let results = checks::run_all(&bare);
        let v = serde_json::to_value(report(&bare, "ns", &notes, &results)).unwrap();
        assert_eq!(v["ok"], false);
        assert_eq!(v["sold_out_reached"], serde_json::Value::Null);
        assert_eq!(v["settle_ms"], serde_json::Value::Null);
        assert_eq!(v["promises"]["outcomes"]["unknown"], 2);
    }

    #[test]
    fn the_outcomes_table_names_broken_promises() {
        let mut input = input();
        input.ticket_states.insert(
            T2.to_owned(),
            TicketState::Failed {
                user_id: 2,
                reason: Some("expired".into()),
            },
        );
        let t = outcomes_table(&checks::promises(&input), &input.allowed_failures);
        let line = |k: &str| t.lines().find(|l| l.starts_with(k)).unwrap().to_owned();
        assert!(line("confirmed").ends_with("1  kept"), "{t}");
        assert!(line("failed:expired").ends_with("1  BROKEN"), "{t}");
        assert!(line("pending").ends_with("0  "), "{t}");
        assert!(line("promises made").ends_with("2  1 kept"), "{t}");
    }

    #[test]
    fn the_outcomes_table_keeps_paid_and_cancelled_promises() {
        let mut input = input();
        input.ticket_states.insert(
            T1.to_owned(),
            TicketState::Paid {
                user_id: 1,
                order_id: Some(10),
                confirmed_at_ms: None,
            },
        );
        let cancelled = |reason| TicketState::Cancelled {
            user_id: 2,
            order_id: Some(11),
            confirmed_at_ms: None,
            reason,
        };
        input
            .ticket_states
            .insert(T2.to_owned(), cancelled(Some(CancelReason::PaymentTimeout)));
        let t = outcomes_table(&checks::promises(&input), &input.allowed_failures);
        let line = |k: &str| t.lines().find(|l| l.starts_with(k)).unwrap().to_owned();
        assert!(line("paid").ends_with("1  kept"), "{t}");
        assert!(
            line("cancelled:payment_timeout").ends_with("1  kept (unit given back)"),
            "{t}"
        );
        assert!(line("promises made").ends_with("2  2 kept"), "{t}");
        // A cancel no store gives a reason for.
        input.ticket_states.insert(T2.to_owned(), cancelled(None));
        let t = outcomes_table(&checks::promises(&input), &input.allowed_failures);
        let line = |k: &str| t.lines().find(|l| l.starts_with(k)).unwrap().to_owned();
        assert!(line("cancelled:none").ends_with("1  BROKEN"), "{t}");
    }
}
