//! `GET /v1/orders/{ticket}`: poll a ticket.

use crate::error::ApiError;
use crate::routes::TicketBody;
use crate::startup::AppState;
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
            None => Err(ApiError::UnknownTicket),
        },
        Err(e) => Err(ApiError::unavailable("MySQL", redis_err.unwrap_or(e))),
    }
}
