//! One waiting-room buyer: joins, polls its entry until admitted, buys with its admission
//! token; a request that gets no answer is retried on the next gateway. [`Room`] is what
//! every buyer shares.

use crate::history::{
    HistorySink, RequestRecord, WaitingRoomLine, WrAdmittedLine, WrBuyLine, WrEndLine, WrJoinLine,
};
use crate::load::buyer_token::BuyerTokens;
use crate::load::engine::error_chain;
use crate::load::plan::Outcome;
use crate::load::settle::{ticket_of, IssuedTicket};
use crate::load::stats::ShardedHistograms;
use crate::now_us;
use bytes::Bytes;
use hyper::header::HeaderValue;
use seckill_shared::api::{ErrorBody, QueueBody};
use seckill_shared::now_ms;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// The header the buy carries the admission token in.
pub const ADMISSION_HEADER: &str = "Seckill-Admission";

/// Back-off after a request that got no usable answer, before the next gateway.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// Polls come no faster and no slower than this, whatever `refresh_after_ms` says.
const MIN_POLL_MS: u64 = 100;
const MAX_POLL_MS: u64 = 2000;

/// State every buyer shares.
pub(super) struct Room {
    pub(super) client: reqwest::Client,
    pub(super) gateways: Vec<String>,
    pub(super) product: u64,
    pub(super) tokens: Option<BuyerTokens>,
    pub(super) history: HistorySink,
    pub(super) permits: Semaphore,
    pub(super) deadline: Instant,
    pub(super) until_sold_out: bool,
    /// The admin view showed the sale over: sold-out buyers stop.
    pub(super) over: AtomicBool,
    pub(super) histograms: ShardedHistograms,
    pub(super) buys: AtomicU64,
    pub(super) join_attempts: AtomicU64,
    pub(super) polls: AtomicU64,
    pub(super) retries: AtomicU64,
    pub(super) admissions: AtomicU64,
}

/// One HTTP exchange's result.
struct Answer {
    status: Option<u16>,
    body: Bytes,
    error: Option<String>,
    retry_after: Option<Duration>,
}

impl Answer {
    /// No answer, or one a retry on another gateway may fix.
    fn retry_elsewhere(&self) -> bool {
        self.status.is_none_or(|s| s >= 500)
    }

    fn error_text(&self) -> Option<String> {
        if let Some(e) = &self.error {
            return Some(e.clone());
        }
        match self.status {
            Some(200..=299) => None,
            _ => ErrorBody::code_of(&self.body).or_else(|| {
                Some(String::from_utf8_lossy(&self.body[..self.body.len().min(100)]).into())
            }),
        }
    }
}

/// How one buyer ended.
pub(super) struct BuyerResult {
    pub(super) ticket: Option<IssuedTicket>,
    pub(super) joined: bool,
    pub(super) admitted: bool,
    pub(super) state: String,
}

impl Room {
    fn next_gateway(&self, gw: usize) -> usize {
        (gw + 1) % self.gateways.len()
    }

    fn past_deadline(&self) -> bool {
        Instant::now() >= self.deadline
    }

    async fn pause(&self, d: Duration) {
        tokio::time::sleep_until((Instant::now() + d).min(self.deadline).into()).await;
    }

    async fn send(&self, req: reqwest::RequestBuilder, auth: &Option<HeaderValue>) -> Answer {
        let _permit = self
            .permits
            .acquire()
            .await
            .expect("the semaphore is never closed");
        let req = match auth {
            Some(a) => req.header(reqwest::header::AUTHORIZATION, a.clone()),
            None => req,
        };
        let res = match req.send().await {
            Ok(r) => r,
            Err(e) => {
                return Answer {
                    status: None,
                    body: Bytes::new(),
                    error: Some(error_chain(&e)),
                    retry_after: None,
                }
            }
        };
        let status = res.status().as_u16();
        let retry_after = res
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .map(Duration::from_secs);
        match res.bytes().await {
            Ok(body) => Answer {
                status: Some(status),
                body,
                error: None,
                retry_after,
            },
            // The head came, the body did not: as good as no answer.
            Err(e) => Answer {
                status: None,
                body: Bytes::new(),
                error: Some(format!("HTTP {status}, then {}", error_chain(&e))),
                retry_after: None,
            },
        }
    }

