//! A property test of the HTTP API: arbitrary methods, paths (product ids, tickets, admin
//! paths, junk), content types, tokens and bodies (random bytes, random JSON, near-valid JSON)
//! against a real gateway on real services. With every dependency up, nothing may answer 5xx;
//! every answer must match `openapi.json` (so every 4xx is JSON with an `error` code); and the
//! gateway must still be live and healthy afterwards.
//!
//! 300 cases by default; `PROPTEST_CASES` changes that, `PROPTEST_RNG_SEED` replays a run.

use crate::helpers::*;
use crate::openapi::spec::Spec;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use reqwest::{Method, StatusCode};
use seckill_shared::ProductId;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

#[derive(Debug, Clone)]
struct Fuzzed {
    method: Method,
    /// Raw path segments; the URL percent-encodes them.
    segments: Vec<String>,
    query: Option<String>,
    content_type: Option<String>,
    authorization: Option<String>,
    body: Option<Vec<u8>>,
}

fn method() -> impl Strategy<Value = Method> {
    prop_oneof![
        4 => Just(Method::POST),
        3 => Just(Method::GET),
        1 => Just(Method::PUT),
        1 => Just(Method::DELETE),
        1 => Just(Method::PATCH),
        1 => Just(Method::HEAD),
        1 => Just(Method::OPTIONS),
        1 => "[A-Z]{1,10}".prop_map(|m| Method::from_bytes(m.as_bytes()).unwrap()),
    ]
}

/// A path segment of any text; the URL encodes what it must.
fn junk_segment() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9._~!$&'()*+,;=:@%-]{0,20}",
        "\\PC{0,12}",
        Just(String::new()),
        Just("..".to_string()),
        Just("%00".to_string()),
    ]
}

fn id_segment(product: ProductId) -> impl Strategy<Value = String> {
    prop_oneof![
        3 => Just(product.to_string()),
        2 => (1u64..50).prop_map(|n| n.to_string()),
        1 => any::<u64>().prop_map(|n| n.to_string()),
        1 => "-?[0-9]{1,25}",
        1 => Just("0".to_string()),
        1 => Just(i64::MAX.to_string()),
        1 => Just((i64::MAX as u64 + 1).to_string()),
        1 => " ?[0-9]{1,3}(\\.[0-9])?[a-z ]?",
        1 => junk_segment(),
    ]
}

fn ticket_segment(product: ProductId) -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[0-9a-f]{32}".prop_map(move |hex| format!("{product}-{hex}")),
        1 => ("[0-9]{1,20}", "[0-9a-fA-F]{0,40}").prop_map(|(p, h)| format!("{p}-{h}")),
        1 => "[0-9a-f]{32}".prop_map(|hex| format!("0-{hex}")),
        1 => junk_segment(),
    ]
}

/// Path segments and the method the route takes.
fn route(product: ProductId) -> BoxedStrategy<(Vec<String>, Method)> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    prop_oneof![
        6 => id_segment(product)
            .prop_map(move |id| (vec!["v1".into(), "seckill".into(), id], Method::POST)),
        3 => ticket_segment(product)
            .prop_map(|t| (vec!["v1".into(), "orders".into(), t], Method::GET)),
        2 => id_segment(product).prop_map(|id| {
            (vec!["v1".into(), "seckill".into(), id, "order".into()], Method::GET)
        }),
        2 => Just((s(&["admin", "products"]), Method::POST)),
        2 => (id_segment(product), prop_oneof![
                Just(None), Just(Some("preload")), Just(Some("reconcile"))
            ])
            .prop_map(|(id, sub)| {
                let mut v = vec!["admin".to_string(), "products".into(), id];
                v.extend(sub.map(String::from));
                let m = if sub.is_some() { Method::POST } else { Method::GET };
                (v, m)
            }),
        2 => prop_oneof![
                Just("healthz"), Just("readyz"), Just("livez"), Just("metrics"),
                Just("openapi.json"),
            ]
            .prop_map(|p| (vec![p.to_string()], Method::GET)),
        // A known path with junk around it.
        2 => (
                prop_oneof![
                    Just(s(&["v1", "seckill"])),
                    Just(s(&["v1", "orders"])),
                    Just(s(&["admin", "products"])),
                    Just(s(&["v1"])),
                    Just(vec![]),
                ],
                prop::collection::vec(junk_segment(), 0..3),
                method(),
            )
            .prop_map(|(mut a, b, m)| {
                a.extend(b);
                (a, m)
            }),
        1 => (prop::collection::vec(junk_segment(), 0..5), method()),
    ]
    .boxed()
}

