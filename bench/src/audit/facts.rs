//! Gathers the facts the checks judge: the history file, Redis and MySQL, into one
//! [`AuditInput`].

use super::args::AuditArgs;
use super::checks::{self, AuditInput, RedisFacts, RoomFacts, RoomHistory, TicketState};
use super::history_facts::history_facts;
use super::mysql_facts::mysql_facts;
use super::room_redis;
use crate::history;
use anyhow::Context;
use futures::stream::{self, StreamExt, TryStreamExt};
use seckill_shared::store::{TicketStore, Topology};
use seckill_shared::{db, CancelReason, ProductId, Ticket, TicketStatus};
use sqlx::mysql::MySqlPool;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

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
