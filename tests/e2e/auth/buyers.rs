//! Good tokens of every kind buy; a body or query naming another user is refused; a ticket
//! answers its owner only; `GET /v1/seckill/{p}/order` finds the caller's ticket; a rotated
//! JWKS file is picked up without a restart.

use crate::auth::calls::{
    assert_unauthenticated, bearer, buy_as, call, gateway, my_order, poll_as,
};
use crate::auth::tokens::{claims, good, hs256, now, with, JwksFile, AUDIENCE, ISSUER};
use crate::helpers::*;
use reqwest::StatusCode;
use seckill_shared::Ticket;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn good_tokens_of_every_kind_buy() {
    let env = TestEnv::new().await;
    let jwks = JwksFile::copy_of("jwks.json");
    let gw = gateway(&env, &jwks, true).await;
    let product = env.product(&gw, 20).await;

    let hs = |user: u64| hs256(JWT_SECRET.as_bytes(), None, &claims(user));
    let cases: Vec<(&str, u64, String)> = vec![
        ("HS256", 1, hs(1)),
        (
            "HS256 from `gateway token`'s minter",
            2,
            seckill_gateway::auth::mint_hs256(
                JWT_SECRET,
                seckill_shared::UserId::new(2).unwrap(),
                60,
                Some(ISSUER),
                Some(AUDIENCE),
            )
            .unwrap(),
        ),
        ("EdDSA, ed-1", 3, good("ed-1", &claims(3))),
        ("ES256, es-1", 4, good("es-1", &claims(4))),
        ("RS256, rs-1", 5, good("rs-1", &claims(5))),
        (
            "an aud list that has ours (RFC 7519 §4.1.3)",
            6,
            good(
                "ed-1",
                &with(claims(6), json!({"aud": ["another", AUDIENCE]})),
            ),
        ),
        (
            "expired 10 s ago, within the 30 s leeway",
            7,
            good("es-1", &with(claims(7), json!({"exp": now() - 10}))),
        ),
        (
            "nbf 10 s ahead, within the leeway",
            8,
            good("rs-1", &with(claims(8), json!({"nbf": now() + 10}))),
        ),
        (
            "a claim the gateway does not know",
            9,
            hs256(
                JWT_SECRET.as_bytes(),
                None,
                &with(claims(9), json!({"scope": "buy", "jti": "x"})),
            ),
        ),
    ];
    for (what, user, token) in &cases {
        let a = buy_as(&gw, product, token, json!({})).await;
        assert_eq!(a.status, StatusCode::ACCEPTED, "{what}: {}", a.body);
        assert_eq!(a.body["user_id"], *user, "{what}: {}", a.body);
        let ticket = a.body["ticket"].as_str().unwrap();
        // The same token reads the ticket, and finds it as the buyer's.
        let polled = poll_as(&gw, ticket, token).await;
        assert_eq!(polled.status, StatusCode::OK, "{what}: {}", polled.body);
        assert_eq!(polled.body["ticket"], ticket, "{what}");
        let mine = my_order(&gw, product, token).await;
        assert_eq!(mine.status, StatusCode::OK, "{what}: {}", mine.body);
        assert_eq!(mine.body["ticket"], ticket, "{what}");
    }
    assert_eq!(env.redis_stock(product).await, 20 - cases.len() as i64);
}