    /// Joins until a `202` or the deadline, each attempt a `wr_join` line.
    async fn join(
        &self,
        user: u64,
        gw: &mut usize,
        auth: &Option<HeaderValue>,
    ) -> Option<QueueBody> {
        // The solution to the room's last challenge (a room with a proof of work).
        let mut solved: Option<String> = None;
        loop {
            if self.past_deadline() {
                return None;
            }
            self.join_attempts.fetch_add(1, Ordering::Relaxed);
            let sent_at_ms = now_ms();
            let url = format!("{}/v1/seckill/{}/queue", self.gateways[*gw], self.product);
            let mut req = self.client.post(url);
            if let Some(s) = solved.take() {
                req = req.header(seckill_shared::waiting_room::pow::HEADER, s);
            }
            let a = self.send(req, auth).await;
            let body = (a.status == Some(202))
                .then(|| serde_json::from_slice::<QueueBody>(&a.body).ok())
                .flatten();
            self.history.line(&WaitingRoomLine::WrJoin(WrJoinLine {
                user_id: user,
                gateway: self.gateways[*gw].clone(),
                status: a.status,
                queue_id: body.as_ref().map(|b| b.queue_id.clone()),
                state: body.as_ref().map(|b| b.state.clone()),
                error: a.error_text(),
                sent_at_ms,
                at_ms: now_ms(),
            }));
            if let Some(b) = body {
                return Some(b);
            }
            if a.status == Some(428) {
                solved = crate::pow_bench::answer_challenge(&a.body).await;
                continue;
            }
            if a.status == Some(403)
                && ErrorBody::code_of(&a.body).as_deref() == Some("challenge_invalid")
            {
                continue; // expired meanwhile, or taken by a join whose answer was lost: ask anew
            }
            if a.retry_elsewhere() {
                self.retries.fetch_add(1, Ordering::Relaxed);
                *gw = self.next_gateway(*gw);
                self.pause(RETRY_PAUSE).await;
            } else {
                // Rate limited, not open yet, or Redis lost the product: try again later.
                self.pause(a.retry_after.unwrap_or(Duration::from_millis(500)))
                    .await;
            }
        }
    }

    /// Polls until an answer or the deadline. `Err(())`: the entry is unknown (Redis lost the
    /// line): join again.
    async fn poll(
        &self,
        queue_id: &str,
        gw: &mut usize,
        auth: &Option<HeaderValue>,
        errors: &mut u64,
    ) -> Option<Result<QueueBody, ()>> {
        loop {
            if self.past_deadline() {
                return None;
            }
            let url = format!(
                "{}/v1/seckill/{}/queue/{queue_id}",
                self.gateways[*gw], self.product
            );
            let a = self.send(self.client.get(url), auth).await;
            match a.status {
                Some(200) => match serde_json::from_slice::<QueueBody>(&a.body) {
                    Ok(b) => {
                        self.polls.fetch_add(1, Ordering::Relaxed);
                        return Some(Ok(b));
                    }
                    Err(_) => *errors += 1,
                },
                Some(404) => return Some(Err(())),
                Some(429) => {
                    self.pause(a.retry_after.unwrap_or(Duration::from_millis(500)))
                        .await;
                    continue;
                }
                _ => *errors += 1,
            }
            self.retries.fetch_add(1, Ordering::Relaxed);
            *gw = self.next_gateway(*gw);
            self.pause(RETRY_PAUSE).await;
        }
    }

