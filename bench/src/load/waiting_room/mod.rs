//! `load --waiting-room`: every buyer goes through the product's waiting room, as a real one
//! would. Each of the `--users` buyers joins once (`POST /v1/seckill/{p}/queue`), polls its
//! entry at the `refresh_after_ms` the gateway asks for, and once `admitted` buys with the
//! admission token in `Seckill-Admission`. It stops when it bought, its admission expired, or
//! its entry answers `sold_out`; with `--until-sold-out`, a sold-out buyer keeps polling
//! (slowly, as told) until the admin view shows the sale over, since units that come back
//! admit the next places. Everyone stops at `--wr-timeout`.
//!
//! A request that gets no answer, or a 5xx, is retried on the next gateway: a gateway that
//! dies loses no buyer. A buy that got no answer is retried with the same token while the
//! admission lasts; a buy that went through answers `200` with the held ticket.
//!
//! The history has the buys' request lines and settled lines as any buy run, and the
//! waiting-room lines ([`crate::history::WaitingRoomLine`]): the joins, the admissions seen,
//! each buy with its token, each buyer's end, and, with `--admin-token`, samples of the admin
//! view's `waiting_room.admitted` against `stock_redis` that the audit checks the cap with.

mod buyer;
mod sampler;

pub use sampler::cap;

