//! `seckill-bench mysql-ceiling`: how fast MySQL takes order rows when nothing else is involved.
//!
//! It writes `--rows` rows into `orders`, the same columns the worker writes (`ticket`,
//! `product_id`, `user_id`, `reserved_at_ms`), as one multi-row `INSERT` with bound values per
//! batch of `--batch` rows, each batch in its own transaction, one after the other on one
//! connection: the worker's write pattern without the Redis claim and confirm, the product
//! lock, the duplicate checks and the stock update. The rate is the denominator of the worker's
//! drain rate.

use anyhow::Context;
use clap::Args;
use hdrhistogram::Histogram;
use seckill_shared::{now_ms, ProductId, Settings, Ticket};
use secrecy::ExposeSecret;
use serde::Serialize;
use sqlx::{Connection, MySql, QueryBuilder};
use std::time::Instant;

#[derive(Debug, Clone, Args)]
pub struct MysqlCeilingArgs {
    /// Default: SECKILL_MYSQL_URL. The database must have the `orders` table (`worker migrate`).
    #[arg(long, value_name = "URL")]
    pub mysql_url: Option<String>,

    /// The rows' product id. Use one that nothing else writes: every row is a new order.
    #[arg(long, value_name = "ID")]
    pub product: u64,

    /// Rows to write in all.
    #[arg(long, default_value_t = 20_000, value_name = "N")]
    pub rows: u64,

    /// Rows per INSERT and transaction (the worker's SECKILL_WORKER_BATCH_SIZE).
    #[arg(long, default_value_t = 500, value_name = "N")]
    pub batch: usize,

    /// User ids are FIRST_USER, FIRST_USER + 1, …
    #[arg(long, default_value_t = 1, value_name = "ID")]
    pub first_user: u64,

    /// Print the result as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// What `mysql-ceiling` measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CeilingReport {
    pub kind: &'static str,
    pub product: u64,
    pub rows: u64,
    pub batch: usize,
    pub batches: u64,
    /// From the first `BEGIN` to the last `COMMIT`.
    pub seconds: f64,
    pub rows_per_s: f64,
    /// Per batch: `BEGIN`, `INSERT`, `COMMIT`.
    pub batch_p50_ms: f64,
    pub batch_p99_ms: f64,
    pub batch_max_ms: f64,
}

impl CeilingReport {
    pub fn table(&self) -> String {
        format!(
            "{} rows of product {} in {} batches of {}: {:.2} s, {:.0} rows/s \
             (batch p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms)\n",
            self.rows,
            self.product,
            self.batches,
            self.batch,
            self.seconds,
            self.rows_per_s,
            self.batch_p50_ms,
            self.batch_p99_ms,
            self.batch_max_ms
        )
    }
}

/// One row as the worker would write it.
struct Row {
    ticket: Ticket,
    user_id: i64,
    reserved_at_ms: i64,
}

pub async fn run(args: MysqlCeilingArgs) -> anyhow::Result<CeilingReport> {
    anyhow::ensure!(args.rows >= 1, "--rows must be at least 1");
    anyhow::ensure!(
        (1..=10_000).contains(&args.batch),
        "--batch must be 1..=10000"
    );
    anyhow::ensure!(args.first_user >= 1, "--first-user must be at least 1");
    let product = ProductId::new(args.product).context("--product")?;
    let url = match &args.mysql_url {
        Some(u) => u.clone(),
        None => Settings::load(None)
            .context("no --mysql-url, and the environment gives no valid settings")?
            .mysql
            .url
            .expose_secret()
            .to_owned(),
    };
    let mut conn = sqlx::MySqlConnection::connect(&url)
        .await
        .context("connecting to MySQL")?;

    // The rows exist before the clock starts: only MySQL is measured.
    let now = now_ms();
    let rows: Vec<Row> = (0..args.rows)
        .map(|i| Row {
            ticket: Ticket::generate(product),
            user_id: (args.first_user + i) as i64,
            reserved_at_ms: now,
        })
        .collect();

    let mut hist = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3)?;
    let started = Instant::now();
    let mut batches = 0u64;
    for chunk in rows.chunks(args.batch) {
        let t0 = Instant::now();
        let mut tx = conn.begin().await.context("starting a transaction")?;
        let mut q = QueryBuilder::<MySql>::new(
            "INSERT INTO orders (ticket, product_id, user_id, reserved_at_ms) ",
        );
        q.push_values(chunk, |mut b, r| {
            b.push_bind(r.ticket.as_str())
                .push_bind(product.as_i64())
                .push_bind(r.user_id)
                .push_bind(r.reserved_at_ms);
        });
        q.build()
            .execute(&mut *tx)
            .await
            .context("inserting a batch")?;
        tx.commit().await.context("committing a batch")?;
        hist.saturating_record((t0.elapsed().as_micros() as u64).max(1));
        batches += 1;
    }
    let seconds = started.elapsed().as_secs_f64();
    let ms = |us: u64| us as f64 / 1000.0;
    let report = CeilingReport {
        kind: "mysql_ceiling",
        product: product.get(),
        rows: args.rows,
        batch: args.batch,
        batches,
        seconds,
        rows_per_s: args.rows as f64 / seconds.max(1e-9),
        batch_p50_ms: ms(hist.value_at_quantile(0.5)),
        batch_p99_ms: ms(hist.value_at_quantile(0.99)),
        batch_max_ms: ms(hist.max()),
    };
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", report.table());
    }
    Ok(report)
}
