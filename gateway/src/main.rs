use clap::Parser;
use seckill_gateway::cli::{run, Cli};

/// mimalloc instead of glibc's malloc: glibc's free-list upkeep (`malloc_consolidate`,
/// `unlink_chunk`) was a tenth of the gateway's samples on the accept path (docs/BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli).await {
        eprintln!("gateway: {e:#}");
        std::process::exit(1);
    }
}
