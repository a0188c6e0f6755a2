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

use super::admin_api::{AdminApi, Reading, StockView};
use super::admin_samples::AdminSampler;
use super::args::LoadArgs;
use super::buyer_token::BuyerTokens;
use super::engine::{error_chain, EngineKind, POOL_IDLE_TIMEOUT};
use super::plan::Outcome;
use super::sale_end::{Ended, SaleEndReport};
use super::settle::{self, ticket_of, IssuedTicket, SettledOut};
use super::stats::{
    ArrivalModel, ArrivalStats, E2eLatency, ShardedHistograms, Summary, TicketTotals,
    WaitingRoomReport,
};
use crate::history::{
    HistorySink, HistoryWriter, RequestRecord, WaitingRoomLine, WrAdmittedLine, WrBuyLine,
    WrEndLine, WrJoinLine, WrSampleLine,
};
use crate::now_us;
use anyhow::Context;
use bytes::Bytes;
use hyper::header::HeaderValue;
use indicatif::ProgressBar;
use seckill_shared::now_ms;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// The header the buy carries the admission token in.
pub const ADMISSION_HEADER: &str = "Seckill-Admission";

/// Back-off after a request that got no usable answer, before the next gateway.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// Polls come no faster and no slower than this, whatever `refresh_after_ms` says.
const MIN_POLL_MS: u64 = 100;
const MAX_POLL_MS: u64 = 2000;

/// A join's or a poll's answer.
#[derive(Debug, Clone, Deserialize)]
struct QueueBody {
    queue_id: String,
    state: String,
    #[serde(default)]
    refresh_after_ms: Option<u64>,
    #[serde(default)]
    admission_token: Option<String>,
    #[serde(default)]
    admitted_until_ms: Option<i64>,
}

/// The admin view's parts the sampler reads.
#[derive(Debug, Deserialize)]
struct AdminView {
    stock_redis: Option<i64>,
    stock_db: i64,
    pending: i64,
    #[serde(default)]
    closed_at: Option<chrono::DateTime<chrono::Utc>>,
    waiting_room: Option<AdminRoom>,
}

#[derive(Debug, Deserialize)]
struct AdminRoom {
    admitted: u64,
    max_admitted_factor: f64,
}

/// State every buyer shares.
struct Room {
    client: reqwest::Client,
    gateways: Vec<String>,
    product: u64,
    tokens: Option<BuyerTokens>,
    history: HistorySink,
    permits: Semaphore,
    deadline: Instant,
    until_sold_out: bool,
    /// The admin view showed the sale over: sold-out buyers stop.
    over: AtomicBool,
    histograms: ShardedHistograms,
    buys: AtomicU64,
    join_attempts: AtomicU64,
    polls: AtomicU64,
    retries: AtomicU64,
    admissions: AtomicU64,
}

/// One HTTP exchange's result.
struct Answer {
    status: Option<u16>,
    body: Bytes,
    error: Option<String>,
    retry_after: Option<Duration>,
}

impl Answer {
    /// No answer, or one a retry on another gateway may fix.
    fn retry_elsewhere(&self) -> bool {
        self.status.is_none_or(|s| s >= 500)
    }

    fn error_text(&self) -> Option<String> {
        if let Some(e) = &self.error {
            return Some(e.clone());
        }
        match self.status {
            Some(200..=299) => None,
            _ => {
                #[derive(Deserialize)]
                struct E {
                    error: Option<String>,
                }
                serde_json::from_slice::<E>(&self.body)
                    .ok()
                    .and_then(|e| e.error)
                    .or_else(|| {
                        Some(String::from_utf8_lossy(&self.body[..self.body.len().min(100)]).into())
                    })
            }
        }
    }
}

/// How one buyer ended.
struct BuyerResult {
    ticket: Option<IssuedTicket>,
    joined: bool,
    admitted: bool,
    state: String,
}

impl Room {
    fn next_gateway(&self, gw: usize) -> usize {
        (gw + 1) % self.gateways.len()
    }

    fn past_deadline(&self) -> bool {
        Instant::now() >= self.deadline
    }

