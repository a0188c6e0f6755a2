//! The waiting-room sale's buyers: each of the `--concurrency` tasks joins its buyers, then polls
//! them from the start and buys with their admission tokens; and the counts they keep.

use super::args::QueueSaleArgs;
use super::report::Counts;
use crate::load::buyer_token::{BuyerTokens, SigningKey, TokenIssuer};
use crate::load::engine::{Conns, EngineKind, Target};
use bytes::Bytes;
use seckill_shared::api::{ErrorBody, QueueBody};
use seckill_shared::now_ms;
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// When buyer `i` of `n` polls first, ms after the start: spread evenly over `spread_ms`, so
/// that the line does not all poll in the same millisecond.
pub fn first_poll_offset_ms(i: u64, n: u64, spread_ms: u64) -> u64 {
    if n == 0 {
        0
    } else {
        (i as u128 * spread_ms as u128 / n as u128) as u64
    }
}

/// The state of a waiting-room entry, as a join or a poll answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryState {
    Waiting,
    Admitted,
    SoldOut,
    Expired,
    Bought,
}

impl EntryState {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "waiting" => Self::Waiting,
            "admitted" => Self::Admitted,
            "sold_out" => Self::SoldOut,
            "expired" => Self::Expired,
            "bought" => Self::Bought,
            _ => return None,
        })
    }

    /// The buyer stops polling.
    pub fn is_final(self) -> bool {
        matches!(self, Self::SoldOut | Self::Expired | Self::Bought)
    }
}

#[derive(Default)]
pub(super) struct AtomicCounts {
    ok: AtomicU64,
    rate_limited: AtomicU64,
    unavailable: AtomicU64,
    other_status: AtomicU64,
    transport_errors: AtomicU64,
}

impl AtomicCounts {
    pub(super) fn record(&self, status: Option<u16>, ok: u16) {
        match status {
            Some(s) if s == ok => &self.ok,
            Some(429) => &self.rate_limited,
            Some(503) => &self.unavailable,
            Some(_) => &self.other_status,
            None => &self.transport_errors,
        }
        .fetch_add(1, Relaxed);
    }

    pub(super) fn get(&self) -> Counts {
        Counts {
            ok: self.ok.load(Relaxed),
            rate_limited: self.rate_limited.load(Relaxed),
            unavailable: self.unavailable.load(Relaxed),
            other_status: self.other_status.load(Relaxed),
            transport_errors: self.transport_errors.load(Relaxed),
        }
    }
}

/// Counts per 100 ms since a start.
pub(super) struct Buckets(Vec<AtomicU32>);

impl Buckets {
    pub(super) fn new(secs: f64) -> Self {
        Self(
            (0..(secs * 10.0) as usize + 20)
                .map(|_| AtomicU32::new(0))
                .collect(),
        )
    }
    fn add(&self, since_start_ms: i64) {
        let i = (since_start_ms.max(0) / 100) as usize;
        if let Some(b) = self.0.get(i.min(self.0.len() - 1)) {
            b.fetch_add(1, Relaxed);
        }
    }
    pub(super) fn get(&self) -> Vec<u32> {
        self.0.iter().map(|b| b.load(Relaxed)).collect()
    }
}

pub(super) struct Gateway {
    pub(super) base: String,
    pub(super) join: Target,
}

pub(super) struct Ctx {
    pub(super) product: u64,
    pub(super) gateways: Vec<Gateway>,
    pub(super) tokens: BuyerTokens,
    pub(super) http: reqwest::Client,
    pub(super) first_user: u64,
    pub(super) buyers: u64,
    pub(super) start_ms: i64,
    pub(super) deadline_ms: i64,
    pub(super) min_refresh: u64,
    pub(super) max_refresh: u64,
    pub(super) joins: AtomicCounts,
    pub(super) last_join_ms: AtomicU64,
    pub(super) poll_answers: AtomicCounts,
    pub(super) states: [AtomicU64; 5],
    pub(super) polls: Buckets,
    pub(super) done: Buckets,
    pub(super) admissions: AtomicU64,
    pub(super) buys_accepted: AtomicU64,
    pub(super) buys_sold_out: AtomicU64,
    pub(super) buys_refused: AtomicU64,
    pub(super) buys_failed: AtomicU64,
    pub(super) sold_at: Mutex<Vec<i64>>,
    pub(super) last_poll_ms: AtomicU64,
}

