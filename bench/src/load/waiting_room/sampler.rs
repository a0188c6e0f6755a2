//! With `--admin-token`: samples of the admin view's waiting room against the stock, and the
//! end of the sale as that view shows it.

use super::buyer::Room;
use crate::history::{WaitingRoomLine, WrSampleLine};
use crate::load::admin_api::{AdminApi, Reading, StockView};
use seckill_shared::now_ms;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Samples the admin view into `wr_sample` lines until stopped; with --until-sold-out, marks
/// the sale over once two looks in a row show no stock in either store and nothing pending.
pub(super) struct Sampler {
    pub(super) samples: u64,
    pub(super) max_admitted: u64,
    pub(super) over_cap: u64,
    pub(super) checks: u64,
    pub(super) last_seen: Option<StockView>,
    pub(super) last_error: Option<String>,
    pub(super) over_at: Option<Instant>,
}

pub(super) async fn sample(
    room: Arc<Room>,
    mut api: AdminApi,
    every: Duration,
    stop: Arc<AtomicBool>,
) -> Sampler {
    let mut s = Sampler {
        samples: 0,
        max_admitted: 0,
        over_cap: 0,
        checks: 0,
        last_seen: None,
        last_error: None,
        over_at: None,
    };
    let mut empty_streak = 0;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let v = match api.view().await {
            Ok(v) => v,
            Err(e) => {
                s.last_error = Some(format!("{e:#}"));
                continue;
            }
        };
        let at_ms = now_ms();
        if let Some(w) = &v.waiting_room {
            s.samples += 1;
            s.max_admitted = s.max_admitted.max(w.admitted);
            if let Some(stock) = v.stock_redis {
                if w.admitted > cap(w.max_admitted_factor, stock) {
                    s.over_cap += 1;
                }
            }
            room.history.line(&WaitingRoomLine::WrSample(WrSampleLine {
                at_ms,
                admitted: w.admitted,
                stock_redis: v.stock_redis,
                pending: v.pending,
                max_admitted_factor: w.max_admitted_factor,
            }));
        }
        let view = StockView::of(&v);
        s.last_seen = Some(view);
        if room.until_sold_out && s.over_at.is_none() {
            s.checks += 1;
            if view.reading() == Reading::Empty {
                empty_streak += 1;
                if empty_streak >= 2 {
                    s.over_at = Some(Instant::now());
                    room.over.store(true, Ordering::Relaxed);
                }
            } else {
                empty_streak = 0;
            }
        }
    }
    s
}

/// `ceil(factor × max(stock, 0))`: the most admitted-not-bought the room may hold.
pub fn cap(factor: f64, stock: i64) -> u64 {
    (factor * stock.max(0) as f64).ceil() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_rounds_up_and_never_goes_below_zero() {
        assert_eq!(cap(1.5, 200), 300);
        assert_eq!(cap(1.5, 3), 5);
        assert_eq!(cap(1.0, 0), 0);
        assert_eq!(cap(1.5, -2), 0);
    }
}
