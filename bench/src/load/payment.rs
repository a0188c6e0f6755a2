//! `--pay-rate`: buyers who pay for their order, or do not.
//!
//! Every distinct ticket the load is handed goes to [`Payers::offer`]. Whether its buyer pays
//! is decided once per user from the run's seed ([`pays`]), so the same seed picks the same
//! buyers whatever order the answers come in. A buyer who does not pay is left alone: the
//! system cancels its order when the payment window closes, and its unit goes back on sale.
//!
//! A paying buyer runs in its own task, looking at its ticket (`GET /v1/orders/{ticket}`) and
//! deciding what to do next with the pure [`next_step`]:
//!
//! - `pending`: look again, until `--settle-timeout` after the buy;
//! - `confirmed` with a `pay_by_ms`: pay (`POST /v1/orders/{ticket}/pay`, a fresh
//!   `Idempotency-Key`; a `503` or no answer is retried with the same key, [`retry_delay`]);
//!   still `confirmed` `--pay-retry-after-ms` after an attempt (the provider declined, or
//!   another payment was in progress), pay again with a new key: at most [`MAX_PAYMENTS`]
//!   payments and [`MAX_KEYS`] keys, and only before `pay_by_ms`;
//! - then look until the ticket is `paid` or `cancelled`, at most `--pay-grace-secs` past
//!   `pay_by_ms`;
//! - `confirmed` without `pay_by_ms` (no payment window), `failed`, `paid`, `cancelled`: stop.
//!
//! With `--double-pay`, each payment attempt is two requests at once, each with its own key
//! and on its own gateway, as a buyer paying from two tabs: the gateway must take one and
//! answer the other `409 payment_in_progress` ([`PairOutcome`]).
//!
//! With `--cancel-rate`, a buyer picked by [`super::cancel::cancels`] cancels instead of paying,
//! from its `202` on ([`super::cancel`]); the others pay at `--pay-rate`.
//!
//! Each request to pay is a `pay` line of the history, each paying buyer's last look a
//! `pay_end` line, and each request to cancel a `cancel` line
//! ([`crate::history::PaymentLine`]). HTTP calls of all the buyers together are bounded by
//! `--settle-concurrency`.

use super::cancel::{self, CancelAnswer, CancelEnd, CancelStep, CancelSummary};
pub use super::draw::pays;
use super::engine::error_chain;
use super::settle::IssuedTicket;
use crate::history::{CancelLine, HistorySink, PayEndLine, PayLine, PaymentLine};
use hyper::header::HeaderValue;
use seckill_shared::TicketStatus;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Most payments (keys answered `202`) one buyer makes.
pub const MAX_PAYMENTS: u32 = 3;
/// Most `Idempotency-Key`s one buyer tries, refused ones included.
pub const MAX_KEYS: u32 = 8;
/// Looks at a ticket are this far apart while something is expected soon...
pub const POLL_EVERY: Duration = Duration::from_millis(200);
/// ...and this far apart while the buyer only waits for its deadline to pass.
pub const POLL_IDLE: Duration = Duration::from_secs(1);
/// Tries of one key after the first that a `503` (or no answer) brings.
pub const KEY_RETRIES: u32 = 5;

/// What a buyer is to do with its ticket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Cancel it as soon as the gateway lets it (`--cancel-rate`).
    Cancels,
    /// Pay for it (`--pay-rate`).
    Pays,
    /// Nothing: the payment window closes on it.
    Idle,
}

/// The role of `user` in the run seeded with `seed`: cancelling first, then paying, each its
/// own draw.
pub fn role(seed: u64, user: u64, cancel_rate: f64, pay_rate: f64) -> Role {
    if cancel::cancels(seed, user, cancel_rate) {
        Role::Cancels
    } else if pays(seed, user, pay_rate) {
        Role::Pays
    } else {
        Role::Idle
    }
}

/// The wait before retry number `retry` (1, 2, ...) of a key answered `503` or not at all:
/// 100 ms, doubling; `None` once [`KEY_RETRIES`] retries are spent.
pub fn retry_delay(retry: u32) -> Option<Duration> {
    (1..=KEY_RETRIES)
        .contains(&retry)
        .then(|| Duration::from_millis(100 << (retry - 1)))
}

