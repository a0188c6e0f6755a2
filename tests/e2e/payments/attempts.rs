//! Payment attempts that race: two pays of one order at once, and pays after an attempt that
//! was never sent.

use crate::helpers::*;
use crate::payments::sale::Sale;
use reqwest::StatusCode;
use seckill_shared::now_ms;
use std::time::Duration;

/// Pays each `(ticket, user)` twice at once, with two keys: each pair must answer one `202`
/// and one `409 payment_in_progress`, and the provider be asked once per ticket. The charges
/// asked for in all.
async fn pay_twice_at_once(sale: &Sale, tickets: &[(String, u64)]) -> usize {
    let answers = futures::future::join_all(tickets.iter().map(|(t, user)| async move {
        let (a, b) = tokio::join!(sale.pay(t, *user, "tap-1"), sale.pay(t, *user, "tap-2"));
        (t.clone(), a, b)
    }))
    .await;
    let charges = sale.provider.charges();
    for (ticket, (s1, b1), (s2, b2)) in &answers {
        let mut statuses = [*s1, *s2];
        statuses.sort();
        assert_eq!(
            statuses,
            [StatusCode::ACCEPTED, StatusCode::CONFLICT],
            "{ticket}: {b1} {b2}"
        );
        let refused = if *s1 == StatusCode::CONFLICT { b1 } else { b2 };
        assert_eq!(refused["error"], "payment_in_progress", "{refused}");
        let asked = charges.iter().filter(|c| &c.ticket == ticket).count();
        assert_eq!(asked, 1, "{ticket}: the provider was asked {asked} times");
    }
    charges.len()
}

/// Two pays of one order at once with two keys (a double tap, or two devices), for many
/// orders: for each, one attempt is sent and the other answers `409 payment_in_progress`,
/// and the provider is asked to charge once. The in-progress check and the insert used to be
/// two statements, and both pays of about one order in six passed the check.
#[tokio::test]
async fn two_pays_of_one_order_at_once_charge_once() {
    let sale = Sale::new().await;
    const N: u64 = 30;
    let product = sale.product(N as i64, 600).await;
    let mut tickets = Vec::new();
    for user in 1..=N {
        tickets.push((sale.confirmed_ticket(product, 500 + user).await, 500 + user));
    }
    let charges = pay_twice_at_once(&sale, &tickets).await;
    assert_eq!(charges, N as usize);
}

/// An attempt the provider never took (it was down) does not block the order until its
/// window closes: a pay with another key sends that attempt again, under its own payment id
/// (which the provider dedupes by), and never a second payment beside it.
#[tokio::test]
async fn a_pay_after_an_unsent_attempt_sends_that_attempt_again() {
    let sale = Sale::new().await;
    let product = sale.product(1, 600).await;
    let ticket = sale.confirmed_ticket(product, 21).await;
    sale.provider
        .down
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let (status, body) = sale.pay(&ticket, 21, "first-device").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    sale.provider
        .down
        .store(false, std::sync::atomic::Ordering::SeqCst);
    // While the first attempt may still be on its way (a call to the provider takes up to
    // its timeout, 3 s here), another key waits; then it sends that attempt.
    let body = eventually(
        "a second pay to be sent",
        Duration::from_secs(15),
        || async {
            let (status, body) = sale.pay(&ticket, 21, "second-device").await;
            match status {
                StatusCode::ACCEPTED => Some(body),
                StatusCode::CONFLICT => {
                    assert_eq!(body["error"], "payment_in_progress", "{body}");
                    None
                }
                _ => panic!("{status}: {body}"),
            }
        },
    )
    .await;
    let first: String = sqlx::query_scalar(
        "SELECT payment_id FROM payments WHERE ticket = ? AND idempotency_key = 'first-device'",
    )
    .bind(&ticket)
    .fetch_one(&sale.env.db)
    .await
    .unwrap();
    assert_eq!(
        body["payment_id"],
        first.as_str(),
        "the unsent attempt, sent again"
    );
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM payments WHERE ticket = ?")
        .bind(&ticket)
        .fetch_one(&sale.env.db)
        .await
        .unwrap();
    assert_eq!(n, 1, "no second attempt beside it");
    let charges = sale.provider.charges();
    assert_eq!(charges.len(), 1);
    assert_eq!(charges[0].payment_id, first);
    // The first key now answers the same payment, in progress, and charges nothing more.
    let (status, again) = sale.pay(&ticket, 21, "first-device").await;
    assert_eq!(
        (status, &again["payment_id"]),
        (StatusCode::ACCEPTED, &body["payment_id"])
    );
    assert_eq!(sale.provider.charges().len(), 1);
}

/// Two pays at once after a pay the provider never took (it was down): only one sends that
/// attempt again; the other answers `409 payment_in_progress`, and the provider is asked to
/// charge each order once. Found from outside: both read the unsent attempt under the order's
/// lock one after the other, and both sent it (6 of 20 orders asked to charge twice).
#[tokio::test]
async fn two_pays_at_once_after_an_unsent_attempt_send_it_once() {
    let sale = Sale::new().await;
    const N: u64 = 12;
    let product = sale.product(N as i64, 600).await;
    let mut tickets = Vec::new();
    for user in 1..=N {
        tickets.push((sale.confirmed_ticket(product, 700 + user).await, 700 + user));
    }
    sale.provider
        .down
        .store(true, std::sync::atomic::Ordering::SeqCst);
    for (t, user) in &tickets {
        let (status, body) = sale.pay(t, *user, "first").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    }
    sale.provider
        .down
        .store(false, std::sync::atomic::Ordering::SeqCst);
    // As the outside test did: wait past the time a call to the provider can take (its
    // timeout, 3 s, + 1 s), read from MySQL, so the attempts are free to send whatever claim
    // they held.
    let newest: i64 = sqlx::query_scalar("SELECT MAX(created_at_ms) FROM payments")
        .fetch_one(&sale.env.db)
        .await
        .unwrap();
    let wait_ms = (newest + 4_100 - now_ms()).max(0) as u64;
    tokio::time::sleep(Duration::from_millis(wait_ms)).await;
    pay_twice_at_once(&sale, &tickets).await;
}
