//! A proof of work before joining a waiting room (issue 36): `428 challenge_required` with a
//! challenge, a join with its solution, each challenge taken once, refused when it is wrong,
//! another buyer's or product's, forged or expired, and a difficulty that follows the joins.

use crate::helpers::*;
use crate::waiting_room::{join, room};
use reqwest::StatusCode;
use seckill_shared::waiting_room::pow::{self, Challenge};
use seckill_shared::{now_ms, ProductId, UserId};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// A join with `solution` in `Seckill-Pow`.
async fn join_with(
    gw: &TestGateway,
    product: ProductId,
    user: u64,
    solution: &str,
) -> (StatusCode, Value) {
    join_with_all(gw, product, user, &[solution]).await
}

/// A join with one `Seckill-Pow` header for each of `solutions`.
async fn join_with_all(
    gw: &TestGateway,
    product: ProductId,
    user: u64,
    solutions: &[&str],
) -> (StatusCode, Value) {
    let mut req = gw
        .http
        .post(format!("{}/v1/seckill/{product}/queue", gw.base))
        .bearer_auth(token(user));
    for s in solutions {
        req = req.header(pow::HEADER, *s);
    }
    let res = req.send().await.unwrap();
    let status = res.status();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// The challenge a join without a solution answers: (token, bits).
async fn challenge(gw: &TestGateway, product: ProductId, user: u64) -> (String, u8) {
    let (status, body) = join(gw, product, user).await;
    assert_eq!(status, StatusCode::PRECONDITION_REQUIRED, "{body}");
    assert_eq!(body["error"], "challenge_required", "{body}");
    let c = &body["challenge"];
    assert_eq!(c["algorithm"], pow::ALGORITHM, "{body}");
    let expires = c["expires_at_ms"].as_i64().unwrap();
    assert!(
        (now_ms()..=now_ms() + pow::CHALLENGE_TTL_MS).contains(&expires),
        "short-lived: {body}"
    );
    let bits = c["bits"].as_u64().unwrap() as u8;
    (c["token"].as_str().unwrap().to_owned(), bits)
}

/// `waiting_room` of the admin view.
async fn room_view(gw: &TestGateway, product: ProductId) -> Value {
    let (status, body) = gw.admin_get(&format!("/admin/products/{product}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["waiting_room"].clone()
}

fn refused(status: StatusCode, body: &Value, why: &str) {
    assert_eq!(status, StatusCode::FORBIDDEN, "{why}: {body}");
    assert_eq!(body["error"], "challenge_invalid", "{why}: {body}");
}

/// Every way a solution is refused, and the one way it is taken, through two gateways: a
/// challenge of one is solved on the other.
#[tokio::test]
async fn a_join_needs_its_own_solved_challenge_once() {
    let env = TestEnv::new().await;
    let (a, b) = (env.gateway().await, env.gateway().await);
    let settings = json!({"admit_per_sec": 1, "pow": {"min_bits": 6, "max_bits": 10, "target_joins_per_sec": 1000}});
    let later = now_ms() + 60_000;
    let product = room(&a, 5, later, settings.clone()).await;
    let other = room(&a, 5, later, settings).await;
    let view = room_view(&a, product).await;
    assert_eq!(view["pow"]["min_bits"], 6, "{view}");
    assert_eq!(view["pow"]["max_bits"], 10, "{view}");
    assert_eq!(view["pow"]["target_joins_per_sec"], 1000.0, "{view}");

    // No solution: a challenge at the floor (few joins), and no place.
    let (token, bits) = challenge(&a, product, 1).await;
    assert_eq!(bits, 6, "few joins: min_bits");
    assert_eq!(room_view(&a, product).await["waiting"], 0);

    // A number that does not solve it.
    let wrong = (0u64..)
        .map(|n| format!("{token}:{n}"))
        .find(|v| !pow::meets(v, bits))
        .unwrap();
    let (status, body) = join_with(&b, product, 1, &wrong).await;
    refused(status, &body, "unsolved");
    assert!(
        body["message"].as_str().unwrap().contains("difficulty"),
        "{body}"
    );

    // Another buyer's solved challenge.
    let solved = pow::solve(&token, bits);
    let (status, body) = join_with(&b, product, 2, &solved).await;
    refused(status, &body, "another buyer's");
    // Another product's.
    let (status, body) = join_with(&b, other, 1, &solved).await;
    refused(status, &body, "another product's");
    // Refusals do not use it up: its buyer joins with it, on the other gateway.
    let (status, entry) = join_with(&b, product, 1, &solved).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{entry}");
    assert_eq!(entry["state"], "waiting", "{entry}");
    assert_eq!(room_view(&a, product).await["waiting"], 1);

    // Once: the same solution again is refused, on either gateway; a join without one
    // answers the buyer's entry (they are in, so no challenge).
    for gw in [&a, &b] {
        let (status, body) = join_with(gw, product, 1, &solved).await;
        refused(status, &body, "used before");
        assert!(body["message"].as_str().unwrap().contains("used"), "{body}");
    }
    let (status, again) = join(&a, product, 1).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{again}");
    assert_eq!(again["queue_id"], entry["queue_id"]);

    // Expired: a challenge signed with the gateways' key, past its deadline.
    let key = pow::key_from(ADMISSION_SECRET.as_bytes());
    let mut stale = Challenge {
        product,
        user: UserId::new(3).unwrap(),
        expires_at_ms: now_ms() - 1,
        bits: 6,
        nonce: [7; 16],
    };
    let (status, body) = join_with(&a, product, 3, &pow::solve(&stale.token(&key), 6)).await;
    refused(status, &body, "expired");
    assert!(
        body["message"].as_str().unwrap().contains("expired"),
        "{body}"
    );
    // Signed with another key (an easier challenge a client made up).
    stale.expires_at_ms = now_ms() + 30_000;
    stale.bits = 0;
    let forged = pow::solve(&stale.token(b"not the gateways' key"), 0);
    let (status, body) = join_with(&a, product, 3, &forged).await;
    refused(status, &body, "forged");
    // Malformed.
    for bad in ["", "v1", "x:1", &format!("{}:", stale.token(&key))] {
        let (status, body) = join_with(&a, product, 3, bad).await;
        refused(status, &body, bad);
    }
    // Sent twice: refused, whatever the two say.
    let solved_too = pow::solve(&stale.token(&key), 0);
    let twice = join_with_all(&a, product, 3, &["junk", &solved_too]).await;
    refused(twice.0, &twice.1, "two headers");
    // A solution matters only where a challenge would be asked for: a buyer already in gets
    // their entry, and a room without a proof of work takes the join.
    let (status, body) = join_with(&a, product, 1, "junk").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["queue_id"], entry["queue_id"]);
    let free = room(&a, 5, later, json!({"admit_per_sec": 1})).await;
    let (status, body) = join_with(&a, free, 3, "junk").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    // The same challenge signed right, in time: taken.
    let (status, body) = join_with(&a, product, 3, &pow::solve(&stale.token(&key), 0)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(room_view(&a, product).await["waiting"], 2);
}

/// A burst of joins raises the difficulty (one bit per doubling past the target), the admin
/// view shows it, and it falls back to the floor once the joins stop.
#[tokio::test]
async fn the_difficulty_rises_under_a_burst_and_falls_after() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = room(
        &gw,
        5,
        now_ms() + 60_000,
        json!({"admit_per_sec": 1, "pow": {"min_bits": 1, "max_bits": 8, "target_joins_per_sec": 5}}),
    )
    .await;
    let quiet = |bits: u8| bits == 1;
    // 64 buyers ask at once.
    let asks = futures::future::join_all((100..164).map(|u| challenge(&gw, product, u))).await;
    let bits: Vec<u8> = asks.iter().map(|(_, b)| *b).collect();
    let top = *bits.iter().max().unwrap();
    // 64 joins in well under a second, against a target of 5: log2(64 / 5) = 3.7, so 4 bits
    // above the floor for the last of them (fewer if the burst straddled a second).
    assert!(top >= 4, "the difficulty rose: {bits:?}");
    assert!(bits.iter().all(|b| (1..=8).contains(b)), "{bits:?}");
    let view = room_view(&gw, product).await;
    assert!(view["pow"]["bits_now"].as_u64().unwrap() >= 3, "{view}");
    assert!(
        view["pow"]["joins_per_sec"].as_f64().unwrap() > 20.0,
        "{view}"
    );
    // A hard challenge is solved and taken like any other.
    let (hardest, (token, b)) = asks
        .iter()
        .enumerate()
        .max_by_key(|(_, (_, b))| *b)
        .unwrap();
    let (status, body) = join_with_solved(&gw, product, 100 + hardest as u64, token, *b).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");

    // Quiet again: two seconds on, the last second holds no join, so the floor.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let view = room_view(&gw, product).await;
        if view["pow"]["joins_per_sec"] == 0.0 {
            assert!(
                quiet(view["pow"]["bits_now"].as_u64().unwrap() as u8),
                "{view}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the difficulty stayed up: {view}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, bits) = challenge(&gw, product, 200).await;
    assert!(quiet(bits), "after the burst: {bits}");
}

async fn join_with_solved(
    gw: &TestGateway,
    product: ProductId,
    user: u64,
    token: &str,
    bits: u8,
) -> (StatusCode, Value) {
    join_with(gw, product, user, &pow::solve(token, bits)).await
}
