//! After the load: poll each ticket with `GET /v1/orders/{ticket}` until it is confirmed or
//! failed, in rounds, with a bounded number of polls in flight. With buyer tokens, each poll
//! carries the token its buy carried. When buyers pay (`--pay-rate`), a ticket already `paid`
//! or `cancelled` (it was confirmed first) is settled too.

use super::engine::error_chain;
use crate::history::SettledLine;
use futures::stream::{self, StreamExt};
use hyper::header::HeaderValue;
use indicatif::ProgressBar;
use seckill_shared::api::TicketBody;
use seckill_shared::TicketStatus;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A ticket some gateway handed out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedTicket {
    pub ticket: String,
    pub user_id: u64,
    /// Index of the gateway that answered.
    pub gateway: usize,
    /// When the answer arrived, µs since the epoch (client clock).
    pub answered_at_us: u64,
    /// The answer was a `202` (a fresh reservation), not a `200` repeating a held ticket.
    pub fresh: bool,
    /// `--jwt-secret` or `--jwt-ed25519-key`: the buyer's `Authorization` header, sent on every poll.
    pub auth: Option<HeaderValue>,
    /// The units its order holds, as the answer said.
    pub quantity: u16,
}

/// A buy answer's ticket, if the body has one.
pub(super) fn ticket_of(body: &[u8]) -> Option<Box<str>> {
    ticket_and_units(body).map(|(t, _)| t)
}

/// A buy answer's ticket and the units its order holds, if the body has one.
pub(super) fn ticket_and_units(body: &[u8]) -> Option<(Box<str>, u16)> {
    serde_json::from_slice::<TicketBody>(body)
        .ok()
        .map(|b| (b.ticket.into(), b.quantity))
}

/// One entry per distinct ticket, in the order first seen: a `200` repeats the ticket of an
/// earlier `202`. When both were seen, the `202`'s answer time is kept: that is when the
/// reservation was handed out.
pub(super) fn distinct_tickets(tickets: &[IssuedTicket]) -> Vec<IssuedTicket> {
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(tickets.len());
    let mut distinct: Vec<IssuedTicket> = Vec::with_capacity(tickets.len());
    for t in tickets {
        match index.get(t.ticket.as_str()) {
            Some(&i) => {
                if t.fresh && !distinct[i].fresh {
                    distinct[i] = t.clone();
                }
            }
            None => {
                index.insert(t.ticket.as_str(), distinct.len());
                distinct.push(t.clone());
            }
        }
    }
    distinct
}

#[derive(serde::Serialize)]
pub(super) struct SettledOut<'a> {
    pub(super) kind: &'static str,
    #[serde(flatten)]
    pub(super) line: &'a crate::history::SettledLine,
}

enum Poll {
    Settled(SettledLine),
    /// Not settled yet; what we saw.
    NotYet(Option<String>),
}

/// Whether a ticket in `status` has settled. `payments`: `paid` and `cancelled` count too.
fn settled(status: TicketStatus, payments: bool) -> bool {
    match status {
        TicketStatus::Confirmed | TicketStatus::Failed => true,
        TicketStatus::Paid | TicketStatus::Cancelled => payments,
        TicketStatus::Pending => false,
    }
}

async fn poll_once(
    client: &reqwest::Client,
    base: &str,
    t: &IssuedTicket,
    payments: bool,
) -> Result<Option<TicketBody>, String> {
    let mut req = client.get(format!("{base}/v1/orders/{}", t.ticket));
    if let Some(auth) = &t.auth {
        req = req.header(reqwest::header::AUTHORIZATION, auth.clone());
    }
    let res = req.send().await.map_err(|e| error_chain(&e))?;
    let status = res.status();
    let bytes = res.bytes().await.map_err(|e| error_chain(&e))?;
    if !status.is_success() {
        return Err(format!(
            "HTTP {}: {}",
            status.as_u16(),
            String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
        ));
    }
    let body: TicketBody =
        serde_json::from_slice(&bytes).map_err(|e| format!("bad order body: {e}"))?;
    Ok(settled(body.status, payments).then_some(body))
}