/// A ticket as a look at `GET /v1/orders/{ticket}` saw it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TicketView {
    pub status: TicketStatus,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub pay_by_ms: Option<i64>,
    #[serde(default)]
    pub paid_at_ms: Option<i64>,
    #[serde(default)]
    pub cancelled_at_ms: Option<i64>,
}

/// Why a `409` refused a payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// `not_payable`: the ticket is not a confirmed order with a payment window.
    NotPayable,
    /// `payment_window_closed`: `pay_by_ms` has passed.
    WindowClosed,
    /// `payment_in_progress`: another payment of the ticket awaits the provider.
    InProgress,
    /// A code this tool does not know.
    Other(String),
}

impl Refusal {
    fn parse(code: &str) -> Self {
        match code {
            "not_payable" => Self::NotPayable,
            "payment_window_closed" => Self::WindowClosed,
            "payment_in_progress" => Self::InProgress,
            other => Self::Other(other.to_owned()),
        }
    }

    pub fn code(&self) -> &str {
        match self {
            Self::NotPayable => "not_payable",
            Self::WindowClosed => "payment_window_closed",
            Self::InProgress => "payment_in_progress",
            Self::Other(code) => code,
        }
    }
}

/// What an answer to `POST /v1/orders/{ticket}/pay` means to the buyer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PayAnswer {
    /// `202`: sent to the provider.
    Accepted { payment_id: Option<String> },
    /// `409`.
    Refused { why: Refusal, state: Option<String> },
    /// `503` (the provider or a store is unreachable), `429`, or no answer: the same key
    /// again, after [`retry_delay`].
    Retry,
    /// Anything else: this key is given up.
    Other,
}

impl PayAnswer {
    pub fn classify(status: Option<u16>, body: &[u8]) -> Self {
        #[derive(Deserialize)]
        struct Body {
            #[serde(default)]
            payment_id: Option<String>,
            #[serde(default)]
            error: Option<String>,
            #[serde(default)]
            state: Option<String>,
        }
        let body = serde_json::from_slice::<Body>(body).ok();
        match status {
            Some(202) => Self::Accepted {
                payment_id: body.and_then(|b| b.payment_id),
            },
            Some(409) => {
                let (code, state) = body.map_or((None, None), |b| (b.error, b.state));
                Self::Refused {
                    why: Refusal::parse(code.as_deref().unwrap_or("unknown")),
                    state,
                }
            }
            None | Some(429) | Some(503) => Self::Retry,
            Some(_) => Self::Other,
        }
    }
}

/// How the two requests of one `--double-pay` attempt were answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairOutcome {
    /// Both `202`, with two payments: two charges in progress at once.
    BothAccepted,
    /// One `202`, the other `409 payment_in_progress`: what the API promises.
    OneInProgress,
    /// Anything else (both refused, one unavailable...).
    Other,
}

impl PairOutcome {
    pub fn of(a: &PayAnswer, b: &PayAnswer) -> Self {
        use PayAnswer::{Accepted, Refused};
        let in_progress = |x: &PayAnswer| {
            matches!(
                x,
                Refused {
                    why: Refusal::InProgress,
                    ..
                }
            )
        };
        match (a, b) {
            (Accepted { payment_id: x }, Accepted { payment_id: y }) if x.is_none() || x != y => {
                Self::BothAccepted
            }
            (Accepted { .. }, o) | (o, Accepted { .. }) if in_progress(o) => Self::OneInProgress,
            _ => Self::Other,
        }
    }
}

/// What one buyer has done so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PayState {
    /// `Idempotency-Key`s used.
    pub keys: u32,
    /// Of those, answered `202`.
    pub accepted: u32,
    /// When the last key's tries ended, ms since the epoch (client clock).
    pub last_attempt_ms: Option<i64>,
    /// A `409 payment_window_closed` was seen.
    pub window_closed: bool,
}

impl PayState {
    /// The last answers of the keys of one attempt (two with `--double-pay`), whose tries
    /// ended at `now_ms`.
    pub fn record<'a>(&mut self, answers: impl IntoIterator<Item = &'a PayAnswer>, now_ms: i64) {
        for a in answers {
            self.keys += 1;
            match a {
                PayAnswer::Accepted { .. } => self.accepted += 1,
                PayAnswer::Refused {
                    why: Refusal::WindowClosed,
                    ..
                } => self.window_closed = true,
                _ => {}
            }
        }
        self.last_attempt_ms = Some(now_ms);
    }
}

