use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = seckill_bench::cli::Cli::parse();
    let runtime = match cli.runtime() {
        Ok(rt) => rt,
        Err(e) => return seckill_bench::exit_code(Err(e)),
    };
    seckill_bench::exit_code(runtime.block_on(seckill_bench::run(cli)))
}