/// Polls every ticket until it settles or `timeout` has passed. Returns one line per ticket,
/// in the order given; tickets that never settled are `pending` (with the last error seen, if
/// any, as the reason). `payments`: a `paid` or `cancelled` ticket has settled too.
pub async fn poll_tickets(
    client: &reqwest::Client,
    gateways: &[String],
    tickets: &[IssuedTicket],
    timeout: Duration,
    concurrency: usize,
    payments: bool,
    progress: &ProgressBar,
) -> Vec<SettledLine> {
    let deadline = Instant::now() + timeout;
    let mut results: Vec<Option<SettledLine>> = vec![None; tickets.len()];
    let mut last_seen: Vec<Option<String>> = vec![None; tickets.len()];
    let mut todo: Vec<usize> = (0..tickets.len()).collect();
    let mut round = 0usize;
    while !todo.is_empty() && !timeout.is_zero() {
        let polled: Vec<(usize, Poll)> = stream::iter(todo.iter().copied())
            .map(|i| {
                let t = &tickets[i];
                // Start with the gateway that issued the ticket, then move on to the next one
                // each round, so that one gateway going away does not stall the polling.
                let base = &gateways[(t.gateway + round) % gateways.len()];
                async move {
                    let poll = match poll_once(client, base, t, payments).await {
                        Ok(Some(body)) => Poll::Settled(SettledLine {
                            ticket: t.ticket.clone(),
                            user_id: t.user_id,
                            status: body.status.as_str().to_owned(),
                            order_id: body.order_id,
                            reason: body.reason,
                            quantity: body.quantity,
                            answered_at_us: Some(t.answered_at_us),
                            reserved_at_ms: body.reserved_at_ms,
                            confirmed_at_ms: body.confirmed_at_ms,
                        }),
                        Ok(None) => Poll::NotYet(None),
                        Err(e) => Poll::NotYet(Some(e)),
                    };
                    (i, poll)
                }
            })
            .buffer_unordered(concurrency.max(1))
            .collect()
            .await;
        todo.clear();
        for (i, poll) in polled {
            match poll {
                Poll::Settled(line) => {
                    results[i] = Some(line);
                    progress.inc(1);
                }
                Poll::NotYet(seen) => {
                    last_seen[i] = seen;
                    todo.push(i);
                }
            }
        }
        let now = Instant::now();
        if todo.is_empty() || now >= deadline {
            break;
        }
        todo.sort_unstable();
        round += 1;
        tokio::time::sleep((deadline - now).min(Duration::from_millis(200))).await;
    }
    results
        .into_iter()
        .zip(last_seen)
        .zip(tickets)
        .map(|((line, seen), t)| {
            line.unwrap_or_else(|| SettledLine {
                ticket: t.ticket.clone(),
                user_id: t.user_id,
                status: "pending".into(),
                order_id: None,
                reason: seen,
                quantity: 1,
                answered_at_us: Some(t.answered_at_us),
                reserved_at_ms: None,
                confirmed_at_ms: None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paid_and_cancelled_tickets_are_settled_only_when_buyers_pay() {
        for payments in [false, true] {
            assert!(
                settled(TicketStatus::Confirmed, payments)
                    && settled(TicketStatus::Failed, payments)
            );
            assert!(!settled(TicketStatus::Pending, payments));
            assert_eq!(settled(TicketStatus::Paid, payments), payments);
            assert_eq!(settled(TicketStatus::Cancelled, payments), payments);
        }
    }

    #[test]
    fn distinct_tickets_keep_the_first_seen_order_and_the_202s_time() {
        let t = |ticket: &str, at: u64, fresh: bool| IssuedTicket {
            quantity: 1,
            ticket: ticket.into(),
            user_id: 1,
            gateway: 0,
            answered_at_us: at,
            fresh,
            auth: None,
        };
        let got = distinct_tickets(&[
            t("1-a", 30, false),
            t("1-b", 10, true),
            t("1-a", 20, true),
            t("1-b", 40, false),
        ]);
        assert_eq!(got, vec![t("1-a", 20, true), t("1-b", 10, true)]);
    }

    #[test]
    fn tickets_are_read_from_buy_answers() {
        let t = ticket_of(
            br#"{"ticket":"3-9f86d081884c7d659a2feaa0c55ad015","status":"pending","product_id":3,"user_id":1}"#,
        );
        assert_eq!(t.as_deref(), Some("3-9f86d081884c7d659a2feaa0c55ad015"));
        assert_eq!(ticket_of(br#"{"error":"sold_out","message":"m"}"#), None);
        assert_eq!(ticket_of(b"not json"), None);
    }
}
