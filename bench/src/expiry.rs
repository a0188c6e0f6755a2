//! `seckill-bench expiry`: how long an unpaid order's unit takes to be on sale again once its
//! payment deadline has passed (issue 12), and how many orders per second the workers expire.
//!
//! The run:
//! 1. creates a priced product with `--orders` units and a payment window of `--window-secs`,
//!    preloads it, and has that many distinct buyers buy one unit each (one signed token each
//!    with `--jwt-secret`);
//! 2. with `--bought-file`, writes that file once every buy is answered: `scripts/bench.sh`
//!    starts the worker then, so that the orders are confirmed, and their deadlines fall, in one
//!    wave (as in the drain figure). Without it, a running worker confirms them as they come;
//! 3. waits until MySQL holds every order with its `pay_by_ms`, and nothing is pending in Redis;
//! 4. reads the deadlines, sorted, and polls the Redis stock every `--poll-ms` until every unit
//!    is back, noting when the stock first showed `k` units back, for each `k`;
//! 5. cross-checks the end state: every order cancelled for the timeout in MySQL, no
//!    `restore_due` left, the stock back to the initial one in Redis and in MySQL.
//!
//! The `k`-th unit back is matched with the `k`-th earliest deadline ([`lags_ms`]): at the
//! moment `k` units are back, `k` orders were cancelled, and each had its deadline before, so
//! the lag is never negative. Its resolution is the poll interval: a unit counts from the poll
//! that saw it, so the lag is overestimated by up to one interval plus a Redis round trip. The
//! worker and this tool read the same clock (one machine).
//!
//! The throughput is `N / (t(N units back) − t(first unit back))`. It is the workers' expiry
//! capacity only when the deadlines fall faster than that: the report gives the deadlines'
//! span next to it.

use crate::admin::Admin;
use crate::load::buyer_token::{BuyerTokens, SigningKey, TokenIssuer};
use crate::now_us;
use anyhow::Context;
use clap::Args;
use futures::stream::{self, StreamExt};
use seckill_shared::store::{TicketStore, Topology};
use seckill_shared::{db, now_ms, ProductId};
use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use sqlx::mysql::MySqlPool;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The goal of issue 12: p99 of the lag at most this.
pub const GOAL_P99_MS: f64 = 1000.0;

#[derive(Debug, Clone, Args)]
pub struct ExpiryArgs {
    /// Gateway base URL: the product is created, preloaded and bought there.
    #[arg(long, value_name = "URL")]
    pub gateway: String,

    /// The gateway's admin token (creates and preloads the product).
    #[arg(
        long,
        env = "SECKILL_ADMIN_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN",
        value_parser = crate::args::secret
    )]
    pub admin_token: SecretString,

    /// Default: SECKILL_REDIS_URL.
    #[arg(long, value_name = "URL")]
    pub redis_url: Option<String>,

    /// Default: SECKILL_MYSQL_URL.
    #[arg(long, value_name = "URL")]
    pub mysql_url: Option<String>,

    /// Namespace of the Redis keys (default: SECKILL_NAMESPACE, else `seckill`).
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,

    /// Units, buyers and so expiring orders: one unit per buyer.
    #[arg(long, default_value_t = 10_000, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub orders: u64,

    /// The product's payment window. Every order must be confirmed before the first deadline
    /// falls (the run is invalid otherwise): longer than the buys and the confirmation take.
    #[arg(long, default_value_t = 20, value_name = "SECS",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub window_secs: u64,

    /// The product's price, in minor units.
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub price: u64,

    /// Sign one HS256 token per buyer with this secret (claims as `load --jwt-secret`). Unset:
    /// no tokens (a gateway with `SECKILL_AUTH_MODE=none`).
    #[arg(
        long,
        env = "SECKILL_AUTH_HS256_SECRET",
        hide_env_values = true,
        value_name = "SECRET",
        value_parser = crate::args::secret
    )]
    pub jwt_secret: Option<SecretString>,

    /// Buyers are FIRST_USER, FIRST_USER + 1, …
    #[arg(long, default_value_t = 1, value_name = "ID")]
    pub first_user: u64,

    /// Buys in flight.
    #[arg(long, short = 'c', default_value_t = 64, value_name = "C")]
    pub concurrency: usize,

    /// Once every buy is answered, write `{"product", "accepted"}` to this file; start the
    /// workers then to confirm the orders in one wave.
    #[arg(long, value_name = "PATH")]
    pub bought_file: Option<PathBuf>,

    /// How long to wait for every order to be confirmed, from the last buy.
    #[arg(long, default_value_t = 120.0, value_name = "SECS")]
    pub confirm_timeout: f64,

    /// How often to read the Redis stock while the units come back.
    #[arg(long, default_value_t = 5, value_name = "MS",
          value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub poll_ms: u64,

    /// Give up waiting for the units this long after the last deadline.
    #[arg(long, default_value_t = 60.0, value_name = "SECS")]
    pub expiry_timeout: f64,

    /// A worker's `/metrics` URL; repeat for several. Its `seckill_worker_expiry_lag_seconds`
    /// histogram over the run is reported next to the measured lag (from 0 when the worker
    /// does not answer before the buys: it starts after them).
    #[arg(long = "worker-metrics", value_name = "URL")]
    pub worker_metrics: Vec<String>,

    /// Write the result as JSON to this file.
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,

    /// Print the result as one JSON object on stdout instead of the summary line (which then
    /// goes to stderr).
    #[arg(long)]
    pub json: bool,
}

