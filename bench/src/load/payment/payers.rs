//! The run's paying (and cancelling) buyers: each in its own task, looking at its ticket and
//! paying or cancelling through the gateways, with its requests written to the history.

use super::answers::{PairOutcome, PayAnswer, PayState, TicketView};
use super::steps::{end_status, next_step, retry_delay, role, PayPolicy, Role, Step, POLL_EVERY};
use super::summary::{DoublePaySummary, PayEnds, PaymentSummary};
use crate::history::{CancelLine, HistorySink, PayEndLine, PayLine, PaymentLine};
use crate::load::cancel::{self, CancelAnswer, CancelEnd, CancelStep, CancelSummary};
use crate::load::engine::error_chain;
use crate::load::settle::IssuedTicket;
use hyper::header::HeaderValue;
use seckill_shared::api::ErrorBody;
use seckill_shared::TicketStatus;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

#[derive(Default)]
struct Counts {
    attempts: AtomicU64,
    requests: AtomicU64,
    accepted: AtomicU64,
    unavailable: AtomicU64,
    other_status: AtomicU64,
    no_answer: AtomicU64,
    refused: Mutex<BTreeMap<String, u64>>,
    /// Paying buyers who saw their ticket paid (for the progress line).
    paid: AtomicU64,
    pairs: AtomicU64,
    pairs_both_accepted: AtomicU64,
    pairs_one_in_progress: AtomicU64,
    cancel_requests: AtomicU64,
    cancelled: AtomicU64,
    /// `409` answers to a cancel, by the state named.
    cancel_refused: Mutex<BTreeMap<String, u64>>,
    cancel_unavailable: AtomicU64,
    cancel_other_status: AtomicU64,
    cancel_no_answer: AtomicU64,
}

#[derive(Default)]
struct Book {
    seen: HashSet<String>,
    not_paying: u64,
    buyers: JoinSet<PayEndLine>,
    /// Each cancelling buyer's end, and whether a `409 pending` came before it.
    cancellers: JoinSet<(CancelEnd, bool)>,
}

/// The last answer to one `Idempotency-Key`, after its retries.
struct KeyEnd {
    answer: PayAnswer,
    retries: u32,
}

/// The run's paying buyers.
pub struct Payers {
    client: reqwest::Client,
    gateways: Vec<String>,
    rate: f64,
    /// `--cancel-rate`.
    cancel_rate: f64,
    seed: u64,
    policy: PayPolicy,
    /// How long after its buy a buyer waits for its ticket to be confirmed.
    confirm_wait: Duration,
    /// A random part of every `Idempotency-Key`, so that keys differ between runs.
    nonce: u64,
    history: HistorySink,
    /// HTTP calls in flight, all buyers together.
    calls: Semaphore,
    counts: Counts,
    book: Mutex<Book>,
}

fn now_ms() -> i64 {
    (crate::now_us() / 1000) as i64
}

