//! `seckill-bench live-sale`: buyers of a waiting-room product from their join to their order's
//! confirmation, following their place and their ticket either by polling or on live streams
//! (server-sent events), so that the two can be compared: requests per buyer, and the time
//! from a ticket's confirmation to its buyer knowing it. `scripts/bench.sh` (12) runs two of
//! these processes at once (a process holds at most 20,000 sockets here) and reads the CPU of
//! the gateways, Redis and the machine around them.
//!
//! Each buyer is one task: it joins, follows its place until `admitted` (or `sold_out`), buys
//! with its admission token, and follows its ticket until `confirmed`. Polling follows the
//! entry at its `refresh_after_ms` (clamped to 250–2000 ms) and the ticket every
//! `--ticket-poll-ms`; streams open `…/events` and read them, reconnecting if one breaks.

mod args;
mod run;

pub use args::{LiveSaleArgs, Mode};
pub use run::run;
