//! `seckill-bench audit`: gathers the facts ([`gather`]) and runs the pure
//! [`checks`] over them.

pub mod checks;

use crate::cli::AuditArgs;
use crate::history::{self, Line};
use anyhow::Context;
use checks::{
    AuditInput, CheckResult, HistoryFacts, MysqlFacts, OrderRow, RedisFacts, TicketState,
};
use futures::stream::{self, StreamExt, TryStreamExt};
use seckill_shared::store::TicketStore;
use seckill_shared::{db, ProductId, Settings, Ticket, TicketStatus};
use serde::Serialize;
use sqlx::mysql::MySqlPool;
use sqlx::Row;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::Duration;

/// Reduces the history's lines to the facts the checks need. Only tickets of `product` count;
/// the number of others is returned so the caller can warn.
pub fn history_facts(lines: &[Line], product: ProductId) -> anyhow::Result<(HistoryFacts, usize)> {
    let mut facts = HistoryFacts::default();
    let mut foreign = 0;
    for line in lines {
        match line {
            Line::Request(r) => {
                facts.requests += 1;
                if r.error.is_some() {
                    continue;
                }
                let Some(user) = r.user_id else { continue };
                match r.status {
                    Some(200..=202) => {
                        let Some(t) = &r.ticket else { continue };
                        if Ticket::parse(t).is_ok_and(|t| t.product() != product) {
                            foreign += 1;
                            continue;
                        }
                        facts.tickets.insert(t.clone(), user);
                        facts.accepted_users.insert(user);
                    }
                    Some(409) => {
                        facts.sold_out_users.insert(user);
                    }
                    _ => {}
                }
            }
            Line::Settled(_) => {}
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
            }
        }
    }
    Ok((facts, foreign))
}

async fn mysql_facts(pool: &MySqlPool, product: ProductId) -> anyhow::Result<MysqlFacts> {
    let p = db::product(pool, product)
        .await?
        .with_context(|| format!("product {product} is not in MySQL"))?;
    let orders =
        sqlx::query("SELECT id, ticket, user_id FROM orders WHERE product_id = ? ORDER BY id")
            .bind(product.as_i64())
            .fetch_all(pool)
            .await
            .context("reading orders")?
            .into_iter()
            .map(|r| OrderRow {
                id: r.get::<i64, _>("id") as u64,
                ticket: r.get("ticket"),
                user_id: r.get::<i64, _>("user_id") as u64,
            })
            .collect();
    let duplicate_users = sqlx::query(
        "SELECT user_id, COUNT(*) AS n FROM orders WHERE product_id = ? \
         GROUP BY user_id HAVING COUNT(*) > 1",
    )
    .bind(product.as_i64())
    .fetch_all(pool)
    .await
    .context("grouping orders by user")?
    .into_iter()
    .map(|r| (r.get::<i64, _>("user_id") as u64, r.get::<i64, _>("n")))
    .collect();
    // Tickets carry their product, so a row filed under another product is caught too.
    let duplicate_tickets = sqlx::query(
        "SELECT ticket, COUNT(*) AS n FROM orders WHERE product_id = ? OR ticket LIKE ? \
         GROUP BY ticket HAVING COUNT(*) > 1",
    )
    .bind(product.as_i64())
    .bind(format!("{product}-%"))
    .fetch_all(pool)
    .await
    .context("grouping orders by ticket")?
    .into_iter()
    .map(|r| (r.get::<String, _>("ticket"), r.get::<i64, _>("n")))
    .collect();
    let failed_tickets = sqlx::query("SELECT ticket FROM failed_tickets WHERE product_id = ?")
        .bind(product.as_i64())
        .fetch_all(pool)
        .await
        .context("reading failed tickets")?
        .into_iter()
        .map(|r| r.get::<String, _>("ticket"))
        .collect();
    Ok(MysqlFacts {
        stock: p.stock,
        initial_stock: p.initial_stock,
        orders,
        duplicate_users,
        duplicate_tickets,
        failed_tickets,
    })
}

