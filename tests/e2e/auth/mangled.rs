//! No mangled token is ever accepted (a property test).

use crate::auth::calls::{gateway, my_order};
use crate::auth::tokens::{good, now, JwksFile};
use crate::helpers::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use reqwest::header::{HeaderValue, AUTHORIZATION};
use reqwest::StatusCode;
use seckill_shared::Ticket;
use serde_json::{json, Value};
use std::time::Instant;

/// The bytes a token may be made of in a header value (no CR, LF or NUL, which the client
/// cannot send), or a good token changed in a few places, never with whitespace at its ends
/// (the gateway trims it, which would leave the good token).
#[derive(Debug, Clone)]
enum Mangled {
    Random(Vec<u8>),
    Mutated {
        base: usize,
        edits: Vec<(prop::sample::Index, u8, u8)>,
    },
}

fn header_byte() -> impl Strategy<Value = u8> {
    prop_oneof![8 => 0x20u8..=0x7e, 1 => 0x80u8..=0xff, 1 => Just(b'\t')]
}

/// Not whitespace: the bytes an edit puts in.
fn edit_byte() -> impl Strategy<Value = u8> {
    prop_oneof![8 => 0x21u8..=0x7e, 1 => 0x80u8..=0xff]
}

fn mangled(bases: usize) -> impl Strategy<Value = Mangled> {
    prop_oneof![
        prop::collection::vec(header_byte(), 0..400).prop_map(Mangled::Random),
        (
            0..bases,
            prop::collection::vec((any::<prop::sample::Index>(), edit_byte(), 0..3u8), 1..4)
        )
            .prop_map(|(base, edits)| Mangled::Mutated { base, edits }),
    ]
}

impl Mangled {
    fn bytes(&self, bases: &[String]) -> Vec<u8> {
        match self {
            Mangled::Random(b) => b.clone(),
            Mangled::Mutated { base, edits } => {
                let mut t = bases[*base].clone().into_bytes();
                for (at, byte, how) in edits {
                    match how {
                        // Flip: another byte in its place.
                        0 if !t.is_empty() => {
                            let i = at.index(t.len());
                            t[i] = match (t[i] == *byte, *byte == b'A') {
                                (false, _) => *byte,
                                (true, false) => b'A',
                                (true, true) => b'B',
                            };
                        }
                        // Delete.
                        1 if t.len() > 1 => {
                            t.remove(at.index(t.len()));
                        }
                        // Insert.
                        _ => t.insert(at.index(t.len() + 1), *byte),
                    }
                }
                t
            }
        }
    }
}

#[test]
fn mangled_tokens_are_never_accepted() {
    // proptest's strategies and shrinking are deep: give them room in debug builds.
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(mangled_tokens)
        .unwrap()
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e));
}

fn mangled_tokens() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let jwks = JwksFile::copy_of("jwks.json");
    let (env, gw, product) = rt.block_on(async {
        let env = TestEnv::new().await;
        let gw = gateway(&env, &jwks, false).await;
        let product = env.product(&gw, 5).await;
        (env, gw, product)
    });
    // A good token of each kind, for users 21 to 24.
    let plain = |user: u64| json!({"sub": user.to_string(), "exp": now() + 600});
    let bases = vec![
        token(21),
        good("ed-1", &plain(22)),
        good("es-1", &plain(23)),
        good("rs-1", &plain(24)),
    ];
    rt.block_on(async {
        for (user, t) in (21..).zip(&bases) {
            let a = my_order(&gw, product, t).await;
            assert_eq!(
                (a.status, a.body["error"].as_str()),
                (StatusCode::NOT_FOUND, Some("no_order")),
                "the unmangled token of user {user} is good: {}",
                a.body
            );
        }
    });

    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        max_shrink_time: 30_000,
        ..Config::default()
    });
    let started = Instant::now();
    let endpoints = [
        format!("/v1/seckill/{product}"),
        format!("/v1/seckill/{product}/order"),
        format!("/v1/orders/{}", Ticket::generate(product)),
    ];
    let result = runner.run(
        &(mangled(bases.len()), 0..endpoints.len()),
        |(m, endpoint)| {
            let token = m.bytes(&bases);
            prop_assume!(!bases.iter().any(|b| b.as_bytes() == token.as_slice()));
            let mut value = b"Bearer ".to_vec();
            value.extend_from_slice(&token);
            let value = HeaderValue::from_bytes(&value)
                .map_err(|e| TestCaseError::fail(format!("not a header value: {e}")))?;
            let path = &endpoints[endpoint];
            rt.block_on(async {
                let url = format!("{}{path}", gw.base);
                let req = if endpoint == 0 {
                    gw.http.post(url).json(&json!({}))
                } else {
                    gw.http.get(url)
                };
                let res = req
                    .header(AUTHORIZATION, value)
                    .send()
                    .await
                    .map_err(|e| TestCaseError::fail(format!("no answer: {e:#}")))?;
                let status = res.status();
                let challenge = res.headers().get("www-authenticate").cloned();
                let body: Value = res.json().await.unwrap_or(Value::Null);
                let what = format!(
                    "{path} with {:?} → {status}: {body}",
                    String::from_utf8_lossy(&token)
                );
                prop_assert!(!status.is_success(), "accepted: {}", what);
                prop_assert!(!status.is_server_error(), "{}", what);
                prop_assert_eq!(status, StatusCode::UNAUTHORIZED, "{}", what);
                prop_assert_eq!(body["error"].as_str(), Some("unauthenticated"), "{}", what);
                prop_assert!(challenge.is_some(), "no WWW-Authenticate: {}", what);
                if token.len() >= 16 {
                    let message = body["message"].as_str().unwrap_or_default();
                    prop_assert!(
                        !message.contains(&*String::from_utf8_lossy(&token)),
                        "{}",
                        what
                    );
                }
                Ok::<(), TestCaseError>(())
            })
        },
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    eprintln!("{cases} mangled tokens refused in {:?}", started.elapsed());

    rt.block_on(async {
        assert_eq!(env.redis_stock(product).await, 5, "nothing reserved");
        assert_eq!(env.store.counts(product).await.unwrap().buyers, 0);
    });
}
