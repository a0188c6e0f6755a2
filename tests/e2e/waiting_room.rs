//! The waiting room (issue 13): a fair random order among early joiners, first come first
//! served after the start, admission at a rate and within the cap across gateways, admission
//! tokens on the buy path, and units that come back.

use crate::helpers::*;
use futures::StreamExt;
use reqwest::StatusCode;
use seckill_shared::{now_ms, ProductId};
use serde_json::{json, Value};
use std::time::Duration;

pub(crate) fn rfc3339(ms: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms)
        .unwrap()
        .to_rfc3339()
}

/// A product with a waiting room, loaded for sale, whose sale starts at `starts_at_ms`.
pub(crate) async fn room(
    gw: &TestGateway,
    stock: i64,
    starts_at_ms: i64,
    room: Value,
) -> ProductId {
    room_with(
        gw,
        json!({"stock": stock, "starts_at": rfc3339(starts_at_ms), "waiting_room": room}),
    )
    .await
}

pub(crate) async fn room_with(gw: &TestGateway, mut body: Value) -> ProductId {
    body["name"] = json!("queued item");
    let (status, created) = gw.admin_post("/admin/products", body).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = ProductId::new(created["id"].as_u64().unwrap()).unwrap();
    let (status, body) = gw
        .admin_post(&format!("/admin/products/{id}/preload"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    id
}

pub(crate) async fn join(gw: &TestGateway, product: ProductId, user: u64) -> (StatusCode, Value) {
    let res = gw
        .http
        .post(format!("{}/v1/seckill/{product}/queue", gw.base))
        .bearer_auth(token(user))
        .send()
        .await
        .unwrap();
    let status = res.status();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn poll(
    gw: &TestGateway,
    product: ProductId,
    user: u64,
    queue_id: &str,
) -> (StatusCode, Value) {
    gw.get_as(
        &format!("/v1/seckill/{product}/queue/{queue_id}"),
        Some(user),
    )
    .await
}

/// `user` buys with `admission` in the `Seckill-Admission` header (or none).
pub(crate) async fn buy_with(
    gw: &TestGateway,
    product: ProductId,
    user: u64,
    admission: Option<&str>,
) -> (StatusCode, Value) {
    let mut req = gw
        .http
        .post(format!("{}/v1/seckill/{product}", gw.base))
        .bearer_auth(token(user))
        .json(&json!({}));
    if let Some(a) = admission {
        req = req.header("Seckill-Admission", a);
    }
    let res = req.send().await.unwrap();
    let status = res.status();
    let body: Value = res.json().await.unwrap_or(Value::Null);
    if let Some(t) = body["ticket"].as_str() {
        gw.owns(t, user);
    }
    (status, body)
}

/// Spearman's rank correlation of two rankings of the same items (no ties).
fn spearman(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len() as f64;
    let d2: f64 = a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum();
    1.0 - 6.0 * d2 / (n * (n * n - 1.0))
}

#[tokio::test]
async fn early_joiners_get_a_random_order_and_later_ones_queue_behind_in_arrival_order() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    const EARLY: u64 = 2000;
    let starts = now_ms() + 20_000;
    // One admission a minute: nobody moves while the test reads the places.
    let product = room(&gw, 10, starts, json!({"admit_per_sec": 0.001})).await;

    // 2,000 buyers join before the start, user 1 first, user 2,000 last.
    let ids: Vec<(u64, String)> = futures::stream::iter(1..=EARLY)
        .map(|user| {
            let gw = &gw;
            async move {
                let (status, body) = join(gw, product, user).await;
                assert_eq!(status, StatusCode::ACCEPTED, "{body}");
                assert_eq!(body["state"], "waiting", "{body}");
                assert!(
                    body["position"].is_null(),
                    "no place is shown before the start: {body}"
                );
                (user, body["queue_id"].as_str().unwrap().to_owned())
            }
        })
        .buffered(16)
        .collect()
        .await;
    assert!(
        now_ms() < starts,
        "the joins took longer than the time to the start"
    );
    // Joining again answers the same entry.
    let (_, again) = join(&gw, product, 1).await;
    assert_eq!(again["queue_id"], ids[0].1.as_str());

    tokio::time::sleep(Duration::from_millis(
        (starts - now_ms()).max(0) as u64 + 50,
    ))
    .await;
    // After the start, 20 more join one by one: they queue behind, in arrival order.
    let mut late = vec![];
    for user in EARLY + 1..=EARLY + 20 {
        let (status, body) = join(&gw, product, user).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        late.push((user, body["queue_id"].as_str().unwrap().to_owned()));
    }
    let positions: Vec<u64> = futures::stream::iter(ids.iter().chain(&late))
        .map(|(user, id)| {
            let gw = &gw;
            async move {
                let (status, body) = poll(gw, product, *user, id).await;
                assert_eq!(status, StatusCode::OK, "{body}");
                assert_eq!(body["state"], "waiting", "{body}");
                body["position"].as_u64().unwrap()
            }
        })
        .buffered(16)
        .collect()
        .await;
    let (early_pos, late_pos) = positions.split_at(EARLY as usize);
    // Early joiners hold places 1..=2000, each once; the late ones follow, in order.
    let mut sorted = early_pos.to_vec();
    sorted.sort_unstable();
    assert_eq!(sorted, (1..=EARLY).collect::<Vec<_>>());
    assert_eq!(late_pos, (EARLY + 1..=EARLY + 20).collect::<Vec<_>>());
    let joined: Vec<f64> = (1..=EARLY).map(|x| x as f64).collect();
    let placed: Vec<f64> = early_pos.iter().map(|&p| p as f64).collect();
    let rho = spearman(&joined, &placed);
    println!("Spearman's rho between join order and place: {rho:.4}");
    assert!(rho.abs() < 0.1, "rho = {rho}");
}

#[tokio::test]
async fn buys_need_a_valid_admission_and_nothing_is_reserved_without_one() {
    let env = TestEnv::new().await;
    let gw = env
        .gateway_with(|s| s.waiting_room.admission_ttl_secs = 1)
        .await;
    let product = room(
        &gw,
        5,
        now_ms() - 1000,
        json!({"admit_per_sec": 100, "max_admitted_factor": 1}),
    )
    .await;
    let (_, a) = join(&gw, product, 1).await;
    let a = eventually("user 1 admitted", Duration::from_secs(10), || async {
        let (_, body) = poll(&gw, product, 1, a["queue_id"].as_str().unwrap()).await;
        (body["state"] == "admitted").then_some(body)
    })
    .await;
    let token_a = a["admission_token"].as_str().unwrap().to_owned();
    // The last signature digit changed (to another digit: the same one would be no forgery).
    let last = if token_a.ends_with('0') { '1' } else { '0' };
    let forged = format!("{}{last}", &token_a[..token_a.len() - 1]);
    assert_ne!(forged, token_a);
    for (user, admission, code) in [
        (1, None, "admission_required"),
        (1, Some("garbage"), "admission_invalid"),
        (1, Some(forged.as_str()), "admission_invalid"),
        (2, Some(token_a.as_str()), "admission_invalid"), // another buyer's
    ] {
        let (status, body) = buy_with(&gw, product, user, admission).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (StatusCode::FORBIDDEN, Some(code)),
            "{user} {admission:?}: {body}"
        );
    }
    // Another product's token.
    let other = room(&gw, 5, now_ms() - 1000, json!({})).await;
    let (status, body) = buy_with(&gw, other, 1, Some(&token_a)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("admission_invalid")),
        "{body}"
    );
    assert_eq!(env.redis_stock(product).await, 5, "nothing reserved");
    // The admission lapses after 1 s: the token is refused and the place given up.
    tokio::time::sleep(Duration::from_millis(
        (a["admitted_until_ms"].as_i64().unwrap() - now_ms()).max(0) as u64 + 20,
    ))
    .await;
    let (status, body) = buy_with(&gw, product, 1, Some(&token_a)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("admission_invalid")),
        "{body}"
    );
    let (_, body) = poll(&gw, product, 1, a["queue_id"].as_str().unwrap()).await;
    assert_eq!(body["state"], "expired", "{body}");
    // User 2 joins, is admitted, and buys with their own token.
    let (_, b) = join(&gw, product, 2).await;
    let b = eventually("user 2 admitted", Duration::from_secs(10), || async {
        let (_, body) = poll(&gw, product, 2, b["queue_id"].as_str().unwrap()).await;
        (body["state"] == "admitted").then_some(body)
    })
    .await;
    let (status, body) = buy_with(&gw, product, 2, b["admission_token"].as_str()).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(env.redis_stock(product).await, 4);
    let (_, body) = poll(&gw, product, 2, b["queue_id"].as_str().unwrap()).await;
    assert_eq!(body["state"], "bought", "{body}");
    // The gateway counted the two answers that handed out a token as `admitted`, and only them.
    assert_eq!(
        gw.metric("seckill_gateway_requests_total{outcome=\"admitted\",route=\"queue_poll\"}")
            .await,
        2.0
    );
    // Someone else's entry is not theirs to see; a product without a room has no queue.
    let (status, _) = poll(&gw, product, 3, b["queue_id"].as_str().unwrap()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let plain = env.product(&gw, 1).await;
    let (status, body) = join(&gw, plain, 1).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::NOT_FOUND, Some("no_waiting_room")),
        "{body}"
    );
}

