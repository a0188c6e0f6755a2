//! HTTP routes. Each resource answers unknown methods with a JSON `405` whose `Allow` header
//! lists its methods, and unknown paths get a JSON `404`. Every route is described in
//! `GET /openapi.json` (see [`openapi`]).

mod admin;
pub(crate) mod buy;
mod dashboard;
mod events;
pub(crate) mod health;
pub mod openapi;
mod orders;
pub(crate) mod payments;
mod queue;
pub(crate) mod sale;

use crate::error::ApiError;
use actix_web::http::header;
use actix_web::{web, HttpResponse};

/// The pages built into the gateway (the dashboard, the buyer's page) load nothing from
/// elsewhere, run no inline script, and are framed by no other site.
const PAGE_CSP: &str = "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// A file of a page built into the gateway, with the page's strict headers.
fn page_asset(content_type: &'static str, body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header((header::CONTENT_SECURITY_POLICY, PAGE_CSP))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .body(body)
}

/// The `outcome` label of a request in `seckill_gateway_requests_total`, when its status code
/// alone does not say enough. A handler puts it in the request's extensions.
#[derive(Debug, Clone, Copy)]
pub struct Outcome(pub &'static str);

pub use seckill_shared::api::TicketBody;

/// Every route: (name, method, path). The name is the `route` label of
/// `seckill_gateway_requests_total`; requests that match no route count as `unmatched`.
pub const ROUTES: &[(&str, &str, &str)] = &[
    ("buy", "POST", "/v1/seckill/{product_id}"),
    ("sale_view", "GET", "/v1/seckill/{product_id}"),
    ("order", "GET", "/v1/orders/{ticket}"),
    ("order_events", "GET", "/v1/orders/{ticket}/events"),
    ("my_order", "GET", "/v1/seckill/{product_id}/order"),
    ("queue_join", "POST", "/v1/seckill/{product_id}/queue"),
    (
        "queue_poll",
        "GET",
        "/v1/seckill/{product_id}/queue/{queue_id}",
    ),
    (
        "queue_events",
        "GET",
        "/v1/seckill/{product_id}/queue/{queue_id}/events",
    ),
    ("pay", "POST", "/v1/orders/{ticket}/pay"),
    ("cancel", "POST", "/v1/orders/{ticket}/cancel"),
    ("payment_callback", "POST", "/v1/payments/callback"),
    ("sale_page", "GET", "/sale/{product_id}"),
    ("sale_js", "GET", "/sale/assets/sale.js"),
    ("sale_css", "GET", "/sale/assets/style.css"),
    ("sale_pow", "GET", "/sale/assets/pow.js"),
    ("admin_create_product", "POST", "/admin/products"),
    ("admin_products", "GET", "/admin/products"),
    ("admin_overview", "GET", "/admin/overview"),
    ("admin_dashboard", "GET", "/admin/dashboard"),
    ("admin_dashboard_js", "GET", "/admin/dashboard/app.js"),
    ("admin_dashboard_css", "GET", "/admin/dashboard/style.css"),
    ("admin_product", "GET", "/admin/products/{id}"),
    ("admin_preload", "POST", "/admin/products/{id}/preload"),
    ("admin_reconcile", "POST", "/admin/products/{id}/reconcile"),
    ("healthz", "GET", "/healthz"),
    ("readyz", "GET", "/readyz"),
    ("livez", "GET", "/livez"),
    ("metrics", "GET", "/metrics"),
    ("openapi", "GET", "/openapi.json"),
];

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        resource("buy")
            .route(web::post().to(buy::buy))
            .route(web::get().to(sale::view)),
    )
    .service(resource("order").route(web::get().to(orders::get_order)))
    .service(resource("order_events").route(web::get().to(events::ticket_events)))
    .service(resource("my_order").route(web::get().to(orders::my_order)))
    .service(resource("queue_join").route(web::post().to(queue::join)))
    .service(resource("queue_poll").route(web::get().to(queue::poll)))
    .service(resource("queue_events").route(web::get().to(events::queue_events)))
    .service(resource("pay").route(web::post().to(payments::pay)))
    .service(resource("cancel").route(web::post().to(payments::cancel)))
    .service(resource("payment_callback").route(web::post().to(payments::callback)))
    .service(resource("sale_js").route(web::get().to(sale::script)))
    .service(resource("sale_css").route(web::get().to(sale::style)))
    .service(resource("sale_pow").route(web::get().to(sale::pow_worker)))
    .service(resource("sale_page").route(web::get().to(sale::page)))
    // One resource per path: actix matches the path first, then the method.
    .service(
        resource("admin_create_product")
            .route(web::post().to(admin::create_product))
            .route(web::get().to(admin::list_products)),
    )
    .service(resource("admin_overview").route(web::get().to(dashboard::overview)))
    .service(resource("admin_dashboard").route(web::get().to(dashboard::page)))
    .service(resource("admin_dashboard_js").route(web::get().to(dashboard::script)))
    .service(resource("admin_dashboard_css").route(web::get().to(dashboard::style)))
    .service(resource("admin_product").route(web::get().to(admin::get_product)))
    .service(resource("admin_preload").route(web::post().to(admin::preload)))
    .service(resource("admin_reconcile").route(web::post().to(admin::reconcile)))
    .service(resource("healthz").route(web::get().to(health::healthz)))
    .service(resource("readyz").route(web::get().to(health::readyz)))
    .service(resource("livez").route(web::get().to(health::livez)))
    .service(resource("metrics").route(web::get().to(health::metrics)))
    .service(resource("openapi").route(web::get().to(openapi::document)))
    .default_service(web::to(|| async {
        Err::<HttpResponse, _>(ApiError::NotFound)
    }));
}