/// A buyer in line, as its task keeps it.
struct Entry {
    /// Index from 0: user `first_user + i`.
    i: u64,
    poll: Target,
}

/// A join's or a poll's answer.
type Answer = QueueBody;

pub(super) fn error_code(body: Option<&Bytes>) -> Option<String> {
    ErrorBody::code_of(body?)
}

pub(super) const TIMEOUT: Option<Duration> = Some(Duration::from_secs(30));

pub(super) async fn sleep_until_ms(t: i64) {
    let d = t - now_ms();
    if d > 0 {
        tokio::time::sleep(Duration::from_millis(d as u64)).await;
    }
}

/// One task: joins its buyers, waits for the start, then polls them until each stops.
pub(super) async fn buyer_task(ctx: Arc<Ctx>, task: u64, tasks: u64) {
    let g = ctx.gateways.len();
    let mut conns = Conns::new(EngineKind::Hyper, &ctx.http, g);
    let mut entries = Vec::new();
    let mut i = task;
    while i < ctx.buyers {
        let user = ctx.first_user + i;
        let gw = (i % g as u64) as usize;
        for attempt in 0..5 {
            let x = conns
                .exchange(
                    &ctx.gateways[gw].join,
                    gw,
                    Some(Bytes::from_static(b"{}")),
                    Some(ctx.tokens.header(user)),
                    TIMEOUT,
                )
                .await;
            ctx.joins.record(x.status, 202);
            let qid = (x.status == Some(202))
                .then(|| {
                    serde_json::from_slice::<Answer>(x.body.as_deref().unwrap_or_default()).ok()
                })
                .flatten()
                .map(|a| a.queue_id);
            if let Some(qid) = qid {
                let url = format!(
                    "{}/v1/seckill/{}/queue/{qid}",
                    ctx.gateways[gw].base, ctx.product
                );
                if let Ok(poll) = Target::parse(&url) {
                    entries.push(Entry { i, poll });
                }
                break;
            }
            if attempt < 4 {
                tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
            }
        }
        i += tasks;
    }
    ctx.last_join_ms.fetch_max(now_ms() as u64, Relaxed);

    let mut due: BinaryHeap<Reverse<(i64, usize)>> = entries
        .iter()
        .enumerate()
        .map(|(k, e)| {
            Reverse((
                ctx.start_ms + first_poll_offset_ms(e.i, ctx.buyers, 1000) as i64,
                k,
            ))
        })
        .collect();
    while let Some(Reverse((at, k))) = due.pop() {
        if at > ctx.deadline_ms {
            break;
        }
        sleep_until_ms(at).await;
        let e = &entries[k];
        let user = ctx.first_user + e.i;
        let gw = (e.i % g as u64) as usize;
        let x = conns
            .exchange(&e.poll, gw, None, Some(ctx.tokens.header(user)), TIMEOUT)
            .await;
        let now = now_ms();
        ctx.poll_answers.record(x.status, 200);
        ctx.polls.add(now - ctx.start_ms);
        ctx.last_poll_ms.fetch_max(now as u64, Relaxed);
        let answer = (x.status == Some(200))
            .then(|| serde_json::from_slice::<Answer>(x.body.as_deref().unwrap_or_default()).ok())
            .flatten();
        let Some(answer) = answer else {
            due.push(Reverse((now + 1000, k)));
            continue;
        };
        let refresh = answer
            .refresh_after_ms
            .clamp(ctx.min_refresh, ctx.max_refresh) as i64;
        let state = EntryState::parse(&answer.state);
        if let Some(s) = state {
            ctx.states[s as usize].fetch_add(1, Relaxed);
        }
        match state {
            Some(s) if s.is_final() => ctx.done.add(now - ctx.start_ms),
            Some(EntryState::Admitted) => {
                ctx.admissions.fetch_add(1, Relaxed);
                match buy(
                    &ctx,
                    gw,
                    user,
                    answer.admission_token.as_deref().unwrap_or(""),
                )
                .await
                {
                    BuyOutcome::Accepted | BuyOutcome::SoldOut => {
                        ctx.done.add(now_ms() - ctx.start_ms)
                    }
                    // The admission was taken back (the cap) or a transient failure: poll again.
                    BuyOutcome::Refused | BuyOutcome::Failed => {
                        due.push(Reverse((now_ms() + ctx.min_refresh as i64, k)))
                    }
                }
            }
            _ => due.push(Reverse((now + refresh, k))),
        }
    }
}

