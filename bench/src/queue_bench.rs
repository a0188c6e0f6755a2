//! `seckill-bench queue-sale`: a waiting-room sale under load (issue 13), next to the same
//! sale without a waiting room.
//!
//! The run:
//! 1. creates a product with a waiting room (`--stock` units, `--admit-per-sec`,
//!    `--max-admitted-factor`) whose sale starts `--starts-in` seconds later, and preloads it;
//! 2. has `--buyers` distinct buyers join its line (one signed HS256 token each), `--concurrency`
//!    joins in flight. Every join must be answered before the start, or the run does not count;
//! 3. from the start, every buyer polls its entry: the first poll at a point spread over the
//!    first second, then each `refresh_after_ms` later (clamped to `--min-refresh-ms` ..
//!    `--max-refresh-ms`). An admitted buyer buys at once with its admission token; a buyer
//!    stops on `sold_out`, `bought` or `expired`;
//! 4. then the same sale without a waiting room: a product with the same stock and a start
//!    two seconds ahead, and the same number of buyers (one buy each, `--concurrency` in flight)
//!    from the start until a `409 sold_out`.
//!
//! Each of the `--concurrency` tasks owns the buyers `i ≡ task (mod C)` and one keep-alive
//! connection per gateway (the `hyper` engine of [`crate::load::engine`]); it sends the poll
//! that is due first, one at a time. When the gateways cannot keep up, polls fall behind their
//! due time: the tasks then send back to back, and what is measured is what the gateways
//! sustain. Buys with an admission token go through `reqwest` (the engine sends no other
//! header than `Authorization`); they are about one per unit.
//!
//! The figures: polls answered per second from the start until 90 % of the buyers have stopped
//! ([`sustained_rate`], leaving the first second of ramp out when the window is long enough);
//! the time from the start to the 202 of the last unit, for both sales; with `--redis-pid`,
//! the Redis CPU (utime + stime from `/proc/PID/stat`) per join over the joins and per poll
//! over the polling phase (which also carries the buys: about one per unit).

use crate::admin::Admin;
use crate::load::buyer_token::{BuyerTokens, SigningKey, TokenIssuer};
use crate::load::engine::{Conns, EngineKind, Target};
use anyhow::Context;
use bytes::Bytes;
use clap::Args;
use seckill_shared::now_ms;
use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone, Args)]
pub struct QueueSaleArgs {
    /// Gateway base URL; repeat for several (buyer `i` uses gateway `i mod G`).
    #[arg(long = "gateway", required = true, value_name = "URL")]
    pub gateways: Vec<String>,

    /// The gateways' admin token (creates and preloads the products).
    #[arg(
        long,
        env = "SECKILL_ADMIN_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN",
        value_parser = crate::args::secret
    )]
    pub admin_token: SecretString,

    /// Sign one HS256 token per buyer with this secret (claims as `load --jwt-secret`).
    #[arg(
        long,
        env = "SECKILL_AUTH_HS256_SECRET",
        hide_env_values = true,
        value_name = "SECRET",
        value_parser = crate::args::secret
    )]
    pub jwt_secret: SecretString,

    /// Buyers in the line (and buyers of the sale without a waiting room).
    #[arg(long, default_value_t = 100_000, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub buyers: u64,

    /// Units on sale.
    #[arg(long, default_value_t = 1000, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub stock: u64,

    /// The waiting room's admissions per second.
    #[arg(long, default_value_t = 1000.0, value_name = "N")]
    pub admit_per_sec: f64,

    /// The waiting room's cap: admitted and not bought ≤ ceil(FACTOR × units left).
    #[arg(long, default_value_t = 1.5, value_name = "FACTOR")]
    pub max_admitted_factor: f64,

    /// The sale starts this long after the product is created: the joins must be done by
    /// then. Default: 5 s + one second per 2,500 buyers.
    #[arg(long, value_name = "SECS")]
    pub starts_in: Option<f64>,

    /// Requests in flight: tasks, each with one connection per gateway.
    #[arg(long, short = 'c', default_value_t = 256, value_name = "C")]
    pub concurrency: usize,

    /// A buyer polls again no sooner than this after an answer, whatever `refresh_after_ms`.
    #[arg(long, default_value_t = 250, value_name = "MS")]
    pub min_refresh_ms: u64,

    /// …and no later than this.
    #[arg(long, default_value_t = 2000, value_name = "MS")]
    pub max_refresh_ms: u64,

    /// Give up polling this long after the start.
    #[arg(long, default_value_t = 300.0, value_name = "SECS")]
    pub timeout: f64,

    /// Buyers are FIRST_USER, FIRST_USER + 1, …
    #[arg(long, default_value_t = 1, value_name = "ID")]
    pub first_user: u64,

    /// Skip the sale without a waiting room.
    #[arg(long)]
    pub no_baseline: bool,

    /// The Redis server's pid: its CPU per join and per poll, from `/proc/PID/stat`.
    #[arg(long, value_name = "PID")]
    pub redis_pid: Option<u32>,

    /// Clock ticks per second of `/proc/PID/stat` (`getconf CLK_TCK`).
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub clk_tck: u64,

    /// Write the result as JSON to this file.
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,

    /// Print the result as one JSON object on stdout instead of the summary line (which then
    /// goes to stderr).
    #[arg(long)]
    pub json: bool,
}