// ------------------------------------------------------------------ pure parts ---

/// When the stock first showed `k` units back, for `k = 1, 2, …`, from successive polls.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StockWatch {
    /// The stock before any unit came back.
    base: i64,
    /// Units expected back.
    target: usize,
    /// `reached_us[k - 1]`: µs since the epoch of the first poll that saw `k` units back.
    pub reached_us: Vec<u64>,
    /// The most units back seen, even beyond the target (which is then a problem).
    pub max_back: i64,
}

impl StockWatch {
    pub fn new(base: i64, target: usize) -> Self {
        Self {
            base,
            target,
            reached_us: Vec::with_capacity(target),
            max_back: 0,
        }
    }

    /// One poll: the stock read at `at_us`.
    pub fn observe(&mut self, stock: i64, at_us: u64) {
        let back = stock - self.base;
        self.max_back = self.max_back.max(back);
        let upto = back.clamp(0, self.target as i64) as usize;
        while self.reached_us.len() < upto {
            self.reached_us.push(at_us);
        }
    }

    pub fn done(&self) -> bool {
        self.reached_us.len() >= self.target
    }
}

/// The lag of each unit back, ms: the `k`-th time a unit came back (µs since the epoch) less
/// the `k`-th earliest deadline (ms since the epoch). `deadlines_ms` must be sorted; units that
/// never came back have no lag.
pub fn lags_ms(deadlines_ms: &[i64], reached_us: &[u64]) -> Vec<f64> {
    debug_assert!(deadlines_ms.is_sorted());
    deadlines_ms
        .iter()
        .zip(reached_us)
        .map(|(&d, &t)| t as f64 / 1000.0 - d as f64)
        .collect()
}

/// The `q`-quantile of sorted values, nearest rank (the smallest value with at least `q` of
/// them at or below it); `None` when empty.
pub fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// The lag's distribution, ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LagStats {
    pub count: usize,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl LagStats {
    pub fn of(lags: &[f64]) -> Option<Self> {
        let mut s = lags.to_vec();
        s.sort_by(f64::total_cmp);
        Some(Self {
            count: s.len(),
            min: *s.first()?,
            p50: percentile(&s, 0.5)?,
            p90: percentile(&s, 0.9)?,
            p99: percentile(&s, 0.99)?,
            max: *s.last()?,
        })
    }
}

