//! Admin endpoints, behind `Authorization: Bearer <SECKILL_ADMIN_TOKEN>`.

use crate::auth::admin::Admin;
use crate::error::{documented as e, ApiError, Object};
use crate::routes::openapi::answers::{json_answer, location};
use crate::routes::openapi::schema;
use crate::state::AppState;
use actix_web::http::header;
use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt};
use seckill_shared::api::{
    BucketView, Created, NewPow, NewProduct, OrdersByState, PageQuery, PowView, Preloaded,
    ProductPage, ProductView, Reconciled, SaleState, WaitingRoomView,
};
use seckill_shared::domain::{MAX_NAME_CHARS, MAX_PRICE, MAX_STOCK};
use seckill_shared::waiting_room::pow;
use seckill_shared::{db, OrderStatus, ProductId};
use std::collections::BTreeMap;
use utoipa::openapi::link::LinkBuilder;
use utoipa::openapi::{RefOr, Response};
use utoipa::IntoResponses;

fn product_id(path: &str) -> Result<ProductId, ApiError> {
    Ok(ProductId::parse(path)?)
}

/// `POST /admin/products` → `201 {"id"}`.
#[utoipa::path(
    post,
    path = "/admin/products",
    operation_id = "createProduct",
    tag = "admin",
    summary = "Create a product in MySQL",
    description = "Not for sale until preloaded.",
    security(("bearer" = [])),
    request_body = NewProduct,
    responses(
        ProductCreated,
        e::BadRequest,
        e::Unauthorized,
        e::Forbidden,
        e::AdminLocked,
        e::PayloadTooLarge,
        e::UnsupportedMediaType,
        e::Unavailable,
    ),
)]
pub async fn create_product(
    _admin: Admin,
    state: web::Data<AppState>,
    body: web::Json<Object<NewProduct>>,
) -> Result<HttpResponse, ApiError> {
    let p = body.into_inner().0;
    let name = p.name.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        return Err(ApiError::BadRequest(format!(
            "name must be 1 to {MAX_NAME_CHARS} characters"
        )));
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
    if p.price
        .is_some_and(|price| !(0..=MAX_PRICE).contains(&price))
    {
        return Err(ApiError::BadRequest(format!(
            "price must be between 0 and {MAX_PRICE} (minor units)"
        )));
    }
    let currency = p.currency.unwrap_or_else(|| "CNY".into());
    if currency.len() != 3 || !currency.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(ApiError::BadRequest(
            "currency must be an ISO 4217 code: three capital letters".into(),
        ));
    }
    let max_window = seckill_shared::config::MAX_PAYMENT_WINDOW_SECS as i64;
    if p.payment_window_secs
        .is_some_and(|w| !(0..=max_window).contains(&w))
    {
        return Err(ApiError::BadRequest(format!(
            "payment_window_secs must be between 0 and {max_window}"
        )));
    }
    let waiting_room = match p.waiting_room {
        None => None,
        Some(w) => {
            let admit_per_sec = w.admit_per_sec.unwrap_or(100.0);
            let factor = w.max_admitted_factor.unwrap_or(1.5);
            if !(0.001..=1_000_000.0).contains(&admit_per_sec) {
                return Err(ApiError::BadRequest(
                    "waiting_room.admit_per_sec must be between 0.001 and 1000000".into(),
                ));
            }
            if !(1.0..=100.0).contains(&factor) {
                return Err(ApiError::BadRequest(
                    "waiting_room.max_admitted_factor must be between 1 and 100".into(),
                ));
            }
            let opens_at_ms = w
                .opens_at
                .map_or_else(seckill_shared::now_ms, |t| t.timestamp_millis());
            Some(db::WaitingRoom {
                admit_per_sec,
                max_admitted_factor: factor,
                opens_at_ms,
                pow: w.pow.map(pow_settings).transpose()?,
            })
        }
    };
    let max_buckets = i64::from(seckill_shared::MAX_BUCKETS);
    let buckets = p.buckets.unwrap_or(1);
    if !(1..=max_buckets).contains(&buckets) {
        return Err(ApiError::BadRequest(format!(
            "buckets must be between 1 and {max_buckets}"
        )));
    }
    if buckets > 1 && waiting_room.is_some() {
        return Err(ApiError::BadRequest(
            "a product with a waiting room keeps its stock in one bucket: leave buckets out, or at 1".into(),
        ));
    }
    let max_per_buyer = p.max_per_buyer.unwrap_or(1);
    if !(1..=i64::from(seckill_shared::MAX_PER_BUYER)).contains(&max_per_buyer) {
        return Err(ApiError::BadRequest(format!(
            "max_per_buyer must be between 1 and {}",
            seckill_shared::MAX_PER_BUYER
        )));
    }
    let window = p.payment_window_secs.unwrap_or(if p.price.is_some() {
        state.default_payment_window_secs as i64
    } else {
        0
    });
    state.recovery.ensure_owned(&state.db).await?;
    let id = db::create_product(
        &state.db,
        &db::NewProduct {
            name: name.to_owned(),
            stock: p.stock,
            starts_at_ms: p.starts_at.map(|t| t.timestamp_millis()),
            ends_at_ms: p.ends_at.map(|t| t.timestamp_millis()),
            price: p.price.unwrap_or(0),
            currency,
            payment_window_secs: window,
            waiting_room,
            buckets: buckets as u16,
            max_per_buyer: max_per_buyer as u16,
        },
    )
    .await
    .map_err(|e| ApiError::unavailable("MySQL", e))?;
    Ok(HttpResponse::Created()
        .insert_header((header::LOCATION, format!("/admin/products/{id}")))
        .json(Created { id: id.get() }))
}