#[tokio::test]
async fn a_user_id_that_is_not_the_tokens_is_refused() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 5).await;
    let path = format!("/v1/seckill/{product}");

    let a = buy_as(&gw, product, &token(7), json!({"user_id": 8})).await;
    assert_eq!(
        (a.status, a.body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("user_mismatch")),
        "{}",
        a.body
    );
    // The same for the look-up of one's order.
    let a = call(
        &gw,
        &format!("{path}/order?user_id=8"),
        Some(&bearer(&token(7))),
        None,
    )
    .await;
    assert_eq!(
        (a.status, a.body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("user_mismatch")),
        "{}",
        a.body
    );
    // Nothing was reserved, for either user.
    assert_eq!(env.redis_stock(product).await, 5);
    for user in [7, 8] {
        let a = my_order(&gw, product, &token(user)).await;
        assert_eq!(
            (a.status, a.body["error"].as_str()),
            (StatusCode::NOT_FOUND, Some("no_order")),
            "user {user}: {}",
            a.body
        );
    }

    // The token's own user: bought.
    let a = buy_as(&gw, product, &token(7), json!({"user_id": 7})).await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.body);
    assert_eq!(a.body["user_id"], 7);
    assert_eq!(env.redis_stock(product).await, 4);
    let mine = call(
        &gw,
        &format!("{path}/order?user_id=7"),
        Some(&bearer(&token(7))),
        None,
    )
    .await;
    assert_eq!(mine.status, StatusCode::OK, "{}", mine.body);
    assert_eq!(mine.body["ticket"], a.body["ticket"]);
}

#[tokio::test]
async fn a_ticket_answers_its_owner_only() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let _worker = env.worker().await;
    let product = env.product(&gw, 5).await;
    let (alice, bob) = (1, 2);
    let (status, body) = gw.buy(product, alice).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let ticket = ticket_of(&body);
    let path = format!("/v1/orders/{ticket}");
    let nowhere = format!("/v1/orders/{}", Ticket::generate(product));

    // From Redis, then from MySQL once the Redis copy is gone.
    for copy in ["Redis", "MySQL"] {
        let (status, body) = gw.get_as(&path, Some(alice)).await;
        assert_eq!(status, StatusCode::OK, "{copy}: {body}");
        assert_eq!(body["ticket"], ticket.as_str(), "{copy}");
        assert_eq!(body["user_id"], alice, "{copy}");
        let theirs = gw.get_as(&path, Some(bob)).await;
        let none = gw.get_as(&nowhere, Some(bob)).await;
        assert_eq!(theirs.0, StatusCode::NOT_FOUND, "{copy}: {}", theirs.1);
        assert_eq!(theirs.1["error"], "unknown_ticket", "{copy}");
        assert_eq!(
            theirs, none,
            "{copy}: another's ticket looks like no ticket at all"
        );
        if copy == "Redis" {
            let settled = gw.settled(ticket.as_str(), Duration::from_secs(30)).await;
            assert_eq!(settled["status"], "confirmed", "{settled}");
            let mut conn = env.store.connection();
            let _: () = redis::cmd("DEL")
                .arg(env.store.keys(product).ticket(&ticket))
                .query_async(&mut conn)
                .await
                .unwrap();
        }
    }
    let (status, body) = gw
        .get_as(&format!("/v1/seckill/{product}/order"), Some(bob))
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::NOT_FOUND, Some("no_order")),
        "{body}"
    );
}

