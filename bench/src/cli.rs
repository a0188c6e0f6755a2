//! The command line: `seckill-bench load …`, `seckill-bench audit …`,
//! `seckill-bench mysql-ceiling …`, `seckill-bench report …`,
//! `seckill-bench provider …`, `seckill-bench expiry …`, `seckill-bench queue-sale …` and
//! `seckill-bench plot …`.

use clap::{Args, Parser, Subcommand};
use secrecy::SecretString;
use std::net::SocketAddr;
use std::path::PathBuf;

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
    Load(LoadArgs),
    /// Check the sale's invariants against a history file, Redis and MySQL.
    Audit(AuditArgs),
    /// Measure the raw MySQL ceiling: write order rows with plain multi-row INSERTs, one
    /// transaction per batch, nothing else involved.
    MysqlCeiling(MysqlCeilingArgs),
    /// Build the results of a `scripts/bench.sh` run: each figure checked for a valid run
    /// before its goal is judged.
    Report(crate::report::ReportArgs),
    /// Simulate the payment provider: take charges, then call the gateway back with signed
    /// succeeded or declined callbacks, sometimes late or twice.
    Provider(ProviderArgs),
    /// Measure the payment deadline: N buyers each buy a unit of a priced product and never
    /// pay; the time from each deadline to the unit being on sale again in Redis, and the
    /// expiry throughput.
    Expiry(crate::expiry::ExpiryArgs),
    /// Measure a waiting-room sale: N buyers join a product's line and poll it until admitted,
    /// sold out or bought; the polls per second sustained, the Redis CPU per poll, and the
    /// time from the start to the last unit sold, next to the same sale without a waiting room.
    QueueSale(crate::queue_bench::QueueSaleArgs),
    /// Draw SVG charts of a load run (from its `load --json` summary) or of a chaos run (from
    /// its folder) over time.
    Plot(crate::plot::PlotArgs),
}