    async fn pause(&self, d: Duration) {
        tokio::time::sleep_until((Instant::now() + d).min(self.deadline).into()).await;
    }

    async fn send(&self, req: reqwest::RequestBuilder, auth: &Option<HeaderValue>) -> Answer {
        let _permit = self
            .permits
            .acquire()
            .await
            .expect("the semaphore is never closed");
        let req = match auth {
            Some(a) => req.header(reqwest::header::AUTHORIZATION, a.clone()),
            None => req,
        };
        let res = match req.send().await {
            Ok(r) => r,
            Err(e) => {
                return Answer {
                    status: None,
                    body: Bytes::new(),
                    error: Some(error_chain(&e)),
                    retry_after: None,
                }
            }
        };
        let status = res.status().as_u16();
        let retry_after = res
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .map(Duration::from_secs);
        match res.bytes().await {
            Ok(body) => Answer {
                status: Some(status),
                body,
                error: None,
                retry_after,
            },
            // The head came, the body did not: as good as no answer.
            Err(e) => Answer {
                status: None,
                body: Bytes::new(),
                error: Some(format!("HTTP {status}, then {}", error_chain(&e))),
                retry_after: None,
            },
        }
    }

    /// Joins until a `202` or the deadline, each attempt a `wr_join` line.
    async fn join(
        &self,
        user: u64,
        gw: &mut usize,
        auth: &Option<HeaderValue>,
    ) -> Option<QueueBody> {
        loop {
            if self.past_deadline() {
                return None;
            }
            self.join_attempts.fetch_add(1, Ordering::Relaxed);
            let sent_at_ms = now_ms();
            let url = format!("{}/v1/seckill/{}/queue", self.gateways[*gw], self.product);
            let a = self.send(self.client.post(url), auth).await;
            let body = (a.status == Some(202))
                .then(|| serde_json::from_slice::<QueueBody>(&a.body).ok())
                .flatten();
            self.history.line(&WaitingRoomLine::WrJoin(WrJoinLine {
                user_id: user,
                gateway: self.gateways[*gw].clone(),
                status: a.status,
                queue_id: body.as_ref().map(|b| b.queue_id.clone()),
                state: body.as_ref().map(|b| b.state.clone()),
                error: a.error_text(),
                sent_at_ms,
                at_ms: now_ms(),
            }));
            if let Some(b) = body {
                return Some(b);
            }
            if a.retry_elsewhere() {
                self.retries.fetch_add(1, Ordering::Relaxed);
                *gw = self.next_gateway(*gw);
                self.pause(RETRY_PAUSE).await;
            } else {
                // Rate limited, not open yet, or Redis lost the product: try again later.
                self.pause(a.retry_after.unwrap_or(Duration::from_millis(500)))
                    .await;
            }
        }
    }

    /// Polls until an answer or the deadline. `Err(())`: the entry is unknown (Redis lost the
    /// line): join again.
    async fn poll(
        &self,
        queue_id: &str,
        gw: &mut usize,
        auth: &Option<HeaderValue>,
        errors: &mut u64,
    ) -> Option<Result<QueueBody, ()>> {
        loop {
            if self.past_deadline() {
                return None;
            }
            let url = format!(
                "{}/v1/seckill/{}/queue/{queue_id}",
                self.gateways[*gw], self.product
            );
            let a = self.send(self.client.get(url), auth).await;
            match a.status {
                Some(200) => match serde_json::from_slice::<QueueBody>(&a.body) {
                    Ok(b) => {
                        self.polls.fetch_add(1, Ordering::Relaxed);
                        return Some(Ok(b));
                    }
                    Err(_) => *errors += 1,
                },
                Some(404) => return Some(Err(())),
                Some(429) => {
                    self.pause(a.retry_after.unwrap_or(Duration::from_millis(500)))
                        .await;
                    continue;
                }
                _ => *errors += 1,
            }
            self.retries.fetch_add(1, Ordering::Relaxed);
            *gw = self.next_gateway(*gw);
            self.pause(RETRY_PAUSE).await;
        }
    }

