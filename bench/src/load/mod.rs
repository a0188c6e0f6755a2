//! `seckill-bench load`: an HTTP load generator, closed loop by default.
//!
//! `C` worker tasks (C = `--concurrency`) loop: take the next request number from an atomic
//! counter, map it to a user ([`plan::Plan`]), wait until it is due (`--rate`), send it over
//! keep-alive connections ([`engine`]), classify the answer, record it.
//!
//! How requests arrive ([`stats::ArrivalModel`]): without `--rate`, each worker sends its next
//! request when its last one is answered (closed loop). `--rate` alone paces that closed loop:
//! its rate still falls when answers are slow. `--rate --open-loop` keeps the arrival rate
//! whatever the answers, as wrk2 does: request `i` is due at `i / RATE` s, the free workers
//! hold the next numbers and send each when due, and its latency counts from when it was due.
//! That holds while fewer than `C` requests are in flight; the summary reports the most that
//! were and the rate achieved, so a run whose loop closed can be told apart. Nothing is spawned per request; latencies go
//! into a few sharded histograms, history records into a per-worker batch that is handed to
//! the writer thread every [`HISTORY_BATCH`] requests. After the load, every ticket is polled
//! until it settles ([`settle`]).
//!
//! `--until-sold-out` brings fresh users after the planned ones until the sale is really over
//! ([`sale_end`]): a round of 409s from every gateway starts a check, and units that came back
//! meanwhile bring fresh users again. `--jwt-secret` (HS256) or `--jwt-ed25519-key` (EdDSA)
//! gives every user a signed token ([`buyer_token`]), sent on its buys and ticket polls.
//!
//! `--pay-rate` makes buyers pay for their confirmed orders, or not ([`payment`]), while the
//! load goes on (`--double-pay`: each attempt twice at once); `--cancel-rate` makes some of
//! them cancel from their `202` on instead ([`cancel`]); `--until-all-paid` brings fresh users
//! until every unit is paid ([`all_paid`]). With none of them, nothing of it runs.
//!
//! `--waiting-room` is a load of its own ([`waiting_room`]): each buyer joins the product's
//! waiting room, polls until admitted, and buys with its admission token.
//!
//! Over time: every answer also goes on a [`timeline`] (answers per second and latency
//! percentiles per outcome, in the summary's `timeline`; `--plot` draws it), and
//! `--sample-admin-ms` reads the product's admin view at a steady pace ([`admin_samples`]), the
//! data of a chaos run's timeline.

pub mod admin_samples;
pub mod all_paid;
pub mod args;
pub mod buyer_token;
pub mod cancel;
mod draw;
pub mod engine;
#[cfg(test)]
mod fake_gateway;
pub mod payment;
pub mod plan;
pub mod sale_end;
pub mod settle;
pub mod stats;
pub mod timeline;
pub mod waiting_room;

use crate::history::{HistorySink, HistoryWriter, RequestRecord};
use crate::now_us;
use admin_samples::AdminSampler;
use all_paid::AllPaid;
use anyhow::Context;
use args::LoadArgs;
use buyer_token::{BuyerTokens, SigningKey, TokenIssuer};
use bytes::BytesMut;
use engine::{Conns, EngineKind, Target};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use payment::{PayPolicy, Payers};
use plan::{Outcome, Plan, StopRule};
use sale_end::{AdminApi, Ended, Gate, Look, Phase, SaleEnd};
use serde::Deserialize;
use settle::IssuedTicket;
use stats::{
    achieved_rate, ArrivalModel, ArrivalStats, E2eLatency, ShardedHistograms, Summary, TicketTotals,
};
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Request records a worker collects before handing them to the history writer.
const HISTORY_BATCH: usize = 256;

/// The server closes idle keep-alive connections after 5 s; drop ours well before.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Buy,
    Get,
}

/// State every worker shares.
struct Shared {
    client: reqwest::Client,
    mode: Mode,
    engine: EngineKind,
    /// Per-request timeout of the `hyper` engine (`reqwest` has it in the client).
    timeout: Option<Duration>,
    /// Per gateway: the URL every request of this run goes to.
    targets: Vec<Target>,
    plan: Plan,
    next: AtomicU64,
    stop: AtomicBool,
    counts: [AtomicU64; Outcome::COUNT],
    /// `--until-sold-out`: whether the next fresh user goes out.
    sale_end: SaleEnd,
    /// Fresh users wait for `sale_end`'s gate (`--until-sold-out`; `--until-all-paid` ones go
    /// at `--rate` until the load stops).
    fresh_gated: bool,
    /// `--pay-rate` or `--cancel-rate` above 0: every ticket is offered to the paying (and
    /// cancelling) buyers.
    payers: Option<Arc<Payers>>,
    /// `--jwt-secret` or `--jwt-ed25519-key`: every user's `Authorization` header.
    tokens: Option<BuyerTokens>,
    histograms: ShardedHistograms,
    history: HistorySink,
    arrival: ArrivalModel,
    /// `--rate`: request `i` is due at `started + i / rate`.
    schedule: Option<(Instant, f64)>,
    /// Requests sent and not yet answered, and the most there were at once.
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
    /// When the last request went out, µs after `started`.
    last_send_us: AtomicU64,
    started: Instant,
}

/// What one worker hands back when it stops.
#[derive(Default)]
struct WorkerResult {
    tickets: Vec<IssuedTicket>,
    sold_out_users: Vec<u64>,
}

/// A buy answer's ticket, if the body has one.
fn ticket_of(body: &[u8]) -> Option<Box<str>> {
    #[derive(Deserialize)]
    struct TicketBody<'a> {
        #[serde(borrow)]
        ticket: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_slice::<TicketBody>(body)
        .ok()
        .and_then(|b| b.ticket)
        .map(|t| t.into())
}

