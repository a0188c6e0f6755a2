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
use crate::waiting_room::shape;
use actix_web::{web, HttpMessage, HttpRequest, HttpResponse};
use rand::RngCore;
use seckill_shared::api::QueueBody;
use seckill_shared::waiting_room::{pow, PowSpent, QueueOp, QueueState};
use seckill_shared::{now_ms, ProductId, UserId};

/// Joins or polls, then shapes the answer (and gives what `queue.lua` said). `expected`: the
/// queue id a poll names.
pub(crate) async fn run(
    state: &AppState,
    redis: &ThreadRedis,
    product: ProductId,
    user: UserId,
    op: QueueOp<'_>,
    expected: Option<&str>,
) -> Result<(QueueBody, QueueState), ApiError> {
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
    if found == QueueState::UnknownProduct {
        return Err(
            match state
                .recovery
                .on_unknown_product(&state.store, &state.db, product)
                .await
            {
                ApiError::Unavailable(m) => ApiError::Unavailable(m),
                _ => ApiError::UnknownProduct,
            },
        );
    }
    let body = shape(
        &state.admissions,
        product,
        user,
        found.clone(),
        expected,
        now,
    )?;
    Ok((body, found))
}

#[utoipa::path(
    post,
    path = "/v1/seckill/{product_id}/queue",
    operation_id = "joinQueue",
    tag = "buy",
    summary = "Join a product's waiting room",
    description = "One entry per buyer: joining again answers the same entry. Everyone who joins before the sale's `starts_at` gets a uniformly random place; later joiners queue behind them in arrival order. Poll the entry (`refresh_after_ms`) until it is `admitted`, then buy with its `admission_token`. No body. Joins per client address are limited for the whole fleet when `SECKILL_QUEUE_JOINS_PER_ADDRESS_PER_MIN` is set (`429`). A room with a proof of work (`waiting_room.pow`) answers a buyer who is not in it `428 challenge_required` with a challenge; join again with its solution in `Seckill-Pow`. Each challenge is taken once.",
    params(
        ("product_id" = inline(schema::Id), Path, description = "The product."),
        ("Seckill-Pow" = Option<String>, Header, nullable = false, pattern = r"^v1\.[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+\.[0-9a-f]{32}\.[0-9a-f]{64}:[0-9]{1,20}$", description = "A solved challenge of a `428 challenge_required`: `<token>:<n>`, where `n` is a whole number (at most 20 digits) such that SHA-256 of this ASCII text starts with the challenge's `bits` zero bits."),
    ),
    security(("buyer" = [])),
    responses(
        (status = 202, description = "In the waiting room.", body = QueueBody),
        e::BadRequest,
        e::Unauthenticated,
        e::QueueRefused,
        e::NoWaitingRoom,
        e::ChallengeRequired,
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
    // Joins per client address, for the whole fleet: many accounts behind one address do
    // not get many places by spreading their joins over gateways.
    if let (Some(limiter), Some(address)) = (
        &redis.join_address_limiter,
        state.auth.addresses.client(&req),
    ) {
        let decision = limiter
            .check_address(address)
            .await
            .map_err(|e| ApiError::unavailable("Redis", e))?;
        if let Decision::Limited { retry_after } = decision {
            return Err(ApiError::AddressRateLimited {
                retry_after_secs: Decision::retry_after_secs(retry_after),
            });
        }
    }
    // A proof of work, checked here (one HMAC and one hash), before Redis; `queue.lua` marks
    // its challenge used, and asks for one when the room wants it and none came. A solution
    // refused here matters only where a challenge would be asked for: a room without a proof
    // of work, or a buyer already in, answers as if it had not been sent.
    let (solved, refused) = match check_solution(&req, &state, product, user) {
        Ok(solved) => (solved, None),
        Err(e) => (None, Some(e)),
    };
    let nonce = solved.as_ref().map(|c| hex::encode(c.nonce));
    let spent = solved
        .as_ref()
        .zip(nonce.as_deref())
        .map(|(c, nonce)| PowSpent {
            nonce,
            expires_at_ms: c.expires_at_ms,
        });
    let mut id = [0u8; 16];
    rand::rng().fill_bytes(&mut id);
    let queue_id = hex::encode(id);
    // The place of an early joiner: uniform below 2^50, from `rand`'s thread-local CSPRNG
    // (ChaCha12, seeded from the operating system).
    let place = rand::rng().next_u64() >> 14;
    let joined = run(
        &state,
        &redis,
        product,
        user,
        QueueOp::Join {
            queue_id: &queue_id,
            place,
            pow: spent,
        },
        None,
    )
    .await;
    let body = match (joined, refused) {
        (Err(ApiError::ChallengeRequired(_)), Some(refused)) => return Err(refused),
        (joined, _) => joined?.0,
    };
    label_admitted(&req, &body);
    Ok(HttpResponse::Accepted().json(body))
}

/// The challenge a join's `Seckill-Pow` solves, if it has one.
fn check_solution(
    req: &HttpRequest,
    state: &AppState,
    product: ProductId,
    user: UserId,
) -> Result<Option<pow::Challenge>, ApiError> {
    let mut values = req.headers().get_all(pow::HEADER);
    let Some(v) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(ApiError::ChallengeInvalid(
            "send one Seckill-Pow header, not several".into(),
        ));
    }
    let v = v
        .to_str()
        .map_err(|_| ApiError::ChallengeInvalid("Seckill-Pow is not ASCII text".into()))?;
    state
        .admissions
        .check_pow(v, product, user, now_ms())
        .map(Some)
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
    check_queue_id(&queue_id)?;
    let user = buyer.resolve(None)?;
    let body = run(
        &state,
        &redis,
        product,
        user,
        QueueOp::Poll,
        Some(&queue_id),
    )
    .await?
    .0;
    label_admitted(&req, &body);
    Ok(HttpResponse::Ok().json(body))
}

/// A queue id as a join answers it: 32 lowercase hex digits.
pub(crate) fn check_queue_id(queue_id: &str) -> Result<(), ApiError> {
    if queue_id.len() != 32
        || !queue_id
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return Err(ApiError::BadRequest(
            "a queue id is 32 lowercase hex digits".into(),
        ));
    }
    Ok(())
}

/// An answer that hands out an admission token counts as `outcome="admitted"`: the gateway's
/// own count of the admissions it signed (the chaos suite's evidence that a killed gateway
/// was admitting buyers).
fn label_admitted(req: &HttpRequest, body: &QueueBody) {
    if body.admission_token.is_some() {
        req.extensions_mut().insert(Outcome("admitted"));
    }
}
