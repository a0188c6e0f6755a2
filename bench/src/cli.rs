//! The command line: `seckill-bench load …`, `seckill-bench audit …`,
//! `seckill-bench mysql-ceiling …`, `seckill-bench report …`,
//! `seckill-bench provider …`, `seckill-bench expiry …`, `seckill-bench queue-sale …` and
//! `seckill-bench plot …`.

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "seckill-bench",
    version,
    about = "Load generator and invariant auditor for the seckill pipeline"
)]
pub struct Cli {
    /// Tokio worker threads (default: one per CPU).
    #[arg(long, global = true)]
    pub threads: Option<usize>,

    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The multi-thread runtime the command runs on.
    pub fn runtime(&self) -> anyhow::Result<tokio::runtime::Runtime> {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.enable_all();
        if let Some(n) = self.threads {
            anyhow::ensure!(n > 0, "--threads must be at least 1");
            b.worker_threads(n);
        }
        Ok(b.build()?)
    }
}

// Parsed once per process: the size of the largest variant (`load`'s flags) costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Drive the gateways: buy requests for one product (or GETs of one path with
    /// --path-get), then poll every ticket until it settles.
    Load(crate::load::args::LoadArgs),
    /// Check the sale's invariants against a history file, Redis and MySQL.
    Audit(crate::audit::args::AuditArgs),
    /// Measure the raw MySQL ceiling: write order rows with plain multi-row INSERTs, one
    /// transaction per batch, nothing else involved.
    MysqlCeiling(crate::ceiling::MysqlCeilingArgs),
    /// Build the results of a `scripts/bench.sh` run: each figure checked for a valid run
    /// before its goal is judged.
    Report(crate::report::ReportArgs),
    /// Simulate the payment provider: take charges, then call the gateway back with signed
    /// succeeded or declined callbacks, sometimes late or twice.
    Provider(crate::provider::args::ProviderArgs),
    /// Measure the payment deadline: N buyers each buy a unit of a priced product and never
    /// pay; the time from each deadline to the unit being on sale again in Redis, and the
    /// expiry throughput.
    Expiry(crate::expiry::ExpiryArgs),
    /// Measure a waiting-room sale: N buyers join a product's line and poll it until admitted,
    /// sold out or bought; the polls per second sustained, the Redis CPU per poll, and the
    /// time from the start to the last unit sold, next to the same sale without a waiting room.
    QueueSale(crate::queue_bench::QueueSaleArgs),
    /// Measure live streams against polling: buyers of a waiting-room product from their join
    /// to their confirmation, following their place and ticket one way or the other; the
    /// requests per buyer and the time from a confirmation to its buyer knowing it.
    LiveSale(crate::live_bench::LiveSaleArgs),
    /// Measure the waiting room's proof of work: the time to solve a challenge at each
    /// difficulty on this machine, and a simulated bot's share of the admissions with and
    /// without a challenge.
    Pow(crate::pow_bench::PowArgs),
    /// Draw SVG charts of a load run (from its `load --json` summary) or of a chaos run (from
    /// its folder) over time.
    Plot(crate::plot::PlotArgs),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::args::LoadArgs;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn load_needs_a_product_unless_it_measures_a_path() {
        assert!(Cli::try_parse_from(["b", "load", "--gateway", "http://x"]).is_err());
        assert!(Cli::try_parse_from([
            "b",
            "load",
            "--gateway",
            "http://x",
            "--path-get",
            "/livez",
            "--duration",
            "1"
        ])
        .is_ok());
        // A ceiling run needs a stop condition.
        assert!(
            Cli::try_parse_from(["b", "load", "--gateway", "http://x", "--path-get", "/l"])
                .is_err()
        );
        assert!(Cli::try_parse_from([
            "b",
            "load",
            "--gateway",
            "http://x",
            "--product",
            "1",
            "--until-sold-out",
            "--duration",
            "3"
        ])
        .is_err());
        let cli = Cli::try_parse_from([
            "b",
            "load",
            "--gateway",
            "http://a",
            "--gateway",
            "http://b",
            "--product",
            "7",
            "--until-sold-out",
        ])
        .unwrap();
        let Command::Load(a) = cli.command else {
            panic!("not load")
        };
        assert_eq!(a.gateways.len(), 2);
        assert_eq!(a.concurrency, 64);
        assert!(a.until_sold_out);
        assert_eq!((a.sold_out_timeout, a.sold_out_wait), (120.0, 60.0));
        assert_eq!(a.sold_out_quiet, 10.0);
    }

    fn load(extra: &[&str]) -> Result<LoadArgs, clap::Error> {
        let mut argv = vec!["b", "load", "--gateway", "http://x", "--product", "1"];
        argv.extend_from_slice(extra);
        Cli::try_parse_from(argv).map(|c| match c.command {
            Command::Load(a) => a,
            other => panic!("not load: {other:?}"),
        })
    }

    #[test]
    fn load_signs_tokens_with_a_secret_it_never_shows() {
        use secrecy::ExposeSecret;
        let a = load(&[
            "--jwt-secret",
            "t0ps3cret",
            "--jwt-issuer",
            "bench",
            "--jwt-audience",
            "seckill",
            "--admin-token",
            "adm1n",
        ])
        .unwrap();
        assert_eq!(a.jwt_secret.as_ref().unwrap().expose_secret(), "t0ps3cret");
        assert_eq!(a.admin_token.as_ref().unwrap().expose_secret(), "adm1n");
        assert_eq!(
            (a.jwt_issuer.as_deref(), a.jwt_audience.as_deref()),
            (Some("bench"), Some("seckill"))
        );
        assert_eq!(a.jwt_ttl_secs, 3600);
        let debug = format!("{a:?}");
        assert!(
            !debug.contains("t0ps3cret") && !debug.contains("adm1n"),
            "{debug}"
        );
        assert!(load(&["--jwt-secret", "s", "--jwt-ttl-secs", "0"]).is_err());
        assert!(load(&["--jwt-secret", ""]).is_err());
        // The claims' flags need a secret (unless the environment gives one).
        if std::env::var_os("SECKILL_AUTH_HS256_SECRET").is_none() {
            assert!(load(&["--jwt-issuer", "bench"]).is_err());
            assert!(load(&["--jwt-ttl-secs", "60"]).is_err());
            assert!(load(&[]).unwrap().jwt_secret.is_none());
        }
        // An Ed25519 key instead: with its kid, and never with a secret.
        if std::env::var_os("SECKILL_AUTH_HS256_SECRET").is_none() {
            let a = load(&[
                "--jwt-ed25519-key",
                "k.pem",
                "--jwt-kid",
                "ed-1",
                "--jwt-ttl-secs",
                "60",
            ])
            .unwrap();
            assert_eq!(
                (a.jwt_ed25519_key.as_deref(), a.jwt_kid.as_deref()),
                (Some(std::path::Path::new("k.pem")), Some("ed-1"))
            );
            assert!(a.jwt_secret.is_none());
            assert!(load(&["--jwt-ed25519-key", "k.pem"]).is_err());
            assert!(load(&["--jwt-kid", "ed-1"]).is_err());
            assert!(load(&["--jwt-ed25519-key", "k.pem", "--jwt-kid", ""]).is_err());
        }
        assert!(load(&[
            "--jwt-secret",
            "s",
            "--jwt-ed25519-key",
            "k.pem",
            "--jwt-kid",
            "ed-1"
        ])
        .is_err());
        // Both secrets can come from the environment, and their values never show in --help.
        let cmd = Cli::command();
        let l = cmd.find_subcommand("load").unwrap();
        let arg = |id: &str| l.get_arguments().find(|a| a.get_id() == id).unwrap();
        for (id, env) in [
            ("jwt_secret", "SECKILL_AUTH_HS256_SECRET"),
            ("admin_token", "SECKILL_ADMIN_TOKEN"),
        ] {
            assert_eq!(arg(id).get_env(), Some(std::ffi::OsStr::new(env)));
            assert!(arg(id).is_hide_env_values_set());
        }
    }

    #[test]
    fn provider_takes_odds_from_0_to_1_and_hides_its_secret() {
        use secrecy::ExposeSecret;
        let provider = |extra: &[&str]| {
            let mut argv = vec!["b", "provider", "--webhook-secret", "whsec"];
            argv.extend_from_slice(extra);
            Cli::try_parse_from(argv).map(|c| match c.command {
                Command::Provider(a) => a,
                other => panic!("not provider: {other:?}"),
            })
        };
        let a = provider(&["--decline-rate", "1", "--seed", "7"]).unwrap();
        assert_eq!(a.webhook_secret.expose_secret(), "whsec");
        assert_eq!(a.listen, "127.0.0.1:8099".parse().unwrap());
        assert_eq!(
            (a.decline_rate, a.late_rate, a.duplicate_rate),
            (1.0, 0.05, 0.0)
        );
        assert_eq!((a.delay_ms, a.late_delay_ms, a.seed), (200, 5000, Some(7)));
        assert!(!format!("{a:?}").contains("whsec"));
        for bad in [
            ["--decline-rate", "1.5"],
            ["--late-rate", "-0.1"],
            ["--duplicate-rate", "x"],
        ] {
            assert!(provider(&bad).is_err(), "{bad:?}");
        }
        assert!(provider(&["--listen", "nowhere"]).is_err());
        if std::env::var_os("SECKILL_PAYMENT_WEBHOOK_SECRET").is_none() {
            assert!(Cli::try_parse_from(["b", "provider"]).is_err());
        }
        let cmd = Cli::command();
        let p = cmd.find_subcommand("provider").unwrap();
        let arg = p
            .get_arguments()
            .find(|a| a.get_id() == "webhook_secret")
            .unwrap();
        assert_eq!(
            arg.get_env(),
            Some(std::ffi::OsStr::new("SECKILL_PAYMENT_WEBHOOK_SECRET"))
        );
        assert!(arg.is_hide_env_values_set());
    }
}
