//! `GET /v1/orders/{ticket}`: poll a ticket.

use crate::error::{documented as e, ApiError};
use crate::routes::openapi::schema;
use crate::routes::TicketBody;
use crate::state::AppState;
use actix_web::{web, HttpResponse};
use seckill_shared::{db, Ticket};

#[utoipa::path(
    get,
    path = "/v1/orders/{ticket}",
    operation_id = "getOrder",
    tag = "buy",
    summary = "Poll a ticket",
    description = "From Redis while its copy lives (`SECKILL_TICKET_TTL_SECS`), then from MySQL. `503` while a dependency is down, or while the product's state is rebuilt after Redis lost it (the ticket may be an order still in Kafka).",
    params(("ticket" = inline(schema::TicketText), Path, description = "As a buy answered it.")),
    responses(
        (status = 200, description = "The ticket.", body = TicketBody),
        e::BadRequest,
        e::UnknownTicket,
        e::Unavailable,
    ),
)]
pub async fn get_order(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let ticket = Ticket::parse(&path)?;
    // The fast Redis copy first; MySQL once it has expired (or while Redis is down).
    let redis_err = match state.store.ticket(&ticket).await {
        Ok(Some(r)) => return Ok(HttpResponse::Ok().json(TicketBody::from_record(&ticket, r))),
        Ok(None) => None,
        Err(e) => Some(e),
    };
    match db::settled_ticket(&state.db, &ticket).await {
        Ok(Some(s)) => Ok(HttpResponse::Ok().json(TicketBody::from_settled(&ticket, s))),
        Ok(None) => match redis_err {
            Some(e) => Err(ApiError::unavailable("Redis", e)),
            None => Err(unknown(&state, &ticket).await),
        },
        Err(e) => Err(ApiError::unavailable("MySQL", redis_err.unwrap_or(e))),
    }
}

/// Neither store knows the ticket. If Redis lost its product, the ticket may be an order still
/// in Kafka: answer `503` while the product is rebuilt, not `404`.
async fn unknown(state: &AppState, ticket: &Ticket) -> ApiError {
    let product = ticket.product();
    match state.store.stock(product).await {
        Ok(Some(_)) => ApiError::UnknownTicket,
        Ok(None) => match state
            .recovery
            .on_unknown_product(&state.store, &state.db, product)
            .await
        {
            ApiError::Unavailable(m) => ApiError::Unavailable(m),
            _ => ApiError::UnknownTicket,
        },
        Err(e) => ApiError::unavailable("Redis", e),
    }
}