#[tokio::test]
async fn joining_before_the_room_opens_is_refused() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let opens = now_ms() + 60_000;
    let product = room(&gw, 1, opens + 60_000, json!({"opens_at": rfc3339(opens)})).await;
    let (status, body) = join(&gw, product, 1).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("queue_not_open")),
        "{body}"
    );
}

#[tokio::test]
async fn two_gateways_admit_within_the_cap_and_every_waiting_buyer_sees_sold_out() {
    let env = TestEnv::new().await;
    let gws = [env.gateway().await, env.gateway().await];
    let _worker = env.worker().await;
    const STOCK: i64 = 20;
    const BUYERS: u64 = 80;
    let starts = now_ms() + 3000;
    let product = room(
        &gws[0],
        STOCK,
        starts,
        json!({"admit_per_sec": 40, "max_admitted_factor": 1.5}),
    )
    .await;
    let mut entries = vec![];
    for user in 1..=BUYERS {
        let (status, body) = join(&gws[(user % 2) as usize], product, user).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        entries.push((user, body["queue_id"].as_str().unwrap().to_owned()));
    }
    // Sample the cap from Redis while the buyers poll and buy through both gateways.
    let sampler = {
        let store = env.store.clone();
        tokio::spawn(async move {
            let mut worst = (0u64, 0i64);
            let mut samples = 0;
            loop {
                let (admitted, stock) = store.admitted_and_stock(product).await.unwrap();
                let cap = (1.5 * stock.max(0) as f64).ceil() as u64;
                assert!(
                    admitted <= cap,
                    "{admitted} admitted with {stock} units left"
                );
                worst = worst.max((admitted, stock));
                samples += 1;
                if stock == 0 && admitted == 0 && samples > 10 {
                    return samples;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    // Each buyer polls (alternating gateways) until admitted, buys, or sees sold out.
    let outcomes: Vec<(&str, std::time::Instant)> = futures::stream::iter(entries.clone())
        .map(|(user, id)| {
            let gws = &gws;
            async move {
                let mut i = user as usize;
                loop {
                    i += 1;
                    let gw = &gws[i % 2];
                    let (status, body) = poll(gw, product, user, &id).await;
                    if status == StatusCode::TOO_MANY_REQUESTS {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        continue;
                    }
                    assert_eq!(status, StatusCode::OK, "{body}");
                    match body["state"].as_str().unwrap() {
                        "admitted" => {
                            let (status, b) =
                                buy_with(gw, product, user, body["admission_token"].as_str()).await;
                            match status {
                                StatusCode::ACCEPTED => {
                                    return ("bought", std::time::Instant::now())
                                }
                                // Taken back to the head of the line to keep the cap, or sold out.
                                StatusCode::FORBIDDEN | StatusCode::CONFLICT => continue,
                                _ => panic!("{status} {b}"),
                            }
                        }
                        "sold_out" => return ("sold_out", std::time::Instant::now()),
                        "waiting" => {
                            tokio::time::sleep(Duration::from_millis(
                                body["refresh_after_ms"].as_u64().unwrap().min(300),
                            ))
                            .await
                        }
                        other => panic!("unexpected state {other}: {body}"),
                    }
                }
            }
        })
        .buffer_unordered(BUYERS as usize)
        .collect()
        .await;
    let when = |kind: &str| -> Vec<std::time::Instant> {
        outcomes
            .iter()
            .filter(|o| o.0 == kind)
            .map(|o| o.1)
            .collect()
    };
    let (bought, sold_out) = (when("bought"), when("sold_out"));
    assert_eq!(bought.len(), STOCK as usize, "{outcomes:?}");
    assert_eq!(sold_out.len(), (BUYERS as usize) - bought.len());
    // Every waiting buyer saw `sold_out` within a poll interval (here at most 300 ms) of the
    // last sale, once its order settled (a worker confirms it in tens of milliseconds).
    let last_sold = bought.iter().max().unwrap();
    let last_told = sold_out.iter().max().unwrap();
    let lag = last_told.saturating_duration_since(*last_sold);
    assert!(
        lag < Duration::from_millis(1500),
        "the last waiting buyer learnt it {lag:?} after the last sale"
    );
    let samples = sampler.await.unwrap();
    assert!(samples > 10);
    assert_eq!(env.redis_stock(product).await, 0);
    // The admin view reads a room's decimal settings (factor 1.5) among the counters.
    let (status, view) = gws[1]
        .admin_get(&format!("/admin/products/{product}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view["waiting_room"]["max_admitted_factor"], 1.5, "{view}");
    assert_eq!(view["waiting_room"]["admitted"], 0, "{view}");
}

#[tokio::test]
async fn a_unit_that_comes_back_admits_exactly_the_next_place() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let _worker = env.worker().await;
    // One unit, a 2 s payment window, one admission per unit.
    let product = room_with(
        &gw,
        json!({"stock": 1, "price": 100, "payment_window_secs": 2, "starts_at": rfc3339(now_ms() - 1000),
               "waiting_room": {"admit_per_sec": 100, "max_admitted_factor": 1}}),
    )
    .await;
    let mut ids = vec![];
    for user in 1..=3 {
        let (_, body) = join(&gw, product, user).await;
        ids.push(body["queue_id"].as_str().unwrap().to_owned());
    }
    let first = eventually(
        "the first place admitted",
        Duration::from_secs(10),
        || async {
            let (_, body) = poll(&gw, product, 1, &ids[0]).await;
            (body["state"] == "admitted").then_some(body)
        },
    )
    .await;
    let (_, second) = poll(&gw, product, 2, &ids[1]).await;
    assert_eq!(
        (second["state"].as_str(), second["position"].as_u64()),
        (Some("waiting"), Some(1)),
        "{second}"
    );
    let (status, order) = buy_with(&gw, product, 1, first["admission_token"].as_str()).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{order}");
    let order = gw
        .settled(order["ticket"].as_str().unwrap(), Duration::from_secs(30))
        .await;
    assert_eq!(order["status"], "confirmed");
    // Sold out, nothing in flight: the line sees it.
    for (user, id) in [(2, &ids[1]), (3, &ids[2])] {
        let (_, body) = poll(&gw, product, user, id).await;
        assert_eq!(body["state"], "sold_out", "{body}");
    }
    // User 1 does not pay: the unit comes back, and the next place (user 2) is admitted.
    let second = eventually(
        "the next place admitted",
        Duration::from_secs(20),
        || async {
            let (_, body) = poll(&gw, product, 2, &ids[1]).await;
            (body["state"] == "admitted").then_some(body)
        },
    )
    .await;
    let (_, third) = poll(&gw, product, 3, &ids[2]).await;
    assert_eq!(third["state"], "waiting", "only the next place: {third}");
    let (status, body) = buy_with(&gw, product, 2, second["admission_token"].as_str()).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
}

/// A waiting-room buyer whose buy Kafka refused (`503`, the unit given back) keeps the
/// admission: the buy did not happen. It used to be marked `bought`, and could never buy.
/// Buying still ends an admission once: a buy that went through is never given back.
#[tokio::test]
async fn an_admission_survives_a_buy_that_kafka_refused() {
    let env = TestEnv::new().await;
    let down = env
        .gateway_with(|s| {
            s.kafka.brokers = "127.0.0.1:1".into(); // nothing listens there
            s.kafka.delivery_timeout_ms = 1000;
        })
        .await;
    let product = room(
        &down,
        5,
        now_ms() - 1000,
        json!({"admit_per_sec": 100, "max_admitted_factor": 1}),
    )
    .await;
    let (_, joined) = join(&down, product, 1).await;
    let queue_id = joined["queue_id"].as_str().unwrap().to_owned();
    let admitted = eventually("user 1 admitted", Duration::from_secs(10), || async {
        let (_, body) = poll(&down, product, 1, &queue_id).await;
        (body["state"] == "admitted").then_some(body)
    })
    .await;
    let admission = admitted["admission_token"].as_str().unwrap().to_owned();
    let (status, body) = buy_with(&down, product, 1, Some(&admission)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(env.redis_stock(product).await, 5, "the unit is back");
    let (_, body) = poll(&down, product, 1, &queue_id).await;
    assert_eq!(body["state"], "admitted", "{body}");

    // Kafka is back (another gateway, the same secrets): the same admission buys.
    let gw = env.gateway().await;
    let (status, body) = buy_with(&gw, product, 1, Some(&admission)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let (_, polled) = poll(&gw, product, 1, &queue_id).await;
    assert_eq!(polled["state"], "bought", "{polled}");
    // Once: buying again answers the same ticket, and takes nothing more.
    let (status, again) = buy_with(&gw, product, 1, Some(&admission)).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["ticket"], body["ticket"]);
    assert_eq!(env.redis_stock(product).await, 4);
}

/// Joins per client address are counted for the whole fleet: with two a minute, three
/// buyers behind one address joining through two gateways get two places, and the third is
/// told to wait (`429` with `Retry-After`), whichever gateway it asks.
#[tokio::test]
async fn joins_per_address_are_limited_across_gateways() {
    let env = TestEnv::new().await;
    let limited = |s: &mut seckill_shared::Settings| {
        s.waiting_room.queue_joins_per_address_per_min = 2;
    };
    let (a, b) = (
        env.gateway_with(limited).await,
        env.gateway_with(limited).await,
    );
    let product = room(&a, 5, now_ms() + 60_000, json!({"admit_per_sec": 1})).await;
    let (status, body) = join(&a, product, 81).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let (status, body) = join(&b, product, 82).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    for gw in [&a, &b] {
        let res = gw
            .http
            .post(format!("{}/v1/seckill/{product}/queue", gw.base))
            .bearer_auth(token(83))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        let wait: u64 = res.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=60).contains(&wait), "{wait}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"], "rate_limited", "{body}");
    }
}
