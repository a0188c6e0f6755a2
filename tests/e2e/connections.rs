//! HTTP limits below the API: the size of a request head, the time a client has to send it,
//! and the connections each actix worker thread holds.

use crate::helpers::*;
use reqwest::StatusCode;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Everything the server sends until it closes the connection, at most `within`.
async fn read_until_closed(conn: &mut TcpStream, within: Duration) -> Result<String, String> {
    let mut buf = Vec::new();
    match tokio::time::timeout(within, conn.read_to_end(&mut buf)).await {
        Ok(Ok(_)) => Ok(String::from_utf8_lossy(&buf).into_owned()),
        Ok(Err(e)) => Err(format!("read failed: {e}")),
        Err(_) => Err(format!(
            "still open after {within:?}; received {:?}",
            String::from_utf8_lossy(&buf)
        )),
    }
}

async fn connect(gw: &TestGateway) -> TcpStream {
    TcpStream::connect(gw.base.trim_start_matches("http://"))
        .await
        .unwrap()
}

/// actix's fixed limits on a request head (96 headers, 128 KiB) answer 431, never a 5xx,
/// and the gateway keeps serving.
#[tokio::test]
async fn an_oversized_request_head_gets_431() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;

    // Too many headers.
    let mut req = gw.http.get(format!("{}/livez", gw.base));
    for i in 0..100 {
        req = req.header(format!("x-h{i}"), "1");
    }
    let res = req.send().await.unwrap();
    assert_eq!(res.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);

    // A head of 128 KiB that has not ended yet. (Exactly that much, so that the server reads
    // all of it and closes cleanly: with more unread, the close could reset the answer away.)
    let mut conn = connect(&gw).await;
    let mut head = b"GET /livez HTTP/1.1\r\nhost: x\r\nx-big: ".to_vec();
    head.resize(128 * 1024, b'a');
    conn.write_all(&head).await.unwrap();
    let answer = read_until_closed(&mut conn, Duration::from_secs(10))
        .await
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer:?}");

    assert_eq!(gw.get_json("/livez").await.0, StatusCode::OK);
}

/// A client that connects and sends nothing, or only part of a head, gets 408 and is
/// disconnected after `SECKILL_HTTP_CLIENT_REQUEST_TIMEOUT_MS`.
#[tokio::test]
async fn a_silent_or_slow_client_is_disconnected_after_the_request_timeout() {
    let env = TestEnv::new().await;
    let gw = env
        .gateway_with(|s| s.gateway.http_client_request_timeout_ms = 1000)
        .await;
    // actix's clock for this ticks every 500 ms: the client gets 0.5 to 1 s. The default
    // (5 s) is well past this bound.
    let within = Duration::from_secs(3);

    let mut silent = connect(&gw).await;
    let t0 = Instant::now();
    let answer = read_until_closed(&mut silent, within).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer:?}");
    assert!(
        t0.elapsed() >= Duration::from_millis(400),
        "{:?}",
        t0.elapsed()
    );

    let mut slow = connect(&gw).await;
    slow.write_all(b"GET /livez HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    let answer = read_until_closed(&mut slow, within).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer:?}");

    // A prompt client is served as usual, within the same tick of that clock.
    let mut prompt = connect(&gw).await;
    prompt
        .write_all(b"GET /livez HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = read_until_closed(&mut prompt, within).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
}

/// At `SECKILL_HTTP_MAX_CONNECTIONS` open connections a worker thread accepts no more; a new
/// connection waits in the backlog until one closes.
#[tokio::test]
async fn past_max_connections_a_new_connection_waits_until_one_closes() {
    let env = TestEnv::new().await;
    let gw = env
        .gateway_with(|s| {
            s.gateway.http_workers = 1;
            s.gateway.http_max_connections = 2;
            s.gateway.http_client_request_timeout_ms = 30_000;
        })
        .await;
    let idle_a = connect(&gw).await;
    let _idle_b = connect(&gw).await;

    let mut third = connect(&gw).await;
    third
        .write_all(b"GET /livez HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut first_byte = [0u8; 1];
    assert!(
        tokio::time::timeout(Duration::from_secs(1), third.read(&mut first_byte))
            .await
            .is_err(),
        "a third connection was served while two were open"
    );

    drop(idle_a);
    let answer = read_until_closed(&mut third, Duration::from_secs(10))
        .await
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
}
