//! API errors. Every error answers with a JSON body `{"error": "...", "message"?: "..."}`.

use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};
use serde_json::json;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("request body is too large")]
    PayloadTooLarge,
    #[error("expected Content-Type: application/json")]
    UnsupportedMediaType,
    #[error("sold out")]
    SoldOut,
    #[error("unknown product")]
    UnknownProduct,
    #[error("unknown ticket")]
    UnknownTicket,
    #[error("not found")]
    NotFound,
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error("the sale has not started")]
    SaleNotStarted,
    #[error("the sale has ended")]
    SaleEnded,
    #[error("missing bearer token")]
    Unauthorized,
    #[error("wrong bearer token")]
    Forbidden,
    /// The user is over the per-user rate limit; a token comes back after this many seconds.
    #[error("too many buys; retry in {retry_after_secs} s")]
    RateLimited { retry_after_secs: u64 },
    /// The gateway already handles `SECKILL_MAX_IN_FLIGHT` buys; it refuses more at once rather
    /// than queue them.
    #[error("the gateway is at capacity, retry shortly")]
    Overloaded,
    /// A dependency cannot take the request now. The client may retry.
    #[error("{0}")]
    Unavailable(String),
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

impl ApiError {
    /// A dependency failed: log the cause chain once, answer 503.
    pub fn unavailable(what: &str, err: anyhow::Error) -> Self {
        tracing::warn!(error = format!("{err:#}"), "{what} unavailable");
        ApiError::Unavailable(format!("{what} is unavailable, retry shortly"))
    }

    fn code(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "bad_request",
            ApiError::PayloadTooLarge => "payload_too_large",
            ApiError::UnsupportedMediaType => "unsupported_media_type",
            ApiError::SoldOut => "sold_out",
            ApiError::UnknownProduct => "unknown_product",
            ApiError::UnknownTicket => "unknown_ticket",
            ApiError::NotFound => "not_found",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::SaleNotStarted => "sale_not_started",
            ApiError::SaleEnded => "sale_ended",
            ApiError::Unauthorized => "unauthorized",
            ApiError::Forbidden => "forbidden",
            ApiError::RateLimited { .. } => "rate_limited",
            ApiError::Overloaded | ApiError::Unavailable(_) => "unavailable",
            ApiError::Unexpected(_) => "internal",
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::SoldOut => StatusCode::CONFLICT,
            ApiError::UnknownProduct | ApiError::UnknownTicket | ApiError::NotFound => {
                StatusCode::NOT_FOUND
            }
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::SaleNotStarted | ApiError::SaleEnded | ApiError::Forbidden => {
                StatusCode::FORBIDDEN
            }
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Overloaded | ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Unexpected(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let mut res = HttpResponse::build(self.status_code());
        let body = match self {
            ApiError::BadRequest(m) | ApiError::Unavailable(m) => {
                json!({"error": self.code(), "message": m})
            }
            ApiError::Unexpected(e) => {
                tracing::error!(error = format!("{e:#}"), "unexpected error");
                json!({"error": self.code(), "message": "internal error"})
            }
            ApiError::Unauthorized => {
                res.insert_header((header::WWW_AUTHENTICATE, "Bearer"));
                json!({"error": self.code(), "message": self.to_string()})
            }
            _ => json!({"error": self.code(), "message": self.to_string()}),
        };
        match self {
            ApiError::Unavailable(_) | ApiError::Overloaded => {
                res.insert_header((header::RETRY_AFTER, "1"));
            }
            ApiError::RateLimited { retry_after_secs } => {
                res.insert_header((header::RETRY_AFTER, retry_after_secs.to_string()));
            }
            _ => {}
        }
        res.json(body)
    }
}

impl From<seckill_shared::domain::ParseError> for ApiError {
    fn from(e: seckill_shared::domain::ParseError) -> Self {
        ApiError::BadRequest(e.to_string())
    }
}

/// Maps body-parsing failures of actix's JSON extractor to our errors.
pub fn json_error(
    err: actix_web::error::JsonPayloadError,
    _req: &actix_web::HttpRequest,
) -> actix_web::Error {
    use actix_web::error::JsonPayloadError as E;
    match err {
        E::ContentType => ApiError::UnsupportedMediaType,
        E::Overflow { .. } | E::OverflowKnownLength { .. } => ApiError::PayloadTooLarge,
        E::Deserialize(e) => ApiError::BadRequest(format!("invalid JSON body: {e}")),
        other => ApiError::BadRequest(format!("invalid body: {other}")),
    }
    .into()
}

/// Maps path-parsing failures to 400.
pub fn path_error(
    err: actix_web::error::PathError,
    _req: &actix_web::HttpRequest,
) -> actix_web::Error {
    ApiError::BadRequest(format!("invalid path: {err}")).into()
}

/// A JSON body that must be an object. serde also accepts a struct written as an array
/// (`[1]`); a public API should not.
#[derive(Debug)]
pub struct Object<T>(pub T);

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Object<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<T>(std::marker::PhantomData<T>);
        impl<'de, T: serde::Deserialize<'de>> serde::de::Visitor<'de> for Visit<T> {
            type Value = Object<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Object<T>, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Object)
            }
        }
        d.deserialize_map(Visit(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::Object;
    use serde::Deserialize;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Req {
        user_id: u64,
    }

    #[test]
    fn only_objects_are_accepted() {
        assert_eq!(
            serde_json::from_str::<Object<Req>>(r#"{"user_id":3}"#)
                .unwrap()
                .0
                .user_id,
            3
        );
        assert!(
            serde_json::from_str::<Req>("[3]").is_ok(),
            "plain serde takes arrays"
        );
        assert!(serde_json::from_str::<Object<Req>>("[3]").is_err());
        assert!(serde_json::from_str::<Object<Req>>(r#"{"user_id":3,"x":1}"#).is_err());
    }
}
