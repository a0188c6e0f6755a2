//! `GET /v1/orders/{ticket}`: poll a ticket; `GET /v1/seckill/{product_id}/order`: find
//! one's own. A ticket answers only its owner: anyone else gets the same `404` as for a
//! ticket that does not exist.

use crate::auth::Buyer;
use crate::error::{documented as e, ApiError};
use crate::routes::buy::{current_ticket, with_order_told};
use crate::routes::openapi::schema;
use crate::state::AppState;
use actix_web::{web, HttpResponse};
use seckill_shared::api::{MyOrderQuery, TicketBody};
use seckill_shared::{db, ProductId, Ticket, UserId};

#[utoipa::path(
    get,
    path = "/v1/orders/{ticket}",
    operation_id = "getOrder",
    tag = "buy",
    summary = "Poll a ticket",
    description = "From Redis while its copy lives (`SECKILL_TICKET_TTL_SECS`), then from MySQL. `503` while a dependency is down, or while the product's state is rebuilt after Redis lost it (the ticket may be an order still in Kafka).",
    params(("ticket" = inline(schema::TicketText), Path, description = "As a buy answered it.")),
    security(("buyer" = [])),
    responses(
        (status = 200, description = "The ticket.", body = TicketBody),
        e::BadRequest,
        e::Unauthenticated,
        e::UnknownTicket,
        e::AddressLimited,
        e::Unavailable,
    ),
)]
pub async fn get_order(
    buyer: Buyer,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let ticket = Ticket::parse(&path)?;
    let body = read_ticket(&state, &ticket, buyer.0).await?;
    Ok(HttpResponse::Ok().json(body))
}

/// A ticket as its owner sees it: the fast Redis copy first; MySQL once it has expired (or
/// while Redis is down). Anyone else but the owner gets `unknown_ticket`; with
/// authentication off (`buyer` is `None`), anyone is the owner.
pub(crate) async fn read_ticket(
    state: &AppState,
    ticket: &Ticket,
    buyer: Option<UserId>,
) -> Result<TicketBody, ApiError> {
    Ok(read_ticket_told(state, ticket, buyer).await?.0)
}

/// [`read_ticket`], and whether MySQL had its say (see [`with_order_told`]).
pub(crate) async fn read_ticket_told(
    state: &AppState,
    ticket: &Ticket,
    buyer: Option<UserId>,
) -> Result<(TicketBody, bool), ApiError> {
    let owner = |user_id: u64| buyer.is_none_or(|b| b.get() == user_id);
    let redis_err = match state.store.ticket(ticket).await {
        Ok(Some(r)) if owner(r.user_id) => return Ok(with_order_told(state, ticket, r).await),
        Ok(Some(_)) => return Err(ApiError::UnknownTicket),
        Ok(None) => None,
        Err(e) => Some(e),
    };
    match db::settled_ticket(&state.db, ticket).await {
        Ok(Some(s)) if owner(s.user_id) => Ok((TicketBody::from_settled(ticket, s), true)),
        Ok(Some(_)) => Err(ApiError::UnknownTicket),
        Ok(None) => match redis_err {
            Some(e) => Err(ApiError::unavailable("Redis", e)),
            None => Err(not_found(state, ticket.product(), ApiError::UnknownTicket).await),
        },
        Err(e) => Err(ApiError::unavailable("MySQL", redis_err.unwrap_or(e))),
    }
}

/// Neither store knows what was asked for (`missing`). If Redis lost the product, it may be
/// an order still in Kafka: answer `503` while the product is rebuilt, not `missing`.
/// A ticket or buyer neither store knows. That is the answer, unless Redis lost the product,
/// or came back with another run's state (which may be old, and miss the newest tickets: see
/// `epoch.lua`): then the product is rebuilt, and the answer is `503` meanwhile.
async fn not_found(state: &AppState, product: ProductId, missing: ApiError) -> ApiError {
    let stock = match state.store.check_epoch(product).await {
        Ok(0) => state.store.stock(product).await,
        Ok(_) => Ok(None),
        Err(e) => Err(e),
    };
    match stock {
        Ok(Some(_)) => missing,
        Ok(None) => match state
            .recovery
            .on_unknown_product(&state.store, &state.db, product)
            .await
        {
            ApiError::Unavailable(m) => ApiError::Unavailable(m),
            _ => missing,
        },
        Err(e) => ApiError::unavailable("Redis", e),
    }
}

#[utoipa::path(
    get,
    path = "/v1/seckill/{product_id}/order",
    operation_id = "getMyOrder",
    tag = "buy",
    summary = "Find my ticket for a product",
    description = "The caller's ticket for the product (the same body as `GET /v1/orders/{ticket}`): the one they hold, else their confirmed order, else their last failed ticket. A buyer whose `202` was lost finds it here, whatever the sold-out marker says.",
    params(("product_id" = inline(schema::Id), Path, description = "The product."), MyOrderQuery),
    security(("buyer" = [])),
    responses(
        (status = 200, description = "The caller's ticket.", body = TicketBody),
        e::BadRequest,
        e::Unauthenticated,
        e::UserMismatch,
        e::NoOrder,
        e::AddressLimited,
        e::Unavailable,
    ),
)]
pub async fn my_order(
    buyer: Buyer,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<MyOrderQuery>,
) -> Result<HttpResponse, ApiError> {
    let product = ProductId::parse(&path)?;
    let named = query.user_id.as_deref().map(UserId::parse).transpose()?;
    let user = buyer.resolve(named)?;
    // The ticket the buyer holds in Redis (pending, or settled while its copy lives).
    match state.store.buyer(product, user).await {
        Ok(Some(held)) => {
            let held = Ticket::parse(&held)
                .map_err(|e| ApiError::Unexpected(anyhow::anyhow!("a held ticket: {e}")))?;
            let body = current_ticket(&state, &held, user).await?;
            return Ok(HttpResponse::Ok().json(body));
        }
        Ok(None) => {}
        Err(e) => return Err(ApiError::unavailable("Redis", e)),
    }
    // Then MySQL: a confirmed order, else the last failed ticket.
    match db::buyer_ticket(&state.db, product, user).await {
        Ok(Some((ticket, settled))) => {
            Ok(HttpResponse::Ok().json(TicketBody::from_settled(&ticket, settled)))
        }
        Ok(None) => Err(not_found(&state, product, ApiError::NoOrder).await),
        Err(e) => Err(ApiError::unavailable("MySQL", e)),
    }
}
