//! The live dashboard: `GET /admin/dashboard` (a page and its two assets, built into the
//! binary) and `GET /admin/overview`, the aggregate it polls once a second.
//!
//! The page itself needs no token: it asks for the admin token, keeps it in the tab's
//! `sessionStorage` and sends it as the bearer header to `/admin/overview`, which is behind the
//! admin token like every admin route. The token never goes into a URL.
//!
//! The overview merges the whole fleet: every gateway and worker publishes its counts and a
//! heartbeat to Redis once a second ([`seckill_shared::live`]), so any gateway answers for all
//! of them, without knowing their addresses.

use super::admin::product_page;
use crate::auth::admin::Admin;
use crate::error::{documented as e, ApiError};
use crate::routes::page_asset;
use crate::state::AppState;
use actix_web::http::header;
use actix_web::{web, HttpResponse};
use seckill_shared::api::{Overview, OverviewQuery, ProcessView, Series};
use seckill_shared::live::{LiveReader, ProcessKind};
use seckill_shared::now_ms;

const INDEX_HTML: &str = include_str!("../dashboard/index.html");
const APP_JS: &str = include_str!("../dashboard/app.js");
const STYLE_CSS: &str = include_str!("../dashboard/style.css");

/// The page loads nothing but its own two assets, runs no inline script, and cannot be framed.
/// Seconds of history the charts show.
pub const SERIES_SECS: i64 = 300;

/// Products the overview shows at most.
const MAX_OVERVIEW_PRODUCTS: u32 = 50;

/// The dashboard page
#[utoipa::path(
    get,
    path = "/admin/dashboard",
    operation_id = "dashboard",
    tag = "operations",
    summary = "The live dashboard (HTML); it asks for the admin token itself",
    responses((status = 200, description = "The page.", content_type = "text/html", body = String)),
)]
pub async fn page() -> HttpResponse {
    page_asset("text/html; charset=utf-8", INDEX_HTML)
}

/// The dashboard's script
#[utoipa::path(
    get,
    path = "/admin/dashboard/app.js",
    operation_id = "dashboardScript",
    tag = "operations",
    responses((status = 200, description = "The script.", content_type = "text/javascript", body = String)),
)]
pub async fn script() -> HttpResponse {
    page_asset("text/javascript; charset=utf-8", APP_JS)
}

/// The dashboard's style sheet
#[utoipa::path(
    get,
    path = "/admin/dashboard/style.css",
    operation_id = "dashboardStyle",
    tag = "operations",
    responses((status = 200, description = "The style sheet.", content_type = "text/css", body = String)),
)]
pub async fn style() -> HttpResponse {
    page_asset("text/css; charset=utf-8", STYLE_CSS)
}

/// `GET /admin/overview`: what the dashboard shows, for the whole fleet.
#[utoipa::path(
    get,
    path = "/admin/overview",
    operation_id = "overview",
    tag = "admin",
    summary = "The dashboard's data: products, the last minutes per second, every gateway and worker",
    security(("bearer" = [])),
    params(OverviewQuery),
    responses(
        (status = 200, description = "The overview.", body = Overview),
        e::BadRequest,
        e::Unauthorized,
        e::Forbidden,
        e::AdminLocked,
        e::Unavailable,
    ),
)]
pub async fn overview(
    _admin: Admin,
    state: web::Data<AppState>,
    query: web::Query<OverviewQuery>,
) -> Result<HttpResponse, ApiError> {
    let limit = query.limit.unwrap_or(MAX_OVERVIEW_PRODUCTS);
    if !(1..=MAX_OVERVIEW_PRODUCTS).contains(&limit) {
        return Err(ApiError::BadRequest(format!(
            "limit must be 1 to {MAX_OVERVIEW_PRODUCTS}"
        )));
    }
    let page = product_page(&state, Some(limit), None).await?;
    let reader = LiveReader::new(state.store.connection(), &state.namespace);
    let now = now_ms();
    let redis = |e| ApiError::unavailable("Redis", e);
    let (seconds, beats) = tokio::try_join!(
        reader.seconds(now / 1000, SERIES_SECS),
        reader.heartbeats(now),
    )
    .map_err(redis)?;
    let (gateways, workers): (Vec<_>, Vec<_>) = beats
        .into_iter()
        .partition(|h| h.kind == ProcessKind::Gateway);
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(Overview {
            now_ms: now,
            step_ms: 1000,
            products: page.products,
            products_total: page.total,
            series: Series::of(seconds),
            gateways: gateways
                .into_iter()
                .map(|h| ProcessView::of(h, now))
                .collect(),
            workers: workers
                .into_iter()
                .map(|h| ProcessView::of(h, now))
                .collect(),
        }))
}
