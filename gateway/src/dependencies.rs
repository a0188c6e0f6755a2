//! The dependencies' health: each checked separately, and the last check kept for
//! `/healthz` (at most [`HEALTH_MAX_AGE`] old) and the live loop that checks every second.

use seckill_shared::api::Dependencies;
use std::future::Future;
use std::time::{Duration, Instant};

/// The oldest check `/healthz` answers from.
pub const HEALTH_MAX_AGE: Duration = Duration::from_secs(2);

/// The last dependency check, shared by `/healthz` and the live loop that checks every second.
#[derive(Default)]
pub struct HealthCache {
    last: std::sync::Mutex<Option<(Instant, Dependencies)>>,
    checking: tokio::sync::Mutex<()>,
}

impl HealthCache {
    pub(crate) fn put(&self, d: &Dependencies) {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let was_up = last.as_ref().map(|(_, d)| d.up());
        for (name, check) in d.each() {
            let before = was_up.and_then(|u| u.iter().find(|(n, _)| *n == name).map(|x| x.1));
            if !check.ok && before != Some(false) {
                tracing::warn!(
                    dependency = name,
                    error = check.detail.as_deref().or(check.error.as_deref()),
                    "a dependency is down"
                );
            }
        }
        *last = Some((Instant::now(), d.clone()));
    }

    fn fresh(&self) -> Option<Dependencies> {
        self.last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|(at, _)| at.elapsed() <= HEALTH_MAX_AGE)
            .map(|(_, d)| d.clone())
    }

    /// The last check if it is fresh, else a new one, `check` (one at a time: callers
    /// meanwhile wait for it and share it).
    pub(crate) async fn get<F: Future<Output = Dependencies>>(
        &self,
        check: impl FnOnce() -> F,
    ) -> Dependencies {
        if let Some(d) = self.fresh() {
            return d;
        }
        let _one = self.checking.lock().await;
        if let Some(d) = self.fresh() {
            return d;
        }
        let d = check().await;
        self.put(&d);
        d
    }
}