fn content_type() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        6 => Just(Some("application/json".to_string())),
        2 => Just(None),
        1 => Just(Some("application/json; charset=utf-8".to_string())),
        1 => Just(Some("text/plain".to_string())),
        1 => Just(Some("application/x-www-form-urlencoded".to_string())),
        1 => Just(Some("application/problem+json".to_string())),
        1 => Just(Some("multipart/form-data; boundary=x".to_string())),
        1 => "[ -~]{0,40}".prop_map(Some),
    ]
}

/// A buyer's valid token, or one with a character changed, inserted or deleted.
fn buyer_token() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (1u64..300).prop_map(token),
        1 => (1u64..300, any::<prop::sample::Index>(), b'!'..=b'~', 0..3u8).prop_map(
            |(user, at, byte, how)| {
                let mut t = token(user).into_bytes();
                let i = at.index(t.len());
                match how {
                    0 if t[i] == byte => t[i] = if byte == b'~' { b'!' } else { byte + 1 },
                    0 => t[i] = byte,
                    1 => t.insert(i, byte),
                    _ => {
                        t.remove(i);
                    }
                }
                String::from_utf8(t).expect("ASCII")
            }
        ),
    ]
}

fn authorization() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        3 => Just(None),
        3 => buyer_token().prop_map(|t| Some(format!("Bearer {t}"))),
        3 => Just(Some(format!("Bearer {ADMIN_TOKEN}"))),
        1 => Just(Some("Bearer wrong".to_string())),
        1 => Just(Some(format!("Bearer  {ADMIN_TOKEN} "))),
        1 => Just(Some("Basic dXNlcjpwYXNz".to_string())),
        1 => "[!-~]{0,30}".prop_map(Some),
    ]
}

fn json_value() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "\\PC{0,20}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map("[a-z_]{0,10}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
    .boxed()
}

/// Values for a field that wants a positive id.
fn id_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => (1u64..200).prop_map(Value::from),
        1 => Just(json!(0)),
        1 => Just(json!(-1)),
        1 => Just(json!(i64::MAX)),
        1 => Just(json!(u64::MAX)),
        1 => Just(json!(1.5)),
        1 => Just(json!("7")),
        1 => Just(Value::Null),
        1 => json_value(),
    ]
}

fn time_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!("2000-01-01T00:00:00Z")),
        Just(json!("2999-01-01T00:00:00+02:00")),
        Just(json!("yesterday")),
        Just(Value::Null),
        any::<i64>().prop_map(Value::from),
    ]
}

/// JSON a client would send, nearly: right and wrong types, extra fields, truncation.
fn near_valid() -> BoxedStrategy<Vec<u8>> {
    let buy =
        (id_value(), prop::option::of(("[a-z_]{1,8}", json_value()))).prop_map(|(id, extra)| {
            let mut m = serde_json::Map::new();
            m.insert("user_id".into(), id);
            if let Some((k, v)) = extra {
                m.insert(k, v);
            }
            Value::Object(m)
        });
    let product = (
        prop_oneof!["\\PC{0,30}", Just(String::new()), Just("x".repeat(201))],
        prop_oneof![
            (0i64..100).prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            json_value()
        ],
        prop::option::of(time_value()),
        prop::option::of(time_value()),
    )
        .prop_map(|(name, stock, starts, ends)| {
            let mut m = serde_json::Map::new();
            m.insert("name".into(), name.into());
            m.insert("stock".into(), stock);
            if let Some(s) = starts {
                m.insert("starts_at".into(), s);
            }
            if let Some(e) = ends {
                m.insert("ends_at".into(), e);
            }
            Value::Object(m)
        });
    (
        prop_oneof![buy, product],
        0usize..4,
        prop_oneof![Just(""), Just(" "), Just("\u{feff}"), Just("\n\t")],
    )
        .prop_map(|(v, cut, pad)| {
            let mut text = format!("{pad}{v}");
            // Sometimes cut the last characters off.
            for _ in 0..cut.saturating_sub(2) {
                text.pop();
            }
            text.into_bytes()
        })
        .boxed()
}