/// A waiting room's proof of work, checked: bits within 0 to [`pow::MAX_BITS`], the least not
/// above the most, and a target joins per second within 0.001 to 1,000,000.
fn pow_settings(p: NewPow) -> Result<db::Pow, ApiError> {
    let max = i64::from(pow::MAX_BITS);
    let bits = |v: Option<i64>, default: u8, name: &str| match v {
        None => Ok(default),
        Some(b) if (0..=max).contains(&b) => Ok(b as u8),
        Some(_) => Err(ApiError::BadRequest(format!(
            "waiting_room.pow.{name} must be between 0 and {max}"
        ))),
    };
    let min_bits = bits(p.min_bits, db::Pow::DEFAULT_MIN_BITS, "min_bits")?;
    let max_bits = bits(
        p.max_bits,
        db::Pow::DEFAULT_MAX_BITS.max(min_bits),
        "max_bits",
    )?;
    if min_bits > max_bits {
        return Err(ApiError::BadRequest(
            "waiting_room.pow.min_bits must not be above max_bits".into(),
        ));
    }
    let target_joins_per_sec = p.target_joins_per_sec.unwrap_or(db::Pow::DEFAULT_TARGET);
    if !(0.001..=1_000_000.0).contains(&target_joins_per_sec) {
        return Err(ApiError::BadRequest(
            "waiting_room.pow.target_joins_per_sec must be between 0.001 and 1000000".into(),
        ));
    }
    Ok(db::Pow {
        min_bits,
        max_bits,
        target_joins_per_sec,
    })
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
#[utoipa::path(
    post,
    path = "/admin/products/{id}/preload",
    operation_id = "preloadProduct",
    tag = "admin",
    summary = "Load a product for sale",
    description = "Copies the MySQL stock and sale window into Redis and publishes `\"false\"` in ZooKeeper. A product that was loaded before and that Redis has lost is reconciled instead. No body.",
    security(("bearer" = [])),
    params(("id" = inline(schema::Id), Path, description = "The product.")),
    responses(
        (status = 200, description = "Loaded.", body = Preloaded, links(
            ("Buy" = (operation_id = "buy", parameters(("product_id" = "$response.body#/id")), description = "Buy a unit.")),
            ("JoinQueue" = (operation_id = "joinQueue", parameters(("product_id" = "$response.body#/id")), description = "Join its waiting room, if it has one.")),
        )),
        e::BadRequest,
        e::Unauthorized,
        e::Forbidden,
        e::AdminLocked,
        e::UnknownProduct,
        e::Unavailable,
    ),
)]
pub async fn preload(
    _admin: Admin,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = product_id(&path)?;
    let product = mysql_product(&state, id).await?;
    state.recovery.ensure_owned(&state.db).await?;
    state.store.learn_buckets(id, product.buckets);
    let lost = product.loaded_at_ms.is_some()
        && state
            .store
            .stock(id)
            .await
            .map_err(|e| ApiError::unavailable("Redis", e))?
            .is_none();
    // A product loaded before (on sale, lost, or closed) is rebuilt by reconcile, which reads
    // MySQL under the product's row lock until Redis is written and settles what was
    // committed but not yet confirmed: a plain preload read the stock without the lock, so a
    // batch or a cancel committing in between made Redis count a unit twice, or miss one.
    // Buckets loaded once are rebuilt together for the same reason.
    let stock_redis = if lost || product.loaded_at_ms.is_some() {
        // A closed sale is on sale again.
        db::mark_loaded(&state.db, id, seckill_shared::now_ms())
            .await
            .map_err(|e| ApiError::unavailable("MySQL", e))?;
        reconcile_product(&state, id).await?.stock_redis
    } else {
        db::mark_loaded(&state.db, id, seckill_shared::now_ms())
            .await
            .map_err(|e| ApiError::unavailable("MySQL", e))?;
        // The waiting room before the stock: no buy finds stock without it.
        state
            .store
            .set_waiting_room(id, product.waiting_room.as_ref())
            .await
            .map_err(|e| ApiError::unavailable("Redis", e))?;
        state
            .store
            .preload(
                id,
                product.stock,
                product.starts_at_ms,
                product.ends_at_ms,
                product.buckets,
                product.max_per_buyer,
            )
            .await
            .map_err(|e| ApiError::unavailable("Redis", e))?
    };
    let published = announce_for_sale(&state, id).await;
    Ok(HttpResponse::Ok().json(Preloaded {
        id: id.get(),
        stock_db: product.stock,
        stock_redis,
        published,
    }))
}

