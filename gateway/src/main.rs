use clap::Parser;
use seckill_gateway::cli::{run, Cli};

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli).await {
        eprintln!("gateway: {e:#}");
        std::process::exit(1);
    }
}
