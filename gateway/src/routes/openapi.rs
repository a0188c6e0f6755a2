//! `GET /openapi.json`: the OpenAPI 3.1 description of this API.
//!
//! The document is written by hand (`gateway/src/openapi.json`) and held to the code by tests:
//! the unit tests below check it against [`super::ROUTES`], and the end-to-end tests in
//! `worker/tests/e2e/openapi.rs` check every status and body the running gateway produces
//! against it, and that every documented status is produced.

use actix_web::http::header::ContentType;
use actix_web::HttpResponse;

/// The document, as served.
pub const DOCUMENT: &str = include_str!("../openapi.json");

pub async fn document() -> HttpResponse {
    HttpResponse::Ok()
        .content_type(ContentType::json())
        .body(DOCUMENT)
}

#[cfg(test)]
mod tests {
    use super::DOCUMENT;
    use crate::routes::ROUTES;
    use serde_json::Value;
    use std::collections::BTreeSet;

    fn doc() -> Value {
        serde_json::from_str(DOCUMENT).expect("openapi.json is JSON")
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
        for (_, method, path) in ROUTES {
            let op = &doc["paths"][path][method.to_ascii_lowercase()];
            let responses = op["responses"].as_object().unwrap();
            assert!(!responses.is_empty(), "{method} {path}");
            for status in responses.keys() {
                assert!(status.parse::<u16>().is_ok(), "{method} {path}: {status}");
            }
            let declared: BTreeSet<&str> = op["parameters"]
                .as_array()
                .map(|ps| ps.iter().filter_map(|p| p["name"].as_str()).collect())
                .unwrap_or_default();
            let in_path: BTreeSet<&str> = path
                .split('/')
                .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
                .collect();
            assert_eq!(declared, in_path, "{method} {path}");
        }
    }

    /// Every error code the gateway can produce is in the `Error` schema.
    #[test]
    fn error_codes_are_documented() {
        use crate::error::ApiError;
        use actix_web::body::MessageBody;
        use actix_web::ResponseError;
        let doc = doc();
        let codes: Vec<&str> = doc["components"]["schemas"]["Error"]["properties"]["error"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        for e in [
            ApiError::BadRequest(String::new()),
            ApiError::PayloadTooLarge,
            ApiError::UnsupportedMediaType,
            ApiError::SoldOut,
            ApiError::UnknownProduct,
            ApiError::UnknownTicket,
            ApiError::NotFound,
            ApiError::MethodNotAllowed,
            ApiError::SaleNotStarted,
            ApiError::SaleEnded,
            ApiError::Unauthorized,
            ApiError::Forbidden,
            ApiError::RateLimited {
                retry_after_secs: 1,
            },
            ApiError::Overloaded,
            ApiError::Unavailable(String::new()),
            ApiError::Unexpected(anyhow::anyhow!("x")),
        ] {
            let res = e.error_response();
            let body = res.into_body().try_into_bytes().unwrap();
            let body: Value = serde_json::from_slice(&body).unwrap();
            let code = body["error"].as_str().unwrap();
            assert!(codes.contains(&code), "{code} is not documented");
        }
    }
}
