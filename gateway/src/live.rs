//! Once a second: each dependency's gauge, and this gateway's share of the dashboard's live
//! figures (see [`seckill_shared::live`]): the buys it answered `202` and `409`, its
//! dependencies and its sold-out markers.

use crate::routes::health::check_dependencies;
use crate::state::AppState;
use actix_web::web;
use seckill_shared::live::{self, field, Deltas, Heartbeat, LivePublisher, ProcessKind};
use seckill_shared::now_ms;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A dependency check that takes longer than this failed.
const CHECK_TIMEOUT: Duration = Duration::from_millis(900);

pub async fn run(state: web::Data<AppState>, publisher: LivePublisher, stop: CancellationToken) {
    let id = live::process_id(ProcessKind::Gateway);
    let mut deltas = Deltas::default();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let checked = check_dependencies(&state, CHECK_TIMEOUT).await;
        state.health.put(&checked);
        let dependencies = checked.up();
        for (name, up) in dependencies {
            state
                .metrics
                .dependency_up
                .with_label_values(&[name])
                .set(up as i64);
        }
        let now = now_ms();
        let heartbeat = Heartbeat {
            id: id.clone(),
            kind: ProcessKind::Gateway,
            at_ms: now,
            dependencies: dependencies
                .into_iter()
                .map(|(n, up)| (n.to_string(), up))
                .collect(),
            sold_out_markers: state.sold_out.marked().iter().map(|p| p.get()).collect(),
            partition_lag: Default::default(),
            oldest_pending_age_ms: None,
        };
        let totals = totals(&state);
        let pending = deltas.pending(&totals);
        match publisher.publish(now / 1000, &pending, &heartbeat).await {
            Ok(()) => deltas.commit(&totals),
            Err(e) => tracing::debug!(error = %e, "could not publish live figures"),
        }
    }
}

/// This gateway's running totals of what the dashboard charts.
fn totals(state: &AppState) -> Vec<(String, u64)> {
    let buys = |outcome: &str| {
        state
            .metrics
            .requests
            .with_label_values(&["buy", outcome])
            .get()
    };
    vec![
        (field::RESERVATIONS.to_string(), buys("202")),
        (
            field::SOLD_OUT.to_string(),
            buys("409") + buys("sold_out_marker"),
        ),
    ]
}