/// A ticket's state: its Redis record, else what MySQL settled, else unknown.
async fn ticket_state(
    store: &TicketStore,
    pool: &MySqlPool,
    ticket: &str,
) -> anyhow::Result<TicketState> {
    let Ok(t) = Ticket::parse(ticket) else {
        return Ok(TicketState::Unknown);
    };
    let map = |s: TicketStatus| match s {
        TicketStatus::Pending => TicketState::Pending,
        TicketStatus::Confirmed => TicketState::Confirmed,
        TicketStatus::Failed => TicketState::Failed,
    };
    if let Some(r) = store.ticket(&t).await? {
        return Ok(map(r.status));
    }
    Ok(db::settled_ticket(pool, &t)
        .await?
        .map_or(TicketState::Unknown, |s| map(s.status)))
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
    let lines = history::read(&args.history)?;
    let (history, foreign) = history_facts(&lines, product)?;
    if foreign > 0 {
        notes.push(format!(
            "{foreign} tickets in the history are of other products; ignored"
        ));
    }
    if !history.has_summary {
        notes.push("the history has no summary line: the load did not finish".into());
    }

    let store = TicketStore::new(redis_url, namespace, 0, Duration::from_secs(5))?;
    let pool = db::pool(mysql_url, args.concurrency.clamp(1, 16) as u32)?;
    let mysql = mysql_facts(&pool, product).await?;
    let c = store.counts(product).await?;
    let redis = RedisFacts {
        stock: c.stock,
        initial: c.initial,
        pending: c.pending,
        confirmed: c.confirmed,
        failed: c.failed,
    };

    let tickets: BTreeSet<&str> = history
        .tickets
        .keys()
        .map(String::as_str)
        .chain(mysql.orders.iter().map(|o| o.ticket.as_str()))
        .collect();
    let ticket_states = stream::iter(tickets)
        .map(|t| {
            let (store, pool) = (&store, &pool);
            async move {
                let state = ticket_state(store, pool, t)
                    .await
                    .with_context(|| format!("reading ticket {t}"))?;
                anyhow::Ok((t.to_owned(), state))
            }
        })
        .buffer_unordered(args.concurrency.max(1))
        .try_collect()
        .await?;
    pool.close().await;

    let initial_stock = args.initial_stock.unwrap_or(mysql.initial_stock);
    Ok((
        AuditInput {
            product: product.get(),
            initial_stock,
            history,
            redis,
            mysql,
            ticket_states,
        },
        notes,
    ))
}

#[derive(Serialize)]
struct Report<'a> {
    ok: bool,
    product: u64,
    namespace: &'a str,
    initial_stock: i64,
    history_requests: u64,
    history_tickets: usize,
    order_rows: usize,
    notes: &'a [String],
    checks: &'a [CheckResult],
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

/// Runs the audit. `Ok(false)` when a check failed.
pub async fn run(args: AuditArgs) -> anyhow::Result<bool> {
    // The environment gives what the flags do not.
    let settings = Settings::load(None);
    let from_env = |what: &str| -> anyhow::Result<&Settings> {
        settings
            .as_ref()
            .map_err(|e| anyhow::anyhow!("{e:#}"))
            .with_context(|| format!("loading settings for the {what} (or pass it as a flag)"))
    };
    let redis_url = match &args.redis_url {
        Some(u) => u.clone(),
        None => from_env("Redis URL")?.redis_url.clone(),
    };
    let mysql_url = match &args.mysql_url {
        Some(u) => u.clone(),
        None => from_env("MySQL URL")?.mysql_url.clone(),
    };
    let namespace = match &args.namespace {
        Some(n) => n.clone(),
        None => from_env("namespace")?.namespace.clone(),
    };

    let (input, notes) = gather(&args, &redis_url, &mysql_url, &namespace).await?;
    let results = checks::run_all(&input);
    let ok = results.iter().all(CheckResult::passed);
    if args.json {
        let report = Report {
            ok,
            product: input.product,
            namespace: &namespace,
            initial_stock: input.initial_stock,
            history_requests: input.history.requests,
            history_tickets: input.history.tickets.len(),
            order_rows: input.mysql.orders.len(),
            notes: &notes,
            checks: &results,
        };
        println!("{}", serde_json::to_string(&report)?);
    } else {
        for n in &notes {
            eprintln!("note: {n}");
        }
        print!("{}", table(&results));
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

    #[test]
    fn history_lines_become_facts() {
        let text = r#"{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":1,"status":202,"ticket":"5-00000000000000000000000000000001","error":null}
{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":1,"status":200,"ticket":"5-00000000000000000000000000000001","error":null}
{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":2,"status":409,"ticket":null,"error":null}
{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":3,"status":null,"ticket":null,"error":"refused"}
{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":4,"status":202,"ticket":"6-00000000000000000000000000000001","error":null}
{"kind":"settled","ticket":"5-00000000000000000000000000000001","user_id":1,"status":"confirmed","order_id":3,"reason":null}
{"kind":"summary","product":5,"until_sold_out":true,"sold_out_reached":true,"outcomes":[]}
"#;
        let lines = history::parse(text.as_bytes()).unwrap();
        let p = ProductId::new(5).unwrap();
        let (f, foreign) = history_facts(&lines, p).unwrap();
        assert_eq!(foreign, 1);
        assert_eq!(f.requests, 5);
        assert_eq!(f.tickets.len(), 1);
        assert_eq!(f.accepted_users, [1].into_iter().collect());
        assert_eq!(f.sold_out_users, [2].into_iter().collect());
        assert!(f.has_summary && f.until_sold_out);
        assert_eq!(f.sold_out_reached, Some(true));
        assert!(history_facts(&lines, ProductId::new(6).unwrap()).is_err());
    }
}
