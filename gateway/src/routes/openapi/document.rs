//! The document itself: every path, the shared components, and how it is served.

use super::schema::AnyObject;
use crate::error::documented;
use crate::routes::{admin, buy, dashboard, events, health, orders, payments, queue, sale};
use actix_web::http::header::ContentType;
use actix_web::HttpResponse;
use std::sync::LazyLock;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{IntoResponses, Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "seckill gateway",
        version = "1",
        description = "The HTTP API of the flash-sale gateway. Every error answers with a JSON body `{\"error\": \"<code>\", \"message\": \"...\"}` (schema `Error`). On every path, a method that is not listed answers `405` with an `Allow` header (`x-fallback-responses`), and a path that matches no route answers `404`.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    paths(
        buy::buy,
        sale::view,
        sale::page,
        sale::script,
        sale::style,
        sale::pow_worker,
        orders::get_order,
        events::ticket_events,
        orders::my_order,
        queue::join,
        queue::poll,
        events::queue_events,
        payments::pay,
        payments::cancel,
        payments::callback,
        admin::create_product,
        admin::list_products,
        admin::get_product,
        dashboard::overview,
        dashboard::page,
        dashboard::script,
        dashboard::style,
        admin::preload,
        admin::reconcile,
        health::healthz,
        health::readyz,
        health::livez,
        health::metrics,
        document,
    ),
    components(schemas(
        seckill_shared::api::TicketBody,
        seckill_shared::api::Created,
        seckill_shared::api::PowChallenge
    )),
    modifiers(&Errors, &BearerAuth),
    tags(
        (name = "buy", description = "Buy a unit and poll its ticket. Behind `Authorization: Bearer <JWT>` (the buyer's token)."),
        (name = "payments", description = "Called by the payment provider, signed with `SECKILL_PAYMENT_WEBHOOK_SECRET`."),
        (name = "admin", description = "Behind `Authorization: Bearer <SECKILL_ADMIN_TOKEN>`."),
        (name = "operations", description = "Health, metrics and this document."),
    ),
)]
pub struct ApiDoc;

/// The document, as served: built once.
static DOCUMENT: LazyLock<String> = LazyLock::new(|| {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).expect("the OpenAPI document serialises");
    add_cross_field_rules(&mut doc);
    serde_json::to_string_pretty(&doc).expect("the OpenAPI document serialises")
});

/// Rules across fields, which utoipa does not derive, in JSON Schema 2020-12 (OpenAPI 3.1's):
/// a product with a waiting room keeps its stock in one bucket. (That `ends_at` comes after
/// `starts_at` compares two values, which JSON Schema cannot express; the document says it
/// in words.)
fn add_cross_field_rules(doc: &mut serde_json::Value) {
    let product = &mut doc["components"]["schemas"]["NewProduct"];
    assert!(product.is_object(), "NewProduct is in the document");
    product["not"] = serde_json::json!({
        "description": "A waiting room with 2 buckets or more: a product with a waiting room \
                        keeps its stock in one bucket.",
        "required": ["waiting_room", "buckets"],
        "properties": {
            "waiting_room": {"type": "object"},
            "buckets": {"type": "number", "minimum": 2}
        }
    });
}

/// The document, as served.
pub fn json() -> &'static str {
    &DOCUMENT
}

/// This document
#[utoipa::path(
    get,
    path = "/openapi.json",
    operation_id = "openapi",
    tag = "operations",
    responses((status = 200, description = "OpenAPI 3.1.", body = inline(AnyObject))),
)]
pub async fn document() -> HttpResponse {
    HttpResponse::Ok()
        .content_type(ContentType::json())
        .body(json())
}

/// The error schemas (one per documented error answer, and `Error` for all of them), and the
/// answers of every path to an unknown method (`405`) and of unknown paths (`404`).
struct Errors;

impl Modify for Errors {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        let mut all = Vec::new();
        for (name, description, errors) in documented::all() {
            components.schemas.insert(
                name.into(),
                documented::body_schema(&description, &errors).into(),
            );
            all.extend(errors);
        }
        components.schemas.insert(
            "Error".into(),
            documented::body_schema("Every error answers with this body.", &all).into(),
        );
        let mut fallback = documented::NotFound::responses();
        fallback.append(&mut documented::MethodNotAllowed::responses());
        let fallback = serde_json::to_value(fallback).expect("responses serialise");
        doc.extensions
            .get_or_insert_with(Default::default)
            .insert("x-fallback-responses".into(), fallback);
    }
}

