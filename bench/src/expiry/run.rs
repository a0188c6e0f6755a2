//! The run: buy every unit, wait for the orders' deadlines, poll the stock until every unit is
//! back, then cross-check the end state.

use super::args::ExpiryArgs;
use super::figures::{lag_buckets, lags_ms, throughput, LagStats, StockWatch, WorkerLag};
use super::report::{Check, ExpiryReport, GOAL_P99_MS};
use crate::admin::Admin;
use crate::load::buyer_token::{BuyerTokens, SigningKey, TokenIssuer};
use crate::now_us;
use anyhow::Context;
use futures::stream::{self, StreamExt};
use seckill_shared::store::{TicketStore, Topology};
use seckill_shared::{db, now_ms, ProductId};
use sqlx::mysql::MySqlPool;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

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