/// An error with its sources, which is where reqwest keeps the useful part.
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let part = c.to_string();
        if !s.contains(&part) {
            s.push_str(": ");
            s.push_str(&part);
        }
        cur = c.source();
    }
    s
}

async fn worker(shared: Arc<Shared>, id: usize) -> WorkerResult {
    let mut out = WorkerResult::default();
    let mut batch: Vec<RequestRecord> = if shared.history.enabled() {
        Vec::with_capacity(HISTORY_BATCH)
    } else {
        Vec::new()
    };
    let mut conns = Conns::new(shared.engine, &shared.client, shared.targets.len());
    // Request bodies are cut from one buffer: no allocation per request.
    let mut bodies = BytesMut::new();
    let gateways = shared.targets.len() as u64;
    'run: loop {
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        let i = shared.next.fetch_add(1, Ordering::Relaxed);
        let Some(slot) = shared.plan.slot(i) else {
            break;
        };
        let due = loop {
            let due = match shared.schedule {
                Some((start, rate)) => {
                    // Time that checks held fresh users moves the schedule on.
                    let due =
                        start + Duration::from_secs_f64(i as f64 / rate) + shared.sale_end.paused();
                    tokio::time::sleep_until(due.into()).await;
                    // The run may have ended while this request waited for its time.
                    if shared.stop.load(Ordering::Relaxed) {
                        break 'run;
                    }
                    Some(due)
                }
                None => None,
            };
            if slot.fresh && shared.fresh_gated {
                match shared.sale_end.gate().await {
                    Gate::Stop => {
                        shared.stop.store(true, Ordering::Relaxed);
                        break 'run;
                    }
                    // Held by a check: this request is due later now.
                    Gate::Go { waited: true } if due.is_some() => continue,
                    Gate::Go { .. } => {}
                }
            }
            break due;
        };
        let gw = (i % gateways) as usize;
        let (body, auth) = match shared.mode {
            Mode::Buy => {
                if bodies.capacity() < 64 {
                    bodies.reserve(8192);
                }
                let _ = write!(bodies, "{{\"user_id\":{}}}", slot.user);
                // Presigned, or signed here: before the request's clock starts.
                let auth = shared.tokens.as_ref().map(|t| t.header(slot.user));
                (Some(bodies.split().freeze()), auth)
            }
            Mode::Get => (None, None),
        };

        let in_flight = shared.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        shared.max_in_flight.fetch_max(in_flight, Ordering::Relaxed);
        let sent_at_us = now_us();
        let t0 = Instant::now();
        shared.last_send_us.fetch_max(
            t0.duration_since(shared.started).as_micros() as u64,
            Ordering::Relaxed,
        );
        let engine::Exchange {
            status,
            body,
            error,
        } = conns
            .exchange(&shared.targets[gw], gw, body, auth.clone(), shared.timeout)
            .await;
        let answered = Instant::now();
        shared.in_flight.fetch_sub(1, Ordering::Relaxed);
        // From sending to the answer; the answer's time on the client clock.
        let service_us = answered.duration_since(t0).as_micros() as u64;
        let lag_us = due.map(|d| t0.saturating_duration_since(d).as_micros() as u64);
        // An open loop counts latency from when the request was due (wrk2's correction for
        // coordinated omission): a send held back by busy workers shows in the latency.
        let latency_us = match (shared.arrival, due) {
            (ArrivalModel::Open, Some(d)) => {
                answered.saturating_duration_since(d).as_micros() as u64
            }
            _ => service_us,
        };

        let outcome = if error.is_some() {
            Outcome::Error
        } else {
            Outcome::classify(status)
        };
        shared.counts[outcome.index()].fetch_add(1, Ordering::Relaxed);
        let at_ms = answered.duration_since(shared.started).as_millis() as u64;
        shared
            .histograms
            .record(id, outcome, latency_us, lag_us, Some(at_ms));
        let mut ticket = None;
        if shared.mode == Mode::Buy {
            shared.sale_end.record(gw, outcome);
            if outcome.has_ticket() {
                ticket = body.as_deref().and_then(ticket_of);
                if let Some(t) = &ticket {
                    out.tickets.push(IssuedTicket {
                        ticket: t.to_string(),
                        user_id: slot.user,
                        gateway: gw,
                        answered_at_us: sent_at_us + service_us,
                        fresh: outcome == Outcome::Accepted,
                        auth,
                    });
                    if let (Some(p), Some(issued)) = (&shared.payers, out.tickets.last()) {
                        p.offer(issued);
                    }
                }
            } else if outcome == Outcome::SoldOut {
                out.sold_out_users.push(slot.user);
            }
        }
        if shared.history.enabled() {
            batch.push(RequestRecord {
                sent_at_us,
                recv_at_us: sent_at_us + service_us,
                gateway: gw as u16,
                user_id: (shared.mode == Mode::Buy).then_some(slot.user),
                status,
                ticket,
                error: error.map(Into::into),
            });
            if batch.len() >= HISTORY_BATCH {
                shared.history.send(std::mem::replace(
                    &mut batch,
                    Vec::with_capacity(HISTORY_BATCH),
                ));
            }
        }
    }
    if !batch.is_empty() {
        shared.history.send(batch);
    }
    out
}

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

