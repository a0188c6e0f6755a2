//! The waiting room's part of `every_status.rs`.

use crate::helpers::token as buyer;
use crate::helpers::*;
use crate::openapi::recorder::Recorder;
use reqwest::Method;
use serde_json::json;

/// The waiting room: a product whose sale has started, and one whose room is not open. Buyers
/// of their own: this gateway's buckets hold two requests each.
pub(crate) async fn queue_statuses(
    r: &Recorder,
    gw: &TestGateway,
    limited: &TestGateway,
    redis_down: &TestGateway,
    t: Option<&str>,
    p: u64,
) {
    use Method as M;
    let qtokens = [21, 22, 23, 24, 25, 26].map(buyer);
    let [q1, q2, q3, q4, q5, q6] = qtokens.each_ref().map(|t| Some(t.as_str()));
    let past = chrono::Utc::now() - chrono::Duration::seconds(1);
    let future = chrono::Utc::now() + chrono::Duration::hours(1);
    let (_, roomed) = r
        .json(
            gw,
            M::POST,
            "/admin/products",
            t,
            json!({"name": "queued", "stock": 2, "starts_at": past.to_rfc3339(), "waiting_room": {"admit_per_sec": 100}}),
        )
        .await;
    let qp = roomed["id"].as_u64().unwrap();
    assert_eq!(
        r.send(
            gw,
            M::POST,
            &format!("/admin/products/{qp}/preload"),
            t,
            None,
            None
        )
        .await
        .0,
        200
    );
    let (_, closed) = r
        .json(
            gw,
            M::POST,
            "/admin/products",
            t,
            json!({"name": "later", "stock": 2, "waiting_room": {"opens_at": future.to_rfc3339()}}),
        )
        .await;
    let cp = closed["id"].as_u64().unwrap();
    assert_eq!(
        r.send(
            gw,
            M::POST,
            &format!("/admin/products/{cp}/preload"),
            t,
            None,
            None
        )
        .await
        .0,
        200
    );
    // A room that asks for a proof of work: 428 with the challenge, 202 with its solution,
    // 403 with a forged one.
    let (_, guarded) = r
        .json(
            gw,
            M::POST,
            "/admin/products",
            t,
            json!({"name": "guarded", "stock": 2, "starts_at": past.to_rfc3339(),
                   "waiting_room": {"admit_per_sec": 100, "pow": {"min_bits": 2, "max_bits": 6}}}),
        )
        .await;
    let gp = guarded["id"].as_u64().unwrap();
    let preload = format!("/admin/products/{gp}/preload");
    assert_eq!(r.send(gw, M::POST, &preload, t, None, None).await.0, 200);
    let guarded_join = format!("/v1/seckill/{gp}/queue");
    let (s, body) = r.send(gw, M::POST, &guarded_join, q5, None, None).await;
    assert_eq!(
        (s, body["error"].as_str()),
        (428, Some("challenge_required")),
        "{body}"
    );
    let challenge = &body["challenge"];
    let token = challenge["token"].as_str().unwrap();
    let bits = challenge["bits"].as_u64().unwrap() as u8;
    let solved = seckill_shared::waiting_room::pow::solve(token, bits);
    let (s, body) = r
        .send_with(
            gw,
            M::POST,
            &guarded_join,
            q5,
            &[("Seckill-Pow", solved)],
            None,
            None,
        )
        .await;
    assert_eq!(s, 202, "{body}");
    let forged = format!(
        "v1.{gp}.26.{}.2.{}.{}:0",
        i64::MAX,
        "0".repeat(32),
        "0".repeat(64)
    );
    let (s, body) = r
        .send_with(
            gw,
            M::POST,
            &guarded_join,
            q6,
            &[("Seckill-Pow", forged)],
            None,
            None,
        )
        .await;
    assert_eq!(
        (s, body["error"].as_str()),
        (403, Some("challenge_invalid")),
        "{body}"
    );

    let join_path = format!("/v1/seckill/{qp}/queue");
    let (s, entry) = r.send(gw, M::POST, &join_path, q1, None, None).await;
    assert_eq!(s, 202, "{entry}");
    let poll_path = format!(
        "/v1/seckill/{qp}/queue/{}",
        entry["queue_id"].as_str().unwrap()
    );
    let (s, polled) = r.send(gw, M::GET, &poll_path, q1, None, None).await;
    assert_eq!(s, 200, "{polled}");
    r.send(gw, M::POST, "/v1/seckill/abc/queue", q1, None, None)
        .await; // 400
    r.send(gw, M::POST, &join_path, None, None, None).await; // 401
    let (s, body) = r
        .send(
            gw,
            M::POST,
            &format!("/v1/seckill/{cp}/queue"),
            q3,
            None,
            None,
        )
        .await;
    assert_eq!(s, 403, "{body}");
    let (s, body) = r
        .send(
            gw,
            M::POST,
            &format!("/v1/seckill/{p}/queue"),
            q4,
            None,
            None,
        )
        .await;
    assert_eq!(s, 404, "{body}");
    r.send(
        gw,
        M::GET,
        &format!("/v1/seckill/{qp}/queue/nope"),
        q1,
        None,
        None,
    )
    .await; // 400
    r.send(gw, M::GET, &poll_path, None, None, None).await; // 401
    r.send(gw, M::GET, &poll_path, q2, None, None).await; // 404: another buyer's
    r.send(limited, M::POST, &join_path, q2, None, None).await;
    r.send(limited, M::POST, &join_path, q2, None, None).await; // 429
    r.send(limited, M::GET, &poll_path, q1, None, None).await;
    r.send(limited, M::GET, &poll_path, q1, None, None).await; // 429
    r.send(redis_down, M::POST, &join_path, q1, None, None)
        .await; // 503
    r.send(redis_down, M::GET, &poll_path, q1, None, None).await; // 503
                                                                  // Buying without the admission, and with it.
    let (s, body) = r
        .json(gw, M::POST, &format!("/v1/seckill/{qp}"), q1, json!({}))
        .await;
    assert_eq!(
        (s, body["error"].as_str()),
        (403, Some("admission_required")),
        "{body}"
    );
    let admitted = polled["admission_token"]
        .as_str()
        .expect("admitted at once")
        .to_owned();
    let (s, body) = r
        .send_with(
            gw,
            M::POST,
            &format!("/v1/seckill/{qp}"),
            q1,
            &[("Seckill-Admission", admitted)],
            Some("application/json"),
            Some("{}".into()),
        )
        .await;
    assert_eq!(s, 202, "{body}");

    // The entry's live stream: bought, so one event and the end.
    let events = format!("{poll_path}/events");
    let (s, body) = r.send(gw, M::GET, &events, q1, None, None).await;
    assert_eq!(s, 200, "{body}");
    // The buyer's queue requests are limited (one a second here): a 429 is tried again,
    // for at most 10 s.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let (s, body) = loop {
        let (s, body) = r
            .send_with(
                gw,
                M::GET,
                &events,
                q1,
                &[("Last-Event-ID", "bought".into())],
                None,
                None,
            )
            .await;
        if s != 429 || std::time::Instant::now() > deadline {
            break (s, body);
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    };
    assert_eq!(s, 204, "the final event was seen: {body}");
    r.send(
        gw,
        M::GET,
        &format!("/v1/seckill/{qp}/queue/nope/events"),
        q1,
        None,
        None,
    )
    .await; // 400
    r.send(gw, M::GET, &events, None, None, None).await; // 401
    r.send(gw, M::GET, &events, q2, None, None).await; // 404: another buyer's
    r.send(limited, M::GET, &events, q1, None, None).await;
    r.send(limited, M::GET, &events, q1, None, None).await; // 429
    r.send(redis_down, M::GET, &events, q1, None, None).await; // 503
}