#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// Gateway base URL; repeat for several (requests go round-robin).
    #[arg(long = "gateway", required = true, value_name = "URL")]
    pub gateways: Vec<String>,

    /// Product to buy: `POST {gateway}/v1/seckill/{product}`.
    #[arg(long, value_name = "ID", required_unless_present = "path_get")]
    pub product: Option<u64>,

    /// Measure a ceiling instead: `GET {gateway}{PATH}` (e.g. /livez) with the same machinery.
    /// Needs --duration or --total.
    #[arg(
        long,
        value_name = "PATH",
        conflicts_with_all = ["product", "until_sold_out"],
        requires = "stop"
    )]
    pub path_get: Option<String>,

    /// Distinct user ids, starting at --first-user.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub users: u64,

    #[arg(long, default_value_t = 1, value_name = "ID")]
    pub first_user: u64,

    /// Requests in flight (worker tasks, and the connection pool size).
    #[arg(long, short = 'c', default_value_t = 64, value_name = "C")]
    pub concurrency: usize,

    /// Pace the requests: at most this many per second in all (request `i` starts no earlier
    /// than `i / RATE` seconds after the start). Alone, this is a paced closed loop: a request
    /// waits for a free worker, so the rate falls when answers are slow. Default: as fast as
    /// the concurrency allows.
    #[arg(long, value_name = "REQ_PER_SEC", value_parser = positive_rate)]
    pub rate: Option<f64>,

    /// With --rate: an open loop, as wrk2 does. Request `i` is due at `i / RATE` s whatever the
    /// answers, up to --concurrency requests in flight, and its latency counts from when it was
    /// due. The summary reports the rate achieved and the most requests in flight.
    #[arg(long, requires = "rate")]
    pub open_loop: bool,

    /// Requests each user makes (in rounds: every user's first, then every user's second…).
    #[arg(long, default_value_t = 1, value_name = "R")]
    pub requests_per_user: u64,

    /// Stop after this long (users are cycled).
    #[arg(long, value_name = "SECS", group = "stop")]
    pub duration: Option<f64>,

    /// Stop after this many requests (users are cycled).
    #[arg(long, value_name = "N", group = "stop")]
    pub total: Option<u64>,

    /// After the planned users, bring fresh user ids until the sale is over: every gateway
    /// answers 409 after its last 202, and then no unit comes back (see --admin-token).
    #[arg(long, conflicts_with = "stop")]
    pub until_sold_out: bool,

    /// --until-sold-out: at most this many distinct users in all.
    #[arg(long, default_value_t = 1_000_000, value_name = "N")]
    pub max_users: u64,

    /// --until-sold-out: stop bringing fresh users this long after the start (but see
    /// --sold-out-wait).
    #[arg(long, default_value_t = 120.0, value_name = "SECS")]
    pub sold_out_timeout: f64,

    /// --until-sold-out: once every gateway has answered 409, keep checking this long that the
    /// sale is over (units of failed orders come back to stock) before giving up. Fresh users
    /// are brought until then or until --sold-out-timeout, whichever is later.
    #[arg(long, default_value_t = 60.0, value_name = "SECS")]
    pub sold_out_wait: f64,

    /// --until-sold-out without --admin-token: the sale is over once no fresh user has bought
    /// for this long (fresh users probe every 0.5 s). Pending orders are not seen.
    #[arg(long, default_value_t = 10.0, value_name = "SECS")]
    pub sold_out_quiet: f64,

    /// --until-sold-out: the gateways' admin token. The sale is then over once
    /// `GET /admin/products/{id}` shows no stock in Redis nor MySQL and nothing pending, twice
    /// in a row; stock back in Redis brings fresh users again.
    #[arg(
        long,
        env = "SECKILL_ADMIN_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN",
        value_parser = secret
    )]
    pub admin_token: Option<SecretString>,

    /// --until-sold-out: how many 409s in a row after its last 202 make a gateway sold out.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub sold_out_streak: u64,

    /// Buyers pay: once a buyer's ticket is `confirmed` with a `pay_by_ms` (a product with a
    /// payment window), the buyer pays with this chance, decided per user from --seed:
    /// `POST /v1/orders/{ticket}/pay` with a fresh Idempotency-Key (a 503 retried with the
    /// same key), then polls the ticket until it is `paid` or `cancelled`. Still `confirmed`
    /// --pay-retry-after-ms after paying (declined), it pays again with a new key, at most 3
    /// payments, until `pay_by_ms`. The other buyers never pay: their orders are cancelled
    /// when the window closes. Each attempt and each paying buyer's last state go to the
    /// history (`pay`, `pay_end` lines). 0: nobody pays, as before payments existed.
    #[arg(
        long,
        default_value_t = 0.0,
        value_name = "P",
        value_parser = probability,
        conflicts_with = "path_get"
    )]
    pub pay_rate: f64,

    /// Buyers cancel: a buyer picked with this chance (per user, from --seed, a draw apart
    /// from --pay-rate's) cancels its order as soon as the gateway lets it, instead of paying.
    /// From its `202` on it calls `POST /v1/orders/{ticket}/cancel` every 20 to 50 ms while
    /// answered `409 not_cancellable` with the state `pending` (not confirmed yet), `503` or
    /// not at all, until `200`, a final refusal (failed, paid, cancelled), or
    /// --settle-timeout. Each request goes to the history (`cancel` lines). The other buyers
    /// pay at --pay-rate. 0: nobody cancels.
    #[arg(
        long,
        default_value_t = 0.0,
        value_name = "P",
        value_parser = probability,
        conflicts_with = "path_get"
    )]
    pub cancel_rate: f64,

    /// --pay-rate: each payment attempt is two requests at once, each with its own
    /// Idempotency-Key and on its own gateway (a buyer paying from two tabs). The API promises
    /// `409 payment_in_progress` to the one that comes second; the summary's
    /// `payments.double_pay` counts the pairs both answered `202`.
    #[arg(long, conflicts_with = "path_get")]
    pub double_pay: bool,

    /// Seed of the run's random choices (which buyers pay, which cancel): the same seed picks
    /// the same buyers. Default: a random seed, shown in the summary.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,

    /// --pay-rate: a buyer whose ticket is still `confirmed` this long after its last payment
    /// attempt (declined, or refused while another was in progress) pays again with a new key.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub pay_retry_after_ms: u64,

    /// --pay-rate: how long after `pay_by_ms` a paying buyer keeps polling a ticket that is
    /// neither paid nor cancelled yet.
    #[arg(long, default_value_t = 10.0, value_name = "SECS")]
    pub pay_grace_secs: f64,

    /// After the planned users, bring fresh user ids (at --rate) until every unit is paid:
    /// `GET /admin/products/{id}` shows `orders_db.paid == initial_stock` (needs
    /// --admin-token, and --pay-rate above 0). Fresh buyers answered 409 while unpaid orders
    /// hold the units keep coming: cancelled orders hand their units back. At most
    /// --max-users distinct users, for at most --all-paid-wait-secs.
    #[arg(
        long,
        requires = "rate",
        conflicts_with_all = ["stop", "until_sold_out", "path_get"]
    )]
    pub until_all_paid: bool,

    /// --until-all-paid: stop bringing fresh buyers this long after the start.
    #[arg(long, default_value_t = 120.0, value_name = "SECS")]
    pub all_paid_wait_secs: f64,

    /// Sign one HS256 token per user with this secret, before its first request, and send it
    /// as `Authorization: Bearer` on its buys and ticket polls (claims `sub` = the user id,
    /// `iat`, `exp`). The body still names the user. An empty SECKILL_AUTH_HS256_SECRET is an
    /// error: unset it for no tokens.
    #[arg(
        long,
        env = "SECKILL_AUTH_HS256_SECRET",
        hide_env_values = true,
        value_name = "SECRET",
        value_parser = secret,
        group = "jwt_key"
    )]
    pub jwt_secret: Option<SecretString>,

    /// Sign the tokens with EdDSA instead, with this Ed25519 private key (PKCS#8 PEM,
    /// `-----BEGIN PRIVATE KEY-----`); the same claims as --jwt-secret's, and --jwt-kid in
    /// each token's header. Not with --jwt-secret, nor with SECKILL_AUTH_HS256_SECRET set.
    #[arg(long, value_name = "PEM_FILE", group = "jwt_key", requires = "jwt_kid")]
    pub jwt_ed25519_key: Option<PathBuf>,

    /// With --jwt-ed25519-key: the key id (`kid`) the tokens name, the one the gateway's JWKS
    /// file gives the public key under.
    #[arg(
        long,
        value_name = "KID",
        requires = "jwt_ed25519_key",
        value_parser = clap::builder::NonEmptyStringValueParser::new()
    )]
    pub jwt_kid: Option<String>,

    /// The tokens' `iss` claim.
    #[arg(long, value_name = "ISS", requires = "jwt_key")]
    pub jwt_issuer: Option<String>,

    /// The tokens' `aud` claim.
    #[arg(long, value_name = "AUD", requires = "jwt_key")]
    pub jwt_audience: Option<String>,

    /// The tokens' lifetime: `exp` is this long after `iat`.
    #[arg(
        long,
        default_value_t = 3600,
        value_name = "SECS",
        requires = "jwt_key",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub jwt_ttl_secs: u64,

    /// HTTP client: `reqwest` (one pooled client) or `hyper` (each worker owns its
    /// connections; less client CPU per request).
    #[arg(long, value_enum, default_value_t = crate::load::engine::EngineKind::Hyper)]
    pub engine: crate::load::engine::EngineKind,

    /// Per-request timeout; a request that takes longer is recorded as `error`. 0: none.
    #[arg(long, default_value_t = 30.0, value_name = "SECS")]
    pub timeout: f64,

    /// History file: one JSON line per request, per settled ticket, and a summary.
    #[arg(long, default_value = "history.jsonl", value_name = "PATH")]
    pub history: PathBuf,

    /// Do not write a history file.
    #[arg(long, conflicts_with = "history")]
    pub no_history: bool,

    /// How long to poll tickets after the load; 0 skips polling.
    #[arg(long, default_value_t = 60.0, value_name = "SECS")]
    pub settle_timeout: f64,

    /// Ticket polls in flight.
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub settle_concurrency: usize,

    /// No progress bar.
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// Print the summary as one JSON object on stdout instead of a table.
    #[arg(long)]
    pub json: bool,

    /// Buy through the product's waiting room: each of the --users buyers joins it once
    /// (`POST /v1/seckill/{product}/queue`), polls its entry at `refresh_after_ms` until it is
    /// admitted, then buys with the admission token (`Seckill-Admission`); it stops when it
    /// bought, its admission expired, or the entry is sold out (with --until-sold-out, once the
    /// admin view shows the sale over: units that come back admit more). A request that gets
    /// no answer, or a 5xx, is retried on the next gateway. With --admin-token, the admin view's
    /// `waiting_room.admitted` and `stock_redis` are sampled into the history (`wr_sample`).
    /// --concurrency bounds the requests in flight; --timeout is per request.
    #[arg(
        long,
        conflicts_with_all = [
            "path_get", "stop", "until_all_paid", "pay_rate", "cancel_rate", "double_pay", "rate"
        ]
    )]
    pub waiting_room: bool,

    /// --waiting-room: every buyer stops this long after the start, whatever its state.
    #[arg(long, default_value_t = 180.0, value_name = "SECS")]
    pub wr_timeout: f64,

    /// Sample the product's admin view (`GET /admin/products/{id}`, needs --admin-token) every
    /// MS ms while the load runs and its tickets settle, into the summary's `admin_samples`:
    /// the data of a chaos run's timeline (`seckill-bench plot chaos`).
    #[arg(long, value_name = "MS", conflicts_with = "path_get")]
    pub sample_admin_ms: Option<u64>,

    /// Draw the run as an SVG chart to this file: answers per second and latency (p50, p99)
    /// over time, per outcome.
    #[arg(long, value_name = "SVG", conflicts_with = "waiting_room")]
    pub plot: Option<PathBuf>,

    /// --waiting-room with --admin-token: how often to sample the admin view.
    #[arg(long, default_value_t = 200, value_name = "MS")]
    pub wr_sample_ms: u64,
}