fn body() -> BoxedStrategy<Option<Vec<u8>>> {
    prop_oneof![
        5 => near_valid().prop_map(Some),
        2 => Just(None),
        2 => json_value().prop_map(|v| Some(v.to_string().into_bytes())),
        2 => prop::collection::vec(any::<u8>(), 0..300).prop_map(Some),
        1 => prop::collection::vec(any::<u8>(), 4000..4200).prop_map(Some),
        1 => Just(Some(b"[1]".to_vec())),
    ]
    .boxed()
}

/// Anything: mostly the route's own method, sometimes another.
fn fuzzed(product: ProductId) -> BoxedStrategy<Fuzzed> {
    (
        route(product),
        prop::option::weighted(0.25, method()),
        prop::option::of(prop_oneof![
            "[a-z_]{1,8}=[ -~]{0,10}",
            "user_id=-?[0-9]{1,4}",
            "user_id=[0-9]{1,3}&user_id=[0-9]{1,3}",
        ]),
        content_type(),
        authorization(),
        body(),
    )
        .prop_map(
            |((segments, own), other, query, content_type, authorization, body)| Fuzzed {
                method: other.unwrap_or(own),
                segments,
                query,
                content_type,
                authorization,
                body,
            },
        )
        .boxed()
}

/// A request a client could really send, so that the handlers past the extractors run too.
fn well_formed(product: ProductId) -> BoxedStrategy<Fuzzed> {
    let json = |v: Value| Some(v.to_string().into_bytes());
    let seg = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let admin_token = Some(format!("Bearer {ADMIN_TOKEN}"));
    let buyer = |user: u64| Some(format!("Bearer {}", token(user)));
    let buy = (
        prop_oneof![3 => Just(product.get()), 1 => 1u64..20],
        1u64..300,
        prop::bool::weighted(0.8),
    )
        .prop_map(move |(p, user, named)| Fuzzed {
            method: Method::POST,
            segments: seg(&["v1", "seckill", &p.to_string()]),
            query: None,
            content_type: Some("application/json".into()),
            authorization: buyer(user),
            body: json(if named {
                json!({ "user_id": user })
            } else {
                json!({})
            }),
        });
    let order = ("[0-9a-f]{32}", 1u64..300).prop_map(move |(hex, user)| Fuzzed {
        method: Method::GET,
        segments: seg(&["v1", "orders", &format!("{product}-{hex}")]),
        query: None,
        content_type: None,
        authorization: buyer(user),
        body: None,
    });
    let my_order = (1u64..300).prop_map(move |user| Fuzzed {
        method: Method::GET,
        segments: seg(&["v1", "seckill", &product.to_string(), "order"]),
        query: None,
        content_type: None,
        authorization: buyer(user),
        body: None,
    });
    let create = {
        let auth = admin_token.clone();
        (
            "[a-zA-Z0-9 ]{0,20}[a-z]",
            0i64..100,
            prop::option::of(prop_oneof![
                Just("2000-01-01T00:00:00Z"),
                Just("2999-01-01T00:00:00+02:00")
            ]),
        )
            .prop_map(move |(name, stock, starts_at)| Fuzzed {
                method: Method::POST,
                segments: seg(&["admin", "products"]),
                query: None,
                content_type: Some("application/json".into()),
                authorization: auth.clone(),
                body: json(json!({"name": name, "stock": stock, "starts_at": starts_at})),
            })
    };
    let admin = (
        1u64..6,
        prop_oneof![Just(""), Just("preload"), Just("reconcile")],
    )
        .prop_map(move |(id, sub)| {
            let mut segments = seg(&["admin", "products", &id.to_string()]);
            if !sub.is_empty() {
                segments.push(sub.to_string());
            }
            Fuzzed {
                method: if sub.is_empty() {
                    Method::GET
                } else {
                    Method::POST
                },
                segments,
                query: None,
                content_type: None,
                authorization: admin_token.clone(),
                body: None,
            }
        });
    prop_oneof![4 => buy, 2 => order, 1 => my_order, 2 => create, 1 => admin].boxed()
}

fn request(product: ProductId) -> BoxedStrategy<Fuzzed> {
    prop_oneof![1 => well_formed(product), 2 => fuzzed(product)].boxed()
}