// ------------------------------------------------------------------ pure parts ---

/// RFC 3339 in UTC with milliseconds, from ms since the epoch.
pub fn rfc3339_utc(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .expect("a time within chrono's range")
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The default `--starts-in`: 5 s plus one second per 2,500 joins.
pub fn default_starts_in_secs(buyers: u64) -> f64 {
    5.0 + buyers as f64 / 2500.0
}

/// When buyer `i` of `n` polls first, ms after the start: spread evenly over `spread_ms`, so
/// that the line does not all poll in the same millisecond.
pub fn first_poll_offset_ms(i: u64, n: u64, spread_ms: u64) -> u64 {
    if n == 0 {
        0
    } else {
        (i as u128 * spread_ms as u128 / n as u128) as u64
    }
}

/// The state of a waiting-room entry, as a join or a poll answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryState {
    Waiting,
    Admitted,
    SoldOut,
    Expired,
    Bought,
}

impl EntryState {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "waiting" => Self::Waiting,
            "admitted" => Self::Admitted,
            "sold_out" => Self::SoldOut,
            "expired" => Self::Expired,
            "bought" => Self::Bought,
            _ => return None,
        })
    }

    /// The buyer stops polling.
    pub fn is_final(self) -> bool {
        matches!(self, Self::SoldOut | Self::Expired | Self::Bought)
    }
}