/// Units back per second: `n / (t(n) − t(1))` over the times units came back; with its span,
/// s. `None` for fewer than two units or when they all came back in one poll.
pub fn throughput(reached_us: &[u64]) -> Option<(f64, f64)> {
    let (first, last) = (*reached_us.first()?, *reached_us.last()?);
    let span = last.checked_sub(first).filter(|d| *d > 0)? as f64 / 1e6;
    Some((span, reached_us.len() as f64 / span))
}

/// The cumulative buckets (`le` in seconds, count) of `seckill_worker_expiry_lag_seconds` in
/// a Prometheus text exposition; `+Inf` included.
pub fn lag_buckets(text: &str) -> BTreeMap<String, f64> {
    let prefix = "seckill_worker_expiry_lag_seconds_bucket{";
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(prefix)?;
            let (labels, value) = rest.split_once('}')?;
            let le = labels
                .split(',')
                .find_map(|kv| kv.trim().strip_prefix("le="))?
                .trim_matches('"');
            Some((le.to_owned(), value.trim().parse().ok()?))
        })
        .collect()
}

/// The worker's view of the run: its histogram's buckets after less before, summed over
/// workers, and the bucket bound its `q`-quantile falls in (s; `None` beyond the last finite
/// bound or without observations).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerLag {
    /// Observations in the run (cancelled orders with a deadline).
    pub count: f64,
    /// The bucket bound, s, at or below which half of them were.
    pub p50_le_s: Option<f64>,
    pub p99_le_s: Option<f64>,
}

impl WorkerLag {
    pub fn of(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> Self {
        let mut buckets: Vec<(f64, f64)> = after
            .iter()
            .filter_map(|(le, n)| {
                let bound = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().ok()?
                };
                Some((bound, n - before.get(le).copied().unwrap_or(0.0)))
            })
            .collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        let count = buckets.last().map_or(0.0, |b| b.1);
        let le = |q: f64| {
            (count > 0.0)
                .then(|| buckets.iter().find(|b| b.1 >= q * count))
                .flatten()
                .map(|b| b.0)
                .filter(|b| b.is_finite())
        };
        Self {
            count,
            p50_le_s: le(0.5),
            p99_le_s: le(0.99),
        }
    }
}

// ------------------------------------------------------------------- the run ---

/// One end-state cross-check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    pub found: String,
}

impl Check {
    fn new(name: &str, ok: bool, found: String) -> Self {
        Self {
            name: name.to_owned(),
            ok,
            found,
        }
    }
}

/// What `expiry` measured (`--out`, `--json`). `scripts/bench.sh` reads `ok`, `lag_ms`
/// (`p50`, `p99`, `max`), `orders_per_s`, `expiry_s`, `deadline_span_s`, `orders`,
/// `units_back`, `goal_met` and `problems`: keep the names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpiryReport {
    pub kind: String,
    /// The run is valid and every cross-check passed.
    pub ok: bool,
    pub product: u64,
    pub namespace: String,
    /// Buys asked for, and answered `202`/`200`.
    pub buyers: u64,
    pub accepted: u64,
    pub buy_s: f64,
    /// Orders in MySQL with a deadline: the units expected back.
    pub orders: u64,
    pub window_secs: u64,
    pub poll_ms: u64,
    /// From the last buy until every order was confirmed.
    pub confirm_wait_s: f64,
    /// First deadline − the start of the polling: above 0 for a valid run.
    pub margin_ms: i64,
    /// Last deadline − first deadline.
    pub deadline_span_s: f64,
    /// Units the polling saw come back.
    pub units_back: u64,
    /// `null` without any unit back.
    pub lag_ms: Option<LagStats>,
    /// First to last unit back, and units back per second over it.
    pub expiry_s: Option<f64>,
    pub orders_per_s: Option<f64>,
    pub goal_p99_ms: f64,
    /// `null` when the run is invalid.
    pub goal_met: Option<bool>,
    /// The workers' own histogram over the run (`--worker-metrics`).
    pub worker_lag: Option<WorkerLag>,
    pub checks: Vec<Check>,
    /// Why the run is invalid.
    pub problems: Vec<String>,
}

