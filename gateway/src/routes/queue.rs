//! A product's waiting room: `POST /v1/seckill/{product_id}/queue` joins it, and
//! `GET /v1/seckill/{product_id}/queue/{queue_id}` polls the entry. Admission is decided in
//! Redis on each join and poll (`queue.lua`), so every gateway serves any entry and a gateway
//! that dies loses nothing. See [`crate::waiting_room`] for the admission token.

use crate::auth::Buyer;
use crate::error::{documented as e, ApiError};
use crate::rate_limit::Decision;
use crate::routes::openapi::schema;
use crate::routes::Outcome;
use crate::state::{AppState, ThreadRedis};
use actix_web::{web, HttpMessage, HttpRequest, HttpResponse};
use rand::RngCore;
use seckill_shared::api::QueueBody;
use seckill_shared::waiting_room::{QueueOp, QueueState};
use seckill_shared::{now_ms, ProductId, UserId};

/// Joins or polls, then shapes the answer. `expected`: the queue id a poll names.
async fn run(
    state: &AppState,
    redis: &ThreadRedis,
    product: ProductId,
    user: UserId,
    op: QueueOp<'_>,
    expected: Option<&str>,
) -> Result<QueueBody, ApiError> {
    if let Some(limiter) = &redis.queue_limiter {
        let decision = limiter
            .check(user)
            .await
            .map_err(|e| ApiError::unavailable("Redis", e))?;
        if let Decision::Limited { retry_after } = decision {
            return Err(ApiError::RateLimited {
                retry_after_secs: Decision::retry_after_secs(retry_after),
            });
        }
    }
    let now = now_ms();
    let found = redis
        .store
        .queue(product, user, op, now, state.admissions.ttl_ms)
        .await
        .map_err(|e| ApiError::unavailable("Redis", e))?;
    let mine = |id: &str| expected.is_none_or(|e| e == id);
    let body = |queue_id: String, state: &'static str| QueueBody {
        queue_id,
        state: state.to_owned(),
        position: None,
        ahead: None,
        estimated_wait_ms: None,
        refresh_after_ms: 1000,
        admission_token: None,
        admitted_until_ms: None,
    };
    Ok(match found {
        QueueState::UnknownProduct => {
            return Err(
                match state
                    .recovery
                    .on_unknown_product(&state.store, &state.db, product)
                    .await
                {
                    ApiError::Unavailable(m) => ApiError::Unavailable(m),
                    _ => ApiError::UnknownProduct,
                },
            )
        }
        QueueState::NoWaitingRoom => return Err(ApiError::NoWaitingRoom),
        QueueState::NotOpen => return Err(ApiError::QueueNotOpen),
        QueueState::NotJoined => return Err(ApiError::UnknownQueueEntry),
        QueueState::Waiting { queue_id, .. }
        | QueueState::Admitted { queue_id, .. }
        | QueueState::Expired { queue_id }
        | QueueState::Bought { queue_id }
            if !mine(&queue_id) =>
        {
            return Err(ApiError::UnknownQueueEntry)
        }
        QueueState::Waiting {
            queue_id,
            ahead,
            sold_out,
            admit_per_sec,
            starts_at_ms,
        } => {
            if sold_out {
                QueueBody {
                    refresh_after_ms: 2000,
                    ..body(queue_id, "sold_out")
                }
            } else {
                let to_start = (starts_at_ms - now).max(0) as u64;
                let wait = ahead.map(|a| to_start + (a as f64 * 1000.0 / admit_per_sec) as u64);
                QueueBody {
                    position: ahead.map(|a| a + 1),
                    ahead,
                    estimated_wait_ms: wait,
                    refresh_after_ms: wait
                        .map_or(to_start.clamp(250, 1000), |w| (w / 4).clamp(250, 2000)),
                    ..body(queue_id, "waiting")
                }
            }
        }
        QueueState::Admitted { queue_id, until_ms } => QueueBody {
            admission_token: Some(state.admissions.sign(product, user, until_ms)),
            admitted_until_ms: Some(until_ms),
            estimated_wait_ms: Some(0),
            ..body(queue_id, "admitted")
        },
        QueueState::Expired { queue_id } => body(queue_id, "expired"),
        QueueState::Bought { queue_id } => body(queue_id, "bought"),
    })
}

