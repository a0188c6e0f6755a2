//! The run: the waiting-room sale, then the same sale without a waiting room ([`baseline`]).

use super::args::{default_starts_in_secs, QueueSaleArgs};
use super::buyers::{
    buyer_task, buyer_tokens, error_code, sleep_until_ms, AtomicCounts, Buckets, Ctx, Gateway,
    TIMEOUT,
};
use super::report::{
    cpu_ticks_of_stat, kth_earliest, sustained_rate, time_to_count_ms, BaselineReport,
    QueueSaleReport,
};
use crate::admin::Admin;
use crate::load::engine::{Conns, EngineKind, Target};
use anyhow::Context;
use bytes::Bytes;
use seckill_shared::now_ms;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// RFC 3339 in UTC with milliseconds, from ms since the epoch.
pub fn rfc3339_utc(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .expect("a time within chrono's range")
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn redis_ticks(pid: Option<u32>) -> Option<u64> {
    cpu_ticks_of_stat(&std::fs::read_to_string(format!("/proc/{}/stat", pid?)).ok()?)
}

pub async fn run(args: QueueSaleArgs) -> anyhow::Result<bool> {
    anyhow::ensure!(args.concurrency > 0, "--concurrency must be at least 1");
    anyhow::ensure!(args.first_user >= 1, "--first-user must be at least 1");
    anyhow::ensure!(
        args.min_refresh_ms <= args.max_refresh_ms,
        "--min-refresh-ms must not be above --max-refresh-ms"
    );
    let bases: Vec<String> = args
        .gateways
        .iter()
        .map(|g| g.trim_end_matches('/').to_owned())
        .collect();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(args.concurrency)
        .timeout(Duration::from_secs(30))
        .build()
        .context("building the HTTP client")?;
    eprintln!("queue-sale: signing {} tokens", args.buyers);
    let tokens = buyer_tokens(&args)?;
    let admin = Admin {
        http: &http,
        base: &bases[0],
        token: &args.admin_token,
    };
    let mut problems = vec![];

    // 1. The product with its waiting room.
    let starts_in = args
        .starts_in
        .unwrap_or_else(|| default_starts_in_secs(args.buyers));
    let start_ms = now_ms() + (starts_in * 1000.0) as i64;
    let product = admin
        .product(serde_json::json!({
            "name": format!("queue bench {}", now_ms()),
            "stock": args.stock,
            "starts_at": rfc3339_utc(start_ms),
            "waiting_room": {
                "admit_per_sec": args.admit_per_sec,
                "max_admitted_factor": args.max_admitted_factor,
            },
        }))
        .await?;
    let gateways = bases
        .iter()
        .map(|b| {
            Ok(Gateway {
                join: Target::parse(&format!("{b}/v1/seckill/{product}/queue"))?,
                base: b.clone(),
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    eprintln!(
        "queue-sale: product {product}, sale starts in {starts_in:.1} s; {} buyers join",
        args.buyers
    );
    let ctx = Arc::new(Ctx {
        product,
        gateways,
        tokens,
        http: http.clone(),
        first_user: args.first_user,
        buyers: args.buyers,
        start_ms,
        deadline_ms: start_ms + (args.timeout * 1000.0) as i64,
        min_refresh: args.min_refresh_ms,
        max_refresh: args.max_refresh_ms,
        joins: AtomicCounts::default(),
        last_join_ms: AtomicU64::new(0),
        poll_answers: AtomicCounts::default(),
        states: Default::default(),
        polls: Buckets::new(args.timeout),
        done: Buckets::new(args.timeout),
        admissions: AtomicU64::new(0),
        buys_accepted: AtomicU64::new(0),
        buys_sold_out: AtomicU64::new(0),
        buys_refused: AtomicU64::new(0),
        buys_failed: AtomicU64::new(0),
        sold_at: Mutex::new(Vec::new()),
        last_poll_ms: AtomicU64::new(0),
    });

    // 2. and 3. Joins, then polls and buys, by the same tasks.
    let ticks0 = redis_ticks(args.redis_pid);
    let join_t0 = now_ms();
    let tasks = args.concurrency as u64;
    let handles: Vec<_> = (0..tasks)
        .map(|t| tokio::spawn(buyer_task(ctx.clone(), t, tasks)))
        .collect();
    // The joins' end: every task has noted its last join (or the start has come).
    let joins_done = || {
        let c = ctx.joins.get();
        c.ok >= args.buyers
            || c.ok + c.rate_limited + c.unavailable + c.other_status + c.transport_errors
                >= args.buyers * 5
    };
    while !joins_done() && now_ms() < start_ms {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let join_end = now_ms();
    let ticks_joined = redis_ticks(args.redis_pid);
    let joins = ctx.joins.get();
    let join_s = (join_end - join_t0) as f64 / 1000.0;
    eprintln!(
        "queue-sale: {} joined in {join_s:.1} s ({:.0}/s); {:.1} s to the start",
        joins.ok,
        joins.ok as f64 / join_s.max(1e-3),
        (start_ms - join_end) as f64 / 1000.0
    );
    if joins.ok < args.buyers {
        problems.push(format!(
            "{} of {} joins answered 202",
            joins.ok, args.buyers
        ));
    }
    sleep_until_ms(start_ms).await;
    let ticks_start = redis_ticks(args.redis_pid);
    for h in handles {
        h.await.context("a buyer task panicked")?;
    }
    let ticks_end = redis_ticks(args.redis_pid);
    let last_join = ctx.last_join_ms.load(Relaxed) as i64;
    if last_join > start_ms {
        problems.push(format!(
            "the joins ended {} ms after the start: raise --starts-in",
            last_join - start_ms
        ));
    }

    let buckets = ctx.polls.get();
    let polls: u64 = buckets.iter().map(|&c| u64::from(c)).sum();
    let done = ctx.done.get();
    let done_total: u64 = done.iter().map(|&c| u64::from(c)).sum();
    let done90 = time_to_count_ms(&done, (joins.ok * 9).div_ceil(10));
    let last_poll = ctx.last_poll_ms.load(Relaxed) as i64;
    let poll_phase_s = (last_poll - start_ms).max(0) as f64 / 1000.0;
    let per_second: Vec<u32> = buckets
        .chunks(10)
        .map(|c| c.iter().sum())
        .take(((last_poll - start_ms).max(0) / 1000 + 1) as usize)
        .collect();
    let polls_per_s = sustained_rate(&buckets, done90.unwrap_or((poll_phase_s * 1000.0) as u64));
    let mut sold = ctx.sold_at.lock().unwrap().clone();
    let sold_out_ms = kth_earliest(&mut sold, args.stock as usize).map(|t| t - start_ms);
    if sold_out_ms.is_none() {
        problems.push(format!(
            "{} of {} units sold through the waiting room",
            sold.len(),
            args.stock
        ));
    }
    if done_total < joins.ok {
        problems.push(format!(
            "{} buyers still polling after --timeout",
            joins.ok - done_total
        ));
    }
    let per = |a: Option<u64>, b: Option<u64>, n: u64| {
        Some((b? - a?) as f64 * 1e6 / args.clk_tck as f64 / n.max(1) as f64)
    };
    let names = [
        "waiting", "admitted", "sold_out", "expired", "bought", "ended",
    ];
    let mut report = QueueSaleReport {
        ok: false,
        problems: vec![],
        buyers: args.buyers,
        stock: args.stock,
        admit_per_sec: args.admit_per_sec,
        max_admitted_factor: args.max_admitted_factor,
        concurrency: args.concurrency,
        gateways: bases.len(),
        product,
        starts_in_s: starts_in,
        joined: joins.ok,
        join_s,
        joins_per_s: joins.ok as f64 / join_s.max(1e-3),
        join_margin_ms: start_ms - last_join,
        joins: joins.clone(),
        polls,
        poll_answers: ctx.poll_answers.get(),
        poll_states: names
            .iter()
            .zip(&ctx.states)
            .map(|(n, c)| (n.to_string(), c.load(Relaxed)))
            .collect(),
        done90_ms: done90,
        polls_per_s,
        polls_per_s_peak: per_second.iter().copied().max().unwrap_or(0) as f64,
        polls_per_second: per_second,
        admissions: ctx.admissions.load(Relaxed),
        buys_accepted: ctx.buys_accepted.load(Relaxed),
        buys_sold_out: ctx.buys_sold_out.load(Relaxed),
        buys_refused: ctx.buys_refused.load(Relaxed),
        buys_failed: ctx.buys_failed.load(Relaxed),
        sold_out_ms,
        poll_phase_s,
        redis_cpu_us_per_join: per(ticks0, ticks_joined, joins.ok),
        redis_cpu_us_per_poll: per(ticks_start, ticks_end, polls),
        redis_cpu_s_polling: per(ticks_start, ticks_end, 1).map(|us| us / 1e6),
        baseline: None,
    };
    drop(ctx);
    report.ok = problems.is_empty();
    report.problems = problems.clone();
    eprintln!("queue-sale: waiting-room sale done; {}", report.line());

    // 4. The same sale without a waiting room.
    if !args.no_baseline {
        report.baseline = Some(baseline(&args, &admin, &bases, &http).await?);
        if report
            .baseline
            .as_ref()
            .is_some_and(|b| b.sold_out_ms.is_none())
        {
            problems.push("the sale without a waiting room did not sell out".into());
        }
    }
    report.ok = problems.is_empty();
    report.problems = problems;
    if let Some(f) = &args.out {
        std::fs::write(f, serde_json::to_string_pretty(&report)? + "\n")
            .with_context(|| format!("writing {}", f.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
        eprintln!("{}", report.line());
    } else {
        println!("{}", report.line());
    }
    Ok(report.ok)
}

/// The sale without a waiting room: every buyer buys once from the start, `--concurrency` in
/// flight, until a `409 sold_out`.
async fn baseline(
    args: &QueueSaleArgs,
    admin: &Admin<'_>,
    bases: &[String],
    http: &reqwest::Client,
) -> anyhow::Result<BaselineReport> {
    let start_ms = now_ms() + 2000;
    let product = admin
        .product(serde_json::json!({
            "name": format!("queue bench baseline {}", now_ms()),
            "stock": args.stock,
            "starts_at": rfc3339_utc(start_ms),
        }))
        .await?;
    eprintln!("queue-sale: baseline product {product}, no waiting room, starts in 2 s");
    let targets = Arc::new(
        bases
            .iter()
            .map(|b| Target::parse(&format!("{b}/v1/seckill/{product}")))
            .collect::<anyhow::Result<Vec<_>>>()?,
    );
    // Sign the tokens before the start (the waiting-room sale's were dropped with its tasks).
    let tokens = Arc::new(buyer_tokens(args)?);
    let next = Arc::new(AtomicU64::new(0));
    let sold_out = Arc::new(AtomicBool::new(false));
    let answers = Arc::new(AtomicCounts::default());
    let sold_out_answers = Arc::new(AtomicU64::new(0));
    let sold_at = Arc::new(Mutex::new(Vec::new()));
    let (buyers, first_user) = (args.buyers, args.first_user);
    let handles: Vec<_> = (0..args.concurrency)
        .map(|_| {
            let (targets, tokens, next, sold_out, answers, sold_out_answers, sold_at) = (
                targets.clone(),
                tokens.clone(),
                next.clone(),
                sold_out.clone(),
                answers.clone(),
                sold_out_answers.clone(),
                sold_at.clone(),
            );
            let mut conns = Conns::new(EngineKind::Hyper, http, targets.len());
            tokio::spawn(async move {
                sleep_until_ms(start_ms).await;
                while !sold_out.load(Relaxed) {
                    let i = next.fetch_add(1, Relaxed);
                    if i >= buyers {
                        break;
                    }
                    let gw = (i % targets.len() as u64) as usize;
                    loop {
                        let x = conns
                            .exchange(
                                &targets[gw],
                                gw,
                                Some(Bytes::from_static(b"{}")),
                                Some(tokens.header(first_user + i)),
                                TIMEOUT,
                            )
                            .await;
                        answers.record(x.status, 202);
                        let code = error_code(x.body.as_ref());
                        match (x.status, code.as_deref()) {
                            (Some(202), _) => sold_at.lock().unwrap().push(now_ms()),
                            (Some(409), Some("sold_out")) => {
                                sold_out_answers.fetch_add(1, Relaxed);
                                sold_out.store(true, Relaxed);
                            }
                            // Our clock ran a little ahead of the gateway's.
                            (Some(403), Some("sale_not_started")) => {
                                tokio::time::sleep(Duration::from_millis(5)).await;
                                continue;
                            }
                            _ => {}
                        }
                        break;
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.await.context("a baseline buyer task panicked")?;
    }
    let mut sold = sold_at.lock().unwrap().clone();
    let answers = answers.get();
    Ok(BaselineReport {
        product,
        buys: answers.ok
            + answers.rate_limited
            + answers.unavailable
            + answers.other_status
            + answers.transport_errors,
        accepted: sold.len() as u64,
        sold_out_answers: sold_out_answers.load(Relaxed),
        answers,
        sold_out_ms: kth_earliest(&mut sold, args.stock as usize).map(|t| t - start_ms),
    })
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats_utc_with_milliseconds() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_utc(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339_utc(1_798_761_599_999), "2026-12-31T23:59:59.999Z");
        assert_eq!(rfc3339_utc(-1), "1969-12-31T23:59:59.999Z");
    }
}
