use clap::Parser;
use seckill_gateway::Application;
use seckill_shared::{telemetry, Settings};
use std::path::PathBuf;

/// The seckill gateway: the HTTP API of a flash sale.
///
/// Configured by SECKILL_* environment variables, layered over an optional TOML file.
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// TOML file with settings; environment variables override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Print the effective configuration (secrets redacted) and exit.
    #[arg(long)]
    print_config: bool,
    /// Development mode: allows running without SECKILL_ADMIN_TOKEN.
    #[arg(long)]
    dev: bool,
}

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli).await {
        eprintln!("gateway: {e:#}");
        std::process::exit(1);
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let mut settings = Settings::load(cli.config.as_deref())?;
    if cli.print_config {
        print!("{}", settings.redacted_toml());
        return Ok(());
    }
    telemetry::init(&settings.log_format);
    settings.require_admin_token(cli.dev)?;
    let app = Application::build(settings).await?;
    tracing::info!(port = app.port(), "gateway listening");
    app.run_until_stopped().await
}
