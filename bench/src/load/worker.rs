//! One load worker: takes the next request number, waits until it is due, sends it, classifies
//! and records the answer, until the plan or the run stops. [`Shared`] is what every worker
//! of a run shares.

use super::buyer_token::BuyerTokens;
use super::engine::{self, Conns, EngineKind, Target};
use super::payment::Payers;
use super::plan::{Outcome, Plan};
use super::sale_end::{Gate, SaleEnd};
use super::settle::{ticket_and_units, IssuedTicket};
use super::stats::{ArrivalModel, ShardedHistograms};
use crate::history::{HistorySink, RequestRecord};
use crate::now_us;
use bytes::BytesMut;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Request records a worker collects before handing them to the history writer.
pub(super) const HISTORY_BATCH: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Buy,
    Get,
}

/// State every worker shares.
pub(super) struct Shared {
    pub(super) client: reqwest::Client,
    pub(super) mode: Mode,
    pub(super) engine: EngineKind,
    /// Per-request timeout of the `hyper` engine (`reqwest` has it in the client).
    pub(super) timeout: Option<Duration>,
    /// Per gateway: the URL every request of this run goes to.
    pub(super) targets: Vec<Target>,
    pub(super) plan: Plan,
    /// `--quantity`, and the run's seed it draws with.
    pub(super) quantity: (super::args::QuantityMix, u64),
    pub(super) next: AtomicU64,
    pub(super) stop: AtomicBool,
    pub(super) counts: [AtomicU64; Outcome::COUNT],
    /// `--until-sold-out`: whether the next fresh user goes out.
    pub(super) sale_end: SaleEnd,
    /// Fresh users wait for `sale_end`'s gate (`--until-sold-out`; `--until-all-paid` ones go
    /// at `--rate` until the load stops).
    pub(super) fresh_gated: bool,
    /// `--pay-rate` or `--cancel-rate` above 0: every ticket is offered to the paying (and
    /// cancelling) buyers.
    pub(super) payers: Option<Arc<Payers>>,
    /// `--jwt-secret` or `--jwt-ed25519-key`: every user's `Authorization` header.
    pub(super) tokens: Option<BuyerTokens>,
    pub(super) histograms: ShardedHistograms,
    pub(super) history: HistorySink,
    pub(super) arrival: ArrivalModel,
    /// `--rate`: request `i` is due at `started + i / rate`.
    pub(super) schedule: Option<(Instant, f64)>,
    /// Requests sent and not yet answered, and the most there were at once.
    pub(super) in_flight: AtomicU64,
    pub(super) max_in_flight: AtomicU64,
    /// When the last request went out, µs after `started`.
    pub(super) last_send_us: AtomicU64,
    pub(super) started: Instant,
}

/// What one worker hands back when it stops.
#[derive(Default)]
pub(super) struct WorkerResult {
    pub(super) tickets: Vec<IssuedTicket>,
    pub(super) sold_out_users: Vec<u64>,
}

