//! [`count_requests`] counts every response in `seckill_gateway_requests_total{route,
//! outcome}`: `route` is the route's name in [`crate::routes::ROUTES`] (or `unmatched`) and
//! `outcome` its status code, unless the handler named the outcome with [`Outcome`] (the buy
//! path does for `sold_out_marker` and `overloaded`; joins and polls of the waiting room for
//! `admitted`, an answer carrying an admission token).

use crate::routes::{route_label, Outcome};
use crate::state::AppState;
use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{web, HttpMessage};

/// Middleware: counts every response by route and outcome.
pub async fn count_requests(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let state = req.app_data::<web::Data<AppState>>().cloned();
    let route = route_label(req.match_name(), req.method().as_str());
    let res = next.call(req).await;
    if let Some(state) = state {
        match &res {
            Ok(r) => {
                let named = r.request().extensions().get::<Outcome>().copied();
                match named {
                    Some(Outcome(o)) => state.count(route, o),
                    None => state.count(route, r.status().as_str()),
                }
            }
            Err(e) => state.count(route, e.as_response_error().status_code().as_str()),
        }
    }
    res
}
