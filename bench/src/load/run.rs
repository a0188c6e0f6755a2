//! The load's entry: sets the run up from its options, starts the workers and the helpers
//! around them, then settles the tickets and writes the summary.

use super::admin_api::AdminApi;
use super::admin_samples::AdminSampler;
use super::all_paid::{self, AllPaid};
use super::args::{validate, LoadArgs};
use super::buyer_token::{BuyerTokens, SigningKey, TokenIssuer};
use super::engine::{EngineKind, Target, POOL_IDLE_TIMEOUT};
use super::payment::{PayPolicy, Payers};
use super::plan::{Plan, StopRule};
use super::progress::{counts_message, progress_bar};
use super::sale_end::{Ended, Look, SaleEnd};
use super::settle::{self, distinct_tickets, IssuedTicket, SettledOut};
use super::stats::{
    achieved_rate, ArrivalModel, ArrivalStats, E2eLatency, ShardedHistograms, Summary, TicketTotals,
};
use super::waiting_room;
use super::worker::{worker, Mode, Shared};
use crate::history::HistoryWriter;
use crate::now_us;
use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::HashSet;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Every user's `Authorization` header, signed before the load starts: none of it is in the
/// measured path. `None` without a key, or for a `--path-get` run.
fn buyer_tokens(args: &LoadArgs, mode: Mode) -> anyhow::Result<Option<BuyerTokens>> {
    let ed25519_pem = match &args.jwt_ed25519_key {
        Some(path) => Some(
            std::fs::read(path)
                .with_context(|| format!("--jwt-ed25519-key: reading {}", path.display()))?,
        ),
        None => None,
    };
    let signing_key = match (&args.jwt_secret, &ed25519_pem, &args.jwt_kid) {
        (Some(secret), None, _) => Some(SigningKey::Hs256(secret)),
        (None, Some(pem), Some(kid)) => Some(SigningKey::Ed25519 { pem, kid }),
        (None, None, _) => None,
        _ => anyhow::bail!("--jwt-ed25519-key needs --jwt-kid, and not --jwt-secret"),
    };
    Ok(match (signing_key, mode) {
        (Some(key), Mode::Buy) => {
            let issuer = TokenIssuer::new(
                key,
                args.jwt_issuer.clone(),
                args.jwt_audience.clone(),
                Duration::from_secs(args.jwt_ttl_secs),
            )?;
            Some(BuyerTokens::new(issuer, args.first_user, args.users).context("signing tokens")?)
        }
        _ => None,
    })
}

