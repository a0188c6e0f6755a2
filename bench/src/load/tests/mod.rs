//! `load` run end to end, against a slow HTTP server or a fake gateway, by topic.

mod arrival;
mod buyer_tokens;
mod payments;
mod sale_end;

use super::run;
use super::stats::Summary;

/// A buy run against `addr`. The admin token and the JWT secret are the ones given, never
/// the environment's.
async fn buy_run(
    addr: std::net::SocketAddr,
    extra: &[&str],
    admin_token: Option<&str>,
    jwt_secret: Option<&str>,
) -> Summary {
    let url = format!("http://{addr}");
    let mut argv = vec![
        "b",
        "load",
        "--gateway",
        &url,
        "--product",
        "7",
        "--no-history",
        "--quiet",
        "--json",
        "--settle-timeout",
        "5",
    ];
    argv.extend_from_slice(extra);
    if let Some(secret) = jwt_secret {
        argv.extend(["--jwt-secret", secret]);
    }
    let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
    let crate::cli::Command::Load(mut args) = cli.command else {
        panic!("not load")
    };
    args.admin_token = admin_token.map(secrecy::SecretString::from);
    if jwt_secret.is_none() {
        args.jwt_secret = None;
    }
    run(args).await.unwrap()
}
