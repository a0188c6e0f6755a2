//! `seckill-bench load`: an HTTP load generator, closed loop by default.
//!
//! `C` worker tasks (C = `--concurrency`) loop: take the next request number from an atomic
//! counter, map it to a user ([`plan::Plan`]), wait until it is due (`--rate`), send it over
//! keep-alive connections ([`engine`]), classify the answer, record it.
//!
//! How requests arrive ([`stats::ArrivalModel`]): without `--rate`, each worker sends its next
//! request when its last one is answered (closed loop). `--rate` alone paces that closed loop:
//! its rate still falls when answers are slow. `--rate --open-loop` keeps the arrival rate
//! whatever the answers, as wrk2 does: request `i` is due at `i / RATE` s, the free workers
//! hold the next numbers and send each when due, and its latency counts from when it was due.
//! That holds while fewer than `C` requests are in flight; the summary reports the most that
//! were and the rate achieved, so a run whose loop closed can be told apart. Nothing is spawned per request; latencies go
//! into a few sharded histograms, history records into a per-worker batch that is handed to
//! the writer thread every `worker::HISTORY_BATCH` requests. After the load, every ticket is polled
//! until it settles ([`settle`]).
//!
//! `--until-sold-out` brings fresh users after the planned ones until the sale is really over
//! ([`sale_end`]): a round of 409s from every gateway starts a check, and units that came back
//! meanwhile bring fresh users again. `--jwt-secret` (HS256) or `--jwt-ed25519-key` (EdDSA)
//! gives every user a signed token ([`buyer_token`]), sent on its buys and ticket polls.
//!
//! `--pay-rate` makes buyers pay for their confirmed orders, or not ([`payment`]), while the
//! load goes on (`--double-pay`: each attempt twice at once); `--cancel-rate` makes some of
//! them cancel from their `202` on instead ([`cancel`]); `--until-all-paid` brings fresh users
//! until every unit is paid ([`all_paid`]). With none of them, nothing of it runs.
//!
//! `--waiting-room` is a load of its own ([`waiting_room`]): each buyer joins the product's
//! waiting room, polls until admitted, and buys with its admission token.
//!
//! Over time: every answer also goes on a [`timeline`] (answers per second and latency
//! percentiles per outcome, in the summary's `timeline`; `--plot` draws it), and
//! `--sample-admin-ms` reads the product's admin view at a steady pace ([`admin_samples`]), the
//! data of a chaos run's timeline.
//!

pub mod admin_api;
pub mod admin_samples;
pub mod all_paid;
pub mod args;
pub mod buyer_token;
pub mod cancel;
mod draw;
pub mod engine;
#[cfg(test)]
mod fake_gateway;
pub mod payment;
pub mod plan;
mod progress;
mod run;
pub mod sale_end;
pub mod settle;
pub mod stats;
pub mod timeline;
pub mod waiting_room;
mod worker;

pub use run::run;

#[cfg(test)]
mod tests;
