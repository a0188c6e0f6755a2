//! `GET /v1/seckill/{product_id}/queue/{queue_id}/events`: a waiting-room entry's place
//! pushed to its owner, with nobody polling.

use super::{open, Events};
use crate::helpers::*;
use crate::waiting_room::{buy_with, join, rfc3339, room, room_with};
use reqwest::StatusCode;
use seckill_shared::now_ms;
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// Five buyers join before the start and only listen: their streams drive admission. Two
/// are admitted (the cap: one per unit), get their tokens on the stream, and buy; the other
/// three see their places, are told early that a unit is `unlikely` to reach them, and then
/// `sold_out` once the two orders are settled.
#[tokio::test]
async fn streams_alone_drive_admission_and_tell_each_place_its_turn_or_no() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let _worker = env.worker().await;
    let product = room(
        &gw,
        2,
        now_ms() + 1500,
        json!({"admit_per_sec": 5, "max_admitted_factor": 1.0}),
    )
    .await;
    let users: Vec<u64> = (51..56).collect();
    let mut streams = Vec::new();
    for &u in &users {
        let (status, entry) = join(&gw, product, u).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{entry}");
        let id = entry["queue_id"].as_str().unwrap().to_owned();
        let path = format!("/v1/seckill/{product}/queue/{id}/events");
        let mut events = Events::of(open(&gw.base, &path, u, None).await);
        let (_, first) = events.next(WAIT).await.expect("the current state first");
        assert_eq!(first["state"], "waiting", "{first}");
        assert_eq!(first["position"], Value::Null, "no place before the start");
        streams.push((u, events));
    }

    // Each stream, all at once, until its last word: admitted (it buys with the token it was
    // sent), or sold out (which waits for the admitted to buy).
    // The admitted buy only once the three others were given their places: until then the
    // two admissions hold both units, so each of those places is told `unlikely`.
    let placed = std::sync::atomic::AtomicUsize::new(0);
    let (gw, placed) = (&gw, &placed);
    let ends = futures::future::join_all(streams.into_iter().map(|(u, mut events)| async move {
        let mut positions = Vec::new();
        let mut unlikely = false;
        loop {
            let (_, body) = events
                .next(WAIT)
                .await
                .expect("a stream ends only when admitted");
            match body["state"].as_str().unwrap() {
                "waiting" => {
                    if let Some(p) = body["position"].as_u64() {
                        if positions.is_empty() {
                            placed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        }
                        positions.push(p);
                    }
                    unlikely |= body["unlikely"] == true;
                }
                "admitted" => {
                    let token = body["admission_token"].as_str().unwrap().to_owned();
                    eventually("the others' places", WAIT, || async {
                        (placed.load(std::sync::atomic::Ordering::SeqCst) == 3).then_some(())
                    })
                    .await;
                    let (status, bought) = buy_with(gw, product, u, Some(&token)).await;
                    assert_eq!(status, StatusCode::ACCEPTED, "{bought}");
                    // An admission can still be taken back until the buy: the stream goes on
                    // until `bought`, then ends.
                    loop {
                        match events.next(WAIT).await {
                            Some((_, e)) if e["state"] == "bought" => break,
                            Some((_, e)) => assert_eq!(e["state"], "admitted", "{e}"),
                            None => panic!("the stream ended before `bought`"),
                        }
                    }
                    assert!(events.next(WAIT).await.is_none(), "over once bought");
                    return ("admitted", positions, unlikely);
                }
                "sold_out" => return ("sold_out", positions, unlikely),
                other => panic!("unexpected state {other}: {body}"),
            }
        }
    }))
    .await;
    for (_, positions, _) in &ends {
        assert!(
            positions.windows(2).all(|w| w[1] <= w[0]),
            "places only move up: {positions:?}"
        );
    }
    let admitted: Vec<_> = ends.iter().filter(|e| e.0 == "admitted").collect();
    let sold_out: Vec<_> = ends.iter().filter(|e| e.0 == "sold_out").collect();
    assert_eq!(admitted.len(), 2, "one admission per unit: {ends:?}");
    assert_eq!(sold_out.len(), 3, "everyone else hears sold_out: {ends:?}");
    assert!(
        sold_out.iter().all(|e| e.2 && !e.1.is_empty()),
        "each of the three was given a place and told early that a unit is unlikely: {ends:?}"
    );
    let mut first_places: Vec<u64> = sold_out.iter().map(|e| e.1[0]).collect();
    first_places.sort();
    assert_eq!(
        first_places,
        [1, 2, 3],
        "the places behind the two admitted: {ends:?}"
    );
}