pub(super) async fn worker(shared: Arc<Shared>, id: usize) -> WorkerResult {
    let mut out = WorkerResult::default();
    let mut batch: Vec<RequestRecord> = if shared.history.enabled() {
        Vec::with_capacity(HISTORY_BATCH)
    } else {
        Vec::new()
    };
    let mut conns = Conns::new(shared.engine, &shared.client, shared.targets.len());
    // Request bodies are cut from one buffer: no allocation per request.
    let mut bodies = BytesMut::new();
    let gateways = shared.targets.len() as u64;
    'run: loop {
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        let i = shared.next.fetch_add(1, Ordering::Relaxed);
        let Some(slot) = shared.plan.slot(i) else {
            break;
        };
        let due = loop {
            let due = match shared.schedule {
                Some((start, rate)) => {
                    // Time that checks held fresh users moves the schedule on.
                    let due =
                        start + Duration::from_secs_f64(i as f64 / rate) + shared.sale_end.paused();
                    tokio::time::sleep_until(due.into()).await;
                    // The run may have ended while this request waited for its time.
                    if shared.stop.load(Ordering::Relaxed) {
                        break 'run;
                    }
                    Some(due)
                }
                None => None,
            };
            if slot.fresh && shared.fresh_gated {
                match shared.sale_end.gate().await {
                    Gate::Stop => {
                        shared.stop.store(true, Ordering::Relaxed);
                        break 'run;
                    }
                    // Held by a check: this request is due later now.
                    Gate::Go { waited: true } if due.is_some() => continue,
                    Gate::Go { .. } => {}
                }
            }
            break due;
        };
        let gw = (i % gateways) as usize;
        // The units this buyer asks for: in the body and in the history line.
        let q = match shared.mode {
            Mode::Buy => shared.quantity.0.of(shared.quantity.1, slot.user),
            Mode::Get => 1,
        };
        let (body, auth) = match shared.mode {
            Mode::Buy => {
                if bodies.capacity() < 64 {
                    bodies.reserve(8192);
                }
                let _ = if q == 1 {
                    write!(bodies, "{{\"user_id\":{}}}", slot.user)
                } else {
                    write!(bodies, "{{\"user_id\":{},\"quantity\":{q}}}", slot.user)
                };
                // Presigned, or signed here: before the request's clock starts.
                let auth = shared.tokens.as_ref().map(|t| t.header(slot.user));
                (Some(bodies.split().freeze()), auth)
            }
            Mode::Get => (None, None),
        };

        let in_flight = shared.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        shared.max_in_flight.fetch_max(in_flight, Ordering::Relaxed);
        let sent_at_us = now_us();
        let t0 = Instant::now();
        shared.last_send_us.fetch_max(
            t0.duration_since(shared.started).as_micros() as u64,
            Ordering::Relaxed,
        );
        let engine::Exchange {
            status,
            body,
            error,
        } = conns
            .exchange(&shared.targets[gw], gw, body, auth.clone(), shared.timeout)
            .await;
        let answered = Instant::now();
        shared.in_flight.fetch_sub(1, Ordering::Relaxed);
        // From sending to the answer; the answer's time on the client clock.
        let service_us = answered.duration_since(t0).as_micros() as u64;
        let lag_us = due.map(|d| t0.saturating_duration_since(d).as_micros() as u64);
        // An open loop counts latency from when the request was due (wrk2's correction for
        // coordinated omission): a send held back by busy workers shows in the latency.
        let latency_us = match (shared.arrival, due) {
            (ArrivalModel::Open, Some(d)) => {
                answered.saturating_duration_since(d).as_micros() as u64
            }
            _ => service_us,
        };

        let outcome = if error.is_some() {
            Outcome::Error
        } else {
            Outcome::classify(status)
        };
        shared.counts[outcome.index()].fetch_add(1, Ordering::Relaxed);
        let at_ms = answered.duration_since(shared.started).as_millis() as u64;
        shared
            .histograms
            .record(id, outcome, latency_us, lag_us, Some(at_ms));
        let mut ticket = None;
        if shared.mode == Mode::Buy {
            shared.sale_end.record(gw, outcome);
            if outcome.has_ticket() {
                let answered = body.as_deref().and_then(ticket_and_units);
                ticket = answered.as_ref().map(|(t, _)| t.clone());
                if let Some((t, quantity)) = &answered {
                    out.tickets.push(IssuedTicket {
                        quantity: *quantity,
                        ticket: t.to_string(),
                        user_id: slot.user,
                        gateway: gw,
                        answered_at_us: sent_at_us + service_us,
                        fresh: outcome == Outcome::Accepted,
                        auth,
                    });
                    if let (Some(p), Some(issued)) = (&shared.payers, out.tickets.last()) {
                        p.offer(issued);
                    }
                }
            } else if outcome == Outcome::SoldOut {
                out.sold_out_users.push(slot.user);
            }
        }
        if shared.history.enabled() {
            batch.push(RequestRecord {
                sent_at_us,
                recv_at_us: sent_at_us + service_us,
                gateway: gw as u16,
                user_id: (shared.mode == Mode::Buy).then_some(slot.user),
                quantity: q,
                status,
                ticket,
                error: error.map(Into::into),
            });
            if batch.len() >= HISTORY_BATCH {
                shared.history.send(std::mem::replace(
                    &mut batch,
                    Vec::with_capacity(HISTORY_BATCH),
                ));
            }
        }
    }
    if !batch.is_empty() {
        shared.history.send(batch);
    }
    out
}