#[utoipa::path(
    post,
    path = "/v1/seckill/{product_id}/queue",
    operation_id = "joinQueue",
    tag = "buy",
    summary = "Join a product's waiting room",
    description = "One entry per buyer: joining again answers the same entry. Everyone who joins before the sale's `starts_at` gets a uniformly random place; later joiners queue behind them in arrival order. Poll the entry (`refresh_after_ms`) until it is `admitted`, then buy with its `admission_token`. No body.",
    params(("product_id" = inline(schema::Id), Path, description = "The product.")),
    security(("buyer" = [])),
    responses(
        (status = 202, description = "In the waiting room.", body = QueueBody),
        e::BadRequest,
        e::Unauthenticated,
        e::QueueRefused,
        e::NoWaitingRoom,
        e::RateLimited,
        e::Unavailable,
    ),
)]
pub async fn join(
    req: HttpRequest,
    buyer: Buyer,
    state: web::Data<AppState>,
    redis: web::Data<ThreadRedis>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let product = ProductId::parse(&path)?;
    let user = buyer.resolve(None)?;
    let mut id = [0u8; 16];
    rand::rng().fill_bytes(&mut id);
    let queue_id = hex::encode(id);
    // The place of an early joiner: uniform below 2^50, from `rand`'s thread-local CSPRNG
    // (ChaCha12, seeded from the operating system).
    let place = rand::rng().next_u64() >> 14;
    let body = run(
        &state,
        &redis,
        product,
        user,
        QueueOp::Join {
            queue_id: &queue_id,
            place,
        },
        None,
    )
    .await?;
    label_admitted(&req, &body);
    Ok(HttpResponse::Accepted().json(body))
}

#[utoipa::path(
    get,
    path = "/v1/seckill/{product_id}/queue/{queue_id}",
    operation_id = "pollQueue",
    tag = "buy",
    summary = "Poll a waiting-room entry",
    description = "The entry's owner only. Each poll also admits whoever's turn has come, on any gateway.",
    params(
        ("product_id" = inline(schema::Id), Path, description = "The product."),
        ("queue_id" = inline(schema::QueueId), Path, description = "As the join answered it."),
    ),
    security(("buyer" = [])),
    responses(
        (status = 200, description = "The entry.", body = QueueBody),
        e::BadRequest,
        e::Unauthenticated,
        e::UnknownQueueEntry,
        e::RateLimited,
        e::Unavailable,
    ),
)]
pub async fn poll(
    req: HttpRequest,
    buyer: Buyer,
    state: web::Data<AppState>,
    redis: web::Data<ThreadRedis>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (product, queue_id) = path.into_inner();
    let product = ProductId::parse(&product)?;
    if queue_id.len() != 32
        || !queue_id
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return Err(ApiError::BadRequest(
            "a queue id is 32 lowercase hex digits".into(),
        ));
    }
    let user = buyer.resolve(None)?;
    let body = run(
        &state,
        &redis,
        product,
        user,
        QueueOp::Poll,
        Some(&queue_id),
    )
    .await?;
    label_admitted(&req, &body);
    Ok(HttpResponse::Ok().json(body))
}

/// An answer that hands out an admission token counts as `outcome="admitted"`: the gateway's
/// own count of the admissions it signed (the chaos suite's evidence that a killed gateway
/// was admitting buyers).
fn label_admitted(req: &HttpRequest, body: &QueueBody) {
    if body.admission_token.is_some() {
        req.extensions_mut().insert(Outcome("admitted"));
    }
}
