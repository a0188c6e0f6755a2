//! `--jwt-secret` and `--jwt-ed25519-key`: every buy and ticket poll carries its user's token.

use super::buy_run;
use crate::load::{buyer_token, fake_gateway, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_buy_and_ticket_poll_carries_its_users_token() {
    use jsonwebtoken::{Algorithm, DecodingKey, Validation};
    for engine in ["hyper", "reqwest"] {
        let (addr, sale) = fake_gateway::start(fake_gateway::Config {
            stock: 3,
            ..Default::default()
        })
        .await;
        let s = buy_run(
            addr,
            &[
                "--users",
                "5",
                "--first-user",
                "100",
                "-c",
                "2",
                "--engine",
                engine,
                "--jwt-issuer",
                "bench",
                "--jwt-audience",
                "seckill",
                "--jwt-ttl-secs",
                "60",
            ],
            None,
            Some("k3y"),
        )
        .await;
        assert!(s.jwt);
        assert_eq!(s.tickets.confirmed, 3, "{s:?}");
        let key = DecodingKey::from_secret(b"k3y").unwrap();
        let mut v = Validation::new(Algorithm::HS256);
        v.set_issuer(&["bench"]);
        v.set_audience(&["seckill"]);
        let seen = sale.lock().unwrap().seen.clone();
        let (mut buys, mut polls) = (0, 0);
        for r in &seen {
            let auth = r
                .authorization
                .as_deref()
                .expect("every request has a token");
            let token = auth.strip_prefix("Bearer ").unwrap();
            let c = jsonwebtoken::decode::<buyer_token::Claims>(token, &key, &v)
                .unwrap()
                .claims;
            assert_eq!(c.exp - c.iat, 60);
            let user = match r.method.as_str() {
                "POST" => {
                    buys += 1;
                    r.user.unwrap()
                }
                _ => {
                    polls += 1;
                    let ticket = r.path.rsplit('/').next().unwrap();
                    fake_gateway::ticket_user(&sale, ticket).unwrap()
                }
            };
            assert_eq!(c.sub, user.to_string(), "{r:?}");
        }
        assert_eq!(buys, 5, "{engine}");
        assert!(polls >= 3, "{engine}");
    }

    // Without a secret, no header.
    let (addr, sale) = fake_gateway::start(Default::default()).await;
    let s = buy_run(addr, &["--users", "2"], None, None).await;
    assert!(!s.jwt);
    assert_eq!(s.jwt_alg, None);
    let seen = sale.lock().unwrap().seen.clone();
    assert!(!seen.is_empty() && seen.iter().all(|r| r.authorization.is_none()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ed25519_key_gives_every_buyer_an_eddsa_token_naming_its_kid() {
    use jsonwebtoken::{Algorithm, DecodingKey, Validation};
    let (addr, sale) = fake_gateway::start(Default::default()).await;
    let url = format!("http://{addr}");
    let argv = [
        "b",
        "load",
        "--gateway",
        &url,
        "--product",
        "7",
        "--users",
        "3",
        "--no-history",
        "--quiet",
        "--json",
        "--settle-timeout",
        "5",
    ];
    let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
    let crate::cli::Command::Load(mut args) = cli.command else {
        panic!("not load")
    };
    // Whatever the environment's secret: the key alone.
    let testdata = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/jwt/");
    args.jwt_secret = None;
    args.admin_token = None;
    args.jwt_ed25519_key = Some(format!("{testdata}ed-1.pem").into());
    args.jwt_kid = Some("ed-1".into());
    let s = run(args).await.unwrap();
    assert!(s.jwt);
    assert_eq!(
        (s.jwt_alg, s.jwt_kid.as_deref()),
        (Some("EdDSA"), Some("ed-1"))
    );
    let public =
        DecodingKey::from_ed_pem(&std::fs::read(format!("{testdata}ed-1.pub.pem")).unwrap())
            .unwrap();
    let seen = sale.lock().unwrap().seen.clone();
    let buys: Vec<_> = seen.iter().filter(|r| r.method == "POST").collect();
    assert_eq!(buys.len(), 3);
    for r in buys {
        let token = r
            .authorization
            .as_deref()
            .and_then(|a| a.strip_prefix("Bearer "))
            .expect("every buy has a token");
        assert_eq!(
            jsonwebtoken::decode_header(token).unwrap().kid.as_deref(),
            Some("ed-1")
        );
        let c = jsonwebtoken::decode::<buyer_token::Claims>(
            token,
            &public,
            &Validation::new(Algorithm::EdDSA),
        )
        .unwrap()
        .claims;
        assert_eq!(c.sub, r.user.unwrap().to_string());
    }
}
