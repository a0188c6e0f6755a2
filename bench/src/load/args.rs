//! `seckill-bench load`'s options.

use crate::args::{positive_rate, probability, secret};
use clap::Args;
use secrecy::SecretString;
use std::path::PathBuf;

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

    /// Seed of the run's random choices (which buyers pay, which cancel, how many units each
    /// buys): the same seed picks the same buyers. Default: a random seed, shown in the summary.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,

    /// Units per order: `N`, or `A-B` for a quantity drawn uniformly in A to B for each buyer
    /// (seeded: a buyer who buys again asks the same). An order of one unit sends no
    /// `quantity`, as before quantities. The product's `max_per_buyer` must allow B.
    #[arg(long, default_value = "1", value_parser = QuantityMix::parse, value_name = "N|A-B", conflicts_with = "path_get")]
    pub quantity: QuantityMix,

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

/// `--quantity`: the units each buyer's order asks for, drawn in `lo..=hi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuantityMix {
    pub lo: u16,
    pub hi: u16,
}

impl QuantityMix {
    pub fn parse(s: &str) -> Result<Self, String> {
        let num = |t: &str| {
            t.trim()
                .parse::<u16>()
                .ok()
                .filter(|q| (1..=seckill_shared::MAX_PER_BUYER).contains(q))
                .ok_or_else(|| {
                    format!(
                        "{t:?} is not a quantity of 1 to {}",
                        seckill_shared::MAX_PER_BUYER
                    )
                })
        };
        let (lo, hi) = match s.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(s)?, num(s)?),
        };
        if lo > hi {
            return Err(format!("{s:?}: the least is above the most"));
        }
        Ok(Self { lo, hi })
    }

    /// The units `user` asks for, in the run seeded with `seed`.
    pub fn of(self, seed: u64, user: u64) -> u16 {
        if self.lo == self.hi {
            return self.lo;
        }
        let span = u64::from(self.hi - self.lo) + 1;
        self.lo + (super::draw::mixed(seed, user, 7) % span) as u16
    }
}

pub(super) fn validate(args: &LoadArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.concurrency >= 1, "--concurrency must be at least 1");
    anyhow::ensure!(
        args.gateways.len() <= u16::MAX as usize,
        "too many gateways"
    );
    for (name, v) in [
        ("--timeout", args.timeout),
        ("--settle-timeout", args.settle_timeout),
        ("--sold-out-timeout", args.sold_out_timeout),
        ("--sold-out-wait", args.sold_out_wait),
        ("--sold-out-quiet", args.sold_out_quiet),
        ("--duration", args.duration.unwrap_or(1.0)),
        ("--pay-grace-secs", args.pay_grace_secs),
        ("--all-paid-wait-secs", args.all_paid_wait_secs),
    ] {
        anyhow::ensure!(
            v.is_finite() && v >= 0.0,
            "{name} must be a non-negative number"
        );
    }
    anyhow::ensure!(
        args.sold_out_streak >= 1,
        "--sold-out-streak must be at least 1"
    );
    if let Some(p) = &args.path_get {
        anyhow::ensure!(p.starts_with('/'), "--path-get must start with '/'");
    }
    if args.pay_rate > 0.0 {
        anyhow::ensure!(
            args.settle_timeout > 0.0,
            "--pay-rate needs --settle-timeout above 0: paying buyers wait that long for their \
             confirmation"
        );
    }
    if args.cancel_rate > 0.0 {
        anyhow::ensure!(
            args.settle_timeout > 0.0,
            "--cancel-rate needs --settle-timeout above 0: cancelling buyers try that long"
        );
    }
    anyhow::ensure!(
        !args.double_pay || args.pay_rate > 0.0,
        "--double-pay needs --pay-rate above 0: nobody pays otherwise"
    );
    if args.until_all_paid {
        anyhow::ensure!(
            args.pay_rate > 0.0 && args.cancel_rate < 1.0,
            "--until-all-paid needs --pay-rate above 0 and --cancel-rate below 1: nobody pays \
             otherwise"
        );
        anyhow::ensure!(
            args.admin_token.is_some(),
            "--until-all-paid needs --admin-token (or SECKILL_ADMIN_TOKEN): it reads the paid \
             orders with GET /admin/products/{{id}}"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn until_all_paid_flags_go_together() {
        let parse = |extra: &[&str]| {
            let mut argv = vec!["b", "load", "--gateway", "http://x", "--product", "1"];
            argv.extend_from_slice(extra);
            <crate::cli::Cli as clap::Parser>::try_parse_from(argv)
        };
        assert!(parse(&["--until-all-paid", "--rate", "5", "--pay-rate", "0.5"]).is_ok());
        // It paces fresh buyers at --rate, and stops by itself.
        assert!(parse(&["--until-all-paid", "--pay-rate", "0.5"]).is_err());
        for other in [
            &["--until-sold-out"][..],
            &["--duration", "3"],
            &["--total", "9"],
        ] {
            let mut argv = vec!["--until-all-paid", "--rate", "5"];
            argv.extend_from_slice(other);
            assert!(parse(&argv).is_err(), "{other:?}");
        }
        assert!(parse(&["--pay-rate", "1.5"]).is_err());
        assert!(parse(&["--cancel-rate", "-0.1"]).is_err());
        for flag in [&["--cancel-rate", "0.5"][..], &["--double-pay"]] {
            let mut argv = vec!["--waiting-room"];
            argv.extend_from_slice(flag);
            assert!(parse(&argv).is_err(), "{flag:?}");
        }
        let cli = parse(&[]).unwrap();
        let crate::cli::Command::Load(a) = cli.command else {
            panic!("not load")
        };
        assert_eq!((a.pay_rate, a.seed, a.until_all_paid), (0.0, None, false));
        assert_eq!((a.cancel_rate, a.double_pay), (0.0, false));
        assert_eq!((a.pay_retry_after_ms, a.pay_grace_secs), (1000, 10.0));
        assert_eq!(a.all_paid_wait_secs, 120.0);
    }
}