/// At the sale's end, every entry that neither bought nor expired is `ended`, final: a stream
/// sends it and ends, a poll and a join again answer it, and a buyer who never joined is
/// refused (`403 sale_ended`). Nobody is admitted after the end.
#[tokio::test]
async fn at_the_sales_end_every_place_left_is_told_ended_and_its_stream_ends() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let starts = now_ms() + 1500;
    let ends = starts + 2500;
    let product = room_with(
        &gw,
        json!({"stock": 5, "starts_at": rfc3339(starts), "ends_at": rfc3339(ends),
               "waiting_room": {"admit_per_sec": 1, "max_admitted_factor": 1.0}}),
    )
    .await;
    let mut ids = Vec::new();
    for u in 61..64 {
        let (status, entry) = join(&gw, product, u).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{entry}");
        ids.push(entry["queue_id"].as_str().unwrap().to_owned());
    }
    let path = format!("/v1/seckill/{product}/queue/{}/events", ids[0]);
    let mut events = Events::of(open(&gw.base, &path, 61, None).await);
    let mut states = Vec::new();
    let mut last_token = None;
    let mut last_id = String::new();
    while let Some((id, body)) = events.next(WAIT).await {
        last_id = id;
        states.push(body["state"].as_str().unwrap().to_owned());
        if body["state"] == "admitted" {
            last_token = body["admission_token"].as_str().map(str::to_owned);
        }
    }
    assert_eq!(
        states.last().map(String::as_str),
        Some("ended"),
        "the stream ends with `ended`: {states:?}"
    );
    assert!(now_ms() >= ends, "not before the end: {states:?}");
    // The final event's id is its state: a reconnect with it is told there is no more (204),
    // which stops an EventSource; one without it gets the final state again.
    assert_eq!(last_id, "ended");
    let again = open(&gw.base, &path, 61, Some("ended")).await;
    assert_eq!(again.status(), StatusCode::NO_CONTENT);
    let mut again = Events::of(open(&gw.base, &path, 61, Some("3")).await);
    assert_eq!(again.next(WAIT).await.unwrap().0, "ended");
    assert!(again.next(WAIT).await.is_none());
    // The others, polled and joined again, are ended too.
    for (i, u) in (62..64).enumerate() {
        let (status, body) = gw
            .get_as(
                &format!("/v1/seckill/{product}/queue/{}", ids[i + 1]),
                Some(u),
            )
            .await;
        assert_eq!(
            (status, body["state"].as_str()),
            (StatusCode::OK, Some("ended")),
            "{body}"
        );
        let (status, again) = join(&gw, product, u).await;
        assert_eq!(
            (status, again["state"].as_str(), again["queue_id"].as_str()),
            (
                StatusCode::ACCEPTED,
                Some("ended"),
                Some(ids[i + 1].as_str())
            ),
            "{again}"
        );
    }
    let (status, late) = join(&gw, product, 64).await;
    assert_eq!(
        (status, late["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("sale_ended")),
        "{late}"
    );
    // An admission given before the end buys nothing after it.
    if let Some(token) = last_token {
        let (status, body) = buy_with(&gw, product, 61, Some(&token)).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (StatusCode::FORBIDDEN, Some("sale_ended")),
            "{body}"
        );
    }
}