fn progress_bar(hidden: bool, len: Option<u64>) -> ProgressBar {
    if hidden {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(len, ProgressDrawTarget::stderr_with_hz(10));
    let template = if len.is_some() {
        "{spinner} {elapsed_precise} [{bar:30}] {pos}/{len} {msg}"
    } else {
        "{spinner} {elapsed_precise} {pos} requests {msg}"
    };
    pb.set_style(
        ProgressStyle::with_template(template)
            .expect("valid progress template")
            .progress_chars("=> "),
    );
    pb
}

fn counts_message(shared: &Shared, until_sold_out: bool, elapsed: Duration) -> String {
    let done: u64 = shared
        .counts
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .sum();
    let mut msg = format!(
        "{:.0} req/s | ",
        done as f64 / elapsed.as_secs_f64().max(1e-3)
    );
    let mut first = true;
    for o in Outcome::ALL {
        let n = shared.counts[o.index()].load(Ordering::Relaxed);
        if n > 0 || o == Outcome::Error {
            if !first {
                msg.push_str(" | ");
            }
            first = false;
            msg.push_str(&format!("{} {n}", o.label()));
        }
    }
    if until_sold_out {
        msg.push_str(&format!(
            " | sold out at {}/{} gateways",
            shared.sale_end.sold_out_gateways(),
            shared.targets.len()
        ));
        match shared.sale_end.phase() {
            Phase::Selling => {}
            Phase::Checking => msg.push_str(", checking the sale is over"),
            Phase::Over => msg.push_str(", over"),
        }
    }
    if let Some(p) = &shared.payers {
        let (paying, paid) = p.progress();
        msg.push_str(&format!(" | {paying} buyers paying, {paid} paid"));
    }
    msg
}

fn validate(args: &LoadArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.concurrency >= 1, "--concurrency must be at least 1");
    anyhow::ensure!(
        args.gateways.len() <= u16::MAX as usize,
        "too many gateways"
    );
    for (name, v) in [
        ("--timeout", args.timeout),
        ("--settle-timeout", args.settle_timeout),
        ("--sold-out-timeout", args.sold_out_timeout),
        ("--sold-out-wait", args.sold_out_wait),
        ("--sold-out-quiet", args.sold_out_quiet),
        ("--duration", args.duration.unwrap_or(1.0)),
        ("--pay-grace-secs", args.pay_grace_secs),
        ("--all-paid-wait-secs", args.all_paid_wait_secs),
    ] {
        anyhow::ensure!(
            v.is_finite() && v >= 0.0,
            "{name} must be a non-negative number"
        );
    }
    anyhow::ensure!(
        args.sold_out_streak >= 1,
        "--sold-out-streak must be at least 1"
    );
    if let Some(p) = &args.path_get {
        anyhow::ensure!(p.starts_with('/'), "--path-get must start with '/'");
    }
    if args.pay_rate > 0.0 {
        anyhow::ensure!(
            args.settle_timeout > 0.0,
            "--pay-rate needs --settle-timeout above 0: paying buyers wait that long for their \
             confirmation"
        );
    }
    if args.cancel_rate > 0.0 {
        anyhow::ensure!(
            args.settle_timeout > 0.0,
            "--cancel-rate needs --settle-timeout above 0: cancelling buyers try that long"
        );
    }
    anyhow::ensure!(
        !args.double_pay || args.pay_rate > 0.0,
        "--double-pay needs --pay-rate above 0: nobody pays otherwise"
    );
    if args.until_all_paid {
        anyhow::ensure!(
            args.pay_rate > 0.0 && args.cancel_rate < 1.0,
            "--until-all-paid needs --pay-rate above 0 and --cancel-rate below 1: nobody pays \
             otherwise"
        );
        anyhow::ensure!(
            args.admin_token.is_some(),
            "--until-all-paid needs --admin-token (or SECKILL_ADMIN_TOKEN): it reads the paid \
             orders with GET /admin/products/{{id}}"
        );
    }
    Ok(())
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
    let all_paid_apis = match (&args.admin_token, product) {
        (Some(token), Some(p)) if args.until_all_paid => {
            let mut last = AdminApi::new(client.clone(), &gateways, p, token)?;
            let view: all_paid::PaidView = last
                .view()
                .await
                .context("--admin-token: reading the product with GET /admin/products/{id}")?;
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

    let payers =
        (mode == Mode::Buy && (args.pay_rate > 0.0 || args.cancel_rate > 0.0)).then(|| {
            Arc::new(Payers::new(
                client.clone(),
                gateways.clone(),
                args.pay_rate,
                args.cancel_rate,
                args.seed.unwrap_or_else(rand::random),
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

/// One entry per distinct ticket, in the order first seen: a `200` repeats the ticket of an
/// earlier `202`. When both were seen, the `202`'s answer time is kept: that is when the
/// reservation was handed out.
fn distinct_tickets(tickets: &[IssuedTicket]) -> Vec<IssuedTicket> {
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(tickets.len());
    let mut distinct: Vec<IssuedTicket> = Vec::with_capacity(tickets.len());
    for t in tickets {
        match index.get(t.ticket.as_str()) {
            Some(&i) => {
                if t.fresh && !distinct[i].fresh {
                    distinct[i] = t.clone();
                }
            }
            None => {
                index.insert(t.ticket.as_str(), distinct.len());
                distinct.push(t.clone());
            }
        }
    }
    distinct
}

#[derive(serde::Serialize)]
struct SettledOut<'a> {
    kind: &'static str,
    #[serde(flatten)]
    line: &'a crate::history::SettledLine,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_tickets_keep_the_first_seen_order_and_the_202s_time() {
        let t = |ticket: &str, at: u64, fresh: bool| IssuedTicket {
            ticket: ticket.into(),
            user_id: 1,
            gateway: 0,
            answered_at_us: at,
            fresh,
            auth: None,
        };
        let got = distinct_tickets(&[
            t("1-a", 30, false),
            t("1-b", 10, true),
            t("1-a", 20, true),
            t("1-b", 40, false),
        ]);
        assert_eq!(got, vec![t("1-a", 20, true), t("1-b", 10, true)]);
    }

    /// A keep-alive HTTP server whose every answer takes `delay`.
    async fn slow_server(delay: Duration) -> std::net::SocketAddr {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    let mut buf = [0u8; 4096];
                    loop {
                        while let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                            got.drain(..end + 4);
                            tokio::time::sleep(delay).await;
                            let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                            if s.write_all(answer).await.is_err() {
                                return;
                            }
                        }
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => got.extend_from_slice(&buf[..n]),
                        }
                    }
                });
            }
        });
        addr
    }

    async fn get_run(addr: std::net::SocketAddr, extra: &[&str]) -> Summary {
        let url = format!("http://{addr}");
        let mut argv = vec![
            "b",
            "load",
            "--gateway",
            &url,
            "--path-get",
            "/x",
            "--duration",
            "1",
            "--no-history",
            "--quiet",
            "--json",
        ];
        argv.extend_from_slice(extra);
        let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
        let crate::cli::Command::Load(args) = cli.command else {
            panic!("not load")
        };
        run(args).await.unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_open_loop_keeps_its_rate_when_answers_are_slow() {
        // 40 ms answers at 200/s: about 8 in flight, well under the cap of 64.
        let addr = slow_server(Duration::from_millis(40)).await;
        let s = get_run(addr, &["--rate", "200", "--open-loop", "-c", "64"]).await;
        let a = &s.arrival;
        assert_eq!(a.model, ArrivalModel::Open);
        assert!((a.achieved_per_s / 200.0 - 1.0).abs() < 0.05, "{a:?}");
        assert!(a.max_in_flight < 64, "{a:?}");
        assert!(s.all.p50_ms >= 40.0, "{:?}", s.all);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_summary_carries_the_runs_timeline_and_plot_draws_it() {
        // 200/s for 1 s, 10 ms answers: every answer is a 200, in buckets over the second.
        let addr = slow_server(Duration::from_millis(10)).await;
        let svg = std::env::temp_dir().join(format!("load-plot-{}.svg", std::process::id()));
        let s = get_run(
            addr,
            &["--rate", "200", "-c", "8", "--plot", svg.to_str().unwrap()],
        )
        .await;
        let t = s.timeline.as_ref().expect("a timeline");
        assert_eq!(t.series.len(), 1);
        let ok = t.get("200").expect("the 200s");
        assert_eq!(ok.points.iter().map(|p| p.count).sum::<u64>(), s.all.count);
        // About 200 answers over 1 s: buckets of 20 answers on average, so 0.1 s (0.2 s when
        // fewer than 200 came back in time).
        assert!(t.bucket_s == 0.1 || t.bucket_s == 0.2, "{}", t.bucket_s);
        assert!(ok.points.len() >= 5, "{}", ok.points.len());
        let busy = ok.points.iter().filter(|p| p.count > 0);
        assert!(busy.clone().all(|p| p.p50_ms.unwrap() >= 10.0));
        // The JSON summary holds it too, for `plot load`.
        let saved: crate::plot::load_chart::SavedRun =
            serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        let saved = saved.timeline.expect("a saved timeline");
        assert_eq!(saved.bucket_s, t.bucket_s);
        let counts = |t: &crate::load::timeline::Timeline| -> Vec<(f64, u64)> {
            t.series[0]
                .points
                .iter()
                .map(|p| (p.t_s, p.count))
                .collect()
        };
        assert_eq!(counts(&saved), counts(t));
        let text = std::fs::read_to_string(&svg).unwrap();
        std::fs::remove_file(&svg).unwrap();
        assert!(text.starts_with("<svg") && text.contains("200 ok"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_paced_or_capped_loop_falls_behind_and_says_so() {
        // 4 workers and 40 ms answers: at most 100/s, against 200/s offered.
        let addr = slow_server(Duration::from_millis(40)).await;
        let paced = get_run(addr, &["--rate", "200", "-c", "4"]).await;
        assert_eq!(paced.arrival.model, ArrivalModel::Paced);
        assert!(
            paced.arrival.achieved_per_s < 0.6 * 200.0,
            "{:?}",
            paced.arrival
        );
        let open = get_run(addr, &["--rate", "200", "--open-loop", "-c", "4"]).await;
        let a = &open.arrival;
        assert_eq!(a.max_in_flight, 4, "{a:?}");
        assert!(a.achieved_per_s < 0.6 * 200.0, "{a:?}");
        // Latency counts from when each request was due: the queue behind the cap shows.
        assert!(open.all.p99_ms > 200.0, "{:?}", open.all);
        let closed = get_run(addr, &["-c", "4"]).await;
        assert_eq!(closed.arrival.model, ArrivalModel::Closed);
        assert_eq!(closed.arrival.offered_per_s, None);
    }

    /// A buy run against `addr`. The admin token and the JWT secret are the ones given, never
    /// the environment's.
    async fn buy_run(
        addr: std::net::SocketAddr,
        extra: &[&str],
        admin_token: Option<&str>,
        jwt_secret: Option<&str>,
    ) -> Summary {
        let url = format!("http://{addr}");
        let mut argv = vec![
            "b",
            "load",
            "--gateway",
            &url,
            "--product",
            "7",
            "--no-history",
            "--quiet",
            "--json",
            "--settle-timeout",
            "5",
        ];
        argv.extend_from_slice(extra);
        if let Some(secret) = jwt_secret {
            argv.extend(["--jwt-secret", secret]);
        }
        let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
        let crate::cli::Command::Load(mut args) = cli.command else {
            panic!("not load")
        };
        args.admin_token = admin_token.map(secrecy::SecretString::from);
        if jwt_secret.is_none() {
            args.jwt_secret = None;
        }
        run(args).await.unwrap()
    }

    const UNTIL_SOLD_OUT: &[&str] = &[
        "--users",
        "5",
        "-c",
        "4",
        "--until-sold-out",
        "--max-users",
        "100000",
    ];

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn until_sold_out_sells_the_units_that_failed_orders_hand_back() {
        // 20 units; the first 4 orders fail 400 ms after their buy, long after every gateway
        // first answered 409.
        let cfg = fake_gateway::Config {
            stock: 20,
            fail_first: 4,
            fail_after: Duration::from_millis(400),
            ..Default::default()
        };
        let (addr, sale) = fake_gateway::start(cfg.clone()).await;
        let mut extra = UNTIL_SOLD_OUT.to_vec();
        extra.extend(["--sold-out-wait", "20"]);
        let s = buy_run(addr, &extra, Some("admin"), None).await;
        assert_eq!(s.sold_out_reached, Some(true), "{s:?}");
        let e = s.sale_end.as_ref().unwrap();
        assert_eq!(e.checked_by, crate::history::SaleEndCheck::AdminApi);
        assert_eq!(e.ended, Ended::SoldOut);
        assert!(e.resumed >= 1, "{e:?}");
        assert!(e.sold_after_first_409 >= 4, "{e:?}");
        assert_eq!(
            e.last_seen,
            Some(sale_end::StockView {
                stock_redis: Some(0),
                stock_db: 0,
                pending: 0,
                closed_at: None,
            })
        );
        assert_eq!((s.tickets.confirmed, s.tickets.failed), (20, 4), "{s:?}");
        {
            let f = sale.lock().unwrap();
            assert_eq!((f.stock, f.stock_db, f.pending), (0, 0, 0));
        }

        // Without the admin API, fresh users probe until none has bought for a second.
        let (addr, sale) = fake_gateway::start(cfg).await;
        let mut extra = UNTIL_SOLD_OUT.to_vec();
        extra.extend(["--sold-out-quiet", "1"]);
        let s = buy_run(addr, &extra, None, None).await;
        assert_eq!(s.sold_out_reached, Some(true), "{s:?}");
        let e = s.sale_end.as_ref().unwrap();
        assert_eq!(e.checked_by, crate::history::SaleEndCheck::Probes);
        assert!(e.ended_s >= 1.0, "{e:?}");
        assert_eq!((s.tickets.confirmed, s.tickets.failed), (20, 4), "{s:?}");
        assert_eq!(sale.lock().unwrap().stock, 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn units_no_buyer_can_get_make_a_sale_that_did_not_sell_out() {
        // Two units come back, but the gateway keeps answering 409.
        let cfg = fake_gateway::Config {
            stock: 10,
            fail_first: 2,
            fail_after: Duration::from_millis(100),
            stale_marker: true,
            ..Default::default()
        };
        let (addr, _) = fake_gateway::start(cfg).await;
        let mut extra = UNTIL_SOLD_OUT.to_vec();
        extra.extend(["--sold-out-timeout", "0.3", "--sold-out-wait", "1.5"]);
        let started = Instant::now();
        let s = buy_run(addr, &extra, Some("admin"), None).await;
        assert_eq!(s.sold_out_reached, Some(false), "{s:?}");
        let e = s.sale_end.as_ref().unwrap();
        assert_eq!(e.ended, Ended::TimedOut);
        assert_eq!(e.last_seen.unwrap().stock_redis, Some(2), "{e:?}");
        assert!(e.resumed >= 1, "{e:?}");
        // Checks are paced: a few rounds of fresh users, not a flood.
        assert!(s.users_used < 5 + 4 * 10, "{s:?}");
        assert!(started.elapsed() < Duration::from_secs(8));
        assert!(
            s.table().contains("NOT sold out (timed out)"),
            "{}",
            s.table()
        );

        // A wrong admin token fails at once, not at the end of the sale.
        let (addr, _) = fake_gateway::start(Default::default()).await;
        let url = format!("http://{addr}");
        let cli = <crate::cli::Cli as clap::Parser>::try_parse_from([
            "b",
            "load",
            "--gateway",
            &url,
            "--product",
            "7",
            "--no-history",
            "--quiet",
            "--until-sold-out",
        ])
        .unwrap();
        let crate::cli::Command::Load(mut args) = cli.command else {
            panic!("not load")
        };
        args.admin_token = Some("wrong".into());
        let err = run(args).await.unwrap_err();
        assert!(format!("{err:#}").contains("HTTP 401"), "{err:#}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_buy_and_ticket_poll_carries_its_users_token() {
        use jsonwebtoken::{Algorithm, DecodingKey, Validation};
        for engine in ["hyper", "reqwest"] {
            let (addr, sale) = fake_gateway::start(fake_gateway::Config {
                stock: 3,
                ..Default::default()
            })
            .await;
            let s = buy_run(
                addr,
                &[
                    "--users",
                    "5",
                    "--first-user",
                    "100",
                    "-c",
                    "2",
                    "--engine",
                    engine,
                    "--jwt-issuer",
                    "bench",
                    "--jwt-audience",
                    "seckill",
                    "--jwt-ttl-secs",
                    "60",
                ],
                None,
                Some("k3y"),
            )
            .await;
            assert!(s.jwt);
            assert_eq!(s.tickets.confirmed, 3, "{s:?}");
            let key = DecodingKey::from_secret(b"k3y").unwrap();
            let mut v = Validation::new(Algorithm::HS256);
            v.set_issuer(&["bench"]);
            v.set_audience(&["seckill"]);
            let seen = sale.lock().unwrap().seen.clone();
            let (mut buys, mut polls) = (0, 0);
            for r in &seen {
                let auth = r
                    .authorization
                    .as_deref()
                    .expect("every request has a token");
                let token = auth.strip_prefix("Bearer ").unwrap();
                let c = jsonwebtoken::decode::<buyer_token::Claims>(token, &key, &v)
                    .unwrap()
                    .claims;
                assert_eq!(c.exp - c.iat, 60);
                let user = match r.method.as_str() {
                    "POST" => {
                        buys += 1;
                        r.user.unwrap()
                    }
                    _ => {
                        polls += 1;
                        let ticket = r.path.rsplit('/').next().unwrap();
                        fake_gateway::ticket_user(&sale, ticket).unwrap()
                    }
                };
                assert_eq!(c.sub, user.to_string(), "{r:?}");
            }
            assert_eq!(buys, 5, "{engine}");
            assert!(polls >= 3, "{engine}");
        }

        // Without a secret, no header.
        let (addr, sale) = fake_gateway::start(Default::default()).await;
        let s = buy_run(addr, &["--users", "2"], None, None).await;
        assert!(!s.jwt);
        assert_eq!(s.jwt_alg, None);
        let seen = sale.lock().unwrap().seen.clone();
        assert!(!seen.is_empty() && seen.iter().all(|r| r.authorization.is_none()));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_ed25519_key_gives_every_buyer_an_eddsa_token_naming_its_kid() {
        use jsonwebtoken::{Algorithm, DecodingKey, Validation};
        let (addr, sale) = fake_gateway::start(Default::default()).await;
        let url = format!("http://{addr}");
        let argv = [
            "b",
            "load",
            "--gateway",
            &url,
            "--product",
            "7",
            "--users",
            "3",
            "--no-history",
            "--quiet",
            "--json",
            "--settle-timeout",
            "5",
        ];
        let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
        let crate::cli::Command::Load(mut args) = cli.command else {
            panic!("not load")
        };
        // Whatever the environment's secret: the key alone.
        let testdata = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/jwt/");
        args.jwt_secret = None;
        args.admin_token = None;
        args.jwt_ed25519_key = Some(format!("{testdata}ed-1.pem").into());
        args.jwt_kid = Some("ed-1".into());
        let s = run(args).await.unwrap();
        assert!(s.jwt);
        assert_eq!(
            (s.jwt_alg, s.jwt_kid.as_deref()),
            (Some("EdDSA"), Some("ed-1"))
        );
        let public =
            DecodingKey::from_ed_pem(&std::fs::read(format!("{testdata}ed-1.pub.pem")).unwrap())
                .unwrap();
        let seen = sale.lock().unwrap().seen.clone();
        let buys: Vec<_> = seen.iter().filter(|r| r.method == "POST").collect();
        assert_eq!(buys.len(), 3);
        for r in buys {
            let token = r
                .authorization
                .as_deref()
                .and_then(|a| a.strip_prefix("Bearer "))
                .expect("every buy has a token");
            assert_eq!(
                jsonwebtoken::decode_header(token).unwrap().kid.as_deref(),
                Some("ed-1")
            );
            let c = jsonwebtoken::decode::<buyer_token::Claims>(
                token,
                &public,
                &Validation::new(Algorithm::EdDSA),
            )
            .unwrap()
            .claims;
            assert_eq!(c.sub, r.user.unwrap().to_string());
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn paying_buyers_retry_a_503_with_the_same_key_and_a_decline_with_a_new_one() {
        let (addr, sale) = fake_gateway::start(fake_gateway::Config {
            stock: 5,
            pay_window: Some(Duration::from_secs(10)),
            decline_first: 1,
            unavailable_first: 1,
            ..Default::default()
        })
        .await;
        let dir = std::env::temp_dir().join(format!("bench-pay-{}", std::process::id()));
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
            "5",
            "-c",
            "2",
            "--quiet",
            "--json",
            "--settle-timeout",
            "5",
            "--pay-rate",
            "1",
            "--seed",
            "9",
            "--pay-retry-after-ms",
            "100",
            "--history",
            history.to_str().unwrap(),
        ];
        let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
        let crate::cli::Command::Load(mut args) = cli.command else {
            panic!("not load")
        };
        (args.admin_token, args.jwt_secret) = (None, None);
        let s = run(args).await.unwrap();
        let p = s.payments.as_ref().expect("a payments summary");
        assert_eq!((p.buyers_paying, p.buyers_not_paying, p.seed), (5, 0, 9));
        // One decline: six payments for five buyers; the 503 was retried with its key.
        assert_eq!((p.attempts, p.accepted, p.unavailable), (6, 6, 1), "{p:?}");
        assert_eq!(p.requests, 7, "{p:?}");
        assert_eq!(p.ended.paid, 5, "{p:?}");
        let (keys, paid) = {
            let f = sale.lock().unwrap();
            (f.pays.clone(), f.paid)
        };
        assert_eq!(paid, 5);
        assert_eq!(keys[0].1, 503);
        assert!(keys[1..].contains(&(keys[0].0.clone(), 202)), "{keys:?}");
        let distinct: HashSet<&str> = keys.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(distinct.len(), 6);
        assert!(s.table().contains("5 paid, 0 cancelled"), "{}", s.table());

        // The history: one `pay` line per request, one `pay_end` per paying buyer; the other
        // lines read as before.
        let (lines, payments) = crate::history::read_with_payments(&history).unwrap();
        assert_eq!(crate::history::read(&history).unwrap(), lines);
        assert!(matches!(
            lines.last(),
            Some(crate::history::Line::Summary(_))
        ));
        let (mut pays, mut ends) = (vec![], vec![]);
        for l in payments {
            match l {
                crate::history::PaymentLine::Pay(p) => pays.push(p),
                crate::history::PaymentLine::PayEnd(e) => ends.push(e),
                crate::history::PaymentLine::Cancel(c) => panic!("nobody cancels: {c:?}"),
            }
        }
        assert_eq!(pays.len(), 7);
        assert_eq!(pays.iter().filter(|p| p.status == Some(202)).count(), 6);
        assert!(pays.iter().filter(|p| p.status == Some(202)).all(|p| p
            .payment_id
            .as_deref()
            .is_some_and(|id| id.starts_with("pay_"))));
        // The declined buyer's second key is its attempt 2.
        assert_eq!(pays.iter().filter(|p| p.attempt == 2).count(), 1);
        assert_eq!(ends.len(), 5);
        assert!(ends
            .iter()
            .all(|e| e.status == "paid" && e.paid_at_ms.is_some()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn until_all_paid_brings_fresh_buyers_until_cancelled_units_are_paid() {
        let seed = 3;
        // Some of the first buyers do not pay: their units must come back and sell again.
        assert!((1..=4).any(|u| !payment::pays(seed, u, 0.5)));
        let (addr, sale) = fake_gateway::start(fake_gateway::Config {
            stock: 4,
            pay_window: Some(Duration::from_millis(300)),
            ..Default::default()
        })
        .await;
        let seed_text = seed.to_string();
        let s = buy_run(
            addr,
            &[
                "--users",
                "4",
                "-c",
                "4",
                "--rate",
                "100",
                "--until-all-paid",
                "--all-paid-wait-secs",
                "20",
                "--pay-rate",
                "0.5",
                "--seed",
                &seed_text,
                "--pay-grace-secs",
                "2",
            ],
            Some("admin"),
            None,
        )
        .await;
        assert_eq!(s.all_paid_reached, Some(true), "{s:?}");
        let a = s.all_paid.as_ref().unwrap();
        assert_eq!(a.stopped, all_paid::Stopped::AllPaid);
        assert!(a.reached_s.is_some_and(|t| t <= a.stopped_s + 1.0), "{a:?}");
        let p = s.payments.as_ref().unwrap();
        assert!(p.buyers_not_paying >= 1, "{p:?}");
        assert!(s.users_used > 4, "{s:?}");
        {
            let f = sale.lock().unwrap();
            assert_eq!(f.paid, 4);
            assert!(f.cancelled >= 1);
        }
        assert!(s.table().contains("every unit paid at"), "{}", s.table());

        // Without an admin token it cannot tell: refused up front.
        let (addr, _) = fake_gateway::start(Default::default()).await;
        let url = format!("http://{addr}");
        let cli = <crate::cli::Cli as clap::Parser>::try_parse_from([
            "b",
            "load",
            "--gateway",
            &url,
            "--product",
            "7",
            "--no-history",
            "--quiet",
            "--rate",
            "10",
            "--until-all-paid",
            "--pay-rate",
            "1",
        ])
        .unwrap();
        let crate::cli::Command::Load(mut args) = cli.command else {
            panic!("not load")
        };
        args.admin_token = None;
        let err = run(args).await.unwrap_err();
        assert!(format!("{err:#}").contains("--admin-token"), "{err:#}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cancelling_buyers_cancel_from_their_202_until_the_order_is_confirmed_and_cancelled() {
        let seed = 11;
        // Some of the first buyers cancel, some pay.
        assert!((1..=6).any(|u| cancel::cancels(seed, u, 0.5)));
        assert!((1..=6).any(|u| !cancel::cancels(seed, u, 0.5)));
        let (addr, sale) = fake_gateway::start(fake_gateway::Config {
            stock: 6,
            // Cancels from the 202 on are refused as pending a few times first.
            confirm_after: Duration::from_millis(100),
            pay_window: Some(Duration::from_secs(5)),
            ..Default::default()
        })
        .await;
        let dir = std::env::temp_dir().join(format!("bench-cancel-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let history = dir.join("h.jsonl");
        let url = format!("http://{addr}");
        let seed_text = seed.to_string();
        let argv = [
            "b",
            "load",
            "--gateway",
            &url,
            "--product",
            "7",
            "--users",
            "6",
            "-c",
            "4",
            "--rate",
            "100",
            "--quiet",
            "--json",
            "--settle-timeout",
            "5",
            "--until-all-paid",
            "--all-paid-wait-secs",
            "20",
            "--pay-rate",
            "1",
            "--cancel-rate",
            "0.5",
            "--seed",
            &seed_text,
            "--history",
            history.to_str().unwrap(),
        ];
        let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
        let crate::cli::Command::Load(mut args) = cli.command else {
            panic!("not load")
        };
        (args.admin_token, args.jwt_secret) = (Some("admin".into()), None);
        let s = run(args).await.unwrap();
        assert_eq!(s.all_paid_reached, Some(true), "{s:?}");
        let p = s.payments.as_ref().unwrap();
        let c = p.cancels.as_ref().expect("a cancels summary");
        let (buyer_cancelled, paid, cancels) = {
            let f = sale.lock().unwrap();
            (f.buyer_cancelled, f.paid, f.cancels.clone())
        };
        assert_eq!(paid, 6);
        // Every cancelling buyer cancelled, each after a refusal as pending; none paid.
        assert!(c.buyers_cancelling >= 1, "{c:?}");
        assert_eq!(c.cancelled, c.buyers_cancelling, "{c:?}");
        assert_eq!(c.ended.cancelled, c.buyers_cancelling, "{c:?}");
        assert_eq!(c.ended.cancelled_after_pending, c.ended.cancelled, "{c:?}");
        assert!(
            c.refused.get("pending").is_some_and(|n| *n >= c.cancelled),
            "{c:?}"
        );
        assert_eq!(c.cancelled, buyer_cancelled);
        assert_eq!(c.requests, cancels.len() as u64);
        assert_eq!(p.ended.paid, p.buyers_paying, "{p:?}");
        assert!(
            s.table().contains("cancels: cancel rate 0.5"),
            "{}",
            s.table()
        );

        // The history: one `cancel` line per request; each order cancelled by its buyer has
        // the 200 that cancelled it, and each cancelling buyer tried until then.
        let (_, lines) = crate::history::read_with_payments(&history).unwrap();
        let cancel_lines: Vec<_> = lines
            .into_iter()
            .filter_map(|l| match l {
                crate::history::PaymentLine::Cancel(c) => Some(c),
                _ => None,
            })
            .collect();
        assert_eq!(cancel_lines.len(), cancels.len());
        let ok: Vec<_> = cancel_lines
            .iter()
            .filter(|l| l.status == Some(200))
            .collect();
        assert_eq!(ok.len() as u64, buyer_cancelled);
        for l in &ok {
            assert_eq!(l.reason.as_deref(), Some("buyer_cancelled"), "{l:?}");
            assert_eq!(l.state.as_deref(), Some("cancelled"), "{l:?}");
            assert!(l.attempt >= 2, "{l:?}");
            assert!(cancels.contains(&(l.ticket.clone(), 200)));
        }
        for l in cancel_lines.iter().filter(|l| l.status == Some(409)) {
            assert_eq!(
                (l.error.as_deref(), l.state.as_deref()),
                (Some("not_cancellable"), Some("pending")),
                "{l:?}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn double_paying_buyers_send_two_keys_at_once_and_one_is_refused_in_progress() {
        let (addr, sale) = fake_gateway::start(fake_gateway::Config {
            stock: 4,
            pay_window: Some(Duration::from_secs(10)),
            pay_delay: Duration::from_millis(200),
            ..Default::default()
        })
        .await;
        let s = buy_run(
            addr,
            &["--users", "4", "--pay-rate", "1", "--double-pay"],
            None,
            None,
        )
        .await;
        let p = s.payments.as_ref().unwrap();
        let d = p.double_pay.as_ref().expect("a double_pay summary");
        assert_eq!(
            (d.pairs, d.one_in_progress, d.both_accepted),
            (4, 4, 0),
            "{p:?}"
        );
        assert_eq!((p.attempts, p.requests, p.accepted), (8, 8, 4), "{p:?}");
        assert_eq!(p.refused.get("payment_in_progress"), Some(&4), "{p:?}");
        assert_eq!(p.ended.paid, 4, "{p:?}");
        {
            let f = sale.lock().unwrap();
            assert_eq!((f.payments, f.paid), (4, 4));
            let keys: HashSet<&str> = f.pays.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(keys.len(), 8);
        }
        assert!(s.table().contains("double pay: 4 pairs"), "{}", s.table());

        // --double-pay alone pays nothing: refused up front.
        let (addr, _) = fake_gateway::start(Default::default()).await;
        let url = format!("http://{addr}");
        let cli = <crate::cli::Cli as clap::Parser>::try_parse_from([
            "b",
            "load",
            "--gateway",
            &url,
            "--product",
            "7",
            "--no-history",
            "--quiet",
            "--double-pay",
        ])
        .unwrap();
        let crate::cli::Command::Load(args) = cli.command else {
            panic!("not load")
        };
        let err = run(args).await.unwrap_err();
        assert!(format!("{err:#}").contains("--double-pay"), "{err:#}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn without_a_pay_rate_nobody_pays_and_the_summary_is_as_before() {
        let (addr, sale) = fake_gateway::start(fake_gateway::Config {
            pay_window: Some(Duration::from_secs(10)),
            ..Default::default()
        })
        .await;
        let s = buy_run(addr, &["--users", "3"], None, None).await;
        assert_eq!(s.tickets.confirmed, 3);
        assert!(s.payments.is_none() && s.all_paid.is_none());
        let json = serde_json::to_value(&s).unwrap();
        for key in ["payments", "all_paid", "all_paid_reached", "until_all_paid"] {
            assert!(json.get(key).is_none(), "{key} in {json}");
        }
        assert!(!s.table().contains("pay"), "{}", s.table());
        assert!(sale.lock().unwrap().pays.is_empty());
    }

    #[test]
    fn until_all_paid_flags_go_together() {
        let parse = |extra: &[&str]| {
            let mut argv = vec!["b", "load", "--gateway", "http://x", "--product", "1"];
            argv.extend_from_slice(extra);
            <crate::cli::Cli as clap::Parser>::try_parse_from(argv)
        };
        assert!(parse(&["--until-all-paid", "--rate", "5", "--pay-rate", "0.5"]).is_ok());
        // It paces fresh buyers at --rate, and stops by itself.
        assert!(parse(&["--until-all-paid", "--pay-rate", "0.5"]).is_err());
        for other in [
            &["--until-sold-out"][..],
            &["--duration", "3"],
            &["--total", "9"],
        ] {
            let mut argv = vec!["--until-all-paid", "--rate", "5"];
            argv.extend_from_slice(other);
            assert!(parse(&argv).is_err(), "{other:?}");
        }
        assert!(parse(&["--pay-rate", "1.5"]).is_err());
        assert!(parse(&["--cancel-rate", "-0.1"]).is_err());
        for flag in [&["--cancel-rate", "0.5"][..], &["--double-pay"]] {
            let mut argv = vec!["--waiting-room"];
            argv.extend_from_slice(flag);
            assert!(parse(&argv).is_err(), "{flag:?}");
        }
        let cli = parse(&[]).unwrap();
        let crate::cli::Command::Load(a) = cli.command else {
            panic!("not load")
        };
        assert_eq!((a.pay_rate, a.seed, a.until_all_paid), (0.0, None, false));
        assert_eq!((a.cancel_rate, a.double_pay), (0.0, false));
        assert_eq!((a.pay_retry_after_ms, a.pay_grace_secs), (1000, 10.0));
        assert_eq!(a.all_paid_wait_secs, 120.0);
    }

    #[test]
    fn tickets_are_read_from_buy_answers() {
        let t = ticket_of(br#"{"ticket":"3-00ff","status":"pending","user_id":1}"#);
        assert_eq!(t.as_deref(), Some("3-00ff"));
        assert_eq!(ticket_of(br#"{"error":"sold_out"}"#), None);
        assert_eq!(ticket_of(b"not json"), None);
    }
}
