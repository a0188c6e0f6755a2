//! `GET /v1/orders/{ticket}`: poll a ticket.

use crate::error::ApiError;
use crate::routes::TicketBody;
use crate::state::AppState;
use actix_web::{web, HttpResponse};
use seckill_shared::{db, Ticket};

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
            ApiError::UnknownProduct => ApiError::UnknownTicket,
            other => other,
        },
        Err(e) => ApiError::unavailable("Redis", e),
    }
}
