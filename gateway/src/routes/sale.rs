//! The buyer's side of a sale before the buy: `GET /v1/seckill/{product_id}` (the product as
//! buyers see it), and the buyer's page built into the gateway, `GET /sale/{product_id}`, with
//! its script and style sheet (no CDN, no build step, a strict content security policy).

use crate::error::{documented as e, ApiError};
use crate::routes::openapi::schema;
use crate::routes::page_asset;
use crate::state::AppState;
use actix_web::{web, HttpResponse};
use seckill_shared::api::SaleView;
use seckill_shared::{db, now_ms, ProductId};

const INDEX_HTML: &str = include_str!("../sale_page/index.html");
const SALE_JS: &str = include_str!("../sale_page/sale.js");
const POW_JS: &str = include_str!("../sale_page/pow.js");
const STYLE_CSS: &str = include_str!("../sale_page/style.css");

/// Scripts, styles and calls from this origin only; no framing, no forms posted elsewhere.
/// How long a gateway answers a product's view from memory: a herd loading the page reads
/// MySQL once a second per gateway, not once per buyer.
const VIEW_TTL_MS: i64 = 1000;

#[utoipa::path(
    get,
    path = "/v1/seckill/{product_id}",
    operation_id = "getSale",
    tag = "buy",
    summary = "A product as buyers see it",
    description = "No token needed: what a buyer's page shows before the buy (name, price, start and end, whether it has a waiting room) and the gateway's clock, to count down with. No stock figures. Answered from memory for up to a second.",
    params(("product_id" = inline(schema::Id), Path, description = "The product.")),
    responses(
        (status = 200, description = "The product.", body = SaleView),
        e::BadRequest,
        e::UnknownProduct,
        e::Unavailable,
    ),
)]
pub async fn view(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let product = ProductId::parse(&path)?;
    let now = now_ms();
    let cached = state
        .sale_views
        .0
        .lock()
        .expect("sale views lock")
        .get(&product)
        .filter(|(at, _)| now - at < VIEW_TTL_MS)
        .map(|(_, v)| v.clone());
    let mut view = match cached {
        Some(v) => v,
        None => {
            let p = db::product(&state.db, product)
                .await
                .map_err(|e| ApiError::unavailable("MySQL", e))?
                .ok_or(ApiError::UnknownProduct)?;
            let v = SaleView {
                id: p.id,
                name: p.name,
                price: p.price,
                currency: p.currency,
                starts_at_ms: p.starts_at_ms,
                ends_at_ms: p.ends_at_ms,
                payment_window_secs: p.payment_window_secs,
                max_per_buyer: p.max_per_buyer,
                waiting_room: p.waiting_room.is_some(),
                queue_opens_at_ms: p.waiting_room.map(|w| w.opens_at_ms),
                now_ms: now,
            };
            let mut views = state.sale_views.0.lock().expect("sale views lock");
            views.retain(|_, (at, _)| now - *at < VIEW_TTL_MS);
            views.insert(product, (now, v.clone()));
            v
        }
    };
    view.now_ms = now;
    Ok(HttpResponse::Ok().json(view))
}

#[utoipa::path(
    get,
    path = "/sale/{product_id}",
    operation_id = "salePage",
    tag = "buy",
    summary = "The buyer's page of a sale (HTML)",
    description = "Built into the gateway: the countdown, the waiting room with the buyer's live place, the buy button once it may be used, the ticket's live state, and the pay and cancel buttons within the payment window. The shop hands it the buyer's token by redirecting to `/sale/{product_id}#token=<JWT>` (the fragment reaches no server); it is kept for the tab only. `/sale/{product_id}?dev` takes a token typed in.",
    params(("product_id" = inline(schema::Id), Path, description = "The product.")),
    responses(
        (status = 200, description = "The page.", content_type = "text/html", body = String),
        e::BadRequest,
    ),
)]
pub async fn page(path: web::Path<String>) -> Result<HttpResponse, ApiError> {
    ProductId::parse(&path)?;
    Ok(page_asset("text/html; charset=utf-8", INDEX_HTML))
}

#[utoipa::path(
    get,
    path = "/sale/assets/sale.js",
    operation_id = "saleScript",
    tag = "buy",
    responses((status = 200, description = "The page's script.", content_type = "text/javascript", body = String)),
)]
pub async fn script() -> HttpResponse {
    page_asset("text/javascript; charset=utf-8", SALE_JS)
}

#[utoipa::path(
    get,
    path = "/sale/assets/style.css",
    operation_id = "saleStyle",
    tag = "buy",
    responses((status = 200, description = "The page's style sheet.", content_type = "text/css", body = String)),
)]
pub async fn style() -> HttpResponse {
    page_asset("text/css; charset=utf-8", STYLE_CSS)
}

#[utoipa::path(
    get,
    path = "/sale/assets/pow.js",
    operation_id = "salePowWorker",
    tag = "buy",
    responses((status = 200, description = "The page's proof-of-work solver (a Web Worker).", content_type = "text/javascript", body = String)),
)]
pub async fn pow_worker() -> HttpResponse {
    page_asset("text/javascript; charset=utf-8", POW_JS)
}