/// The admin token, as the `bearer` security scheme.
struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        doc.components
            .get_or_insert_with(Default::default)
            .add_security_scheme(
                "bearer",
                SecurityScheme::Http(
                    HttpBuilder::new()
                        .scheme(HttpAuthScheme::Bearer)
                        .description(Some("`SECKILL_ADMIN_TOKEN`"))
                        .build(),
                ),
            );
        doc.components
            .get_or_insert_with(Default::default)
            .add_security_scheme(
                "buyer",
                SecurityScheme::Http(
                    HttpBuilder::new()
                        .scheme(HttpAuthScheme::Bearer)
                        .bearer_format("JWT")
                        .description(Some("A buyer's JWT from the shop's account service: HS256 with `SECKILL_AUTH_HS256_SECRET`, or EdDSA, ES256 or RS256 with a key of `SECKILL_AUTH_JWKS_FILE` named by `kid`. The buyer is its `sub`; `exp` is required."))
                        .build(),
                ),
            );
    }
}

#[cfg(test)]
mod tests {
    use super::json;
    use crate::routes::openapi::schema;
    use crate::routes::ROUTES;
    use serde_json::Value;
    use std::collections::BTreeSet;

    fn doc() -> Value {
        serde_json::from_str(json()).expect("openapi.json is JSON")
    }

    #[test]
    fn every_route_is_documented_and_nothing_else() {
        let doc = doc();
        assert_eq!(doc["openapi"], "3.1.0");
        let documented: BTreeSet<(String, String)> = doc["paths"]
            .as_object()
            .unwrap()
            .iter()
            .flat_map(|(path, ops)| {
                ops.as_object()
                    .unwrap()
                    .keys()
                    .map(move |m| (m.to_ascii_uppercase(), path.clone()))
            })
            .collect();
        let registered: BTreeSet<(String, String)> = ROUTES
            .iter()
            .map(|(_, m, p)| (m.to_string(), p.to_string()))
            .collect();
        assert_eq!(documented, registered);
    }

