//! Liveness and health: the process, and each dependency checked separately.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The body of `GET /livez`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Live {
    pub status: LiveStatus,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum LiveStatus {
    Ok,
}

/// The body of `GET /healthz` and `GET /readyz`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Health {
    pub status: HealthStatus,
    pub dependencies: Dependencies,
}

#[derive(Debug, Serialize, Deserialize, ToSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum HealthStatus {
    /// Every dependency is up.
    Ok,
    /// At least one is down.
    Degraded,
}

/// Each dependency, checked separately.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Dependencies {
    pub redis: DependencyCheck,
    pub mysql: DependencyCheck,
    pub kafka: DependencyCheck,
    pub zookeeper: DependencyCheck,
}

/// One dependency: up, or down and why.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DependencyCheck {
    pub ok: bool,
    /// Why it is down: `unreachable`, `timed out`, or for ZooKeeper a sentence; with the admin
    /// token, the dependency's own error.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub error: Option<String>,
    /// The dependency's own error, for the log and the admin.
    #[serde(skip)]
    pub detail: Option<String>,
}

impl DependencyCheck {
    pub fn up() -> Self {
        Self {
            ok: true,
            error: None,
            detail: None,
        }
    }

    /// For the admin: the dependency's own error in place of the short one.
    pub fn show_detail(&mut self) {
        if let Some(detail) = self.detail.take() {
            self.error = Some(detail);
        }
    }

    pub fn down(error: &str, detail: Option<String>) -> Self {
        Self {
            ok: false,
            error: Some(error.to_owned()),
            detail,
        }
    }
}

impl Dependencies {
    pub fn all_up(&self) -> bool {
        self.up().iter().all(|d| d.1)
    }

    /// Each dependency's name, and whether it is up.
    pub fn up(&self) -> [(&'static str, bool); 4] {
        self.each().map(|(n, d)| (n, d.ok))
    }

    pub fn each(&self) -> [(&'static str, &DependencyCheck); 4] {
        [
            ("redis", &self.redis),
            ("mysql", &self.mysql),
            ("kafka", &self.kafka),
            ("zookeeper", &self.zookeeper),
        ]
    }
}