impl ExpiryReport {
    /// The one-line summary.
    pub fn line(&self) -> String {
        let ms = |x: f64| format!("{x:.1} ms");
        let lag = self.lag_ms.map_or("no unit came back".into(), |l| {
            format!(
                "lag p50 {}, p99 {}, max {}",
                ms(l.p50),
                ms(l.p99),
                ms(l.max)
            )
        });
        let goal = match self.goal_met {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "not judged",
        };
        let rate = match (self.orders_per_s, self.expiry_s) {
            (Some(r), Some(s)) => format!("{:.0} orders/s ({:.3} s first to last)", r, s),
            _ => "throughput n/a".into(),
        };
        let worker = self.worker_lag.as_ref().map_or(String::new(), |w| {
            let le = |x: Option<f64>| x.map_or("n/a".into(), |s| format!("≤ {s} s"));
            format!(
                "; worker histogram: {} observed, p50 {}, p99 {}",
                w.count,
                le(w.p50_le_s),
                le(w.p99_le_s)
            )
        });
        let verdict = if self.ok {
            "all checks passed".to_owned()
        } else {
            let failed: Vec<&str> = self
                .checks
                .iter()
                .filter(|c| !c.ok)
                .map(|c| c.name.as_str())
                .collect();
            let mut why = self.problems.clone();
            if !failed.is_empty() {
                why.push(format!("failed checks: {}", failed.join(", ")));
            }
            format!("INVALID: {}", why.join("; "))
        };
        format!(
            "expiry: {}/{} units of product {} back, window {} s, deadlines over {:.3} s: {lag} \
             (goal p99 ≤ {} ms: {goal}); {rate}{worker}; {verdict}",
            self.units_back,
            self.orders,
            self.product,
            self.window_secs,
            self.deadline_span_s,
            GOAL_P99_MS,
        )
    }
}

