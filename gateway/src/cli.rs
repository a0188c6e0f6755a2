//! The `gateway` binary's command line. It lives in the library so that tests can run the
//! binary's exact code path in a child process (see `tests/e2e/lifecycle.rs`).

use crate::{auth, Application};
use clap::{Parser, Subcommand};
use seckill_shared::{telemetry, Settings, UserId};
use secrecy::ExposeSecret;
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
    /// Development mode: allows running without SECKILL_ADMIN_TOKEN or a buyer-token key
    /// (development values are used, with a warning), and allows SECKILL_AUTH_MODE=none.
    #[arg(long, global = true)]
    pub dev: bool,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand)]
pub enum Command {
    /// Print an HS256 buyer token signed with SECKILL_AUTH_HS256_SECRET, for development and
    /// tests. In production the shop's account service issues tokens.
    Token {
        /// The buyer's user id: the token's `sub`.
        #[arg(long)]
        user: String,
        /// Seconds until the token expires.
        #[arg(long, default_value_t = 600)]
        ttl: u64,
    },
}

/// Runs the gateway until SIGTERM (or SIGINT), then flushes the producer.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let mut settings = Settings::load(cli.config.as_deref())?;
    if cli.print_config {
        print!("{}", settings.redacted_toml());
        return Ok(());
    }
    if let Some(Command::Token { user, ttl }) = cli.command {
        return print_token(&mut settings, cli.dev, &user, ttl);
    }
    let telemetry = telemetry::init(
        settings.common.log_format,
        "seckill-gateway",
        settings.common.trace_slow(),
    )?;
    settings.require_admin_token(cli.dev)?;
    settings.require_auth(cli.dev)?;
    settings.require_admission_secret(cli.dev)?;

    let app = Application::build(settings).await?;
    tracing::info!(port = app.port(), "gateway listening");
    let stopped = app.run_until_stopped().await;
    // The spans still buffered go out before the process ends.
    let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    stopped
}

/// `gateway token`: one HS256 token, with the configured issuer and audience.
fn print_token(settings: &mut Settings, dev: bool, user: &str, ttl: u64) -> anyhow::Result<()> {
    let user = UserId::parse(user).map_err(|e| anyhow::anyhow!("--user: {e}"))?;
    if settings.auth.hs256_secret.expose_secret().is_empty() {
        if !dev {
            anyhow::bail!("SECKILL_AUTH_HS256_SECRET is not set (or pass --dev to use the development secret)");
        }
        settings.auth.hs256_secret = seckill_shared::config::DEV_AUTH_HS256_SECRET.into();
    }
    let some = |s: &String| (!s.is_empty()).then_some(s.clone());
    let token = auth::mint_hs256(
        settings.auth.hs256_secret.expose_secret(),
        user,
        ttl,
        some(&settings.auth.issuer).as_deref(),
        some(&settings.auth.audience).as_deref(),
    )?;
    println!("{token}");
    Ok(())
}