/// A secret option's value: not empty.
pub(crate) fn secret(s: &str) -> Result<SecretString, String> {
    if s.is_empty() {
        return Err("must not be empty".into());
    }
    Ok(SecretString::from(s))
}

fn probability(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err("must be a number from 0 to 1".into()),
    }
}

fn positive_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err("must be a number above 0".into()),
    }
}

#[derive(Debug, Clone, Args)]
pub struct AuditArgs {
    /// History file written by `load`.
    #[arg(long, default_value = "history.jsonl", value_name = "PATH")]
    pub history: PathBuf,

    /// Product the history's run bought.
    #[arg(long, value_name = "ID")]
    pub product: u64,

    /// Namespace of the Redis keys (default: SECKILL_NAMESPACE, else `seckill`).
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,

    /// Default: SECKILL_REDIS_URL.
    #[arg(long, value_name = "URL")]
    pub redis_url: Option<String>,

    /// Default: SECKILL_MYSQL_URL.
    #[arg(long, value_name = "URL")]
    pub mysql_url: Option<String>,

    /// Units the sale started with, from the scenario: the database under test does not
    /// get to say.
    #[arg(long, value_name = "N")]
    pub initial_stock: i64,

    /// A failure reason the run allows (e.g. `chaos` when the workers fail orders on purpose);
    /// repeat for several. A ticket answered 202, 200 or 201 that fails for any other reason
    /// is a broken promise.
    #[arg(long = "allow-failure", value_name = "REASON")]
    pub allow_failures: Vec<String>,