/// Runs the load, the polling, writes the history and prints the summary.
pub async fn run(args: LoadArgs) -> anyhow::Result<Summary> {
    validate(&args)?;
    if args.waiting_room {
        let tokens = buyer_tokens(&args, Mode::Buy)?;
        return waiting_room::run(args, tokens).await;
    }
    let gateways: Vec<String> = args
        .gateways
        .iter()
        .map(|g| g.trim_end_matches('/').to_owned())
        .collect();
    let mode = if args.path_get.is_some() {
        Mode::Get
    } else {
        Mode::Buy
    };
    let product = args.product;
    if let Some(p) = product {
        seckill_shared::ProductId::new(p).context("--product")?;
    }
    let targets = gateways
        .iter()
        .map(|g| {
            let u = match (&args.path_get, product) {
                (Some(path), _) => format!("{g}{path}"),
                (None, Some(p)) => format!("{g}/v1/seckill/{p}"),
                (None, None) => unreachable!("clap requires --product or --path-get"),
            };
            Target::parse(&u).with_context(|| format!("bad gateway URL {u:?}"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;

    let stop_rule = match (args.until_sold_out, args.total, args.duration) {
        _ if args.until_all_paid => StopRule::UntilAllPaid {
            max_users: args.max_users,
        },
        (true, _, _) => StopRule::UntilSoldOut {
            max_users: args.max_users,
        },
        (false, Some(n), _) => StopRule::Total(n),
        (false, None, Some(_)) => StopRule::Duration,
        (false, None, None) => StopRule::Planned,
    };
    let plan = Plan::new(
        args.first_user,
        args.users,
        args.requests_per_user,
        stop_rule,
    )?;

    let mut builder = reqwest::Client::builder()
        .pool_max_idle_per_host(args.concurrency)
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(5))
        .no_proxy();
    if args.timeout > 0.0 {
        builder = builder.timeout(Duration::from_secs_f64(args.timeout));
    }
    let client = builder.build().context("building the HTTP client")?;

    let tokens = buyer_tokens(&args, mode)?;
    let look = match (&args.admin_token, product) {
        _ if !args.until_sold_out => None,
        (Some(token), Some(p)) => {
            let mut api = AdminApi::new(client.clone(), &gateways, p, token)?;
            // A token that does not work would only show at the end of the sale.
            api.stock()
                .await
                .context("--admin-token: reading the product with GET /admin/products/{id}")?;
            Some(Look::AdminApi(api))
        }
        _ => Some(Look::Probes {
            quiet: Duration::from_secs_f64(args.sold_out_quiet),
        }),
    };
    let checked_by = look.as_ref().map(Look::kind);
    // --until-all-paid: one admin API handle for the watch, one for the last look.
    let all_paid_apis =
        match (&args.admin_token, product) {
            (Some(token), Some(p)) if args.until_all_paid => {
                let mut last = AdminApi::new(client.clone(), &gateways, p, token)?;
                let view =
                    all_paid::PaidView::of(&last.view().await.context(
                        "--admin-token: reading the product with GET /admin/products/{id}",
                    )?);
                anyhow::ensure!(
                    view.orders_db.is_some(),
                    "--until-all-paid: GET /admin/products/{p} shows no orders_db (a gateway from \
                 before payments)"
                );
                Some((AdminApi::new(client.clone(), &gateways, p, token)?, last))
            }
            _ => None,
        };

    let gateway_names = Arc::new(gateways.clone());
    let history_path = (!args.no_history).then_some(args.history.as_path());
    let writer = HistoryWriter::create(history_path, gateway_names)?;

    let seed = args.seed.unwrap_or_else(rand::random);
    let payers =
        (mode == Mode::Buy && (args.pay_rate > 0.0 || args.cancel_rate > 0.0)).then(|| {
            Arc::new(Payers::new(
                client.clone(),
                gateways.clone(),
                args.pay_rate,
                args.cancel_rate,
                seed,
                PayPolicy {
                    retry_after_ms: args.pay_retry_after_ms.min(i64::MAX as u64) as i64,
                    grace_ms: (args.pay_grace_secs * 1000.0) as i64,
                    double_pay: args.double_pay,
                },
                Duration::from_secs_f64(args.settle_timeout),
                args.settle_concurrency,
                writer.sink(),
            ))
        });

    let threads = tokio::runtime::Handle::current().metrics().num_workers();
    let started = Instant::now();
    let started_at_us = now_us();
    let shared = Arc::new(Shared {
        client: client.clone(),
        mode,
        engine: args.engine,
        timeout: (args.timeout > 0.0).then(|| Duration::from_secs_f64(args.timeout)),
        targets,
        plan,
        quantity: (args.quantity, seed),
        next: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        counts: Default::default(),
        sale_end: SaleEnd::new(
            gateways.len(),
            args.sold_out_streak,
            started,
            Duration::from_secs_f64(args.sold_out_timeout),
            Duration::from_secs_f64(args.sold_out_wait),
        ),
        fresh_gated: args.until_sold_out,
        payers: payers.clone(),
        tokens,
        histograms: ShardedHistograms::new((threads * 4).min(args.concurrency)),
        history: writer.sink(),
        arrival: match (args.rate, args.open_loop) {
            (None, _) => ArrivalModel::Closed,
            (Some(_), false) => ArrivalModel::Paced,
            (Some(_), true) => ArrivalModel::Open,
        },
        schedule: args.rate.map(|r| (started, r)),
        in_flight: AtomicU64::new(0),
        max_in_flight: AtomicU64::new(0),
        last_send_us: AtomicU64::new(0),
        started,
    });

    let hidden = args.quiet || !std::io::stderr().is_terminal();
    let pb = progress_bar(hidden, plan.known_length());
    let ticker = (!hidden).then(|| {
        let (shared, pb) = (shared.clone(), pb.clone());
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_millis(100));
            loop {
                every.tick().await;
                let done: u64 = shared
                    .counts
                    .iter()
                    .map(|c| c.load(Ordering::Relaxed))
                    .sum();
                pb.set_position(done);
                pb.set_message(counts_message(
                    &shared,
                    args.until_sold_out,
                    started.elapsed(),
                ));
            }
        })
    });
    let timer = args.duration.map(|d| {
        let shared = shared.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs_f64(d)).await;
            shared.stop.store(true, Ordering::Relaxed);
        })
    });

    let judge = look.map(|look| {
        let shared = shared.clone();
        tokio::spawn(async move {
            let in_flight = {
                let shared = shared.clone();
                move || shared.in_flight.load(Ordering::Relaxed)
            };
            shared.sale_end.judge(look, in_flight).await;
        })
    });
    let all_paid = args.until_all_paid.then(|| {
        Arc::new(AllPaid::new(
            started,
            Duration::from_secs_f64(args.all_paid_wait_secs),
        ))
    });
    let (watch, mut last_look_api) = match (&all_paid, all_paid_apis) {
        (Some(a), Some((api, last))) => {
            let (a, shared) = (a.clone(), shared.clone());
            let watch = tokio::spawn(async move {
                a.watch(api, || shared.stop.store(true, Ordering::Relaxed))
                    .await;
            });
            (Some(watch), Some(last))
        }
        _ => (None, None),
    };
    let admin_samples = match product {
        Some(p) => AdminSampler::from_args(&args, &client, &gateways, p)?,
        None => None,
    };
    let workers: Vec<_> = (0..args.concurrency)
        .map(|id| tokio::spawn(worker(shared.clone(), id)))
        .collect();
    let mut tickets: Vec<IssuedTicket> = Vec::new();
    let mut sold_out_users: HashSet<u64> = HashSet::new();
    for w in workers {
        let r = w.await.context("a load worker panicked")?;
        tickets.extend(r.tickets);
        sold_out_users.extend(r.sold_out_users);
    }
    let duration = started.elapsed();
    // Await the aborted helpers so that their handles on `shared` (and its history sink)
    // are gone before the writer is finished.
    for t in [timer, judge, watch].into_iter().flatten() {
        t.abort();
        let _ = t.await;
    }
    if let Some(t) = ticker {
        t.abort();
        let _ = t.await;
        let done: u64 = shared
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum();
        pb.set_position(done);
        pb.set_message(counts_message(&shared, args.until_sold_out, duration));
    }
    pb.finish_and_clear();

    let distinct = distinct_tickets(&tickets);
    let accepted_users: HashSet<u64> = distinct.iter().map(|t| t.user_id).collect();

    let settle_started = Instant::now();
    let settled = if mode == Mode::Buy {
        let spb = if hidden || distinct.is_empty() || args.settle_timeout == 0.0 {
            ProgressBar::hidden()
        } else {
            let spb = ProgressBar::with_draw_target(
                Some(distinct.len() as u64),
                ProgressDrawTarget::stderr_with_hz(10),
            );
            spb.set_style(
                ProgressStyle::with_template(
                    "{spinner} {elapsed_precise} settling [{bar:30}] {pos}/{len} tickets",
                )
                .expect("valid progress template")
                .progress_chars("=> "),
            );
            spb.enable_steady_tick(Duration::from_millis(100));
            spb
        };
        let lines = settle::poll_tickets(
            &client,
            &gateways,
            &distinct,
            Duration::from_secs_f64(args.settle_timeout),
            args.settle_concurrency,
            // `paid` and `cancelled` are final too (a windowed product), paying or not.
            true,
            &spb,
        )
        .await;
        spb.finish_and_clear();
        lines
    } else {
        Vec::new()
    };
    let settle_s = settle_started.elapsed().as_secs_f64();
    let admin_samples = match admin_samples {
        Some(s) => Some(s.finish().await),
        None => None,
    };
    // The paying buyers stop by themselves: each by its ticket's deadline and the grace.
    let payments = match &payers {
        Some(p) => {
            let mut summary = p.finish().await;
            summary.settled_paid = settled.iter().filter(|l| l.status == "paid").count() as u64;
            summary.settled_cancelled =
                settled.iter().filter(|l| l.status == "cancelled").count() as u64;
            Some(summary)
        }
        None => None,
    };
    let all_paid = match (all_paid, &mut last_look_api) {
        (Some(a), Some(api)) => {
            a.last_look(api).await;
            Some(a.report())
        }
        _ => None,
    };
    for line in &settled {
        writer.line(&SettledOut {
            kind: "settled",
            line,
        })?;
    }

    let duration_s = duration.as_secs_f64();
    let merged = shared.histograms.merged();
    let (outcomes, all) = merged.stats(duration_s);
    let count = |s: &str| settled.iter().filter(|l| l.status == s).count() as u64;
    let lag_ms = |q: f64| {
        merged.lag().filter(|h| !h.is_empty()).map(|h| {
            let us = if q >= 1.0 {
                h.max()
            } else {
                h.value_at_quantile(q)
            };
            us as f64 / 1000.0
        })
    };
    let arrival = ArrivalStats {
        model: shared.arrival,
        offered_per_s: args.rate,
        achieved_per_s: match args.rate {
            Some(rate) => achieved_rate(
                all.count,
                shared.last_send_us.load(Ordering::Relaxed) as f64 / 1e6,
                rate,
            ),
            None => all.per_sec,
        },
        in_flight_cap: args.concurrency as u64,
        max_in_flight: shared.max_in_flight.load(Ordering::Relaxed),
        lag_p50_ms: lag_ms(0.5),
        lag_p99_ms: lag_ms(0.99),
        lag_max_ms: lag_ms(1.0),
    };
    let e2e = (mode == Mode::Buy).then(|| E2eLatency::from_settled(&settled));
    let sale_end = checked_by.map(|c| shared.sale_end.report(c));
    let summary = Summary {
        kind: "summary",
        engine: match args.engine {
            EngineKind::Reqwest => "reqwest",
            EngineKind::Hyper => "hyper",
        },
        mode: match mode {
            Mode::Buy => "buy",
            Mode::Get => "get",
        },
        gateways: gateways.clone(),
        product,
        path: args.path_get.clone(),
        concurrency: args.concurrency,
        started_at_us,
        duration_s,
        requests: all.count,
        req_per_s: all.per_sec,
        until_sold_out: args.until_sold_out,
        sold_out_reached: sale_end.as_ref().map(|r| r.ended == Ended::SoldOut),
        sale_end,
        until_all_paid: args.until_all_paid,
        all_paid_reached: all_paid.as_ref().map(|r| r.reached),
        all_paid,
        jwt: shared.tokens.is_some(),
        jwt_alg: shared.tokens.as_ref().map(|t| t.issuer().algorithm()),
        jwt_kid: shared
            .tokens
            .as_ref()
            .and_then(|t| t.issuer().kid().map(str::to_owned)),
        first_user: args.first_user,
        users_used: if mode == Mode::Buy {
            plan.users_used(all.count)
        } else {
            0
        },
        distinct_users_accepted: accepted_users.len() as u64,
        distinct_users_sold_out: sold_out_users.len() as u64,
        outcomes,
        all,
        tickets: TicketTotals {
            issued: distinct.len() as u64,
            confirmed: count("confirmed"),
            failed: count("failed"),
            unsettled: count("pending"),
            units_issued: distinct.iter().map(|t| u64::from(t.quantity)).sum(),
            units_confirmed: settled
                .iter()
                .filter(|l| l.status == "confirmed")
                .map(|l| u64::from(l.quantity))
                .sum(),
        },
        payments,
        settle_s,
        e2e,
        arrival,
        history: history_path.map(|p| p.display().to_string()),
        waiting_room: None,
        timeline: Some(merged.timeline(duration_s)),
        admin_samples,
    };
    writer.line(&summary)?;
    drop(shared);
    drop(payers);
    tokio::task::spawn_blocking(move || writer.finish())
        .await
        .context("the history writer task failed")??;

    if let Some(path) = &args.plot {
        crate::plot::load_chart::write(&summary, path)?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print!("{}", summary.table());
    }
    Ok(summary)
}