    /// Buys with the admission while it lasts: a request that got no answer (or a 5xx) is
    /// retried on the next gateway. `None`: refused (sold out, not admitted any more).
    async fn buy(
        &self,
        user: u64,
        gw: &mut usize,
        auth: &Option<HeaderValue>,
        token: &str,
        until_ms: i64,
    ) -> Option<IssuedTicket> {
        let admission = HeaderValue::try_from(token).ok()?;
        loop {
            if now_ms() >= until_ms || self.past_deadline() {
                return None;
            }
            let url = format!("{}/v1/seckill/{}", self.gateways[*gw], self.product);
            let req = self
                .client
                .post(url)
                .header(ADMISSION_HEADER, admission.clone())
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(format!("{{\"user_id\":{user}}}"));
            let sent_at_us = now_us();
            let t0 = Instant::now();
            let a = self.send(req, auth).await;
            let service_us = t0.elapsed().as_micros() as u64;
            self.buys.fetch_add(1, Ordering::Relaxed);
            let outcome = if a.error.is_some() {
                Outcome::Error
            } else {
                Outcome::classify(a.status)
            };
            self.histograms.record(0, outcome, service_us, None, None);
            let ticket = outcome.has_ticket().then(|| ticket_of(&a.body)).flatten();
            let error = a.error_text();
            if self.history.enabled() {
                self.history.send(vec![RequestRecord {
                    sent_at_us,
                    recv_at_us: sent_at_us + service_us,
                    gateway: *gw as u16,
                    user_id: Some(user),
                    status: a.status,
                    ticket: ticket.clone(),
                    error: a.error.as_deref().map(Into::into),
                }]);
                self.history.line(&WaitingRoomLine::WrBuy(WrBuyLine {
                    user_id: user,
                    admission_token: Some(token.to_owned()),
                    admitted_until_ms: Some(until_ms),
                    sent_at_us,
                    gateway: self.gateways[*gw].clone(),
                    status: a.status,
                    ticket: ticket.as_deref().map(str::to_owned),
                    error,
                }));
            }
            if let Some(t) = ticket {
                return Some(IssuedTicket {
                    ticket: t.to_string(),
                    user_id: user,
                    gateway: *gw,
                    answered_at_us: sent_at_us + service_us,
                    fresh: outcome == Outcome::Accepted,
                    auth: auth.clone(),
                });
            }
            match a.status {
                _ if a.retry_elsewhere() => {
                    self.retries.fetch_add(1, Ordering::Relaxed);
                    *gw = self.next_gateway(*gw);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Some(429) => {
                    self.pause(a.retry_after.unwrap_or(Duration::from_millis(200)))
                        .await
                }
                _ => return None,
            }
        }
    }

    async fn buyer(self: Arc<Self>, user: u64) -> BuyerResult {
        let mut gw = (user as usize) % self.gateways.len();
        let auth = self.tokens.as_ref().map(|t| t.header(user));
        let (mut polls, mut errors) = (0u64, 0u64);
        let mut out = BuyerResult {
            ticket: None,
            joined: false,
            admitted: false,
            state: "not_joined".into(),
        };
        let mut seen_until = None;
        let mut queue_id: Option<String> = None;
        'join: loop {
            let Some(mut q) = self.join(user, &mut gw, &auth).await else {
                break 'join;
            };
            out.joined = true;
            queue_id = Some(q.queue_id.clone());
            loop {
                out.state.clone_from(&q.state);
                let mut pause = q.refresh_after_ms.unwrap_or(1000);
                match q.state.as_str() {
                    "admitted" => {
                        if let (Some(token), Some(until)) =
                            (&q.admission_token, q.admitted_until_ms)
                        {
                            out.admitted = true;
                            if seen_until != Some(until) {
                                seen_until = Some(until);
                                self.admissions.fetch_add(1, Ordering::Relaxed);
                                self.history
                                    .line(&WaitingRoomLine::WrAdmitted(WrAdmittedLine {
                                        user_id: user,
                                        queue_id: q.queue_id.clone(),
                                        admitted_until_ms: until,
                                        gateway: self.gateways[gw].clone(),
                                        at_ms: now_ms(),
                                    }));
                            }
                            if let Some(t) = self.buy(user, &mut gw, &auth, token, until).await {
                                out.ticket = Some(t);
                                out.state = "bought".into();
                                break 'join;
                            }
                            if self.over.load(Ordering::Relaxed) {
                                out.state = "sold_out".into();
                                break 'join;
                            }
                            // Refused: the line says why (sold out, taken back, lapsed).
                            pause = 0;
                        }
                    }
                    "bought" | "expired" => break 'join,
                    "sold_out" if !self.until_sold_out || self.over.load(Ordering::Relaxed) => {
                        break 'join
                    }
                    _ => {}
                }
                if self.past_deadline() {
                    break 'join;
                }
                self.pause(Duration::from_millis(pause.clamp(MIN_POLL_MS, MAX_POLL_MS)))
                    .await;
                match self.poll(&q.queue_id, &mut gw, &auth, &mut errors).await {
                    None => break 'join,
                    Some(Ok(next)) => {
                        polls += 1;
                        q = next;
                    }
                    Some(Err(())) => continue 'join,
                }
            }
        }
        self.history.line(&WaitingRoomLine::WrEnd(WrEndLine {
            user_id: user,
            queue_id,
            state: out.state.clone(),
            polls,
            poll_errors: errors,
            at_ms: now_ms(),
        }));
        out
    }
}

