//! HTTP routes. Each resource answers unknown methods with a JSON `405`, and unknown paths get
//! a JSON `404`.

mod admin;
mod buy;
mod health;
mod orders;

use crate::error::ApiError;
use actix_web::{web, HttpResponse};

pub use buy::TicketBody;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/v1/seckill/{product_id}").route(web::post().to(buy::buy)))
        .service(resource("/v1/orders/{ticket}").route(web::get().to(orders::get_order)))
        .service(resource("/admin/products").route(web::post().to(admin::create_product)))
        .service(resource("/admin/products/{id}").route(web::get().to(admin::get_product)))
        .service(resource("/admin/products/{id}/preload").route(web::post().to(admin::preload)))
        .service(resource("/admin/products/{id}/reconcile").route(web::post().to(admin::reconcile)))
        .service(resource("/healthz").route(web::get().to(health::healthz)))
        .service(resource("/readyz").route(web::get().to(health::healthz)))
        .service(resource("/livez").route(web::get().to(health::livez)))
        .service(resource("/metrics").route(web::get().to(health::metrics)))
        .default_service(web::to(|| async {
            Err::<HttpResponse, _>(ApiError::NotFound)
        }));
}

fn resource(path: &str) -> actix_web::Resource {
    web::resource(path).default_service(web::to(|| async {
        Err::<HttpResponse, _>(ApiError::MethodNotAllowed)
    }))
}