/// The run's rules for paying buyers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayPolicy {
    /// `--pay-retry-after-ms`.
    pub retry_after_ms: i64,
    /// `--pay-grace-secs`, in ms.
    pub grace_ms: i64,
    /// `--double-pay`: each attempt is two requests at once, with two keys.
    pub double_pay: bool,
}

/// What a buyer does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Pay with a new key.
    Pay,
    /// Look at the ticket again after this long.
    Look(Duration),
    /// Nothing more to do or to wait for.
    Stop,
}

/// The buyer's next step, from its last look at the ticket (`None`: no look answered yet),
/// the time (ms since the epoch), when it gives up waiting for a confirmation, and what it has
/// done so far.
pub fn next_step(
    seen: Option<&TicketView>,
    now_ms: i64,
    confirm_by_ms: i64,
    st: &PayState,
    policy: &PayPolicy,
) -> Step {
    let waiting = || {
        if now_ms >= confirm_by_ms {
            Step::Stop
        } else {
            Step::Look(POLL_EVERY)
        }
    };
    let Some(v) = seen else {
        return waiting();
    };
    match v.status {
        TicketStatus::Pending => waiting(),
        TicketStatus::Paid | TicketStatus::Cancelled | TicketStatus::Failed => Step::Stop,
        TicketStatus::Confirmed => {
            // No payment window: the order is final once confirmed.
            let Some(pay_by) = v.pay_by_ms else {
                return Step::Stop;
            };
            if now_ms >= pay_by.saturating_add(policy.grace_ms) {
                return Step::Stop;
            }
            if now_ms >= pay_by || st.window_closed {
                // The window closed: the cancel is due any moment.
                return Step::Look(POLL_EVERY);
            }
            if st.accepted >= MAX_PAYMENTS || st.keys >= MAX_KEYS {
                // Out of tries: a late success may still come; else the window closes.
                let until_pay_by = Duration::from_millis((pay_by - now_ms) as u64);
                return Step::Look(POLL_IDLE.min(until_pay_by).max(POLL_EVERY));
            }
            match st.last_attempt_ms {
                Some(at) if now_ms - at < policy.retry_after_ms => Step::Look(POLL_EVERY),
                _ => Step::Pay,
            }
        }
    }
}

/// A paying buyer's last look, as its `pay_end` line says: `paid`, `cancelled`, `confirmed`,
/// `failed`, `pending` or `unknown`.
pub fn end_status(seen: Option<&TicketView>) -> &'static str {
    seen.map_or("unknown", |v| v.status.as_str())
}

/// How the paying buyers' tickets ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PayEnds {
    pub paid: u64,
    pub cancelled: u64,
    /// Still unpaid when the buyer stopped looking, past its deadline and the grace.
    pub confirmed: u64,
    /// Never payable: failed, never confirmed in time, or never seen.
    pub other: u64,
}

/// The summary's `payments`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PaymentSummary {
    /// `--pay-rate`.
    pub pay_rate: f64,
    /// The seed that picked the paying buyers (`--seed`, or drawn at random).
    pub seed: u64,
    /// Distinct tickets whose buyer pays, and whose buyer neither pays nor cancels.
    pub buyers_paying: u64,
    pub buyers_not_paying: u64,
    /// `Idempotency-Key`s used: payment attempts.
    pub attempts: u64,
    /// Requests to pay sent, retries of a key included.
    pub requests: u64,
    /// Answered `202`.
    pub accepted: u64,
    /// Answered `409`, by error code.
    pub refused: BTreeMap<String, u64>,
    /// Answered `503`.
    pub unavailable: u64,
    /// Answered with another status.
    pub other_status: u64,
    /// Not answered (transport error).
    pub no_answer: u64,
    /// The paying buyers' tickets when they stopped looking.
    pub ended: PayEnds,
    /// Tickets (of all buyers) the polling after the load saw `paid` and `cancelled`; they are
    /// not among the summary's `tickets`.
    pub settled_paid: u64,
    pub settled_cancelled: u64,
    /// `--double-pay`: how the pairs of requests were answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub double_pay: Option<DoublePaySummary>,
    /// `--cancel-rate`: the buyers who cancel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancels: Option<CancelSummary>,
}