async fn reconcile_product(
    state: &AppState,
    id: ProductId,
) -> Result<seckill_shared::recovery::ReconcileReport, ApiError> {
    state.recovery.ensure_owned(&state.db).await?;
    seckill_shared::recovery::reconcile(&state.store, &state.db, id, Some(state.recovery.fence()))
        .await
        .map_err(|e| ApiError::unavailable("Redis, MySQL or Kafka", e))?
        .ok_or(ApiError::UnknownProduct)
}

/// `POST /admin/products/{id}/reconcile`: rebuild the product's Redis state from MySQL and
/// publish `"false"`. After a Redis loss it first waits until the workers have read every
/// order published before (at most a minute); one call is exact.
#[utoipa::path(
    post,
    path = "/admin/products/{id}/reconcile",
    operation_id = "reconcileProduct",
    tag = "admin",
    summary = "Rebuild a product's Redis state from MySQL",
    description = "After Redis lost its data; the gateways and workers also do it by themselves. Publishes `\"false\"` in ZooKeeper. No body.",
    security(("bearer" = [])),
    params(("id" = inline(schema::Id), Path, description = "The product.")),
    responses(
        (status = 200, description = "Rebuilt.", body = Reconciled),
        e::BadRequest,
        e::Unauthorized,
        e::Forbidden,
        e::AdminLocked,
        e::UnknownProduct,
        e::Unavailable,
    ),
)]
pub async fn reconcile(
    _admin: Admin,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = product_id(&path)?;
    let seckill_shared::recovery::ReconcileReport {
        stock_db,
        stock_redis,
        confirmed,
        failed,
        restored,
        pruned,
        was_lost,
    } = reconcile_product(&state, id).await?;
    let published = announce_for_sale(&state, id).await;
    Ok(HttpResponse::Ok().json(Reconciled {
        id: id.get(),
        published,
        stock_db,
        stock_redis,
        confirmed,
        failed,
        restored,
        pruned,
        was_lost,
    }))
}