    /// Buys with the admission while it lasts: a request that got no answer (or a 5xx) is
    /// retried on the next gateway. `None`: refused (sold out, not admitted any more).
    async fn buy(
        &self,
        user: u64,
        gw: &mut usize,
        auth: &Option<HeaderValue>,
        token: &str,
        until_ms: i64,
    ) -> Option<IssuedTicket> {
        let admission = HeaderValue::try_from(token).ok()?;
        loop {
            if now_ms() >= until_ms || self.past_deadline() {
                return None;
            }
            let url = format!("{}/v1/seckill/{}", self.gateways[*gw], self.product);
            let req = self
                .client
                .post(url)
                .header(ADMISSION_HEADER, admission.clone())
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(format!("{{\"user_id\":{user}}}"));
            let sent_at_us = now_us();
            let t0 = Instant::now();
            let a = self.send(req, auth).await;
            let service_us = t0.elapsed().as_micros() as u64;
            self.buys.fetch_add(1, Ordering::Relaxed);
            let outcome = if a.error.is_some() {
                Outcome::Error
            } else {
                Outcome::classify(a.status)
            };
            self.histograms.record(0, outcome, service_us, None, None);
            let ticket = outcome.has_ticket().then(|| ticket_of(&a.body)).flatten();
            let error = a.error_text();
            if self.history.enabled() {
                self.history.send(vec![RequestRecord {
                    sent_at_us,
                    recv_at_us: sent_at_us + service_us,
                    gateway: *gw as u16,
                    user_id: Some(user),
                    quantity: 1,
                    status: a.status,
                    ticket: ticket.clone(),
                    error: a.error.as_deref().map(Into::into),
                }]);
                self.history.line(&WaitingRoomLine::WrBuy(WrBuyLine {
                    user_id: user,
                    admission_token: Some(token.to_owned()),
                    admitted_until_ms: Some(until_ms),
                    sent_at_us,
                    gateway: self.gateways[*gw].clone(),
                    status: a.status,
                    ticket: ticket.as_deref().map(str::to_owned),
                    error,
                }));
            }
            if let Some(t) = ticket {
                return Some(IssuedTicket {
                    quantity: 1,
                    ticket: t.to_string(),
                    user_id: user,
                    gateway: *gw,
                    answered_at_us: sent_at_us + service_us,
                    fresh: outcome == Outcome::Accepted,
                    auth: auth.clone(),
                });
            }
            match a.status {
                _ if a.retry_elsewhere() => {
                    self.retries.fetch_add(1, Ordering::Relaxed);
                    *gw = self.next_gateway(*gw);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Some(429) => {
                    self.pause(a.retry_after.unwrap_or(Duration::from_millis(200)))
                        .await
                }
                _ => return None,
            }
        }
    }

    pub(super) async fn buyer(self: Arc<Self>, user: u64) -> BuyerResult {
        let mut gw = (user as usize) % self.gateways.len();
        let auth = self.tokens.as_ref().map(|t| t.header(user));
        let (mut polls, mut errors) = (0u64, 0u64);
        let mut out = BuyerResult {
            ticket: None,
            joined: false,
            admitted: false,
            state: "not_joined".into(),
        };
        let mut seen_until = None;
        let mut queue_id: Option<String> = None;
        'join: loop {
            let Some(mut q) = self.join(user, &mut gw, &auth).await else {
                break 'join;
            };
            out.joined = true;
            queue_id = Some(q.queue_id.clone());
            loop {
                out.state.clone_from(&q.state);
                let mut pause = q.refresh_after_ms;
                match q.state.as_str() {
                    "admitted" => {
                        if let (Some(token), Some(until)) =
                            (&q.admission_token, q.admitted_until_ms)
                        {
                            out.admitted = true;
                            if seen_until != Some(until) {
                                seen_until = Some(until);
                                self.admissions.fetch_add(1, Ordering::Relaxed);
                                self.history
                                    .line(&WaitingRoomLine::WrAdmitted(WrAdmittedLine {
                                        user_id: user,
                                        queue_id: q.queue_id.clone(),
                                        admitted_until_ms: until,
                                        gateway: self.gateways[gw].clone(),
                                        at_ms: now_ms(),
                                    }));
                            }
                            if let Some(t) = self.buy(user, &mut gw, &auth, token, until).await {
                                out.ticket = Some(t);
                                out.state = "bought".into();
                                break 'join;
                            }
                            if self.over.load(Ordering::Relaxed) {
                                out.state = "sold_out".into();
                                break 'join;
                            }
                            // Refused: the line says why (sold out, taken back, lapsed).
                            pause = 0;
                        }
                    }
                    "bought" | "expired" | "ended" => break 'join,
                    "sold_out" if !self.until_sold_out || self.over.load(Ordering::Relaxed) => {
                        break 'join
                    }
                    _ => {}
                }
                if self.past_deadline() {
                    break 'join;
                }
                self.pause(Duration::from_millis(pause.clamp(MIN_POLL_MS, MAX_POLL_MS)))
                    .await;
                match self.poll(&q.queue_id, &mut gw, &auth, &mut errors).await {
                    None => break 'join,
                    Some(Ok(next)) => {
                        polls += 1;
                        q = next;
                    }
                    Some(Err(())) => continue 'join,
                }
            }
        }
        self.history.line(&WaitingRoomLine::WrEnd(WrEndLine {
            user_id: user,
            queue_id,
            state: out.state.clone(),
            polls,
            poll_errors: errors,
            at_ms: now_ms(),
        }));
        out
    }
}
