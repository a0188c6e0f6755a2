//! The `gateway` binary's command line. It lives in the library so that tests can run the
//! binary's exact code path in a child process (see `worker/tests/e2e/lifecycle.rs`).

use crate::Application;
use clap::Parser;
use seckill_shared::{telemetry, Settings};
use std::path::PathBuf;

/// The seckill gateway: the HTTP API of a flash sale.
///
/// Configured by SECKILL_* environment variables, layered over an optional TOML file.
/// SIGTERM stops it gracefully: no new connections, requests in flight finish (10 s at most),
/// then queued orders are flushed to Kafka.
#[derive(Parser)]
#[command(name = "gateway", version)]
pub struct Cli {
    /// TOML file with settings; environment variables override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Print the effective configuration (secrets redacted) and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Development mode: allows running without SECKILL_ADMIN_TOKEN.
    #[arg(long)]
    pub dev: bool,
}

/// Runs the gateway until SIGTERM (or SIGINT), then flushes the producer.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let mut settings = Settings::load(cli.config.as_deref())?;
    if cli.print_config {
        print!("{}", settings.redacted_toml());
        return Ok(());
    }
    telemetry::init(settings.log_format);
    settings.require_admin_token(cli.dev)?;
    let app = Application::build(settings).await?;
    tracing::info!(port = app.port(), "gateway listening");
    app.run_until_stopped().await
}