    /// Only tickets reserved in this window (ms since the epoch, `FROM..TO`) may fail for an
    /// allowed reason: the allowance fits its fault, not the whole sale.
    #[arg(long, value_name = "FROM_MS..TO_MS", value_parser = parse_window)]
    pub allow_window: Option<(i64, i64)>,

    /// At most this many tickets may fail for an allowed reason (say, those in flight at
    /// the fault).
    #[arg(long, value_name = "N")]
    pub allow_at_most: Option<u64>,

    /// The sale had to sell out: fail unless the load reached sold out and nothing is left
    /// over that an allowed failure did not hand back.
    #[arg(long)]
    pub until_sold_out: bool,

    /// After the sale every unit of the initial stock must end in a paid order: fail if any
    /// is left unsold, confirmed and unpaid, or cancelled and not sold again.
    #[arg(long)]
    pub expect_all_paid: bool,

    /// Ticket look-ups in flight.
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub concurrency: usize,

    /// Print the result as one JSON object on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct MysqlCeilingArgs {
    /// Default: SECKILL_MYSQL_URL. The database must have the `orders` table (`worker migrate`).
    #[arg(long, value_name = "URL")]
    pub mysql_url: Option<String>,

    /// The rows' product id. Use one that nothing else writes: every row is a new order.
    #[arg(long, value_name = "ID")]
    pub product: u64,