    /// Every `$ref` resolves, every operation documents at least one status, and every path
    /// parameter of a route is declared.
    #[test]
    fn the_document_is_consistent() {
        let doc = doc();
        fn refs(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    if let Some(Value::String(r)) = m.get("$ref") {
                        out.push(r.clone());
                    }
                    m.values().for_each(|x| refs(x, out));
                }
                Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
                _ => {}
            }
        }
        let mut all = Vec::new();
        refs(&doc, &mut all);
        assert!(!all.is_empty());
        for r in all {
            let pointer = r.strip_prefix('#').expect("local refs only");
            assert!(doc.pointer(pointer).is_some(), "{r} does not resolve");
        }
        let operation_ids: BTreeSet<&str> = ROUTES
            .iter()
            .filter_map(|(_, m, p)| doc["paths"][p][m.to_ascii_lowercase()]["operationId"].as_str())
            .collect();
        assert_eq!(
            operation_ids.len(),
            ROUTES.len(),
            "operation ids are unique"
        );
        for (_, method, path) in ROUTES {
            let op = &doc["paths"][path][method.to_ascii_lowercase()];
            let responses = op["responses"].as_object().unwrap();
            assert!(!responses.is_empty(), "{method} {path}");
            for (status, response) in responses {
                assert!(status.parse::<u16>().is_ok(), "{method} {path}: {status}");
                // Links name operations that exist.
                for link in response["links"]
                    .as_object()
                    .into_iter()
                    .flat_map(|l| l.values())
                {
                    let id = link["operationId"].as_str().unwrap();
                    assert!(operation_ids.contains(id), "{method} {path}: link to {id}");
                }
            }
            let declared: BTreeSet<&str> = op["parameters"]
                .as_array()
                .map(|ps| {
                    ps.iter()
                        .filter(|p| p["in"] == "path")
                        .filter_map(|p| p["name"].as_str())
                        .collect()
                })
                .unwrap_or_default();
            let in_path: BTreeSet<&str> = path
                .split('/')
                .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
                .collect();
            assert_eq!(declared, in_path, "{method} {path}");
            // The admin routes, and only they, need the admin token (but for the dashboard's
            // page and assets, which hold no data); the buyer routes, and only they, the
            // buyer's. The payment provider's callback is signed instead.
            let admin = op["security"] == serde_json::json!([{"bearer": []}]);
            let page = path.starts_with("/admin/dashboard");
            assert_eq!(
                admin,
                path.starts_with("/admin/") && !page,
                "{method} {path}"
            );
            let buyer = op["security"] == serde_json::json!([{"buyer": []}]);
            let signed = *path == "/v1/payments/callback";
            // The product as buyers see it is public: a shop's page shows it before sign-in.
            let public = *path == "/v1/seckill/{product_id}" && *method == "GET";
            assert_eq!(
                buyer,
                path.starts_with("/v1/") && !signed && !public,
                "{method} {path}"
            );
            if signed {
                assert!(op["security"].is_null(), "{method} {path}");
                let header = op["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|p| p["in"] == "header" && p["name"] == "Seckill-Signature");
                assert!(header, "{method} {path} documents its signature header");
            }
        }
    }

    /// Every error the gateway can produce is in the `Error` schema, and documented with its
    /// status, code and headers as an answer of some route (or of every route, for `404` and
    /// `405`).
    #[test]
    fn error_codes_are_documented() {
        use crate::error::every_kind;
        use actix_web::body::MessageBody;
        use actix_web::ResponseError;
        let doc = doc();
        let codes = |schema: &Value| -> Vec<String> {
            schema["properties"]["error"]["enum"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_str().unwrap().to_owned())
                .collect()
        };
        let all_codes = codes(&doc["components"]["schemas"]["Error"]);
        // Every documented answer: (status, response).
        let mut answers: Vec<(String, &Value)> = Vec::new();
        for ops in doc["paths"].as_object().unwrap().values() {
            for op in ops.as_object().unwrap().values() {
                for (status, r) in op["responses"].as_object().unwrap() {
                    answers.push((status.clone(), r));
                }
            }
        }
        for (status, r) in doc["x-fallback-responses"].as_object().unwrap() {
            answers.push((status.clone(), r));
        }
        let resolve = |v: &Value| -> Value {
            match v["$ref"].as_str() {
                Some(r) => doc.pointer(r.strip_prefix('#').unwrap()).unwrap().clone(),
                None => v.clone(),
            }
        };
        for e in every_kind() {
            let res = e.error_response();
            let status = res.status().as_u16().to_string();
            let headers: Vec<String> = res
                .headers()
                .keys()
                .filter(|h| h.as_str() != "content-type")
                .map(|h| h.as_str().to_owned())
                .collect();
            let body = res.into_body().try_into_bytes().unwrap();
            let body: Value = serde_json::from_slice(&body).unwrap();
            let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
            let with_state = matches!(
                e,
                crate::error::ApiError::NotPayable { .. }
                    | crate::error::ApiError::NotCancellable { .. }
            );
            if with_state {
                assert_eq!(keys, ["error", "message", "state"]);
            } else if matches!(e, crate::error::ApiError::ChallengeRequired(_)) {
                assert_eq!(keys, ["challenge", "error", "message"]);
            } else if matches!(e, crate::error::ApiError::NotEnoughStock { .. }) {
                assert_eq!(keys, ["error", "left", "message"]);
            } else if matches!(e, crate::error::ApiError::QuantityOverLimit { .. }) {
                assert_eq!(keys, ["error", "max_per_buyer", "message"]);
            } else {
                assert_eq!(keys, ["error", "message"]);
            }
            let code = body["error"].as_str().unwrap().to_owned();
            assert!(all_codes.contains(&code), "{code} is not in `Error`");
            let documented = answers.iter().any(|(s, r)| {
                let schema = resolve(&r["content"]["application/json"]["schema"]);
                let documented_headers: Vec<String> = r["headers"]
                    .as_object()
                    .map(|h| h.keys().map(|k| k.to_ascii_lowercase()).collect())
                    .unwrap_or_default();
                *s == status
                    && schema["properties"]["error"]["enum"].is_array()
                    && codes(&schema).contains(&code)
                    && headers.iter().all(|h| documented_headers.contains(h))
            });
            assert!(
                documented,
                "{e:?}: {status} {code} {headers:?} is documented nowhere"
            );
        }
    }

    /// The ticket pattern matches what `Ticket::parse` takes, but for leading zeros in the
    /// product id (which no ticket the gateway hands out has); checked on the ids around the
    /// limits, here by hand and in the end-to-end tests with a JSON-Schema validator.
    #[test]
    fn the_id_expression_spells_the_id_range() {
        assert_eq!(schema::decimal_up_to(9), "(?:[1-8]|9)");
        assert_eq!(schema::decimal_up_to(10), "(?:[1-9]|10)");
        assert_eq!(schema::decimal_up_to(42), "(?:[1-9]|[1-3][0-9]|4[0-1]|42)");
        assert_eq!(
            schema::decimal_up_to(205),
            "(?:[1-9][0-9]?|1[0-9]{2}|20[0-4]|205)"
        );
        assert!(schema::ticket_regex().starts_with("(?:[1-9][0-9]{0,17}|[1-8][0-9]{18}|9[0-1]"));
    }

    /// `WHITE_SPACE` is exactly what `str::trim` removes.
    #[test]
    fn white_space_ranges_are_what_trim_removes() {
        for c in (0..=0x10ffff).filter_map(char::from_u32) {
            let listed = schema::WHITE_SPACE
                .iter()
                .any(|&(a, b)| (a..=b).contains(&c));
            assert_eq!(listed, c.is_whitespace(), "{:?}", c);
        }
    }
}