/// The answers to the buys, by status (`error` for no answer).
async fn buy_all(
    http: &reqwest::Client,
    gateway: &str,
    product: u64,
    users: std::ops::Range<u64>,
    tokens: Option<&BuyerTokens>,
    concurrency: usize,
) -> BTreeMap<String, u64> {
    let url = format!("{gateway}/v1/seckill/{product}");
    let answers: Vec<String> = stream::iter(users)
        .map(|user| {
            let mut req = http
                .post(&url)
                .json(&serde_json::json!({ "user_id": user }));
            if let Some(t) = tokens {
                req = req.header(reqwest::header::AUTHORIZATION, t.header(user));
            }
            async move {
                match req.send().await {
                    Ok(r) => {
                        let status = r.status().as_u16().to_string();
                        // Read the body so the connection goes back to the pool.
                        let _ = r.bytes().await;
                        status
                    }
                    Err(_) => "error".to_owned(),
                }
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    let mut by_status = BTreeMap::new();
    for a in answers {
        *by_status.entry(a).or_insert(0) += 1;
    }
    by_status
}

async fn count(pool: &MySqlPool, sql: &'static str, product: ProductId) -> anyhow::Result<i64> {
    sqlx::query_scalar(sql)
        .bind(product.as_i64())
        .fetch_one(pool)
        .await
        .with_context(|| format!("MySQL: {sql}"))
}

async fn scrape(http: &reqwest::Client, urls: &[String]) -> anyhow::Result<BTreeMap<String, f64>> {
    let mut sum = BTreeMap::new();
    for u in urls {
        let text = http
            .get(u)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .with_context(|| format!("GET {u}"))?
            .text()
            .await
            .with_context(|| format!("GET {u}"))?;
        for (le, n) in lag_buckets(&text) {
            *sum.entry(le).or_insert(0.0) += n;
        }
    }
    Ok(sum)
}

pub async fn run(args: ExpiryArgs) -> anyhow::Result<bool> {
    let crate::stores::Stores {
        redis_url,
        mysql_url,
        namespace,
    } = crate::stores::Stores::resolve(
        args.redis_url.as_deref(),
        args.mysql_url.as_deref(),
        args.namespace.as_deref(),
    )?;
    anyhow::ensure!(args.first_user >= 1, "--first-user must be at least 1");
    let gateway = args.gateway.trim_end_matches('/');
    let store = TicketStore::new(
        &Topology::parse(&redis_url, false)?,
        &namespace,
        0,
        Duration::from_secs(5),
    )?;
    let pool = db::pool(&mysql_url, 4)?;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(args.concurrency.max(1))
        .timeout(Duration::from_secs(30))
        .build()
        .context("building the HTTP client")?;
    let tokens = match &args.jwt_secret {
        Some(s) => Some(BuyerTokens::new(
            TokenIssuer::new(SigningKey::Hs256(s), None, None, Duration::from_secs(3600))?,
            args.first_user,
            args.orders,
        )?),
        None => None,
    };
    let mut problems = vec![];

    // 1. The product, and its buyers.
    let admin = Admin {
        http: &http,
        base: gateway,
        token: &args.admin_token,
    };
    let id = admin
        .product(serde_json::json!({
            "name": format!("expiry bench {}", now_ms()),
            "stock": args.orders,
            "price": args.price,
            "payment_window_secs": args.window_secs,
        }))
        .await?;
    let product = ProductId::new(id).context("the created product's id")?;
    // A worker that is not up yet (started after the buys) has observed nothing.
    let before = match scrape(&http, &args.worker_metrics).await {
        Ok(b) => b,
        Err(e) => {
            eprintln!("expiry: {e:#}: counting the workers' histogram from 0");
            BTreeMap::new()
        }
    };
    eprintln!(
        "expiry: product {id} ({} units, window {} s); buying",
        args.orders, args.window_secs
    );
    let t_buy = Instant::now();
    let answers = buy_all(
        &http,
        gateway,
        id,
        args.first_user..args.first_user + args.orders,
        tokens.as_ref(),
        args.concurrency,
    )
    .await;
    let buy_s = t_buy.elapsed().as_secs_f64();
    let accepted = ["200", "202"]
        .iter()
        .filter_map(|s| answers.get(*s))
        .sum::<u64>();
    if accepted != args.orders {
        problems.push(format!(
            "{accepted} of {} buys were accepted (answers: {answers:?})",
            args.orders
        ));
    }
    anyhow::ensure!(accepted > 0, "no buy was accepted: {answers:?}");
    if let Some(f) = &args.bought_file {
        std::fs::write(
            f,
            serde_json::json!({"product": id, "accepted": accepted}).to_string(),
        )
        .with_context(|| format!("writing {}", f.display()))?;
    }
    eprintln!("expiry: {accepted} buys accepted in {buy_s:.2} s; waiting for the confirmations");

    // 2. Every order confirmed, with its deadline.
    let t_confirm = Instant::now();
    loop {
        let with_deadline = count(
            &pool,
            "SELECT COUNT(*) FROM orders WHERE product_id = ? AND pay_by_ms IS NOT NULL",
            product,
        )
        .await?;
        let pending = store.counts(product).await?.pending;
        if with_deadline as u64 >= accepted && pending == 0 {
            break;
        }
        anyhow::ensure!(
            t_confirm.elapsed().as_secs_f64() < args.confirm_timeout,
            "after {} s, {with_deadline} of {accepted} orders are confirmed ({pending} pending): \
             is a worker running?",
            args.confirm_timeout
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let confirm_wait_s = t_confirm.elapsed().as_secs_f64();
    let deadlines: Vec<i64> = sqlx::query_scalar(
        "SELECT pay_by_ms FROM orders WHERE product_id = ? AND pay_by_ms IS NOT NULL \
         ORDER BY pay_by_ms",
    )
    .bind(product.as_i64())
    .fetch_all(&pool)
    .await
    .context("reading the deadlines")?;
    let n = deadlines.len();
    let (first, last) = (deadlines[0], deadlines[n - 1]);

    // 3. The units coming back. The stock before any: the initial stock less the orders.
    let base = args.orders as i64 - n as i64;
    let mut watch = StockWatch::new(base, n);
    let poll_start_ms = now_ms();
    let margin_ms = first - poll_start_ms;
    if margin_ms <= 0 {
        problems.push(format!(
            "the first deadline fell {} ms before the polling started: a longer --window-secs",
            -margin_ms
        ));
    }
    eprintln!(
        "expiry: {n} orders confirmed in {confirm_wait_s:.2} s; deadlines in {:.2} s, over {:.3} s",
        margin_ms as f64 / 1000.0,
        (last - first) as f64 / 1000.0
    );
    let give_up_ms = last + (args.expiry_timeout * 1000.0) as i64;
    let mut tick = tokio::time::interval(Duration::from_millis(args.poll_ms));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut stock_seen = None;
    while !watch.done() && now_ms() < give_up_ms {
        tick.tick().await;
        let Some(stock) = store.stock(product).await? else {
            anyhow::bail!("product {id} is not loaded in Redis any more");
        };
        let at = now_us();
        if stock_seen.is_none() && stock != base {
            problems.push(format!(
                "the first poll saw {} units back already",
                stock - base
            ));
        }
        stock_seen = Some(stock);
        watch.observe(stock, at);
    }
    let units_back = watch.reached_us.len();
    if units_back < n {
        problems.push(format!(
            "{units_back} of {n} units came back within {} s of the last deadline",
            args.expiry_timeout
        ));
    }

    // 4. The end state, once the last cancels have cleared their `restore_due`.
    let t_end = Instant::now();
    let restore_due = loop {
        let due = count(
            &pool,
            "SELECT COUNT(*) FROM orders WHERE product_id = ? AND restore_due = 1",
            product,
        )
        .await?;
        if due == 0 || t_end.elapsed() > Duration::from_secs(5) {
            break due;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let cancelled = count(
        &pool,
        "SELECT COUNT(*) FROM orders WHERE product_id = ? AND status = 'cancelled' \
         AND cancel_reason = 'payment_timeout'",
        product,
    )
    .await?;
    let all_orders = count(
        &pool,
        "SELECT COUNT(*) FROM orders WHERE product_id = ?",
        product,
    )
    .await?;
    let stock_db: i64 = sqlx::query_scalar("SELECT stock FROM products WHERE id = ?")
        .bind(product.as_i64())
        .fetch_one(&pool)
        .await
        .context("reading the product's stock")?;
    let stock_redis = store.stock(product).await?;
    let initial = args.orders as i64;
    let checks = vec![
        Check::new(
            "every order cancelled for the timeout",
            cancelled as usize == n && all_orders as usize == n,
            format!("{cancelled} of {all_orders} orders ({n} with a deadline)"),
        ),
        Check::new(
            "no restore_due left",
            restore_due == 0,
            format!("{restore_due} orders with restore_due"),
        ),
        Check::new(
            "Redis stock back to the initial stock",
            stock_redis == Some(initial),
            format!("{stock_redis:?}, initial {initial}"),
        ),
        Check::new(
            "MySQL stock back to the initial stock",
            stock_db == initial,
            format!("{stock_db}, initial {initial}"),
        ),
        Check::new(
            "no unit came back twice",
            watch.max_back <= n as i64,
            format!("at most {} units back of {n}", watch.max_back),
        ),
    ];
    let worker_lag = if args.worker_metrics.is_empty() {
        None
    } else {
        Some(WorkerLag::of(
            &before,
            &scrape(&http, &args.worker_metrics).await?,
        ))
    };
    pool.close().await;

    let lag_ms = LagStats::of(&lags_ms(&deadlines, &watch.reached_us));
    let rate = throughput(&watch.reached_us);
    let ok = problems.is_empty() && checks.iter().all(|c| c.ok);
    let report = ExpiryReport {
        kind: "expiry".into(),
        ok,
        product: id,
        namespace,
        buyers: args.orders,
        accepted,
        buy_s,
        orders: n as u64,
        window_secs: args.window_secs,
        poll_ms: args.poll_ms,
        confirm_wait_s,
        margin_ms,
        deadline_span_s: (last - first) as f64 / 1000.0,
        units_back: units_back as u64,
        lag_ms,
        expiry_s: rate.map(|r| r.0),
        orders_per_s: rate.map(|r| r.1),
        goal_p99_ms: GOAL_P99_MS,
        goal_met: ok.then(|| lag_ms.is_some_and(|l| l.p99 <= GOAL_P99_MS)),
        worker_lag,
        checks,
        problems,
    };
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
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::{CommandFactory, Parser};
    use secrecy::ExposeSecret;

    #[test]
    fn the_command_line_takes_the_connection_settings_and_hides_its_secrets() {
        Cli::command().debug_assert();
        let parse = |extra: &[&str]| {
            let mut argv = vec![
                "b",
                "expiry",
                "--gateway",
                "http://g/",
                "--admin-token",
                "adm1n",
            ];
            argv.extend_from_slice(extra);
            Cli::try_parse_from(argv).map(|c| match c.command {
                Command::Expiry(a) => a,
                other => panic!("not expiry: {other:?}"),
            })
        };
        let a = parse(&[
            "--redis-url",
            "redis://r",
            "--mysql-url",
            "mysql://m",
            "--namespace",
            "ns",
            "--jwt-secret",
            "t0ps3cret",
        ])
        .unwrap();
        assert_eq!(a.admin_token.expose_secret(), "adm1n");
        assert_eq!(
            (
                a.redis_url.as_deref(),
                a.mysql_url.as_deref(),
                a.namespace.as_deref()
            ),
            (Some("redis://r"), Some("mysql://m"), Some("ns"))
        );
        assert_eq!(
            (a.orders, a.window_secs, a.price, a.poll_ms),
            (10_000, 20, 100, 5)
        );
        let debug = format!("{a:?}");
        assert!(
            !debug.contains("adm1n") && !debug.contains("t0ps3cret"),
            "{debug}"
        );
        for bad in [
            &["--orders", "0"][..],
            &["--window-secs", "0"],
            &["--poll-ms", "0"],
            &["--jwt-secret", ""],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_kth_unit_back_is_matched_with_the_kth_deadline() {
        // Three orders due at 1000, 1000 and 1200 ms; the stock showed one unit back at
        // 1010 ms, then two more at once at 1250.5 ms.
        let mut w = StockWatch::new(0, 3);
        w.observe(0, 1_005_000);
        w.observe(1, 1_010_000);
        w.observe(1, 1_015_000);
        assert!(!w.done());
        w.observe(3, 1_250_500);
        assert!(w.done());
        assert_eq!(w.reached_us, [1_010_000, 1_250_500, 1_250_500]);
        assert_eq!(
            lags_ms(&[1000, 1000, 1200], &w.reached_us),
            [10.0, 250.5, 50.5]
        );
    }

    #[test]
    fn units_back_count_from_the_stock_left_unsold() {
        // 2 of 5 units were never bought: the watch counts from 2.
        let mut w = StockWatch::new(2, 3);
        w.observe(2, 10);
        assert!(w.reached_us.is_empty());
        w.observe(4, 20);
        w.observe(5, 30);
        assert_eq!(w.reached_us, [20, 20, 30]);
        // A stock beyond the target (a unit back twice) is remembered, never counted twice.
        w.observe(6, 40);
        assert_eq!((w.reached_us.len(), w.max_back), (3, 4));
    }

    #[test]
    fn units_that_never_came_back_have_no_lag() {
        assert_eq!(lags_ms(&[100, 200, 300], &[150_000]), [50.0]);
        assert!(lags_ms(&[100], &[]).is_empty());
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), Some(50.0));
        assert_eq!(percentile(&v, 0.99), Some(99.0));
        assert_eq!(percentile(&v, 1.0), Some(100.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&[7.0], 0.99), Some(7.0));
        assert_eq!(percentile(&[], 0.5), None);
        // 10,000 values: p99 is the 9,900th.
        let v: Vec<f64> = (1..=10_000).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.99), Some(9_900.0));
    }

    #[test]
    fn lag_stats_sort_their_input() {
        let s = LagStats::of(&[30.0, 10.0, 20.0, 40.0]).unwrap();
        assert_eq!(
            (s.count, s.min, s.p50, s.p99, s.max),
            (4, 10.0, 20.0, 40.0, 40.0)
        );
        assert_eq!(LagStats::of(&[]), None);
    }

    #[test]
    fn throughput_is_units_over_first_to_last() {
        // 1,000 units from t = 2 s to t = 2.5 s: 2,000 per second.
        let t: Vec<u64> = (0..1000).map(|i| 2_000_000 + i * 500_000 / 999).collect();
        let (span, rate) = throughput(&t).unwrap();
        assert!((span - 0.5).abs() < 1e-9, "{span}");
        assert!((rate - 2000.0).abs() < 1e-6, "{rate}");
        // All in one poll, or a single unit: no rate.
        assert_eq!(throughput(&[5, 5, 5]), None);
        assert_eq!(throughput(&[5]), None);
        assert_eq!(throughput(&[]), None);
    }

    #[test]
    fn the_workers_histogram_is_read_as_a_difference() {
        let text = |counts: [u32; 4]| {
            format!(
                "# HELP seckill_worker_expiry_lag_seconds x\n\
                 # TYPE seckill_worker_expiry_lag_seconds histogram\n\
                 seckill_worker_expiry_lag_seconds_bucket{{le=\"0.1\"}} {}\n\
                 seckill_worker_expiry_lag_seconds_bucket{{le=\"0.5\"}} {}\n\
                 seckill_worker_expiry_lag_seconds_bucket{{le=\"1\"}} {}\n\
                 seckill_worker_expiry_lag_seconds_bucket{{le=\"+Inf\"}} {}\n\
                 seckill_worker_expiry_lag_seconds_sum 1.5\n\
                 seckill_worker_expiry_lag_seconds_count {}\n\
                 seckill_worker_batch_size_bucket{{le=\"1\"}} 99\n",
                counts[0], counts[1], counts[2], counts[3], counts[3]
            )
        };
        let before = lag_buckets(&text([1, 1, 1, 1]));
        assert_eq!(before.len(), 4);
        assert_eq!(before["+Inf"], 1.0);
        // 100 more: 60 under 0.1 s, 39 under 0.5 s, 1 under 1 s.
        let after = lag_buckets(&text([61, 100, 101, 101]));
        let w = WorkerLag::of(&before, &after);
        assert_eq!(w.count, 100.0);
        assert_eq!((w.p50_le_s, w.p99_le_s), (Some(0.1), Some(0.5)));
        // Beyond the last finite bound, or nothing observed: no bound.
        let slow = lag_buckets(&text([1, 1, 1, 101]));
        assert_eq!(WorkerLag::of(&before, &slow).p99_le_s, None);
        assert_eq!(WorkerLag::of(&before, &before), WorkerLag::default());
    }

    #[test]
    fn an_invalid_run_says_why_and_is_not_judged() {
        let r = ExpiryReport {
            kind: "expiry".into(),
            ok: false,
            product: 7,
            namespace: "ns".into(),
            buyers: 10,
            accepted: 10,
            buy_s: 0.1,
            orders: 10,
            window_secs: 5,
            poll_ms: 5,
            confirm_wait_s: 1.0,
            margin_ms: -20,
            deadline_span_s: 0.2,
            units_back: 10,
            lag_ms: LagStats::of(&[5.0; 10]),
            expiry_s: Some(0.1),
            orders_per_s: Some(100.0),
            goal_p99_ms: GOAL_P99_MS,
            goal_met: None,
            worker_lag: None,
            checks: vec![Check::new("no restore_due left", false, "1".into())],
            problems: vec!["the first deadline fell 20 ms before the polling started".into()],
        };
        let line = r.line();
        assert!(line.contains("not judged"), "{line}");
        assert!(
            line.contains("INVALID: the first deadline fell 20 ms")
                && line.contains("failed checks: no restore_due left"),
            "{line}"
        );
        let back: ExpiryReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }
}
