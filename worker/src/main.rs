use clap::Parser;
use seckill_worker::cli::{run, Cli};

/// The same allocator as the gateway's (see there).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli).await {
        eprintln!("worker: {e:#}");
        std::process::exit(1);
    }
    // Not a return: dropping the runtime waits for every blocking task, and a consumer close
    // that librdkafka never finishes (abandoned above, after a timeout) would keep the
    // process alive.
    std::process::exit(0);
}
