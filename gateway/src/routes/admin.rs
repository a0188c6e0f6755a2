//! Admin endpoints, behind `Authorization: Bearer <SECKILL_ADMIN_TOKEN>`.

use crate::error::{ApiError, Object};
use crate::state::AppState;
use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use seckill_shared::{db, ProductId};
use serde::Deserialize;
use serde_json::json;

/// Checks the bearer token in constant time: `401` without one, `403` when it is wrong.
fn authorize(req: &HttpRequest, state: &AppState) -> Result<(), ApiError> {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or(ApiError::Unauthorized)?;
    if constant_time_eq(given.trim().as_bytes(), state.admin_token.as_bytes()) {
        Ok(())
    } else {
        Err(ApiError::Forbidden)
    }
}

/// Compares without an early exit, so the time taken says nothing about the token.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= usize::from(x ^ y);
    }
    diff == 0
}

fn product_id(path: &str) -> Result<ProductId, ApiError> {
    Ok(ProductId::parse(path)?)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewProduct {
    name: String,
    stock: i64,
    starts_at: Option<DateTime<Utc>>,
    ends_at: Option<DateTime<Utc>>,
}

/// Largest stock one product may have.
const MAX_STOCK: i64 = 1_000_000_000;

/// `POST /admin/products` → `201 {"id"}`.
pub async fn create_product(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Json<Object<NewProduct>>,
) -> Result<HttpResponse, ApiError> {
    authorize(&req, &state)?;
    let p = body.into_inner().0;
    let name = p.name.trim();
    if name.is_empty() || name.chars().count() > 200 {
        return Err(ApiError::BadRequest(
            "name must be 1 to 200 characters".into(),
        ));
    }
    if !(0..=MAX_STOCK).contains(&p.stock) {
        return Err(ApiError::BadRequest(format!(
            "stock must be between 0 and {MAX_STOCK}"
        )));
    }
    if let (Some(s), Some(e)) = (p.starts_at, p.ends_at) {
        if e <= s {
            return Err(ApiError::BadRequest(
                "ends_at must be after starts_at".into(),
            ));
        }
    }
    let id = db::create_product(
        &state.db,
        name,
        p.stock,
        p.starts_at.map(|t| t.timestamp_millis()),
        p.ends_at.map(|t| t.timestamp_millis()),
    )
    .await
    .map_err(|e| ApiError::unavailable("MySQL", e))?;
    Ok(HttpResponse::Created()
        .insert_header((header::LOCATION, format!("/admin/products/{id}")))
        .json(json!({"id": id.get()})))
}

async fn mysql_product(state: &AppState, id: ProductId) -> Result<db::Product, ApiError> {
    db::product(&state.db, id)
        .await
        .map_err(|e| ApiError::unavailable("MySQL", e))?
        .ok_or(ApiError::UnknownProduct)
}

/// Units may be for sale again: drop this gateway's marker at once and publish `"false"` so
/// the others follow. Returns whether the publish reached ZooKeeper.
async fn announce_for_sale(state: &AppState, id: ProductId) -> bool {
    state
        .sold_out
        .drop_marker(id, crate::sold_out::DropCause::ZkFalse);
    state.sold_out.publish_not_sold_out(id).await
}

/// `POST /admin/products/{id}/preload`: copy the MySQL stock into Redis and publish `"false"`.
/// A product that was loaded before and that Redis has lost is reconciled instead, so that
/// the orders still in Kafka are counted.
pub async fn preload(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    authorize(&req, &state)?;
    let id = product_id(&path)?;
    let product = mysql_product(&state, id).await?;
    let lost = product.loaded_at_ms.is_some()
        && state
            .store
            .stock(id)
            .await
            .map_err(|e| ApiError::unavailable("Redis", e))?
            .is_none();
    let stock_redis = if lost {
        reconcile_product(&state, id).await?.stock_redis
    } else {
        db::mark_loaded(&state.db, id, seckill_shared::now_ms())
            .await
            .map_err(|e| ApiError::unavailable("MySQL", e))?;
        state
            .store
            .preload(id, product.stock, product.starts_at_ms, product.ends_at_ms)
            .await
            .map_err(|e| ApiError::unavailable("Redis", e))?
    };
    let published = announce_for_sale(&state, id).await;
    Ok(HttpResponse::Ok().json(json!({
        "id": id.get(),
        "stock_db": product.stock,
        "stock_redis": stock_redis,
        "published": published,
    })))
}

async fn reconcile_product(
    state: &AppState,
    id: ProductId,
) -> Result<seckill_shared::recovery::ReconcileReport, ApiError> {
    seckill_shared::recovery::reconcile(&state.store, &state.db, id, Some(state.recovery.fence()))
        .await
        .map_err(|e| ApiError::unavailable("Redis, MySQL or Kafka", e))?
        .ok_or(ApiError::UnknownProduct)
}

/// `POST /admin/products/{id}/reconcile`: rebuild the product's Redis state from MySQL and
/// publish `"false"`. After a Redis loss it first waits until the workers have read every
/// order published before (at most a minute); one call is exact.
pub async fn reconcile(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    authorize(&req, &state)?;
    let id = product_id(&path)?;
    let report = reconcile_product(&state, id).await?;
    let published = announce_for_sale(&state, id).await;
    let mut body = serde_json::to_value(&report).map_err(anyhow::Error::from)?;
    body["id"] = id.get().into();
    body["published"] = published.into();
    Ok(HttpResponse::Ok().json(body))
}

/// `GET /admin/products/{id}`: MySQL and Redis side by side.
pub async fn get_product(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    authorize(&req, &state)?;
    let id = product_id(&path)?;
    let product = mysql_product(&state, id).await?;
    let counts = state
        .store
        .counts(id)
        .await
        .map_err(|e| ApiError::unavailable("Redis", e))?;
    Ok(HttpResponse::Ok().json(json!({
        "id": id.get(),
        "name": product.name,
        "stock_db": product.stock,
        "initial_stock": product.initial_stock,
        "stock_redis": counts.stock,
        "pending": counts.pending,
        "confirmed": counts.confirmed,
        "failed": counts.failed,
        "starts_at": product.starts_at_ms.and_then(DateTime::<Utc>::from_timestamp_millis),
        "ends_at": product.ends_at_ms.and_then(DateTime::<Utc>::from_timestamp_millis),
    })))
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
