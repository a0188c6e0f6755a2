//! The worker's HTTP listener: `/livez`, `/healthz`, `/metrics`.

use crate::consume::Assignment;
use crate::metrics::Metrics;
use actix_web::dev::Server;
use actix_web::{web, App, HttpResponse, HttpServer};
use seckill_shared::store::TicketStore;
use serde_json::json;
use sqlx::MySqlPool;
use std::net::TcpListener;
use std::time::Duration;

struct HealthState {
    store: TicketStore,
    db: MySqlPool,
    assigned: Assignment,
    metrics: Metrics,
}

pub fn server(
    listener: TcpListener,
    store: TicketStore,
    db: MySqlPool,
    assigned: Assignment,
    metrics: Metrics,
) -> anyhow::Result<Server> {
    let state = web::Data::new(HealthState {
        store,
        db,
        assigned,
        metrics,
    });
    Ok(HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .route(
                "/livez",
                web::get().to(|| async { HttpResponse::Ok().json(json!({"status": "ok"})) }),
            )
            .route("/healthz", web::get().to(healthz))
            .route("/readyz", web::get().to(healthz))
            .route("/metrics", web::get().to(metrics_text))
    })
    .workers(1)
    .disable_signals()
    .listen(listener)?
    .run())
}

async fn healthz(state: web::Data<HealthState>) -> HttpResponse {
    let limit = Duration::from_secs(2);
    let redis = tokio::time::timeout(limit, state.store.ping()).await;
    let mysql = tokio::time::timeout(limit, sqlx::query("SELECT 1").execute(&state.db)).await;
    let redis_ok = matches!(redis, Ok(Ok(())));
    let mysql_ok = matches!(mysql, Ok(Ok(_)));
    let partitions: Vec<i32> = state
        .assigned
        .lock()
        .map(|s| s.iter().copied().collect())
        .unwrap_or_default();
    let ok = redis_ok && mysql_ok;
    let body = json!({
        "status": if ok { "ok" } else { "degraded" },
        "dependencies": {"redis": {"ok": redis_ok}, "mysql": {"ok": mysql_ok}},
        "assigned_partitions": partitions,
    });
    if ok {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}

async fn metrics_text(state: web::Data<HealthState>) -> HttpResponse {
    crate::live::refresh_pending(&state.store, &state.metrics).await;
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(state.metrics.render())
}