/// Utime + stime, in clock ticks, from the text of `/proc/PID/stat` (fields 14 and 15; the
/// command name, in parentheses, may hold spaces).
pub fn cpu_ticks_of_stat(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3, so utime (14) and stime (15) are at 11 and 12.
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// Polls per second over the window from the start to `end_ms`, from counts per 100 ms
/// bucket since the start. When the window is longer than 3 s, its first second (the first
/// polls are spread over it) is left out. `None` for an empty window.
pub fn sustained_rate(buckets: &[u32], end_ms: u64) -> Option<f64> {
    let end = (end_ms / 100) as usize;
    let from = if end_ms > 3000 { 10 } else { 0 };
    let end = end.min(buckets.len());
    if end <= from {
        return None;
    }
    let n: u64 = buckets[from..end].iter().map(|&c| u64::from(c)).sum();
    Some(n as f64 / ((end - from) as f64 / 10.0))
}

/// The first 100 ms bucket boundary, ms since the start, by which at least `want` events of
/// `buckets` (counts per 100 ms) had happened.
pub fn time_to_count_ms(buckets: &[u32], want: u64) -> Option<u64> {
    let mut seen = 0u64;
    for (i, &c) in buckets.iter().enumerate() {
        seen += u64::from(c);
        if seen >= want {
            return Some((i as u64 + 1) * 100);
        }
    }
    None
}

/// The `k`-th (1-based) earliest of `times`, if there are that many.
pub fn kth_earliest(times: &mut [i64], k: usize) -> Option<i64> {
    if k == 0 || times.len() < k {
        return None;
    }
    times.sort_unstable();
    Some(times[k - 1])
}

// --------------------------------------------------------------------- results ---

#[derive(Debug, Clone, Default, Serialize)]
pub struct Counts {
    pub ok: u64,
    pub rate_limited: u64,
    pub unavailable: u64,
    pub other_status: u64,
    pub transport_errors: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct QueueSaleReport {
    pub ok: bool,
    pub problems: Vec<String>,
    pub buyers: u64,
    pub stock: u64,
    pub admit_per_sec: f64,
    pub max_admitted_factor: f64,
    pub concurrency: usize,
    pub gateways: usize,
    pub product: u64,
    pub starts_in_s: f64,
    /// Joins answered 202.
    pub joined: u64,
    pub join_s: f64,
    pub joins_per_s: f64,
    /// ms from the last join's answer to the start (negative: the joins ran late).
    pub join_margin_ms: i64,
    pub joins: Counts,
    /// Polls answered (any status), from the start to the end of the run.
    pub polls: u64,
    pub poll_answers: Counts,
    pub poll_states: std::collections::BTreeMap<String, u64>,
    /// ms after the start by which 90 % of the joined buyers had stopped.
    pub done90_ms: Option<u64>,
    /// Polls answered per second from the start to `done90_ms` (see [`sustained_rate`]).
    pub polls_per_s: Option<f64>,
    /// The best second.
    pub polls_per_s_peak: f64,
    /// Polls answered per second over each second since the start.
    pub polls_per_second: Vec<u32>,
    /// Buyers admitted (polls answered `admitted`, one per admission seen).
    pub admissions: u64,
    /// Buys with an admission token, by answer.
    pub buys_accepted: u64,
    pub buys_sold_out: u64,
    pub buys_refused: u64,
    pub buys_failed: u64,
    /// From the start to the 202 of the `stock`-th unit.
    pub sold_out_ms: Option<i64>,
    /// From the start to the last poll answered.
    pub poll_phase_s: f64,
    pub redis_cpu_us_per_join: Option<f64>,
    pub redis_cpu_us_per_poll: Option<f64>,
    pub redis_cpu_s_polling: Option<f64>,
    pub baseline: Option<BaselineReport>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BaselineReport {
    pub product: u64,
    pub buys: u64,
    pub accepted: u64,
    pub sold_out_answers: u64,
    pub answers: Counts,
    /// From the start to the 202 of the `stock`-th unit.
    pub sold_out_ms: Option<i64>,
}

impl QueueSaleReport {
    /// The one-line summary.
    pub fn line(&self) -> String {
        let f = |v: Option<f64>, unit: &str| v.map_or("n/a".into(), |v| format!("{v:.1}{unit}"));
        let secs =
            |v: Option<i64>| v.map_or("n/a".into(), |v| format!("{:.2} s", v as f64 / 1000.0));
        let mut s = format!(
            "queue-sale: {} buyers joined in {:.1} s ({:.0}/s), {} units (admit {}/s, factor {}): \
             {} polls/s sustained (peak {:.0}/s, {} polls in {:.1} s); Redis {} CPU per poll, {} per join; \
             start → last unit sold {}",
            self.joined,
            self.join_s,
            self.joins_per_s,
            self.stock,
            self.admit_per_sec,
            self.max_admitted_factor,
            f(self.polls_per_s, ""),
            self.polls_per_s_peak,
            self.polls,
            self.poll_phase_s,
            f(self.redis_cpu_us_per_poll, " µs"),
            f(self.redis_cpu_us_per_join, " µs"),
            secs(self.sold_out_ms),
        );
        if let Some(b) = &self.baseline {
            s += &format!(
                ", without a waiting room {} ({} buys)",
                secs(b.sold_out_ms),
                b.buys
            );
        }
        if !self.ok {
            s += &format!("; INVALID: {}", self.problems.join("; "));
        }
        s
    }
}

// ------------------------------------------------------------------------- run ---

#[derive(Default)]
struct AtomicCounts {
    ok: AtomicU64,
    rate_limited: AtomicU64,
    unavailable: AtomicU64,
    other_status: AtomicU64,
    transport_errors: AtomicU64,
}

impl AtomicCounts {
    fn record(&self, status: Option<u16>, ok: u16) {
        match status {
            Some(s) if s == ok => &self.ok,
            Some(429) => &self.rate_limited,
            Some(503) => &self.unavailable,
            Some(_) => &self.other_status,
            None => &self.transport_errors,
        }
        .fetch_add(1, Relaxed);
    }

    fn get(&self) -> Counts {
        Counts {
            ok: self.ok.load(Relaxed),
            rate_limited: self.rate_limited.load(Relaxed),
            unavailable: self.unavailable.load(Relaxed),
            other_status: self.other_status.load(Relaxed),
            transport_errors: self.transport_errors.load(Relaxed),
        }
    }
}

/// Counts per 100 ms since a start.
struct Buckets(Vec<AtomicU32>);

impl Buckets {
    fn new(secs: f64) -> Self {
        Self(
            (0..(secs * 10.0) as usize + 20)
                .map(|_| AtomicU32::new(0))
                .collect(),
        )
    }
    fn add(&self, since_start_ms: i64) {
        let i = (since_start_ms.max(0) / 100) as usize;
        if let Some(b) = self.0.get(i.min(self.0.len() - 1)) {
            b.fetch_add(1, Relaxed);
        }
    }
    fn get(&self) -> Vec<u32> {
        self.0.iter().map(|b| b.load(Relaxed)).collect()
    }
}

struct Gateway {
    base: String,
    join: Target,
}

struct Ctx {
    product: u64,
    gateways: Vec<Gateway>,
    tokens: BuyerTokens,
    http: reqwest::Client,
    first_user: u64,
    buyers: u64,
    start_ms: i64,
    deadline_ms: i64,
    min_refresh: u64,
    max_refresh: u64,
    joins: AtomicCounts,
    last_join_ms: AtomicU64,
    poll_answers: AtomicCounts,
    states: [AtomicU64; 5],
    polls: Buckets,
    done: Buckets,
    admissions: AtomicU64,
    buys_accepted: AtomicU64,
    buys_sold_out: AtomicU64,
    buys_refused: AtomicU64,
    buys_failed: AtomicU64,
    sold_at: Mutex<Vec<i64>>,
    last_poll_ms: AtomicU64,
}

/// A buyer in line, as its task keeps it.
struct Entry {
    /// Index from 0: user `first_user + i`.
    i: u64,
    poll: Target,
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    queue_id: Option<String>,
    state: String,
    #[serde(default)]
    refresh_after_ms: Option<u64>,
    #[serde(default)]
    admission_token: Option<String>,
}

#[derive(Deserialize)]
struct ErrorBody {
    error: String,
}

fn error_code(body: Option<&Bytes>) -> Option<String> {
    serde_json::from_slice::<ErrorBody>(body?)
        .ok()
        .map(|e| e.error)
}

const TIMEOUT: Option<Duration> = Some(Duration::from_secs(30));

async fn sleep_until_ms(t: i64) {
    let d = t - now_ms();
    if d > 0 {
        tokio::time::sleep(Duration::from_millis(d as u64)).await;
    }
}

/// One task: joins its buyers, waits for the start, then polls them until each stops.
async fn buyer_task(ctx: Arc<Ctx>, task: u64, tasks: u64) {
    let g = ctx.gateways.len();
    let mut conns = Conns::new(EngineKind::Hyper, &ctx.http, g);
    let mut entries = Vec::new();
    let mut i = task;
    while i < ctx.buyers {
        let user = ctx.first_user + i;
        let gw = (i % g as u64) as usize;
        for attempt in 0..5 {
            let x = conns
                .exchange(
                    &ctx.gateways[gw].join,
                    gw,
                    Some(Bytes::from_static(b"{}")),
                    Some(ctx.tokens.header(user)),
                    TIMEOUT,
                )
                .await;
            ctx.joins.record(x.status, 202);
            let qid = (x.status == Some(202))
                .then(|| {
                    serde_json::from_slice::<Answer>(x.body.as_deref().unwrap_or_default()).ok()
                })
                .flatten()
                .and_then(|a| a.queue_id);
            if let Some(qid) = qid {
                let url = format!(
                    "{}/v1/seckill/{}/queue/{qid}",
                    ctx.gateways[gw].base, ctx.product
                );
                if let Ok(poll) = Target::parse(&url) {
                    entries.push(Entry { i, poll });
                }
                break;
            }
            if attempt < 4 {
                tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
            }
        }
        i += tasks;
    }
    ctx.last_join_ms.fetch_max(now_ms() as u64, Relaxed);

    let mut due: BinaryHeap<Reverse<(i64, usize)>> = entries
        .iter()
        .enumerate()
        .map(|(k, e)| {
            Reverse((
                ctx.start_ms + first_poll_offset_ms(e.i, ctx.buyers, 1000) as i64,
                k,
            ))
        })
        .collect();
    while let Some(Reverse((at, k))) = due.pop() {
        if at > ctx.deadline_ms {
            break;
        }
        sleep_until_ms(at).await;
        let e = &entries[k];
        let user = ctx.first_user + e.i;
        let gw = (e.i % g as u64) as usize;
        let x = conns
            .exchange(&e.poll, gw, None, Some(ctx.tokens.header(user)), TIMEOUT)
            .await;
        let now = now_ms();
        ctx.poll_answers.record(x.status, 200);
        ctx.polls.add(now - ctx.start_ms);
        ctx.last_poll_ms.fetch_max(now as u64, Relaxed);
        let answer = (x.status == Some(200))
            .then(|| serde_json::from_slice::<Answer>(x.body.as_deref().unwrap_or_default()).ok())
            .flatten();
        let Some(answer) = answer else {
            due.push(Reverse((now + 1000, k)));
            continue;
        };
        let refresh = answer
            .refresh_after_ms
            .unwrap_or(1000)
            .clamp(ctx.min_refresh, ctx.max_refresh) as i64;
        let state = EntryState::parse(&answer.state);
        if let Some(s) = state {
            ctx.states[s as usize].fetch_add(1, Relaxed);
        }
        match state {
            Some(s) if s.is_final() => ctx.done.add(now - ctx.start_ms),
            Some(EntryState::Admitted) => {
                ctx.admissions.fetch_add(1, Relaxed);
                match buy(
                    &ctx,
                    gw,
                    user,
                    answer.admission_token.as_deref().unwrap_or(""),
                )
                .await
                {
                    BuyOutcome::Accepted | BuyOutcome::SoldOut => {
                        ctx.done.add(now_ms() - ctx.start_ms)
                    }
                    // The admission was taken back (the cap) or a transient failure: poll again.
                    BuyOutcome::Refused | BuyOutcome::Failed => {
                        due.push(Reverse((now_ms() + ctx.min_refresh as i64, k)))
                    }
                }
            }
            _ => due.push(Reverse((now + refresh, k))),
        }
    }
}

enum BuyOutcome {
    Accepted,
    SoldOut,
    Refused,
    Failed,
}

async fn buy(ctx: &Ctx, gw: usize, user: u64, admission: &str) -> BuyOutcome {
    let res = ctx
        .http
        .post(format!(
            "{}/v1/seckill/{}",
            ctx.gateways[gw].base, ctx.product
        ))
        .header(reqwest::header::AUTHORIZATION, ctx.tokens.header(user))
        .header("Seckill-Admission", admission)
        .json(&serde_json::json!({}))
        .send()
        .await;
    let Ok(res) = res else {
        ctx.buys_failed.fetch_add(1, Relaxed);
        return BuyOutcome::Failed;
    };
    let status = res.status().as_u16();
    let body = res.bytes().await.ok();
    match status {
        202 => {
            let t = now_ms();
            ctx.buys_accepted.fetch_add(1, Relaxed);
            ctx.sold_at.lock().unwrap().push(t);
            BuyOutcome::Accepted
        }
        409 if error_code(body.as_ref()).as_deref() == Some("sold_out") => {
            ctx.buys_sold_out.fetch_add(1, Relaxed);
            BuyOutcome::SoldOut
        }
        403 => {
            ctx.buys_refused.fetch_add(1, Relaxed);
            BuyOutcome::Refused
        }
        _ => {
            ctx.buys_failed.fetch_add(1, Relaxed);
            BuyOutcome::Failed
        }
    }
}

fn redis_ticks(pid: Option<u32>) -> Option<u64> {
    cpu_ticks_of_stat(&std::fs::read_to_string(format!("/proc/{}/stat", pid?)).ok()?)
}

/// One HS256 token per buyer, valid for an hour.
fn buyer_tokens(args: &QueueSaleArgs) -> anyhow::Result<BuyerTokens> {
    BuyerTokens::new(
        TokenIssuer::new(
            SigningKey::Hs256(&args.jwt_secret),
            None,
            None,
            Duration::from_secs(3600),
        )?,
        args.first_user,
        args.buyers,
    )
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
    let names = ["waiting", "admitted", "sold_out", "expired", "bought"];
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
    use crate::cli::{Cli, Command};
    use clap::Parser;

    #[test]
    fn rfc3339_formats_utc_with_milliseconds() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_utc(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339_utc(1_798_761_599_999), "2026-12-31T23:59:59.999Z");
        assert_eq!(rfc3339_utc(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn first_polls_spread_over_the_window_in_order() {
        assert_eq!(first_poll_offset_ms(0, 100_000, 1000), 0);
        assert_eq!(first_poll_offset_ms(50_000, 100_000, 1000), 500);
        assert_eq!(first_poll_offset_ms(99_999, 100_000, 1000), 999);
        assert_eq!(first_poll_offset_ms(3, 0, 1000), 0);
    }

    #[test]
    fn entry_states_parse_and_the_last_three_stop_the_buyer() {
        for (s, st, fin) in [
            ("waiting", EntryState::Waiting, false),
            ("admitted", EntryState::Admitted, false),
            ("sold_out", EntryState::SoldOut, true),
            ("expired", EntryState::Expired, true),
            ("bought", EntryState::Bought, true),
        ] {
            assert_eq!(EntryState::parse(s), Some(st));
            assert_eq!(st.is_final(), fin);
            assert_eq!(serde_json::to_value(st).unwrap(), s);
        }
        assert_eq!(EntryState::parse("Waiting"), None);
    }

    #[test]
    fn cpu_ticks_are_utime_plus_stime_even_with_spaces_in_the_name() {
        let stat = "1234 (redis-server *:6379) S 1 1234 1234 0 -1 4194560 5000 0 0 0 \
                    700 300 0 0 20 0 5 0 100 0 0";
        assert_eq!(cpu_ticks_of_stat(stat), Some(1000));
        assert_eq!(cpu_ticks_of_stat("garbage"), None);
        assert_eq!(cpu_ticks_of_stat("1 (x) S 1 2"), None);
    }

    #[test]
    fn the_sustained_rate_leaves_the_first_second_out_of_long_windows() {
        // 1 s of ramp at 100/100 ms, then 500/100 ms.
        let mut b = vec![100u32; 10];
        b.extend([500u32; 40]);
        assert_eq!(sustained_rate(&b, 5000), Some(5000.0));
        // A short window counts from the start.
        assert_eq!(sustained_rate(&b, 2000), Some((1000.0 + 5000.0) / 2.0));
        // Beyond the buckets, the window is cut; an empty window has no rate.
        assert_eq!(sustained_rate(&b, 60_000), Some(5000.0));
        assert_eq!(sustained_rate(&b, 50), None);
    }

    #[test]
    fn counts_and_kth_times() {
        let b = [0, 3, 0, 5, 2];
        assert_eq!(time_to_count_ms(&b, 1), Some(200));
        assert_eq!(time_to_count_ms(&b, 8), Some(400));
        assert_eq!(time_to_count_ms(&b, 10), Some(500));
        assert_eq!(time_to_count_ms(&b, 11), None);
        let mut t = vec![30, 10, 20];
        assert_eq!(kth_earliest(&mut t, 3), Some(30));
        assert_eq!(kth_earliest(&mut t, 1), Some(10));
        assert_eq!(kth_earliest(&mut t, 4), None);
        assert_eq!(kth_earliest(&mut t, 0), None);
    }

    #[test]
    fn default_start_leaves_time_for_the_joins() {
        assert_eq!(default_starts_in_secs(100_000), 45.0);
        assert_eq!(default_starts_in_secs(0), 5.0);
    }

    #[test]
    fn the_command_line_has_the_issue_s_defaults_and_hides_its_secrets() {
        let cli = Cli::try_parse_from([
            "b",
            "queue-sale",
            "--gateway",
            "http://x",
            "--admin-token",
            "adm1n",
            "--jwt-secret",
            "s3cret",
        ])
        .unwrap();
        let Command::QueueSale(a) = cli.command else {
            panic!("not queue-sale")
        };
        assert_eq!((a.buyers, a.stock, a.concurrency), (100_000, 1000, 256));
        assert_eq!((a.admit_per_sec, a.max_admitted_factor), (1000.0, 1.5));
        assert_eq!((a.min_refresh_ms, a.max_refresh_ms), (250, 2000));
        assert!(a.starts_in.is_none() && !a.no_baseline);
        let debug = format!("{a:?}");
        assert!(
            !debug.contains("adm1n") && !debug.contains("s3cret"),
            "{debug}"
        );
        assert!(Cli::try_parse_from([
            "b",
            "queue-sale",
            "--gateway",
            "http://x",
            "--admin-token",
            "a",
            "--jwt-secret",
            "s",
            "--buyers",
            "0"
        ])
        .is_err());
    }
}