/// The resource of route `name` in [`ROUTES`], named so that metrics can label it.
fn resource(name: &'static str) -> actix_web::Resource {
    let (_, _, path) = ROUTES
        .iter()
        .find(|r| r.0 == name)
        .expect("every resource is listed in ROUTES");
    // Every method registered on this path, for the `Allow` header of its `405`.
    let allow = ROUTES
        .iter()
        .filter(|r| r.2 == *path)
        .map(|r| r.1)
        .collect::<Vec<_>>()
        .join(", ");
    web::resource(*path)
        .name(name)
        .default_service(web::to(move || {
            let allow = allow.clone();
            async move { Err::<HttpResponse, _>(ApiError::MethodNotAllowed { allow }) }
        }))
}

/// The `route` label of a request: the name of its route (the path's resource, `name`, and
/// the method), or `unmatched`. A method the path lacks counts under the path's first route.
pub fn route_label(name: Option<&str>, method: &str) -> &'static str {
    let Some(path) = name.and_then(|n| ROUTES.iter().find(|r| r.0 == n).map(|r| r.2)) else {
        return "unmatched";
    };
    ROUTES
        .iter()
        .find(|r| r.2 == path && r.1 == method)
        .or_else(|| ROUTES.iter().find(|r| r.2 == path))
        .map_or("unmatched", |r| r.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::{test, App};

    /// The methods in ROUTES are the ones `configure` registers: the listed method reaches the
    /// handler (anything but 405), and another method gets 405.
    #[actix_web::test]
    async fn routes_table_matches_what_configure_registers() {
        let app = test::init_service(App::new().configure(configure)).await;
        for (name, method, path) in ROUTES {
            let concrete = path
                .replace("{product_id}", "1")
                .replace("{id}", "1")
                .replace("{ticket}", &format!("1-{}", "0".repeat(32)));
            let req = test::TestRequest::default()
                .method(method.parse().unwrap())
                .uri(&concrete)
                .to_request();
            let res = test::call_service(&app, req).await;
            assert!(
                ![404, 405].contains(&res.status().as_u16()),
                "{method} {path} reaches a handler"
            );
            assert_eq!(route_label(res.request().match_name(), method), *name);
            // No route uses DELETE.
            let other = "DELETE";
            let req = test::TestRequest::default()
                .method(other.parse().unwrap())
                .uri(&concrete)
                .to_request();
            let res = test::call_service(&app, req).await;
            assert_eq!(res.status(), 405, "{other} {path}");
            let allow = res.headers().get("allow").unwrap().to_str().unwrap();
            assert!(
                allow.split(", ").any(|m| m == *method),
                "{other} {path}: Allow {allow}"
            );
            let first = ROUTES.iter().find(|r| r.2 == *path).unwrap().0;
            assert_eq!(route_label(res.request().match_name(), other), first);
        }
        let req = test::TestRequest::get().uri("/nowhere").to_request();
        let res = test::call_service(&app, req).await;
        assert_eq!(res.status(), 404);
        assert_eq!(route_label(res.request().match_name(), "GET"), "unmatched");
    }
}