impl Payers {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: reqwest::Client,
        gateways: Vec<String>,
        rate: f64,
        cancel_rate: f64,
        seed: u64,
        policy: PayPolicy,
        confirm_wait: Duration,
        concurrency: usize,
        history: HistorySink,
    ) -> Self {
        Self {
            client,
            gateways,
            rate,
            cancel_rate,
            seed,
            policy,
            confirm_wait,
            nonce: rand::random(),
            history,
            calls: Semaphore::new(concurrency.max(1)),
            counts: Counts::default(),
            book: Mutex::default(),
        }
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A ticket the load was handed: its buyer starts cancelling or paying if it is one who
    /// does ([`role`]). A ticket offered again (a `200` repeating it) is ignored. Call from
    /// within the runtime.
    pub fn offer(self: &Arc<Self>, t: &IssuedTicket) {
        let mut book = self.book();
        if !book.seen.insert(t.ticket.clone()) {
            return;
        }
        match role(self.seed, t.user_id, self.cancel_rate, self.rate) {
            Role::Cancels => {
                book.cancellers.spawn(self.clone().canceller(t.clone()));
            }
            Role::Pays => {
                book.buyers.spawn(self.clone().buyer(t.clone()));
            }
            Role::Idle => book.not_paying += 1,
        }
    }

    /// Buyers paying or done paying, and those who saw their ticket paid.
    pub fn progress(&self) -> (u64, u64) {
        let paying = self.book().buyers.len() as u64;
        (paying, self.counts.paid.load(Ordering::Relaxed))
    }

    /// Waits for every cancelling and paying buyer to stop, and sums up. Buyers offered after
    /// this are not waited for.
    pub async fn finish(&self) -> PaymentSummary {
        let (mut buyers, mut cancellers, not_paying) = {
            let mut book = self.book();
            (
                std::mem::take(&mut book.buyers),
                std::mem::take(&mut book.cancellers),
                book.not_paying,
            )
        };
        let mut cancel_ends = cancel::CancelEnds::default();
        let mut cancelling = 0;
        while let Some(end) = cancellers.join_next().await {
            cancelling += 1;
            match end {
                Ok((CancelEnd::Cancelled, after_pending)) => {
                    cancel_ends.cancelled += 1;
                    cancel_ends.cancelled_after_pending += u64::from(after_pending);
                }
                Ok((CancelEnd::Refused(state), _)) => {
                    *cancel_ends.refused.entry(state).or_default() += 1
                }
                Ok((CancelEnd::GaveUp, _)) | Err(_) => cancel_ends.gave_up += 1,
            }
        }
        let mut ended = PayEnds::default();
        let mut paying = 0;
        while let Some(end) = buyers.join_next().await {
            paying += 1;
            let Ok(end) = end else {
                ended.other += 1;
                continue;
            };
            match end.status.as_str() {
                "paid" => ended.paid += 1,
                "cancelled" => ended.cancelled += 1,
                "confirmed" => ended.confirmed += 1,
                _ => ended.other += 1,
            }
        }
        let c = &self.counts;
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        PaymentSummary {
            pay_rate: self.rate,
            seed: self.seed,
            buyers_paying: paying,
            buyers_not_paying: not_paying,
            attempts: n(&c.attempts),
            requests: n(&c.requests),
            accepted: n(&c.accepted),
            refused: c.refused.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            unavailable: n(&c.unavailable),
            other_status: n(&c.other_status),
            no_answer: n(&c.no_answer),
            ended,
            settled_paid: 0,
            settled_cancelled: 0,
            double_pay: self.policy.double_pay.then(|| DoublePaySummary {
                pairs: n(&c.pairs),
                both_accepted: n(&c.pairs_both_accepted),
                one_in_progress: n(&c.pairs_one_in_progress),
            }),
            cancels: (self.cancel_rate > 0.0).then(|| CancelSummary {
                cancel_rate: self.cancel_rate,
                buyers_cancelling: cancelling,
                requests: n(&c.cancel_requests),
                cancelled: n(&c.cancelled),
                refused: c
                    .cancel_refused
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone(),
                unavailable: n(&c.cancel_unavailable),
                other_status: n(&c.cancel_other_status),
                no_answer: n(&c.cancel_no_answer),
                ended: cancel_ends,
            }),
        }
    }

    /// One cancelling buyer, from its ticket's `202` to a final answer or `--settle-timeout`
    /// later: its end, and whether a `409` as `pending` came first.
    async fn canceller(self: Arc<Self>, t: IssuedTicket) -> (CancelEnd, bool) {
        let give_up_at = now_ms().saturating_add(self.confirm_wait.as_millis() as i64);
        let (mut tries, mut fails, mut saw_pending) = (0u32, 0usize, false);
        loop {
            tries += 1;
            let base = &self.gateways[(t.gateway + fails) % self.gateways.len()];
            let sent_at_ms = now_ms();
            let (status, body, error) = {
                let _call = self.calls.acquire().await;
                let req = with_auth(
                    self.client
                        .post(format!("{base}/v1/orders/{}/cancel", t.ticket)),
                    &t.auth,
                );
                send(req).await
            };
            let answer = CancelAnswer::classify(status, &body);
            self.count_cancel(status, &answer);
            let (state, reason, code) = match &answer {
                CancelAnswer::Cancelled { state, reason } => (state.clone(), reason.clone(), None),
                CancelAnswer::Refused { code, state } => (state.clone(), None, Some(code.clone())),
                _ => (None, None, error.or_else(|| error_code(&body))),
            };
            self.history.line(&PaymentLine::Cancel(CancelLine {
                ticket: t.ticket.clone(),
                user_id: t.user_id,
                attempt: tries,
                status,
                error: code,
                state,
                reason,
                sent_at_ms,
                at_ms: now_ms(),
            }));
            saw_pending |= answer.not_yet();
            if answer == CancelAnswer::Retry {
                fails += 1;
            }
            match cancel::next_try(&answer, now_ms(), give_up_at, rand::random()) {
                CancelStep::Again(pause) => tokio::time::sleep(pause).await,
                CancelStep::Done(end) => return (end, saw_pending),
            }
        }
    }

    fn count_cancel(&self, status: Option<u16>, answer: &CancelAnswer) {
        let c = &self.counts;
        c.cancel_requests.fetch_add(1, Ordering::Relaxed);
        let counter = match answer {
            CancelAnswer::Cancelled { .. } => &c.cancelled,
            CancelAnswer::Refused { code, state } => {
                let key = state.clone().unwrap_or_else(|| code.clone());
                *c.cancel_refused
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .entry(key)
                    .or_default() += 1;
                return;
            }
            CancelAnswer::Retry if status.is_none() => &c.cancel_no_answer,
            CancelAnswer::Retry => &c.cancel_unavailable,
            CancelAnswer::Other => &c.cancel_other_status,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// One paying buyer, from its ticket's `202` to its last look.
    async fn buyer(self: Arc<Self>, t: IssuedTicket) -> PayEndLine {
        let confirm_by = now_ms().saturating_add(self.confirm_wait.as_millis() as i64);
        let mut st = PayState::default();
        let mut seen: Option<TicketView> = None;
        // Failed calls so far: each moves the buyer on to the next gateway.
        let mut fails = 0usize;
        loop {
            match self.look(&t, t.gateway + fails).await {
                Some(v) => seen = Some(v),
                None => fails += 1,
            }
            match next_step(seen.as_ref(), now_ms(), confirm_by, &st, &self.policy) {
                Step::Stop => break,
                Step::Look(after) => tokio::time::sleep(after).await,
                Step::Pay => {
                    let pay_by = seen.as_ref().and_then(|v| v.pay_by_ms).unwrap_or(i64::MAX);
                    let (gw, first) = (t.gateway + fails, st.keys + 1);
                    let ends = if self.policy.double_pay {
                        // Two tabs: two keys at once, each on its own gateway.
                        let (a, b) = tokio::join!(
                            self.pay_key(&t, first, pay_by, gw),
                            self.pay_key(&t, first + 1, pay_by, gw + 1)
                        );
                        self.count_pair(PairOutcome::of(&a.answer, &b.answer));
                        vec![a, b]
                    } else {
                        vec![self.pay_key(&t, first, pay_by, gw).await]
                    };
                    fails += ends.iter().map(|e| e.retries as usize).sum::<usize>();
                    st.record(ends.iter().map(|e| &e.answer), now_ms());
                    tokio::time::sleep(POLL_EVERY).await;
                }
            }
        }
        if seen
            .as_ref()
            .is_some_and(|v| v.status == TicketStatus::Paid)
        {
            self.counts.paid.fetch_add(1, Ordering::Relaxed);
        }
        let end = PayEndLine {
            ticket: t.ticket.clone(),
            user_id: t.user_id,
            status: end_status(seen.as_ref()).to_owned(),
            reason: seen.as_ref().and_then(|v| v.reason.clone()),
            pay_by_ms: seen.as_ref().and_then(|v| v.pay_by_ms),
            paid_at_ms: seen.as_ref().and_then(|v| v.paid_at_ms),
            cancelled_at_ms: seen.as_ref().and_then(|v| v.cancelled_at_ms),
            attempts: st.keys,
            accepted: st.accepted,
            at_ms: now_ms(),
        };
        self.history.line(&PaymentLine::PayEnd(end.clone()));
        end
    }

    /// `GET /v1/orders/{ticket}` on gateway `gw` (modulo their number); `None` on any failure.
    async fn look(&self, t: &IssuedTicket, gw: usize) -> Option<TicketView> {
        let base = &self.gateways[gw % self.gateways.len()];
        let _call = self.calls.acquire().await.ok()?;
        let res = with_auth(
            self.client.get(format!("{base}/v1/orders/{}", t.ticket)),
            &t.auth,
        )
        .send()
        .await
        .ok()?;
        if !res.status().is_success() {
            return None;
        }
        serde_json::from_slice(&res.bytes().await.ok()?).ok()
    }

    /// One payment attempt's key (`attempt`: the buyer's key number), tried again while
    /// answered `503` or not at all (and before `pay_by_ms`). Returns its last answer, and the
    /// failed calls, for the choice of gateway.
    async fn pay_key(&self, t: &IssuedTicket, attempt: u32, pay_by_ms: i64, gw: usize) -> KeyEnd {
        self.counts.attempts.fetch_add(1, Ordering::Relaxed);
        let key = format!("bench-{:016x}-{}-{}", self.nonce, t.ticket, attempt);
        let mut retries = 0u32;
        loop {
            let base = &self.gateways[(gw + retries as usize) % self.gateways.len()];
            let sent_at_ms = now_ms();
            let (status, body, error) = {
                let _call = self.calls.acquire().await;
                let req = with_auth(
                    self.client
                        .post(format!("{base}/v1/orders/{}/pay", t.ticket)),
                    &t.auth,
                )
                .header("Idempotency-Key", &key);
                send(req).await
            };
            let answer = PayAnswer::classify(status, &body);
            self.count(status, &answer);
            let (payment_id, code, state) = match &answer {
                PayAnswer::Accepted { payment_id } => (payment_id.clone(), None, None),
                PayAnswer::Refused { why, state } => {
                    (None, Some(why.code().to_owned()), state.clone())
                }
                _ => (None, error, None),
            };
            self.history.line(&PaymentLine::Pay(PayLine {
                ticket: t.ticket.clone(),
                user_id: t.user_id,
                attempt,
                idempotency_key: key.clone(),
                status,
                payment_id,
                error: code,
                state,
                sent_at_ms,
                at_ms: now_ms(),
            }));
            if answer == PayAnswer::Retry {
                retries += 1;
                if let Some(wait) = retry_delay(retries) {
                    if now_ms().saturating_add(wait.as_millis() as i64) < pay_by_ms {
                        tokio::time::sleep(wait).await;
                        continue;
                    }
                }
            }
            return KeyEnd { answer, retries };
        }
    }

    fn count_pair(&self, outcome: PairOutcome) {
        let c = &self.counts;
        c.pairs.fetch_add(1, Ordering::Relaxed);
        match outcome {
            PairOutcome::BothAccepted => &c.pairs_both_accepted,
            PairOutcome::OneInProgress => &c.pairs_one_in_progress,
            PairOutcome::Other => return,
        }
        .fetch_add(1, Ordering::Relaxed);
    }

    fn count(&self, status: Option<u16>, answer: &PayAnswer) {
        let c = &self.counts;
        c.requests.fetch_add(1, Ordering::Relaxed);
        let counter = match (status, answer) {
            (_, PayAnswer::Accepted { .. }) => &c.accepted,
            (_, PayAnswer::Refused { why, .. }) => {
                *c.refused
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .entry(why.code().to_owned())
                    .or_default() += 1;
                return;
            }
            (None, _) => &c.no_answer,
            (Some(503), _) => &c.unavailable,
            (Some(_), _) => &c.other_status,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Sends `req`: its status and body, or the transport error.
async fn send(req: reqwest::RequestBuilder) -> (Option<u16>, bytes::Bytes, Option<String>) {
    match req.send().await {
        Ok(res) => {
            let status = res.status().as_u16();
            match res.bytes().await {
                Ok(b) => (Some(status), b, None),
                Err(e) => (None, Default::default(), Some(error_chain(&e))),
            }
        }
        Err(e) => (None, Default::default(), Some(error_chain(&e))),
    }
}

/// The `error` field of a JSON error body.
fn error_code(body: &[u8]) -> Option<String> {
    ErrorBody::code_of(body)
}

fn with_auth(req: reqwest::RequestBuilder, auth: &Option<HeaderValue>) -> reqwest::RequestBuilder {
    match auth {
        Some(a) => req.header(reqwest::header::AUTHORIZATION, a.clone()),
        None => req,
    }
}