/// A buyer whose `202` was lost asks for their ticket: found whatever the local sold-out marker
/// says, then from MySQL once Redis has forgotten it; a failed ticket too. Someone who never
/// bought has none.
#[tokio::test]
async fn my_order_finds_the_callers_ticket_whatever_the_marker_says() {
    let env = TestEnv::new().await;
    let gw = env
        .gateway_with(|s| s.gateway.sold_out_ttl_ms = 60_000)
        .await;
    gw.wait_for_zookeeper().await;
    let product = env.product(&gw, 1).await;
    let my = |user: u64| {
        let gw = &gw;
        async move {
            gw.get_as(&format!("/v1/seckill/{product}/order"), Some(user))
                .await
        }
    };

    let (status, first) = gw.buy(product, 1).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{first}");
    assert_eq!(gw.buy(product, 2).await.0, StatusCode::CONFLICT);
    assert_eq!(gw.metric("seckill_gateway_sold_out_markers").await, 1.0);
    // While the marker is set, a buy, even the buyer's own again, is answered 409 from it.
    let (status, again) = gw.buy(product, 1).await;
    assert_eq!(status, StatusCode::CONFLICT, "{again}");
    assert!(
        gw.metric("seckill_gateway_sold_out_marker_hits_total")
            .await
            >= 1.0
    );
    // The marker answers before the token is looked at: a sold-out flood costs no
    // verification, and a 409 reserves nothing.
    let res = gw
        .http
        .post(format!("{}/v1/seckill/{product}", gw.base))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CONFLICT);

    let (status, mine) = my(1).await;
    assert_eq!(status, StatusCode::OK, "{mine}");
    assert_eq!(mine["ticket"], first["ticket"], "{mine}");
    assert_eq!(mine["user_id"], 1);
    for user in [2, 3] {
        let (status, body) = my(user).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (StatusCode::NOT_FOUND, Some("no_order")),
            "user {user}: {body}"
        );
    }

    // Settled, then forgotten by Redis: MySQL has the order.
    let _worker = env.worker_with(|s| s.chaos.fail_users = "4".into()).await;
    let ticket = ticket_of(&first);
    let settled = gw.settled(ticket.as_str(), Duration::from_secs(30)).await;
    assert_eq!(settled["status"], "confirmed", "{settled}");
    let keys = env.store.keys(product);
    let mut conn = env.store.connection();
    let _: () = redis::cmd("DEL")
        .arg(keys.ticket(&ticket))
        .arg(keys.buyers())
        .query_async(&mut conn)
        .await
        .unwrap();
    let (status, mine) = my(1).await;
    assert_eq!(status, StatusCode::OK, "{mine}");
    assert_eq!(
        (&mine["ticket"], &mine["status"], &mine["order_id"]),
        (&first["ticket"], &settled["status"], &settled["order_id"]),
        "{mine}"
    );

    // A failed ticket is found too, once its unit has gone back.
    let other = env.product(&gw, 5).await;
    let (status, body) = gw.buy(other, 4).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let failed = gw
        .settled(body["ticket"].as_str().unwrap(), Duration::from_secs(30))
        .await;
    assert_eq!(failed["status"], "failed", "{failed}");
    let (status, mine) = gw
        .get_as(&format!("/v1/seckill/{other}/order"), Some(4))
        .await;
    assert_eq!(status, StatusCode::OK, "{mine}");
    assert_eq!(
        (&mine["ticket"], &mine["status"], &mine["reason"]),
        (&body["ticket"], &failed["status"], &failed["reason"]),
        "{mine}"
    );
}

#[tokio::test]
async fn a_rotated_jwks_file_is_picked_up_without_a_restart() {
    let env = TestEnv::new().await;
    let jwks = JwksFile::copy_of("jwks.json");
    let gw = gateway(&env, &jwks, false).await;
    let product = env.product(&gw, 10).await;
    let plain = |user: u64| json!({"sub": user.to_string(), "exp": now() + 600});
    let ed2 = good("ed-2", &plain(11));
    let ed1 = good("ed-1", &plain(12));

    let a = buy_as(&gw, product, &ed2, json!({})).await;
    assert_unauthenticated("ed-2 before the rotation", &a, Some(&ed2));
    let a = my_order(&gw, product, &ed1).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND, "ed-1 before: {}", a.body);

    jwks.overwrite_with("jwks-rotated.json");
    let bought = eventually(
        "the gateway to take ed-2's token",
        Duration::from_secs(10),
        || async {
            let a = buy_as(&gw, product, &ed2, json!({})).await;
            match a.status {
                StatusCode::UNAUTHORIZED => None,
                StatusCode::ACCEPTED => Some(a.body),
                other => panic!("ed-2 after the rotation: {other} {}", a.body),
            }
        },
    )
    .await;
    assert_eq!(bought["user_id"], 11);
    // ed-1 is gone; the keys the file kept still work.
    let a = buy_as(&gw, product, &ed1, json!({})).await;
    assert_unauthenticated("ed-1 after the rotation", &a, Some(&ed1));
    let a = buy_as(&gw, product, &good("es-1", &plain(13)), json!({})).await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "es-1: {}", a.body);
    assert_eq!(env.redis_stock(product).await, 8);
}