    /// Rows to write in all.
    #[arg(long, default_value_t = 20_000, value_name = "N")]
    pub rows: u64,

    /// Rows per INSERT and transaction (the worker's SECKILL_WORKER_BATCH_SIZE).
    #[arg(long, default_value_t = 500, value_name = "N")]
    pub batch: usize,

    /// User ids are FIRST_USER, FIRST_USER + 1, …
    #[arg(long, default_value_t = 1, value_name = "ID")]
    pub first_user: u64,

    /// Print the result as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ProviderArgs {
    /// Address to listen on (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:8099", value_name = "ADDR")]
    pub listen: SocketAddr,

    /// Sign each callback with this (HMAC-SHA256): the gateway's payment webhook secret.
    #[arg(
        long,
        env = "SECKILL_PAYMENT_WEBHOOK_SECRET",
        hide_env_values = true,
        value_name = "SECRET",
        value_parser = secret
    )]
    pub webhook_secret: SecretString,

    /// Chance that a charge is declined.
    #[arg(long, default_value_t = 0.1, value_name = "P", value_parser = probability)]
    pub decline_rate: f64,

    /// Time from a charge to its decision and callback.
    #[arg(long, default_value_t = 200, value_name = "MS")]
    pub delay_ms: u64,

    /// Chance that a charge is decided after --late-delay-ms instead.
    #[arg(long, default_value_t = 0.05, value_name = "P", value_parser = probability)]
    pub late_rate: f64,

    #[arg(long, default_value_t = 5000, value_name = "MS")]
    pub late_delay_ms: u64,

    /// Chance that a callback is sent twice (the same bytes, the same signature).
    #[arg(long, default_value_t = 0.0, value_name = "P", value_parser = probability)]
    pub duplicate_rate: f64,

    /// Seed the random choices: the same charges in the same order get the same ones.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
}

/// `FROM..TO`, two integers with `FROM <= TO`.
fn parse_window(text: &str) -> Result<(i64, i64), String> {
    let (from, to) = text
        .split_once("..")
        .ok_or_else(|| format!("{text:?} is not FROM..TO"))?;
    let n = |s: &str| s.parse::<i64>().map_err(|e| format!("{s:?}: {e}"));
    let (from, to) = (n(from)?, n(to)?);
    if from > to {
        return Err(format!("{from} is after {to}"));
    }
    Ok((from, to))
}

#[cfg(test)]
mod tests {
    use super::*;
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