/// `GET /admin/products/{id}`: MySQL and Redis side by side.
#[utoipa::path(
    get,
    path = "/admin/products/{id}",
    operation_id = "getProduct",
    tag = "admin",
    summary = "A product: MySQL and Redis side by side",
    security(("bearer" = [])),
    params(("id" = inline(schema::Id), Path, description = "The product.")),
    responses(
        (status = 200, description = "The product.", body = ProductView),
        e::BadRequest,
        e::Unauthorized,
        e::Forbidden,
        e::AdminLocked,
        e::UnknownProduct,
        e::Unavailable,
    ),
)]
pub async fn get_product(
    _admin: Admin,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = product_id(&path)?;
    let product = mysql_product(&state, id).await?;
    Ok(HttpResponse::Ok().json(product_view(&state, product).await?))
}

/// A product as the admin API shows it: MySQL's row, Redis's counts and MySQL's orders.
pub(crate) async fn product_view(
    state: &AppState,
    product: db::Product,
) -> Result<ProductView, ApiError> {
    let id = ProductId::new(product.id).map_err(|_| ApiError::UnknownProduct)?;
    let redis = |e| ApiError::unavailable("Redis", e);
    let mysql = |e| ApiError::unavailable("MySQL", e);
    state.store.learn_buckets(id, product.buckets);
    let counts = state.store.counts(id).await.map_err(redis)?;
    let buckets = if counts.buckets.is_empty() {
        vec![BucketView {
            bucket: 0,
            stock: counts.stock,
            initial: counts.initial,
            pending: counts.pending,
            confirmed: counts.confirmed,
            lent: 0,
            borrowed: 0,
            borrowing: 0,
        }]
    } else {
        counts.buckets.iter().map(BucketView::from).collect()
    };
    let (by_state, failed_by_reason) = tokio::try_join!(
        db::orders_by_status(&state.db, id),
        db::failed_by_reason(&state.db, id),
    )
    .map_err(mysql)?;
    let count = |s: OrderStatus| by_state.get(&s).copied().unwrap_or(0);
    let waiting_room = match product.waiting_room {
        None => None,
        Some(w) => {
            let (admitted, waiting) = state.store.room_counts(id).await.map_err(redis)?;
            let pow = match w.pow {
                None => None,
                Some(p) => {
                    let jps = state
                        .store
                        .joins_per_sec(id, seckill_shared::now_ms())
                        .await
                        .map_err(redis)?;
                    Some(PowView {
                        min_bits: p.min_bits,
                        max_bits: p.max_bits,
                        target_joins_per_sec: p.target_joins_per_sec,
                        joins_per_sec: jps,
                        bits_now: pow::difficulty(
                            jps,
                            p.min_bits,
                            p.max_bits,
                            p.target_joins_per_sec,
                        ),
                    })
                }
            };
            Some(WaitingRoomView {
                admit_per_sec: w.admit_per_sec,
                max_admitted_factor: w.max_admitted_factor,
                opens_at: DateTime::<Utc>::from_timestamp_millis(w.opens_at_ms),
                pow,
                admitted,
                waiting,
            })
        }
    };
    Ok(ProductView {
        id: id.get(),
        state: SaleState::of(&product, counts.stock, seckill_shared::now_ms()),
        stock_db: product.stock,
        initial_stock: product.initial_stock,
        stock_redis: counts.stock,
        pending: counts.pending,
        confirmed: counts.confirmed,
        paid: counts.paid,
        cancelled: counts.cancelled,
        failed: counts.failed,
        failed_by_reason,
        orders_db: OrdersByState {
            confirmed: count(OrderStatus::Confirmed),
            paid: count(OrderStatus::Paid),
            cancelled: count(OrderStatus::Cancelled),
        },
        price: product.price,
        currency: product.currency,
        payment_window_secs: product.payment_window_secs,
        max_per_buyer: product.max_per_buyer,
        waiting_room,
        starts_at: product
            .starts_at_ms
            .and_then(DateTime::<Utc>::from_timestamp_millis),
        ends_at: product
            .ends_at_ms
            .and_then(DateTime::<Utc>::from_timestamp_millis),
        closed_at: product
            .closed_at_ms
            .and_then(DateTime::<Utc>::from_timestamp_millis),
        name: product.name,
        buckets,
    })
}

