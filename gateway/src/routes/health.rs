//! Health and metrics.
//!
//! `/healthz` is open, so it answers from the check the gateway runs every second anyway (at
//! most [`crate::dependencies::HEALTH_MAX_AGE`] old; one check at a time when that is stale), and names what is
//! down without the dependency's own error text (addresses, driver messages): that goes to
//! the log, and to a caller with the admin token.

use crate::state::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use seckill_shared::api::{Dependencies, DependencyCheck, Health, HealthStatus, Live, LiveStatus};
use std::time::Duration;

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
pub async fn healthz(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let mut dependencies = state
        .health
        .get(|| check_dependencies(&state, Duration::from_secs(2)))
        .await;
    // Always live: a session that just came (or went) shows at once.
    dependencies.zookeeper = zookeeper_check(&state);
    let admin = req
        .headers()
        .contains_key(actix_web::http::header::AUTHORIZATION)
        && state.admins.authorize(&req, &state.auth).is_ok();
    if admin {
        for d in [
            &mut dependencies.redis,
            &mut dependencies.mysql,
            &mut dependencies.kafka,
        ] {
            d.show_detail();
        }
    }
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

fn zookeeper_check(state: &AppState) -> DependencyCheck {
    if state.sold_out.is_watching() {
        DependencyCheck::up()
    } else {
        DependencyCheck::down("no ZooKeeper session; sold-out markers are off", None)
    }
}

/// Checks every dependency at once, each within `limit`.
pub(crate) async fn check_dependencies(state: &AppState, limit: Duration) -> Dependencies {
    let check = |r: Result<anyhow::Result<()>, tokio::time::error::Elapsed>| match r {
        Ok(Ok(())) => DependencyCheck::up(),
        Ok(Err(e)) => DependencyCheck::down("unreachable", Some(format!("{e:#}"))),
        Err(_) => DependencyCheck::down("timed out", None),
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
    Dependencies {
        redis: check(redis),
        mysql: check(mysql),
        kafka: check(kafka),
        zookeeper: zookeeper_check(state),
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
pub async fn readyz(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    healthz(req, state).await
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
    state.metrics.awaiting_kafka.set(state.publisher.awaiting());
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(state.metrics.render())
}
