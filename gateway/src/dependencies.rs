//! The dependencies' health: each checked separately, and the last check kept for
//! `/healthz` (at most [`HEALTH_MAX_AGE`] old) and the live loop that checks every second.

use serde::Serialize;
use std::future::Future;
use std::time::{Duration, Instant};
use utoipa::ToSchema;

/// The oldest check `/healthz` answers from.
pub const HEALTH_MAX_AGE: Duration = Duration::from_secs(2);

/// Each dependency, checked separately.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Dependencies {
    pub(crate) redis: DependencyCheck,
    pub(crate) mysql: DependencyCheck,
    pub(crate) kafka: DependencyCheck,
    pub(crate) zookeeper: DependencyCheck,
}

/// One dependency: up, or down and why.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DependencyCheck {
    ok: bool,
    /// Why it is down: `unreachable`, `timed out`, or for ZooKeeper a sentence; with the admin
    /// token, the dependency's own error.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    error: Option<String>,
    /// The dependency's own error, for the log and the admin.
    #[serde(skip)]
    detail: Option<String>,
}

impl DependencyCheck {
    pub(crate) fn up() -> Self {
        Self {
            ok: true,
            error: None,
            detail: None,
        }
    }

    /// For the admin: the dependency's own error in place of the short one.
    pub(crate) fn show_detail(&mut self) {
        if let Some(detail) = self.detail.take() {
            self.error = Some(detail);
        }
    }

    pub(crate) fn down(error: &str, detail: Option<String>) -> Self {
        Self {
            ok: false,
            error: Some(error.to_owned()),
            detail,
        }
    }
}

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

impl Dependencies {
    pub(crate) fn all_up(&self) -> bool {
        self.up().iter().all(|d| d.1)
    }

    /// Each dependency's name, and whether it is up.
    pub(crate) fn up(&self) -> [(&'static str, bool); 4] {
        self.each().map(|(n, d)| (n, d.ok))
    }

    fn each(&self) -> [(&'static str, &DependencyCheck); 4] {
        [
            ("redis", &self.redis),
            ("mysql", &self.mysql),
            ("kafka", &self.kafka),
            ("zookeeper", &self.zookeeper),
        ]
    }
}