/// Most products one page holds.
pub(crate) const MAX_PAGE: u32 = 100;

/// A page of products, newest first, as [`get_product`] shows each.
pub(crate) async fn product_page(
    state: &AppState,
    limit: Option<u32>,
    before: Option<u64>,
) -> Result<ProductPage, ApiError> {
    let limit = limit.unwrap_or(20);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::BadRequest(format!(
            "limit must be 1 to {MAX_PAGE}"
        )));
    }
    let before = before.map(product_id_of).transpose()?;
    let mysql = |e| ApiError::unavailable("MySQL", e);
    let (products, total) = tokio::try_join!(
        db::list_products(&state.db, before, limit),
        db::count_products(&state.db),
    )
    .map_err(mysql)?;
    let full = products.len() == limit as usize;
    let next_before = products.last().filter(|_| full).map(|p| p.id);
    // A few products at a time: each view is a handful of Redis and MySQL round trips.
    let views = futures::stream::iter(products)
        .map(|p| product_view(state, p))
        .buffered(8)
        .try_collect()
        .await?;
    Ok(ProductPage {
        products: views,
        total,
        next_before,
    })
}

fn product_id_of(id: u64) -> Result<ProductId, ApiError> {
    ProductId::new(id).map_err(|e| ApiError::BadRequest(e.to_string()))
}

/// `GET /admin/products`: the products, newest first, a page at a time.
#[utoipa::path(
    get,
    path = "/admin/products",
    operation_id = "listProducts",
    tag = "admin",
    summary = "The products, newest first, a page at a time",
    security(("bearer" = [])),
    params(PageQuery),
    responses(
        (status = 200, description = "A page of products.", body = ProductPage),
        e::BadRequest,
        e::Unauthorized,
        e::Forbidden,
        e::AdminLocked,
        e::Unavailable,
    ),
)]
pub async fn list_products(
    _admin: Admin,
    state: web::Data<AppState>,
    query: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let q = query.into_inner();
    Ok(HttpResponse::Ok().json(product_page(&state, q.limit, q.before).await?))
}

/// The `201` of `POST /admin/products`: the new id, where the product is, and what to do with it.
pub struct ProductCreated;

impl IntoResponses for ProductCreated {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        let mut response = json_answer::<Created>("Created; not for sale until preloaded.").header(
            "Location",
            location(
                "/admin/products/{}",
                &schema::decimal_up_to(seckill_shared::domain::MAX_ID),
                true,
            ),
        );
        for (name, operation) in [
            ("GetProduct", "getProduct"),
            ("PreloadProduct", "preloadProduct"),
            ("ReconcileProduct", "reconcileProduct"),
        ] {
            response = response.link(
                name,
                LinkBuilder::new()
                    .operation_id(operation)
                    .parameter("id", "$response.body#/id")
                    .build(),
            );
        }
        BTreeMap::from([("201".to_owned(), response.build().into())])
    }
}
