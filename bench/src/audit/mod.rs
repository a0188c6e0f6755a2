//! `seckill-bench audit`: gathers the facts ([`gather`]) and runs the pure
//! [`checks`] over them.
//!
//! Where each part lives: `facts.rs` gathers the facts (`history_facts.rs` from the history
//! file, `mysql_facts.rs` from MySQL, `room_redis.rs` the waiting room from Redis), and
//! `report.rs` prints the verdicts.

pub mod args;
pub mod checks;
mod facts;
mod history_facts;
mod mysql_facts;
mod report;
mod room_redis;

pub use facts::gather;
pub use history_facts::history_facts;
pub use report::{outcomes_table, table};

use args::AuditArgs;
use report::report;

/// Runs the audit. `Ok(false)` when a check failed.
pub async fn run(args: AuditArgs) -> anyhow::Result<bool> {
    // The environment gives what the flags do not.
    let crate::stores::Stores {
        redis_url,
        mysql_url,
        namespace,
    } = crate::stores::Stores::resolve(
        args.redis_url.as_deref(),
        args.mysql_url.as_deref(),
        args.namespace.as_deref(),
    )?;

    let (input, notes) = gather(&args, &redis_url, &mysql_url, &namespace).await?;
    let results = checks::run_all(&input);
    let report = report(&input, &namespace, &notes, &results);
    let ok = report.ok;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        for n in &notes {
            eprintln!("note: {n}");
        }
        print!("{}", table(&results));
        println!();
        print!(
            "{}",
            outcomes_table(&report.promises, &input.allowed_failures)
        );
        let failed = results.iter().filter(|r| !r.passed()).count();
        println!(
            "\nproduct {} in namespace {namespace:?}: {} requests and {} tickets in {}, {} order rows: {}",
            input.product,
            input.history.requests,
            input.history.tickets.len(),
            args.history.display(),
            input.mysql.orders.len(),
            if ok {
                "all checks passed".to_owned()
            } else {
                format!("{failed} check(s) FAILED")
            }
        );
    }
    Ok(ok)
}
