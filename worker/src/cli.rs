//! The `worker` binary's command line. It lives in the library so that tests can run the
//! binary's exact code path in a child process (see `tests/e2e/process.rs`).

use crate::Worker;
use anyhow::Context;
use clap::{Parser, Subcommand};
use seckill_shared::store::TicketStore;
use seckill_shared::{db, kafka, recovery, sold_out, telemetry, ProductId, Settings};
use secrecy::ExposeSecret;
use std::path::PathBuf;
use std::time::Duration;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio_util::sync::CancellationToken;

/// The seckill worker: persists orders from Kafka to MySQL, in batches, as one member of a
/// consumer group.
///
/// Configured by SECKILL_* environment variables, layered over an optional TOML file.
/// Like the gateway, it refuses to start without SECKILL_ADMIN_TOKEN unless run with `--dev`
/// (`migrate` and `reconcile` do not need it).
#[derive(Parser)]
#[command(version)]
pub struct Cli {
    /// TOML file with settings; environment variables override it.
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// Print the effective configuration (secrets redacted) and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Development mode: allows running without SECKILL_ADMIN_TOKEN.
    #[arg(long)]
    pub dev: bool,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand)]
pub enum Command {
    /// Apply the MySQL migrations and exit.
    Migrate,
    /// Rebuild a product's Redis state from MySQL (after Redis lost its data, once the
    /// workers have read every order published before), publish "false" so every gateway
    /// drops its sold-out marker, and exit. Workers do this on their own when they find a
    /// live product missing from Redis.
    Reconcile {
        /// The product to rebuild.
        product_id: String,
    },
}

/// Runs the worker until SIGTERM (or SIGINT), or one of its subcommands. The binary exits
/// right after this returns (see `main.rs`).
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let mut settings = Settings::load(cli.config.as_deref())?;
    if cli.print_config {
        print!("{}", settings.redacted_toml());
        return Ok(());
    }
    let telemetry = telemetry::init(
        settings.common.log_format,
        "seckill-worker",
        settings.common.trace_slow(),
    )?;
    if let Some(Command::Migrate) = &cli.command {
        let pool = db::pool(settings.mysql.url.expose_secret(), 1)?;
        db::migrate(&pool).await?;
        println!("migrations applied");
        return Ok(());
    }
    if let Some(Command::Reconcile { product_id }) = cli.command {
        let product = ProductId::parse(&product_id)?;
        let pool = db::pool(settings.mysql.url.expose_secret(), 1)?;
        db::claim_namespace(&pool, &settings.common.namespace)
            .await?
            .ensure_ours(&settings.common.namespace, "reconcile refuses")?;
        let store = TicketStore::from_settings(&settings.redis, &settings.common.namespace)?;
        let fence = kafka::Fence::new(&settings.kafka, &settings.worker.group)?;
        let report = recovery::reconcile(&store, &pool, product, Some(&fence))
            .await?
            .ok_or_else(|| anyhow::anyhow!("product {product} is not in MySQL"))?;
        sold_out::Publisher::new(&settings.zookeeper.hosts, &settings.common.namespace)
            .not_sold_out(product, Duration::from_secs(5))
            .await?;
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    settings.require_admin_token(cli.dev)?;
    // Caught from here on: a SIGTERM while the worker starts stops it as soon as it runs.
    let term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let worker = Worker::build(settings).await?;
    tracing::info!(port = worker.port(), "worker started");
    let shutdown = CancellationToken::new();
    tokio::spawn(stop_on_signal(term, shutdown.clone()));
    let stopped = worker.run_until_stopped(shutdown).await;
    // The spans still buffered go out before the process ends.
    let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    stopped
}

/// SIGTERM or SIGINT: finish the batch, commit, leave the group.
async fn stop_on_signal(mut term: Signal, shutdown: CancellationToken) {
    tokio::select! {
        _ = term.recv() => {},
        _ = tokio::signal::ctrl_c() => {},
    }
    tracing::info!("stopping: finishing the batch in hand");
    shutdown.cancel();
}