/// A room of 40 streams: at the start the gateway reads the whole line at once (not each
/// entry), and every place it tells is the place a poll answers. Two units and a cap of one
/// admission per unit, nobody buys: once the two are admitted the line stands still, and the
/// 38 others are told places 1 to 38, each what polling their entry says.
#[tokio::test]
async fn a_large_rooms_places_read_at_once_are_the_places_polls_answer() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = room(
        &gw,
        2,
        now_ms() + 2000,
        json!({"admit_per_sec": 10, "max_admitted_factor": 1.0}),
    )
    .await;
    let users: Vec<u64> = (101..141).collect();
    let mut streams = Vec::new();
    for &u in &users {
        let (status, entry) = join(&gw, product, u).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{entry}");
        let id = entry["queue_id"].as_str().unwrap().to_owned();
        let path = format!("/v1/seckill/{product}/queue/{id}/events");
        let events = Events::of(open(&gw.base, &path, u, None).await);
        streams.push((u, id, events));
    }
    let admitted = std::sync::atomic::AtomicUsize::new(0);
    let (gw, admitted) = (&gw, &admitted);
    let ends =
        futures::future::join_all(streams.into_iter().map(|(u, id, mut events)| async move {
            let poll_path = format!("/v1/seckill/{product}/queue/{id}");
            let mut last = Value::Null;
            loop {
                // The next event, or a quiet second.
                match tokio::time::timeout(Duration::from_secs(1), events.next(WAIT)).await {
                    Ok(Some((_, body))) if body["state"] == "admitted" => {
                        admitted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        return (u, None);
                    }
                    Ok(Some((_, body))) if body["position"].is_u64() => last = body,
                    Ok(Some(_)) | Err(_) => {}
                    Ok(None) => panic!("the stream ended"),
                }
                // Once the two admissions hold both units, the line stands still.
                if admitted.load(std::sync::atomic::Ordering::SeqCst) < 2 || last.is_null() {
                    continue;
                }
                let (_, polled) = gw.get_as(&poll_path, Some(u)).await;
                if polled["state"] == "waiting" && polled["position"] == last["position"] {
                    return (u, last["position"].as_u64());
                }
            }
        }))
        .await;
    let mut places: Vec<u64> = ends.iter().filter_map(|e| e.1).collect();
    places.sort();
    assert_eq!(
        places,
        (1..=38).collect::<Vec<_>>(),
        "two admitted, 38 places: {ends:?}"
    );
}

/// An admission taken back while its buyer follows it live: three admitted for two units
/// (factor 1.5); once two of them buy, the cap is nought and the third goes back to the head
/// of the line. Its stream says so (`waiting`, place 1, after `admitted`), and its old token
/// buys nothing.
#[tokio::test]
async fn a_stream_is_told_when_its_admission_is_taken_back_to_the_head_of_the_line() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = room(
        &gw,
        2,
        now_ms() + 1500,
        json!({"admit_per_sec": 100, "max_admitted_factor": 1.5}),
    )
    .await;
    let mut admitted = Vec::new();
    for u in 71..74 {
        let (status, entry) = join(&gw, product, u).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{entry}");
        let id = entry["queue_id"].as_str().unwrap().to_owned();
        let path = format!("/v1/seckill/{product}/queue/{id}/events");
        let mut events = Events::of(open(&gw.base, &path, u, None).await);
        let token = loop {
            let (_, body) = events.next(WAIT).await.expect("admitted in time");
            if body["state"] == "admitted" {
                break body["admission_token"].as_str().unwrap().to_owned();
            }
            assert_eq!(body["state"], "waiting", "{body}");
        };
        admitted.push((u, token, events));
    }
    let (last, last_token, mut events) = admitted.pop().unwrap();
    for (u, token, _) in &admitted {
        let (status, body) = buy_with(&gw, product, *u, Some(token)).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    }
    let back = loop {
        let (_, body) = events.next(WAIT).await.expect("the stream goes on");
        match body["state"].as_str().unwrap() {
            "admitted" => continue,
            _ => break body,
        }
    };
    assert_eq!(
        (back["state"].as_str(), back["position"].as_u64()),
        (Some("waiting"), Some(1)),
        "back at the head of the line: {back}"
    );
    let (status, body) = buy_with(&gw, product, last, Some(&last_token)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("admission_invalid")),
        "{body}"
    );
}