use crate::history::HistoryWriter;
use crate::load::admin_api::AdminApi;
use crate::load::admin_samples::AdminSampler;
use crate::load::args::LoadArgs;
use crate::load::buyer_token::BuyerTokens;
use crate::load::engine::{EngineKind, POOL_IDLE_TIMEOUT};
use crate::load::sale_end::{Ended, SaleEndReport};
use crate::load::settle::{self, IssuedTicket, SettledOut};
use crate::load::stats::{
    ArrivalModel, ArrivalStats, E2eLatency, ShardedHistograms, Summary, TicketTotals,
    WaitingRoomReport,
};
use crate::now_us;
use anyhow::Context;
use buyer::Room;
use indicatif::ProgressBar;
use sampler::sample;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// Runs the waiting-room load, the polling of its tickets, writes the history and prints the
/// summary.
pub async fn run(args: LoadArgs, tokens: Option<BuyerTokens>) -> anyhow::Result<Summary> {
    let product = args.product.context("--waiting-room needs --product")?;
    seckill_shared::ProductId::new(product).context("--product")?;
    anyhow::ensure!(
        args.wr_timeout.is_finite() && args.wr_timeout > 0.0,
        "--wr-timeout must be a number above 0"
    );
    anyhow::ensure!(
        !args.until_sold_out || args.admin_token.is_some(),
        "--waiting-room --until-sold-out needs --admin-token (or SECKILL_ADMIN_TOKEN): it \
         reads the end of the sale with GET /admin/products/{{id}}"
    );
    let gateways: Vec<String> = args
        .gateways
        .iter()
        .map(|g| g.trim_end_matches('/').to_owned())
        .collect();
    let mut builder = reqwest::Client::builder()
        .pool_max_idle_per_host(args.concurrency)
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(2))
        .no_proxy();
    if args.timeout > 0.0 {
        builder = builder.timeout(Duration::from_secs_f64(args.timeout));
    }
    let client = builder.build().context("building the HTTP client")?;
    let api = match &args.admin_token {
        Some(token) => {
            let mut api = AdminApi::new(client.clone(), &gateways, product, token)?;
            let v = api
                .view()
                .await
                .context("--admin-token: reading the product with GET /admin/products/{id}")?;
            anyhow::ensure!(
                v.waiting_room.is_some(),
                "--waiting-room: product {product} has no waiting room"
            );
            Some(api)
        }
        None => None,
    };

    let history_path = (!args.no_history).then_some(args.history.as_path());
    let writer = HistoryWriter::create(history_path, Arc::new(gateways.clone()))?;
    let started = Instant::now();
    let started_at_us = now_us();
    let room = Arc::new(Room {
        client: client.clone(),
        gateways: gateways.clone(),
        product,
        tokens,
        history: writer.sink(),
        permits: Semaphore::new(args.concurrency.max(1)),
        deadline: started + Duration::from_secs_f64(args.wr_timeout),
        until_sold_out: args.until_sold_out,
        over: AtomicBool::new(false),
        histograms: ShardedHistograms::new(1),
        buys: AtomicU64::new(0),
        join_attempts: AtomicU64::new(0),
        polls: AtomicU64::new(0),
        retries: AtomicU64::new(0),
        admissions: AtomicU64::new(0),
    });
    let admin_samples = AdminSampler::from_args(&args, &client, &gateways, product)?;
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = api.map(|api| {
        tokio::spawn(sample(
            room.clone(),
            api,
            Duration::from_millis(args.wr_sample_ms.max(10)),
            stop.clone(),
        ))
    });
    let buyers: Vec<_> = (args.first_user..args.first_user.saturating_add(args.users))
        .map(|u| tokio::spawn(room.clone().buyer(u)))
        .collect();
    let mut results = Vec::with_capacity(buyers.len());
    for b in buyers {
        results.push(b.await.context("a buyer panicked")?);
    }
    let duration = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let sampled = match sampler {
        Some(s) => Some(s.await.context("the sampler panicked")?),
        None => None,
    };

    let tickets: Vec<IssuedTicket> = results.iter().filter_map(|r| r.ticket.clone()).collect();
    let settle_started = Instant::now();
    let settled = settle::poll_tickets(
        &client,
        &gateways,
        &tickets,
        Duration::from_secs_f64(args.settle_timeout),
        args.settle_concurrency,
        true,
        &ProgressBar::hidden(),
    )
    .await;
    let settle_s = settle_started.elapsed().as_secs_f64();
    let admin_samples = match admin_samples {
        Some(s) => Some(s.finish().await),
        None => None,
    };
    for line in &settled {
        writer.line(&SettledOut {
            kind: "settled",
            line,
        })?;
    }

    let mut ended: BTreeMap<String, u64> = BTreeMap::new();
    for r in &results {
        *ended.entry(r.state.clone()).or_default() += 1;
    }
    let report = WaitingRoomReport {
        joined: results.iter().filter(|r| r.joined).count() as u64,
        not_joined: results.iter().filter(|r| !r.joined).count() as u64,
        admitted_buyers: results.iter().filter(|r| r.admitted).count() as u64,
        admissions: room.admissions.load(Ordering::Relaxed),
        ended,
        join_attempts: room.join_attempts.load(Ordering::Relaxed),
        polls: room.polls.load(Ordering::Relaxed),
        retries: room.retries.load(Ordering::Relaxed),
        samples: sampled.as_ref().map_or(0, |s| s.samples),
        max_admitted_seen: sampled.as_ref().map_or(0, |s| s.max_admitted),
        samples_over_cap: sampled.as_ref().map_or(0, |s| s.over_cap),
    };
    let sale_end = match (&sampled, args.until_sold_out) {
        (Some(s), true) => Some(SaleEndReport {
            checked_by: crate::history::SaleEndCheck::AdminApi,
            ended: if s.over_at.is_some() {
                Ended::SoldOut
            } else {
                Ended::TimedOut
            },
            first_all_409_s: None,
            ended_s: s
                .over_at
                .map_or(duration, |at| at.duration_since(started))
                .as_secs_f64(),
            checks: s.checks,
            resumed: 0,
            sold_after_first_409: 0,
            paused_s: 0.0,
            last_seen: s.last_seen,
            last_error: s.last_error.clone(),
        }),
        _ => None,
    };

    let duration_s = duration.as_secs_f64();
    let merged = room.histograms.merged();
    let (outcomes, all) = merged.stats(duration_s);
    let count = |s: &str| settled.iter().filter(|l| l.status == s).count() as u64;
    let summary = Summary {
        kind: "summary",
        engine: match args.engine {
            EngineKind::Reqwest | EngineKind::Hyper => "reqwest",
        },
        mode: "buy",
        gateways: gateways.clone(),
        product: Some(product),
        path: None,
        concurrency: args.concurrency,
        started_at_us,
        duration_s,
        requests: all.count,
        req_per_s: all.per_sec,
        until_sold_out: args.until_sold_out,
        sold_out_reached: sale_end.as_ref().map(|r| r.ended == Ended::SoldOut),
        sale_end,
        until_all_paid: false,
        all_paid_reached: None,
        all_paid: None,
        jwt: room.tokens.is_some(),
        jwt_alg: room.tokens.as_ref().map(|t| t.issuer().algorithm()),
        jwt_kid: room
            .tokens
            .as_ref()
            .and_then(|t| t.issuer().kid().map(str::to_owned)),
        first_user: args.first_user,
        users_used: args.users,
        distinct_users_accepted: tickets.len() as u64,
        distinct_users_sold_out: report.ended.get("sold_out").copied().unwrap_or(0),
        outcomes,
        all,
        tickets: TicketTotals {
            issued: tickets.len() as u64,
            confirmed: count("confirmed"),
            failed: count("failed"),
            unsettled: count("pending"),
            units_issued: settled.iter().map(|l| u64::from(l.quantity)).sum(),
            units_confirmed: settled
                .iter()
                .filter(|l| l.status == "confirmed")
                .map(|l| u64::from(l.quantity))
                .sum(),
        },
        payments: None,
        settle_s,
        e2e: Some(E2eLatency::from_settled(&settled)),
        arrival: ArrivalStats {
            model: ArrivalModel::Closed,
            offered_per_s: None,
            achieved_per_s: room.buys.load(Ordering::Relaxed) as f64 / duration_s.max(1e-3),
            in_flight_cap: args.concurrency as u64,
            max_in_flight: 0,
            lag_p50_ms: None,
            lag_p99_ms: None,
            lag_max_ms: None,
        },
        history: history_path.map(|p| p.display().to_string()),
        waiting_room: Some(report),
        timeline: None,
        admin_samples,
    };
    writer.line(&summary)?;
    drop(room);
    tokio::task::spawn_blocking(move || writer.finish())
        .await
        .context("the history writer task failed")??;
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print!("{}", summary.table());
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use crate::history::{Line, WaitingRoomLine as W};
    use crate::load::fake_gateway;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn buyers_join_poll_and_buy_with_their_admission_until_sold_out() {
        let (addr, sale) = fake_gateway::start(fake_gateway::Config {
            stock: 3,
            waiting_room: true,
            ..Default::default()
        })
        .await;
        let dir = std::env::temp_dir().join(format!("bench-wr-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let history = dir.join("h.jsonl");
        let url = format!("http://{addr}");
        let argv = [
            "b",
            "load",
            "--gateway",
            &url,
            "--product",
            "7",
            "--users",
            "8",
            "--waiting-room",
            "--until-sold-out",
            "--wr-timeout",
            "20",
            "--wr-sample-ms",
            "20",
            "--quiet",
            "--json",
            "--settle-timeout",
            "5",
            "--history",
            history.to_str().unwrap(),
        ];
        let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
        let crate::cli::Command::Load(mut args) = cli.command else {
            panic!("not load")
        };
        args.admin_token = Some("admin".into());
        args.jwt_secret = Some(fake_gateway::ROOM_JWT_SECRET.into());
        (args.jwt_ed25519_key, args.jwt_kid) = (None, None);
        let s = crate::load::run(args).await.unwrap();
        assert_eq!(s.sold_out_reached, Some(true), "{s:?}");
        assert_eq!(s.tickets.confirmed, 3, "{s:?}");
        let w = s.waiting_room.as_ref().unwrap();
        assert_eq!((w.joined, w.not_joined), (8, 0), "{w:?}");
        assert_eq!(w.ended.get("bought"), Some(&3), "{w:?}");
        assert_eq!(w.ended.get("sold_out"), Some(&5), "{w:?}");
        assert!(w.samples > 0 && w.samples_over_cap == 0, "{w:?}");
        assert!(sale.lock().unwrap().max_admitted <= 5);

        let all = crate::history::read_all(&history).unwrap();
        let count = |f: fn(&W) -> bool| all.waiting_room.iter().filter(|l| f(l)).count();
        assert_eq!(
            count(|l| matches!(l, W::WrJoin(j) if j.status == Some(202))),
            8
        );
        assert_eq!(count(|l| matches!(l, W::WrEnd(_))), 8);
        assert!(count(|l| matches!(l, W::WrSample(_))) > 0);
        let buys: Vec<_> = all
            .waiting_room
            .iter()
            .filter_map(|l| match l {
                W::WrBuy(b) if b.status == Some(202) => Some(b),
                _ => None,
            })
            .collect();
        assert_eq!(buys.len(), 3);
        for b in buys {
            let until = b.admitted_until_ms.unwrap();
            assert_eq!(
                b.admission_token.as_deref(),
                Some(format!("adm-{}-{until}", b.user_id).as_str())
            );
            assert!(until * 1000 > b.sent_at_us as i64);
        }
        // The buys have their request lines, and a summary ends the file, as in any buy run.
        let requests = all
            .lines
            .iter()
            .filter(|l| matches!(l, Line::Request(r) if r.status == Some(202)))
            .count();
        assert_eq!(requests, 3);
        assert!(matches!(all.lines.last(), Some(Line::Summary(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
