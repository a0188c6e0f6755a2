//! `GET /v1/orders/{ticket}/events`: a ticket's states pushed to its owner.

use super::{open, Events};
use crate::helpers::*;
use crate::process::Proc;
use reqwest::StatusCode;
use seckill_shared::ProductId;
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// A product with a payment window, loaded for sale.
async fn with_payment_window(gw: &TestGateway, stock: i64) -> ProductId {
    let (status, body) = gw
        .admin_post(
            "/admin/products",
            json!({"name": "streamed item", "stock": stock, "price": 500, "currency": "EUR", "payment_window_secs": 600}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = ProductId::new(body["id"].as_u64().unwrap()).unwrap();
    let (status, body) = gw
        .admin_post(&format!("/admin/products/{id}/preload"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    id
}

/// `user` buys one unit on `gw`; the ticket of its `202`.
async fn bought(gw: &TestGateway, product: ProductId, user: u64) -> String {
    let (status, body) = gw.buy(product, user).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    body["ticket"].as_str().unwrap().to_owned()
}

/// pending → confirmed (with its deadline) → cancelled, each pushed as it happens with the
/// body a poll answers, and the stream ends after the final state.
#[tokio::test]
async fn a_ticket_stream_pushes_each_state_and_ends_after_the_final_one() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = with_payment_window(&gw, 2).await;
    let ticket = bought(&gw, product, 41).await;
    let path = format!("/v1/orders/{ticket}/events");
    let mut events = Events::of(open(&gw.base, &path, 41, None).await);
    let (id, pending) = events.next(WAIT).await.expect("the current state first");
    assert_eq!(
        (id.as_str(), pending["status"].as_str()),
        ("1", Some("pending"))
    );
    assert_eq!(pending["ticket"], ticket.as_str());

    let _worker = env.worker().await;
    let (id, confirmed) = events.next(WAIT).await.expect("the confirmation");
    assert_eq!(
        (id.as_str(), confirmed["status"].as_str()),
        ("2", Some("confirmed"))
    );
    assert!(confirmed["pay_by_ms"].as_i64().is_some(), "{confirmed}");
    let (status, polled) = gw.get_as(&format!("/v1/orders/{ticket}"), Some(41)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(confirmed, polled, "an event's data is what a poll answers");

    let res = gw
        .http
        .post(format!("{}/v1/orders/{ticket}/cancel", gw.base))
        .bearer_auth(token(41))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let (id, cancelled) = events.next(WAIT).await.expect("the cancel");
    assert_eq!(
        (id.as_str(), cancelled["status"].as_str()),
        ("3", Some("cancelled"))
    );
    let (_, polled) = gw.get_as(&format!("/v1/orders/{ticket}"), Some(41)).await;
    assert_eq!(cancelled, polled, "an event's data is what a poll answers");
    assert!(
        events.next(WAIT).await.is_none(),
        "the stream ends after a final state"
    );
    // A reconnect that has the final state is told there is no more: 204 stops an
    // EventSource from reconnecting.
    let again = open(&gw.base, &path, 41, Some("3")).await;
    assert_eq!(again.status(), StatusCode::NO_CONTENT);
}

/// A change's message carries the ticket's new state, and the stream sends it as it came,
/// reading nothing: a message that says `failed` (sent here by hand; the record in Redis is
/// still `pending`, which is all a read could find) is what the buyer is sent.
#[tokio::test]
async fn a_stream_sends_the_state_its_change_carried_without_reading_it() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 2).await;
    let ticket = bought(&gw, product, 43).await;
    let path = format!("/v1/orders/{ticket}/events");
    let mut events = Events::of(open(&gw.base, &path, 43, None).await);
    let (id, _) = events.next(WAIT).await.expect("pending");
    assert_eq!(id, "1");
    let channel = format!("sk:{{{}:{product}}}:events", env.settings.common.namespace);
    let payload = format!(
        r#"{ticket} ["status","failed","user_id","43","created_at","1","reason","carried_by_the_message"]"#
    );
    // The gateway's subscription may still be under way (a message before it is lost, as
    // it may be in production, where the heartbeat's read makes up for it): publish every
    // 200 ms until the stream sends it.
    let mut conn = env.store.connection();
    let publisher = tokio::spawn(async move {
        loop {
            let _: i64 = redis::cmd("PUBLISH")
                .arg(&channel)
                .arg(&payload)
                .query_async(&mut conn)
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    let got = events.next(WAIT).await.expect("the pushed state");
    publisher.abort();
    assert_eq!(got.0, "3");
    assert_eq!(got.1["status"], "failed");
    assert_eq!(got.1["reason"], "carried_by_the_message");
    let (_, polled) = gw.get_as(&format!("/v1/orders/{ticket}"), Some(43)).await;
    assert_eq!(
        polled["status"], "pending",
        "the record itself did not change"
    );
}

/// A stream's gateway dies after `pending`; the client reconnects to another gateway with
/// `Last-Event-ID`, is not sent `pending` again, and gets the confirmation (final: no payment
/// window). Reconnecting after the end sends nothing; reconnecting with an older id sends
/// the final state at once.
#[tokio::test]
async fn a_stream_resumes_on_another_gateway_after_its_gateway_dies() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 2).await;
    let mut first = Proc::gateway(&env, &[]).await;
    let first_client = TestGateway::at(first.base.clone(), reqwest::Client::new());
    let ticket = bought(&first_client, product, 42).await;
    let path = format!("/v1/orders/{ticket}/events");
    let mut events = Events::of(open(&first.base, &path, 42, None).await);
    let (id, _) = events.next(WAIT).await.expect("pending");
    assert_eq!(id, "1");
    first.child.kill().await.unwrap();
    assert!(
        events.next(WAIT).await.is_none(),
        "the stream broke with its gateway"
    );

    let mut events = Events::of(open(&gw.base, &path, 42, Some("1")).await);
    let _worker = env.worker().await;
    let (id, confirmed) = events.next(WAIT).await.expect("the confirmation");
    assert_eq!(
        (id.as_str(), confirmed["status"].as_str()),
        ("3", Some("confirmed"))
    );
    assert!(confirmed.get("pay_by_ms").is_none(), "{confirmed}");
    assert!(events.next(WAIT).await.is_none());

    let after_the_end = open(&gw.base, &path, 42, Some("3")).await;
    assert_eq!(
        after_the_end.status(),
        StatusCode::NO_CONTENT,
        "nothing to send"
    );
    let mut late = Events::of(open(&gw.base, &path, 42, Some("1")).await);
    let (id, body) = late.next(WAIT).await.expect("the final state");
    assert_eq!(
        (id.as_str(), body["status"].as_str()),
        ("3", Some("confirmed"))
    );
    assert!(late.next(WAIT).await.is_none());
}

/// Heartbeats, the per-buyer limit (the oldest stream gives way) and the per-gateway one,
/// and what a stream refuses.
#[tokio::test]
async fn streams_are_limited_and_refuse_what_they_cannot_serve() {
    let env = TestEnv::new().await;
    let gw = env
        .gateway_with(|s| {
            s.gateway.sse_max_per_buyer = 1;
            s.gateway.sse_max_streams = 2;
            s.gateway.sse_heartbeat_secs = 1;
        })
        .await;
    let product = env.product(&gw, 5).await;
    let t1 = bought(&gw, product, 43).await;
    let t2 = bought(&gw, product, 44).await;
    let t3 = bought(&gw, product, 45).await;
    let path = |t: &str| format!("/v1/orders/{t}/events");

    let mut first = Events::of(open(&gw.base, &path(&t1), 43, None).await);
    first.next(WAIT).await.expect("pending");
    // A quiet stream sends a comment each heartbeat.
    first.read_until(": keep-alive", WAIT).await;

    // The buyer opens another (a reload): it opens, and their older one ends, so that a
    // buyer is never locked out by streams they left.
    let mut again = Events::of(open(&gw.base, &path(&t1), 43, None).await);
    again.next(WAIT).await.expect("pending, on the new stream");
    // Told to wait 30 s before it reconnects: a buyer with more tabs than the limit does not
    // have them take each other's place every second.
    first.read_until("retry: 30000", WAIT).await;
    assert!(first.next(WAIT).await.is_none(), "the older stream ended");
    drop(first);

    let _second = Events::of(open(&gw.base, &path(&t2), 44, None).await);
    let res = open(&gw.base, &path(&t3), 45, None).await;
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(res.headers().contains_key("retry-after"));
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"], "unavailable");

    // A closed stream frees its place (the gateway notices at its next write, within a
    // heartbeat).
    drop(again);
    let opened = eventually("a freed place", WAIT, || async {
        let res = open(&gw.base, &path(&t3), 45, None).await;
        (res.status() == StatusCode::OK).then_some(res)
    })
    .await;
    Events::of(opened);

    // Another buyer's ticket is unknown to them; a bad Last-Event-ID is a 400.
    let res = open(&gw.base, &path(&t2), 46, None).await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    // Only the ids the stream sends, as it sends them.
    for bad in ["seven", "03", "4", "-1", "+3"] {
        let res = open(&gw.base, &path(&t2), 44, Some(bad)).await;
        assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{bad}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"], "bad_request", "{bad}");
    }
}

/// A gateway told to stop (SIGTERM) ends its streams at once, not after its graceful shutdown
/// (10 s), so that their clients reconnect elsewhere without waiting.
#[tokio::test]
async fn sigterm_ends_the_streams_at_once() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 2).await;
    let doomed = Proc::gateway(&env, &[]).await;
    let ticket = bought(&gw, product, 47).await;
    let path = format!("/v1/orders/{ticket}/events");
    let mut events = Events::of(open(&doomed.base, &path, 47, None).await);
    events.next(WAIT).await.expect("pending");
    let told = std::time::Instant::now();
    doomed.sigterm();
    assert!(events.next(WAIT).await.is_none(), "the stream ended");
    let took = told.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "ended {took:?} after SIGTERM"
    );
    doomed.exits_cleanly("the gateway").await;
}
