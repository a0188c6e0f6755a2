//! Health and metrics.

use crate::state::AppState;
use actix_web::{web, HttpResponse};
use serde::Serialize;
use std::time::Duration;
use utoipa::ToSchema;

/// The body of `GET /livez`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Live {
    status: LiveStatus,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
enum LiveStatus {
    Ok,
}

/// The body of `GET /healthz` and `GET /readyz`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Health {
    status: HealthStatus,
    dependencies: Dependencies,
}

#[derive(Debug, Serialize, ToSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum HealthStatus {
    /// Every dependency is up.
    Ok,
    /// At least one is down.
    Degraded,
}

/// Each dependency, checked separately.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Dependencies {
    redis: DependencyCheck,
    mysql: DependencyCheck,
    kafka: DependencyCheck,
    zookeeper: DependencyCheck,
}

/// One dependency: up, or down and why.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct DependencyCheck {
    ok: bool,
    /// Why it is down.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    error: Option<String>,
}

impl DependencyCheck {
    fn up() -> Self {
        Self {
            ok: true,
            error: None,
        }
    }

    fn down(error: String) -> Self {
        Self {
            ok: false,
            error: Some(error),
        }
    }
}

/// The process is up. Touches no dependency.
#[utoipa::path(
    get,
    path = "/livez",
    operation_id = "livez",
    tag = "operations",
    responses((status = 200, description = "Up.", body = Live)),
)]
pub async fn livez() -> HttpResponse {
    HttpResponse::Ok().json(Live {
        status: LiveStatus::Ok,
    })
}

/// Each dependency checked separately
///
/// `503` if any is down.
#[utoipa::path(
    get,
    path = "/healthz",
    operation_id = "healthz",
    tag = "operations",
    responses(
        (status = 200, description = "Every dependency is up.", body = Health),
        (status = 503, description = "At least one dependency is down; each is reported.", body = Health),
    ),
)]
pub async fn healthz(state: web::Data<AppState>) -> HttpResponse {
    let dependencies = check_dependencies(&state, Duration::from_secs(2)).await;
    let ok = dependencies.all_up();
    let body = Health {
        status: if ok {
            HealthStatus::Ok
        } else {
            HealthStatus::Degraded
        },
        dependencies,
    };
    if ok {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}

impl Dependencies {
    fn all_up(&self) -> bool {
        self.up().iter().all(|d| d.1)
    }

    /// Each dependency's name, and whether it is up.
    pub(crate) fn up(&self) -> [(&'static str, bool); 4] {
        [
            ("redis", self.redis.ok),
            ("mysql", self.mysql.ok),
            ("kafka", self.kafka.ok),
            ("zookeeper", self.zookeeper.ok),
        ]
    }
}

/// Checks every dependency at once, each within `limit`.
pub(crate) async fn check_dependencies(state: &AppState, limit: Duration) -> Dependencies {
    let check = |r: Result<anyhow::Result<()>, tokio::time::error::Elapsed>| match r {
        Ok(Ok(())) => DependencyCheck::up(),
        Ok(Err(e)) => DependencyCheck::down(format!("{e:#}")),
        Err(_) => DependencyCheck::down("timed out".into()),
    };
    let (redis, mysql, kafka) = tokio::join!(
        tokio::time::timeout(limit, state.store.ping()),
        tokio::time::timeout(limit, async {
            sqlx::query("SELECT 1")
                .execute(&state.db)
                .await
                .map(drop)
                .map_err(anyhow::Error::from)
        }),
        tokio::time::timeout(limit, state.publisher.check()),
    );
    let zookeeper = if state.sold_out.is_watching() {
        DependencyCheck::up()
    } else {
        DependencyCheck::down("no ZooKeeper session; sold-out markers are off".into())
    };
    Dependencies {
        redis: check(redis),
        mysql: check(mysql),
        kafka: check(kafka),
        zookeeper,
    }
}

/// Same as /healthz
#[utoipa::path(
    get,
    path = "/readyz",
    operation_id = "readyz",
    tag = "operations",
    responses(
        (status = 200, description = "Every dependency is up.", body = Health),
        (status = 503, description = "At least one dependency is down; each is reported.", body = Health),
    ),
)]
pub async fn readyz(state: web::Data<AppState>) -> HttpResponse {
    healthz(state).await
}

/// Prometheus metrics
#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "metrics",
    tag = "operations",
    responses((status = 200, description = "Prometheus text format 0.0.4.", content_type = "text/plain", body = String)),
)]
pub async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    state
        .metrics
        .in_flight
        .set(state.admission.in_flight() as i64);
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(state.metrics.render())
}