/// Sends one request; returns the path as sent, the status and the checked key.
async fn send(
    gw: &TestGateway,
    spec: &Spec,
    seen: &Mutex<BTreeMap<u16, u32>>,
    f: &Fuzzed,
) -> Result<(), TestCaseError> {
    let mut url = reqwest::Url::parse(&gw.base).unwrap();
    url.path_segments_mut()
        .unwrap()
        .clear()
        .extend(f.segments.iter());
    url.set_query(f.query.as_deref());
    let mut req = gw.http.request(f.method.clone(), url.clone());
    if let Some(c) = &f.content_type {
        req = req.header("content-type", c.as_str());
    }
    if let Some(a) = &f.authorization {
        req = req.header("authorization", a.as_str());
    }
    if let Some(b) = &f.body {
        req = req.body(b.clone());
    }
    let res = req
        .send()
        .await
        .map_err(|e| TestCaseError::fail(format!("{url}: no answer: {e:#}")))?;
    let status = res.status();
    *seen.lock().unwrap().entry(status.as_u16()).or_default() += 1;
    let headers = res.headers().clone();
    let bytes = res
        .bytes()
        .await
        .map_err(|e| TestCaseError::fail(format!("{url}: reading the body: {e:#}")))?;
    let what = format!(
        "{} {url} → {status}: {}",
        f.method,
        String::from_utf8_lossy(&bytes)
    );
    prop_assert!(!status.is_server_error(), "{}", what);
    if status.is_client_error() && f.method != Method::HEAD {
        let json: Value = serde_json::from_slice(&bytes)
            .map_err(|_| TestCaseError::fail(format!("{what}: not JSON")))?;
        prop_assert!(json["error"].is_string(), "{}", what);
    }
    spec.check(
        f.method.as_str(),
        url.path(),
        status.as_u16(),
        &headers,
        &bytes,
    )
    .map_err(TestCaseError::fail)?;
    Ok(())
}

#[test]
fn fuzzed_requests_get_no_5xx_and_answers_that_match_the_document() {
    // proptest's strategies and shrinking are deep: give them room in debug builds.
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(fuzz)
        .unwrap()
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e));
}

/// The fuzzed product's units.
const STOCK: i64 = 5;

fn fuzz() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (env, gw, product) = rt.block_on(async {
        let env = TestEnv::new().await;
        let gw = env.gateway().await;
        gw.wait_for_zookeeper().await;
        // Few units: the accepted buys (some 16 in 300 cases) sell it out, so 409s come too.
        let product = env.product(&gw, STOCK).await;
        (env, gw, product)
    });
    let spec = rt.block_on(Spec::fetch(&gw));
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        max_shrink_time: 30_000,
        ..Config::default()
    });
    let started = std::time::Instant::now();
    let seen = Mutex::new(BTreeMap::new());
    let result = runner.run(&request(product), |f| {
        rt.block_on(send(&gw, &spec, &seen, &f))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let seen = seen.into_inner().unwrap();
    eprintln!(
        "{cases} fuzzed requests in {:?}; statuses: {seen:?}",
        started.elapsed()
    );
    // The generator reaches the handlers, not only the router.
    if cases >= 300 {
        for status in [200, 201, 202, 400, 401, 404, 405, 409, 415] {
            assert!(seen.contains_key(&status), "no {status} in {seen:?}");
        }
    }

    rt.block_on(async {
        let (status, body) = gw.get_json("/livez").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (status, body) = gw.get_json("/healthz").await;
        assert_eq!(status, StatusCode::OK, "still healthy: {body}");
        // The gateway still sells.
        let (status, body) = gw.buy(product, 1_000_000).await;
        assert!(
            [StatusCode::ACCEPTED, StatusCode::CONFLICT].contains(&status),
            "{status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    });

    // The fuzz sent preloads and reconciles mid-sale. Once a worker has settled every order,
    // the stores agree with each other and with the units the product started with.
    rt.block_on(async {
        let _worker = env.worker().await;
        let counts = eventually("every order to settle", Duration::from_secs(60), || async {
            let c = env.store.counts(product).await.unwrap();
            (c.pending == 0).then_some(c)
        })
        .await;
        let rows = env.order_rows(product).await.len() as i64;
        let mysql_stock = env.mysql_stock(product).await;
        assert_eq!(
            counts.confirmed, rows,
            "Redis confirmed = MySQL rows: {counts:?}"
        );
        assert_eq!(
            counts.stock,
            Some(mysql_stock),
            "Redis stock = MySQL stock: {counts:?}"
        );
        assert_eq!(mysql_stock + rows, STOCK, "no unit made or lost");
    });
}