/// The summary's `payments.double_pay`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DoublePaySummary {
    /// Attempts made as two requests at once.
    pub pairs: u64,
    /// Pairs both answered `202` with two payments ([`PairOutcome::BothAccepted`]).
    pub both_accepted: u64,
    /// Pairs answered `202` and `409 payment_in_progress`.
    pub one_in_progress: u64,
}

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
    #[derive(Deserialize)]
    struct Body {
        error: Option<String>,
    }
    serde_json::from_slice::<Body>(body).ok()?.error
}

fn with_auth(req: reqwest::RequestBuilder, auth: &Option<HeaderValue>) -> reqwest::RequestBuilder {
    match auth {
        Some(a) => req.header(reqwest::header::AUTHORIZATION, a.clone()),
        None => req,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: PayPolicy = PayPolicy {
        retry_after_ms: 1000,
        grace_ms: 5000,
        double_pay: false,
    };

    fn view(status: TicketStatus, pay_by_ms: Option<i64>) -> TicketView {
        TicketView {
            status,
            reason: None,
            pay_by_ms,
            paid_at_ms: None,
            cancelled_at_ms: None,
        }
    }

    #[test]
    fn the_same_seed_picks_the_same_buyers_and_about_the_rate() {
        let picked = |seed, rate| (1..=10_000u64).filter(|u| pays(seed, *u, rate)).count();
        assert_eq!(picked(7, 0.0), 0);
        assert_eq!(picked(7, 1.0), 10_000);
        let n = picked(7, 0.3);
        assert!((2_800..3_200).contains(&n), "{n}");
        assert_eq!(picked(7, 0.3), n);
        // Another seed, other buyers.
        let a: Vec<u64> = (1..=200).filter(|u| pays(1, *u, 0.5)).collect();
        let b: Vec<u64> = (1..=200).filter(|u| pays(2, *u, 0.5)).collect();
        assert_ne!(a, b);
        // A buyer who pays at a rate pays at every higher rate.
        for u in 1..=1000 {
            assert!(!pays(3, u, 0.2) || pays(3, u, 0.6), "user {u}");
        }
    }

    #[test]
    fn a_buyer_cancels_pays_or_idles_and_paying_buyers_stay_as_they_were_without_cancels() {
        // Without cancels, the buyers who pay are those of `pays`, as before --cancel-rate.
        for u in 1..=2_000 {
            let expected = if pays(5, u, 0.7) {
                Role::Pays
            } else {
                Role::Idle
            };
            assert_eq!(role(5, u, 0.0, 0.7), expected, "user {u}");
        }
        // Half cancel; the others all pay at --pay-rate 1.
        let roles: Vec<Role> = (1..=10_000).map(|u| role(5, u, 0.5, 1.0)).collect();
        let n = |r| roles.iter().filter(|x| **x == r).count();
        assert!(
            (4_800..5_200).contains(&n(Role::Cancels)),
            "{}",
            n(Role::Cancels)
        );
        assert_eq!(n(Role::Cancels) + n(Role::Pays), 10_000);
        // Cancelling comes first: a buyer drawn to both cancels.
        let both = (1..=10_000).find(|u| pays(5, *u, 0.5) && cancel::cancels(5, *u, 0.5));
        let both = both.expect("some buyer is drawn to both");
        assert_eq!(role(5, both, 0.5, 0.5), Role::Cancels);
        assert_eq!(role(5, both, 0.0, 0.5), Role::Pays);
    }

    #[test]
    fn the_two_answers_of_a_double_pay_are_told_apart() {
        let ok = |id: &str| PayAnswer::Accepted {
            payment_id: Some(id.into()),
        };
        let busy = PayAnswer::Refused {
            why: Refusal::InProgress,
            state: None,
        };
        assert_eq!(
            PairOutcome::of(&ok("pay_1"), &busy),
            PairOutcome::OneInProgress
        );
        assert_eq!(
            PairOutcome::of(&busy, &ok("pay_1")),
            PairOutcome::OneInProgress
        );
        assert_eq!(
            PairOutcome::of(&ok("pay_1"), &ok("pay_2")),
            PairOutcome::BothAccepted
        );
        let unnamed = PayAnswer::Accepted { payment_id: None };
        assert_eq!(
            PairOutcome::of(&unnamed, &unnamed),
            PairOutcome::BothAccepted
        );
        // The same payment answered twice is one charge.
        assert_eq!(
            PairOutcome::of(&ok("pay_1"), &ok("pay_1")),
            PairOutcome::Other
        );
        let closed = PayAnswer::Refused {
            why: Refusal::WindowClosed,
            state: None,
        };
        assert_eq!(PairOutcome::of(&ok("pay_1"), &closed), PairOutcome::Other);
        assert_eq!(PairOutcome::of(&busy, &busy), PairOutcome::Other);
        assert_eq!(
            PairOutcome::of(&PayAnswer::Retry, &ok("pay_1")),
            PairOutcome::Other
        );
    }

    #[test]
    fn both_keys_of_a_double_pay_count_towards_the_buyers_tries() {
        let mut st = PayState::default();
        let busy = PayAnswer::Refused {
            why: Refusal::InProgress,
            state: None,
        };
        let ok = PayAnswer::Accepted {
            payment_id: Some("pay_1".into()),
        };
        st.record([&ok, &busy], 1_000);
        assert_eq!(
            st,
            PayState {
                keys: 2,
                accepted: 1,
                last_attempt_ms: Some(1_000),
                window_closed: false
            }
        );
        // Declined, paid again twice: four keys, and a pair in the window's last moment.
        let closed = PayAnswer::Refused {
            why: Refusal::WindowClosed,
            state: None,
        };
        st.record([&ok, &closed], 2_000);
        assert_eq!((st.keys, st.accepted, st.window_closed), (4, 2, true));
        assert_eq!(st.last_attempt_ms, Some(2_000));
        // Two more pairs use the buyer's keys up: it pays no more.
        let confirmed = view(TicketStatus::Confirmed, Some(60_000));
        st.window_closed = false;
        st.record([&busy, &busy], 3_000);
        st.record([&PayAnswer::Other, &busy], 4_000);
        assert_eq!(st.keys, MAX_KEYS);
        let policy = PayPolicy {
            double_pay: true,
            ..POLICY
        };
        assert_eq!(
            next_step(Some(&confirmed), 10_000, 0, &st, &policy),
            Step::Look(POLL_IDLE)
        );
    }

    #[test]
    fn an_unavailable_key_is_retried_a_few_times_with_a_growing_wait() {
        let waits: Vec<Duration> = (1..).map_while(retry_delay).collect();
        assert_eq!(waits.len(), KEY_RETRIES as usize);
        assert_eq!(waits[0], Duration::from_millis(100));
        assert_eq!(waits[4], Duration::from_millis(1600));
        assert_eq!(retry_delay(0), None);
    }

    #[test]
    fn answers_to_pay_are_classified() {
        assert_eq!(
            PayAnswer::classify(
                Some(202),
                br#"{"payment_id":"pay_01","status":"processing"}"#
            ),
            PayAnswer::Accepted {
                payment_id: Some("pay_01".into())
            }
        );
        assert_eq!(
            PayAnswer::classify(Some(409), br#"{"error":"not_payable","state":"paid"}"#),
            PayAnswer::Refused {
                why: Refusal::NotPayable,
                state: Some("paid".into())
            }
        );
        for (code, why) in [
            ("payment_window_closed", Refusal::WindowClosed),
            ("payment_in_progress", Refusal::InProgress),
            ("sold_out", Refusal::Other("sold_out".into())),
        ] {
            let body = format!(r#"{{"error":"{code}"}}"#);
            assert_eq!(
                PayAnswer::classify(Some(409), body.as_bytes()),
                PayAnswer::Refused { why, state: None }
            );
        }
        assert_eq!(
            PayAnswer::classify(Some(409), b"<html>"),
            PayAnswer::Refused {
                why: Refusal::Other("unknown".into()),
                state: None
            }
        );
        for status in [None, Some(503), Some(429)] {
            assert_eq!(PayAnswer::classify(status, b""), PayAnswer::Retry);
        }
        for status in [400, 401, 404, 500] {
            assert_eq!(PayAnswer::classify(Some(status), b"{}"), PayAnswer::Other);
        }
    }

    #[test]
    fn a_buyer_waits_for_its_confirmation_then_pays_once_in_the_window() {
        let fresh = PayState::default();
        let step = |seen: Option<&TicketView>, now, st: &PayState| {
            next_step(seen, now, 10_000, st, &POLICY)
        };
        // Not seen yet, or pending: look again until the confirmation deadline.
        assert_eq!(step(None, 0, &fresh), Step::Look(POLL_EVERY));
        assert_eq!(step(None, 10_000, &fresh), Step::Stop);
        let pending = view(TicketStatus::Pending, None);
        assert_eq!(step(Some(&pending), 9_999, &fresh), Step::Look(POLL_EVERY));
        assert_eq!(step(Some(&pending), 10_000, &fresh), Step::Stop);
        // Confirmed in a window: pay.
        let confirmed = view(TicketStatus::Confirmed, Some(60_000));
        assert_eq!(step(Some(&confirmed), 100, &fresh), Step::Pay);
        // Confirmed long after the confirmation deadline: still pay, the window decides.
        assert_eq!(step(Some(&confirmed), 20_000, &fresh), Step::Pay);
        // No window: nothing to pay. Failed: nothing to pay.
        let final_order = view(TicketStatus::Confirmed, None);
        assert_eq!(step(Some(&final_order), 100, &fresh), Step::Stop);
        let failed = view(TicketStatus::Failed, None);
        assert_eq!(step(Some(&failed), 100, &fresh), Step::Stop);
    }

    #[test]
    fn a_declined_buyer_pays_again_with_a_new_key_until_its_tries_or_window_run_out() {
        let confirmed = view(TicketStatus::Confirmed, Some(60_000));
        let step = |now, st: &PayState| next_step(Some(&confirmed), now, 0, st, &POLICY);
        let mut st = PayState {
            keys: 1,
            accepted: 1,
            last_attempt_ms: Some(1_000),
            window_closed: false,
        };
        // The provider has not decided yet.
        assert_eq!(step(1_500, &st), Step::Look(POLL_EVERY));
        // Still confirmed --pay-retry-after-ms later: declined. Pay again.
        assert_eq!(step(2_000, &st), Step::Pay);
        // A refusal (another payment in progress) waits as long.
        st.keys = 2;
        st.last_attempt_ms = Some(2_000);
        assert_eq!(step(2_500, &st), Step::Look(POLL_EVERY));
        assert_eq!(step(3_000, &st), Step::Pay);
        // Three payments made: only look, idly, until the deadline and the grace pass.
        st.accepted = MAX_PAYMENTS;
        assert_eq!(step(10_000, &st), Step::Look(POLL_IDLE));
        assert_eq!(step(59_900, &st), Step::Look(POLL_EVERY));
        st.accepted = 1;
        st.keys = MAX_KEYS;
        assert_eq!(step(10_000, &st), Step::Look(POLL_IDLE));
        // Past pay_by: no more paying; the cancel is due.
        st.keys = 1;
        assert_eq!(step(60_000, &st), Step::Look(POLL_EVERY));
        assert_eq!(step(64_999, &st), Step::Look(POLL_EVERY));
        assert_eq!(step(65_000, &st), Step::Stop);
        // The gateway said the window closed (its clock ahead of ours): no more paying either.
        st.window_closed = true;
        assert_eq!(step(30_000, &st), Step::Look(POLL_EVERY));
    }

    #[test]
    fn paid_and_cancelled_tickets_end_the_buyer() {
        let st = PayState {
            keys: 1,
            accepted: 1,
            last_attempt_ms: Some(0),
            window_closed: false,
        };
        for status in [TicketStatus::Paid, TicketStatus::Cancelled] {
            let v = view(status, Some(60_000));
            assert_eq!(next_step(Some(&v), 100, 0, &st, &POLICY), Step::Stop);
            assert_eq!(end_status(Some(&v)), status.as_str());
        }
        assert_eq!(end_status(None), "unknown");
    }
}