/// Samples the admin view into `wr_sample` lines until stopped; with --until-sold-out, marks
/// the sale over once two looks in a row show no stock in either store and nothing pending.
struct Sampler {
    samples: u64,
    max_admitted: u64,
    over_cap: u64,
    checks: u64,
    last_seen: Option<StockView>,
    last_error: Option<String>,
    over_at: Option<Instant>,
}

async fn sample(
    room: Arc<Room>,
    mut api: AdminApi,
    every: Duration,
    stop: Arc<AtomicBool>,
) -> Sampler {
    let mut s = Sampler {
        samples: 0,
        max_admitted: 0,
        over_cap: 0,
        checks: 0,
        last_seen: None,
        last_error: None,
        over_at: None,
    };
    let mut empty_streak = 0;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let v = match api.view::<AdminView>().await {
            Ok(v) => v,
            Err(e) => {
                s.last_error = Some(format!("{e:#}"));
                continue;
            }
        };
        let at_ms = now_ms();
        if let Some(w) = &v.waiting_room {
            s.samples += 1;
            s.max_admitted = s.max_admitted.max(w.admitted);
            if let Some(stock) = v.stock_redis {
                if w.admitted > cap(w.max_admitted_factor, stock) {
                    s.over_cap += 1;
                }
            }
            room.history.line(&WaitingRoomLine::WrSample(WrSampleLine {
                at_ms,
                admitted: w.admitted,
                stock_redis: v.stock_redis,
                pending: v.pending,
                max_admitted_factor: w.max_admitted_factor,
            }));
        }
        let view = StockView {
            stock_redis: v.stock_redis,
            stock_db: v.stock_db,
            pending: v.pending,
            closed_at: v.closed_at,
        };
        s.last_seen = Some(view);
        if room.until_sold_out && s.over_at.is_none() {
            s.checks += 1;
            if view.reading() == Reading::Empty {
                empty_streak += 1;
                if empty_streak >= 2 {
                    s.over_at = Some(Instant::now());
                    room.over.store(true, Ordering::Relaxed);
                }
            } else {
                empty_streak = 0;
            }
        }
    }
    s
}

/// `ceil(factor × max(stock, 0))`: the most admitted-not-bought the room may hold.
pub fn cap(factor: f64, stock: i64) -> u64 {
    (factor * stock.max(0) as f64).ceil() as u64
}

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
            let v: AdminView = api
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
    use super::super::fake_gateway;
    use super::*;
    use crate::history::{Line, WaitingRoomLine as W};

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
        let s = super::super::run(args).await.unwrap();
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

    #[test]
    fn the_cap_rounds_up_and_never_goes_below_zero() {
        assert_eq!(cap(1.5, 200), 300);
        assert_eq!(cap(1.5, 3), 5);
        assert_eq!(cap(1.0, 0), 0);
        assert_eq!(cap(1.5, -2), 0);
    }
}