enum BuyOutcome {
    Accepted,
    SoldOut,
    Refused,
    Failed,
}

async fn buy(ctx: &Ctx, gw: usize, user: u64, admission: &str) -> BuyOutcome {
    let res = ctx
        .http
        .post(format!(
            "{}/v1/seckill/{}",
            ctx.gateways[gw].base, ctx.product
        ))
        .header(reqwest::header::AUTHORIZATION, ctx.tokens.header(user))
        .header("Seckill-Admission", admission)
        .json(&serde_json::json!({}))
        .send()
        .await;
    let Ok(res) = res else {
        ctx.buys_failed.fetch_add(1, Relaxed);
        return BuyOutcome::Failed;
    };
    let status = res.status().as_u16();
    let body = res.bytes().await.ok();
    match status {
        202 => {
            let t = now_ms();
            ctx.buys_accepted.fetch_add(1, Relaxed);
            ctx.sold_at.lock().unwrap().push(t);
            BuyOutcome::Accepted
        }
        409 if error_code(body.as_ref()).as_deref() == Some("sold_out") => {
            ctx.buys_sold_out.fetch_add(1, Relaxed);
            BuyOutcome::SoldOut
        }
        403 => {
            ctx.buys_refused.fetch_add(1, Relaxed);
            BuyOutcome::Refused
        }
        _ => {
            ctx.buys_failed.fetch_add(1, Relaxed);
            BuyOutcome::Failed
        }
    }
}

/// One HS256 token per buyer, valid for an hour.
pub(super) fn buyer_tokens(args: &QueueSaleArgs) -> anyhow::Result<BuyerTokens> {
    BuyerTokens::new(
        TokenIssuer::new(
            SigningKey::Hs256(&args.jwt_secret),
            None,
            None,
            Duration::from_secs(3600),
        )?,
        args.first_user,
        args.buyers,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_polls_spread_over_the_window_in_order() {
        assert_eq!(first_poll_offset_ms(0, 100_000, 1000), 0);
        assert_eq!(first_poll_offset_ms(50_000, 100_000, 1000), 500);
        assert_eq!(first_poll_offset_ms(99_999, 100_000, 1000), 999);
        assert_eq!(first_poll_offset_ms(3, 0, 1000), 0);
    }

    #[test]
    fn entry_states_parse_and_the_last_three_stop_the_buyer() {
        for (s, st, fin) in [
            ("waiting", EntryState::Waiting, false),
            ("admitted", EntryState::Admitted, false),
            ("sold_out", EntryState::SoldOut, true),
            ("expired", EntryState::Expired, true),
            ("bought", EntryState::Bought, true),
        ] {
            assert_eq!(EntryState::parse(s), Some(st));
            assert_eq!(st.is_final(), fin);
            assert_eq!(serde_json::to_value(st).unwrap(), s);
        }
        assert_eq!(EntryState::parse("Waiting"), None);
    }
}
