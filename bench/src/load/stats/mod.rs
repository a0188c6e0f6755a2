//! Latency histograms per outcome, the run's summary and its table.

mod histograms;
mod summary;
mod table;

pub use histograms::{OutcomeHistograms, OutcomeStats, ShardedHistograms};
pub use summary::{
    achieved_rate, ArrivalModel, ArrivalStats, E2eLatency, Summary, TicketTotals, WaitingRoomReport,
};
