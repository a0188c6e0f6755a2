//! Health and metrics.

use crate::state::AppState;
use actix_web::{web, HttpResponse};
use serde_json::{json, Value};
use std::time::Duration;

/// `GET /livez`: the process is up. Touches no dependency.
pub async fn livez() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

/// `GET /healthz` and `/readyz`: each dependency checked separately; `503` if any is down.
pub async fn healthz(state: web::Data<AppState>) -> HttpResponse {
    let limit = Duration::from_secs(2);
    let check = |r: Result<anyhow::Result<()>, tokio::time::error::Elapsed>| -> Value {
        match r {
            Ok(Ok(())) => json!({"ok": true}),
            Ok(Err(e)) => json!({"ok": false, "error": format!("{e:#}")}),
            Err(_) => json!({"ok": false, "error": "timed out"}),
        }
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
        json!({"ok": true})
    } else {
        json!({"ok": false, "error": "no ZooKeeper session; sold-out markers are off"})
    };
    let deps = json!({
        "redis": check(redis),
        "mysql": check(mysql),
        "kafka": check(kafka),
        "zookeeper": zookeeper,
    });
    let ok = deps.as_object().unwrap().values().all(|v| v["ok"] == true);
    let body = json!({"status": if ok { "ok" } else { "degraded" }, "dependencies": deps});
    if ok {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}

/// `GET /metrics`: Prometheus text format.
pub async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    state
        .metrics
        .in_flight
        .set(state.admission.in_flight() as i64);
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(state.metrics.render())
}
