//! API errors. Every error answers with a JSON body `{"error": "...", "message"?: "..."}`.

use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};
use seckill_shared::TicketStatus;
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
    /// The path exists, but not with this method. `allow` lists the methods it has, for the
    /// `Allow` header that RFC 9110 requires on a `405`.
    #[error("method not allowed")]
    MethodNotAllowed { allow: String },
    #[error("the sale has not started")]
    SaleNotStarted,
    #[error("the sale has ended")]
    SaleEnded,
    #[error("missing bearer token")]
    Unauthorized,
    #[error("wrong bearer token")]
    Forbidden,
    /// A buyer endpoint without a valid token; the message says which check failed.
    #[error("{0}")]
    Unauthenticated(String),
    /// The request names a user that is not the token's.
    #[error("user_id is not the token's user (sub)")]
    UserMismatch,
    /// The buyer holds no ticket for this product.
    #[error("you hold no ticket for this product")]
    NoOrder,
    /// The ticket is not a `confirmed` order awaiting payment.
    #[error("the order cannot be paid: it is {}", state.as_str())]
    NotPayable { state: TicketStatus },
    /// The payment deadline (`pay_by_ms`) has passed.
    #[error("the payment window has closed")]
    PaymentWindowClosed,
    /// Another payment of this order is waiting for the provider's answer.
    #[error("another payment of this order is in progress")]
    PaymentInProgress,
    /// The ticket is not a `confirmed` order awaiting payment.
    #[error("the order cannot be cancelled: it is {}", state.as_str())]
    NotCancellable { state: TicketStatus },
    /// A payment callback without a valid `Seckill-Signature`.
    #[error("{0}")]
    InvalidSignature(String),
    /// A payment callback for a payment this system never made.
    #[error("unknown payment")]
    UnknownPayment,
    /// Joining a waiting room before it opens.
    #[error("the waiting room is not open yet")]
    QueueNotOpen,
    /// A waiting-room product bought without an admission token.
    #[error("this product is sold through its waiting room: join it, and buy with the admission token (Seckill-Admission)")]
    AdmissionRequired,
    /// The admission token is forged, another buyer's or product's, expired, or the admission
    /// no longer holds.
    #[error("{0}")]
    AdmissionInvalid(String),
    /// The product has no waiting room.
    #[error("this product has no waiting room")]
    NoWaitingRoom,
    /// No such entry in the waiting room (or another buyer's).
    #[error("unknown queue entry")]
    UnknownQueueEntry,
    /// The client address is over the per-address limit.
    #[error("too many requests from this address; retry in {retry_after_secs} s")]
    AddressRateLimited { retry_after_secs: u64 },
    /// Too many wrong admin tokens from the client address: every admin request from it is
    /// refused, whatever its token (`SECKILL_ADMIN_AUTH_FAILURES_PER_MIN`).
    #[error("too many wrong admin tokens from this address; admin requests from it are refused, retry in {retry_after_secs} s")]
    AdminLocked { retry_after_secs: u64 },
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
        Self::retry_later(what)
    }

    /// The same `503`, for a caller that has already logged the failure with more context.
    pub fn retry_later(what: &str) -> Self {
        ApiError::Unavailable(format!("{what} is unavailable, retry shortly"))
    }

    /// The `error` field of the body.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "bad_request",
            ApiError::PayloadTooLarge => "payload_too_large",
            ApiError::UnsupportedMediaType => "unsupported_media_type",
            ApiError::SoldOut => "sold_out",
            ApiError::UnknownProduct => "unknown_product",
            ApiError::UnknownTicket => "unknown_ticket",
            ApiError::NotFound => "not_found",
            ApiError::MethodNotAllowed { .. } => "method_not_allowed",
            ApiError::SaleNotStarted => "sale_not_started",
            ApiError::SaleEnded => "sale_ended",
            ApiError::Unauthorized => "unauthorized",
            ApiError::Forbidden => "forbidden",
            ApiError::Unauthenticated(_) => "unauthenticated",
            ApiError::UserMismatch => "user_mismatch",
            ApiError::NoOrder => "no_order",
            ApiError::NotPayable { .. } => "not_payable",
            ApiError::PaymentWindowClosed => "payment_window_closed",
            ApiError::PaymentInProgress => "payment_in_progress",
            ApiError::NotCancellable { .. } => "not_cancellable",
            ApiError::InvalidSignature(_) => "invalid_signature",
            ApiError::UnknownPayment => "unknown_payment",
            ApiError::QueueNotOpen => "queue_not_open",
            ApiError::AdmissionRequired => "admission_required",
            ApiError::AdmissionInvalid(_) => "admission_invalid",
            ApiError::NoWaitingRoom => "no_waiting_room",
            ApiError::UnknownQueueEntry => "unknown_queue_entry",
            ApiError::AddressRateLimited { .. } => "rate_limited",
            ApiError::AdminLocked { .. } => "rate_limited",
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
            ApiError::SoldOut
            | ApiError::NotPayable { .. }
            | ApiError::PaymentWindowClosed
            | ApiError::PaymentInProgress
            | ApiError::NotCancellable { .. } => StatusCode::CONFLICT,
            ApiError::UnknownProduct
            | ApiError::UnknownTicket
            | ApiError::NotFound
            | ApiError::NoOrder
            | ApiError::UnknownPayment
            | ApiError::NoWaitingRoom
            | ApiError::UnknownQueueEntry => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::SaleNotStarted
            | ApiError::SaleEnded
            | ApiError::Forbidden
            | ApiError::UserMismatch
            | ApiError::QueueNotOpen
            | ApiError::AdmissionRequired
            | ApiError::AdmissionInvalid(_) => StatusCode::FORBIDDEN,
            ApiError::Unauthorized
            | ApiError::Unauthenticated(_)
            | ApiError::InvalidSignature(_) => StatusCode::UNAUTHORIZED,
            ApiError::RateLimited { .. }
            | ApiError::AddressRateLimited { .. }
            | ApiError::AdminLocked { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Overloaded | ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Unexpected(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let mut res = HttpResponse::build(self.status_code());
        let body = match self {
            ApiError::BadRequest(m)
            | ApiError::Unavailable(m)
            | ApiError::InvalidSignature(m)
            | ApiError::AdmissionInvalid(m) => {
                json!({"error": self.code(), "message": m})
            }
            ApiError::NotPayable { state } | ApiError::NotCancellable { state } => {
                json!({"error": self.code(), "message": self.to_string(), "state": state.as_str()})
            }
            ApiError::Unauthenticated(m) => {
                // RFC 6750 §3.1.
                res.insert_header((header::WWW_AUTHENTICATE, r#"Bearer error="invalid_token""#));
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
            ApiError::RateLimited { retry_after_secs }
            | ApiError::AddressRateLimited { retry_after_secs }
            | ApiError::AdminLocked { retry_after_secs } => {
                res.insert_header((header::RETRY_AFTER, retry_after_secs.to_string()));
            }
            ApiError::MethodNotAllowed { allow } => {
                res.insert_header((header::ALLOW, allow.as_str()));
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

/// The error answers of `GET /openapi.json`, made from the errors themselves.
///
/// Each type below is one documented answer (an `IntoResponses` for `#[utoipa::path]`) and
/// stands for the errors listed with it. Its status, the `error` codes of its body and its
/// headers are read from what [`ApiError::error_response`] really sends for those errors, so
/// the document cannot drift from the code. Its schema is a component of the same name.
pub mod documented {
    use super::ApiError;
    use actix_web::http::header;
    use actix_web::ResponseError;
    use seckill_shared::TicketStatus;
    use std::collections::BTreeMap;
    use utoipa::openapi::extensions::Extensions;
    use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Schema, Type};
    use utoipa::openapi::{
        ContentBuilder, Header, HeaderBuilder, Ref, RefOr, Response, ResponseBuilder,
    };

    macro_rules! documented {
        ($($(#[doc = $doc:literal])+ $name:ident => [$($error:expr),+ $(,)?];)+) => {
            $(
                $(#[doc = $doc])+
                pub struct $name;

                impl $name {
                    /// The errors this answer stands for.
                    pub fn errors() -> Vec<ApiError> {
                        vec![$($error),+]
                    }
                }

                impl utoipa::IntoResponses for $name {
                    fn responses() -> BTreeMap<String, RefOr<Response>> {
                        let (status, response) = answer(
                            stringify!($name),
                            concat!($($doc, "\n"),+),
                            &Self::errors(),
                        );
                        BTreeMap::from([(status.to_string(), response.into())])
                    }
                }
            )+

            /// Every documented error answer: its name (and schema's), its description, and
            /// the errors it stands for.
            pub fn all() -> Vec<(&'static str, String, Vec<ApiError>)> {
                vec![$((stringify!($name), describe(concat!($($doc, "\n"),+)), $name::errors())),+]
            }
        };
    }

    documented! {
        /// A malformed path, body or value.
        BadRequest => [ApiError::BadRequest(String::new())];
        /// The body is larger than 4096 bytes.
        PayloadTooLarge => [ApiError::PayloadTooLarge];
        /// The body is not `Content-Type: application/json`.
        UnsupportedMediaType => [ApiError::UnsupportedMediaType];
        /// No `Authorization: Bearer` token.
        Unauthorized => [ApiError::Unauthorized];
        /// A wrong bearer token.
        Forbidden => [ApiError::Forbidden];
        /// No valid buyer token: missing, malformed, badly signed, expired, not yet valid, or
        /// for another issuer or audience. The message says which; nothing was done.
        Unauthenticated => [ApiError::Unauthenticated(String::new())];
        /// The request's `user_id` is not the token's user (`sub`).
        UserMismatch => [ApiError::UserMismatch];
        /// The buyer holds no ticket for this product.
        NoOrder => [ApiError::NoOrder];
        /// The product is not known.
        UnknownProduct => [ApiError::UnknownProduct];
        /// The order cannot be paid: it is not `confirmed` with a payment window (`state`
        /// says what it is), its window has closed, or another payment of it is in progress.
        NotPayable => [
            ApiError::NotPayable { state: TicketStatus::Paid },
            ApiError::PaymentWindowClosed,
            ApiError::PaymentInProgress,
        ];
        /// The order cannot be cancelled: it is not `confirmed` with a payment window;
        /// `state` says what it is.
        NotCancellable => [ApiError::NotCancellable { state: TicketStatus::Paid }];
        /// The callback's `Seckill-Signature` is missing, malformed, does not match the raw
        /// body, or its `t` is more than 300 s from the gateway's clock. Nothing changed.
        InvalidSignature => [ApiError::InvalidSignature(String::new())];
        /// No such payment.
        UnknownPayment => [ApiError::UnknownPayment];
        /// No such ticket.
        UnknownTicket => [ApiError::UnknownTicket];
        /// Outside the product's sale window, the body's `user_id` is not the token's user
        /// (`sub`), or a waiting-room product bought without a valid admission
        /// (`Seckill-Admission`: missing, forged, another buyer's or product's, expired, or
        /// the admission no longer holds).
        BuyRefused => [
            ApiError::SaleNotStarted,
            ApiError::SaleEnded,
            ApiError::UserMismatch,
            ApiError::AdmissionRequired,
            ApiError::AdmissionInvalid(String::new()),
        ];
        /// The waiting room does not open before `opens_at`, or the body's `user_id` is not
        /// the token's user.
        QueueRefused => [ApiError::QueueNotOpen, ApiError::UserMismatch];
        /// The product has no waiting room (or is not known).
        NoWaitingRoom => [ApiError::NoWaitingRoom, ApiError::UnknownProduct];
        /// No such queue entry (or another buyer's), or the product has no waiting room (or
        /// is not known).
        UnknownQueueEntry => [
            ApiError::UnknownQueueEntry,
            ApiError::NoWaitingRoom,
            ApiError::UnknownProduct,
        ];
        /// No unit left.
        SoldOut => [ApiError::SoldOut];
        /// The user is over the per-user rate limit (`SECKILL_RATE_LIMIT_PER_USER_PER_SEC`,
        /// `SECKILL_RATE_LIMIT_BURST`), shared by every gateway, or the client address is over
        /// `SECKILL_RATE_LIMIT_PER_ADDRESS_PER_SEC`. Retry after `Retry-After`.
        RateLimited => [
            ApiError::RateLimited { retry_after_secs: 1 },
            ApiError::AddressRateLimited { retry_after_secs: 1 },
        ];
        /// The client address is over `SECKILL_RATE_LIMIT_PER_ADDRESS_PER_SEC`. Retry after
        /// `Retry-After`.
        AddressLimited => [ApiError::AddressRateLimited { retry_after_secs: 1 }];
        /// Too many wrong admin tokens from the client address
        /// (`SECKILL_ADMIN_AUTH_FAILURES_PER_MIN`): every admin request from it is refused,
        /// even with the right token, until `Retry-After`.
        AdminLocked => [ApiError::AdminLocked { retry_after_secs: 1 }];
        /// A dependency (Redis, Kafka or MySQL) cannot take the request now, the sale's state
        /// is being restored after Redis lost it, or the gateway is at capacity
        /// (`SECKILL_MAX_IN_FLIGHT`). Nothing was done. Retry after `Retry-After`.
        Unavailable => [ApiError::Unavailable(String::new()), ApiError::Overloaded];
        /// An unexpected error; logged by the gateway.
        Internal => [ApiError::Unexpected(anyhow::anyhow!("unexpected"))];
        /// No route matches the path.
        NotFound => [ApiError::NotFound];
        /// The path exists, but not with this method; `Allow` lists the methods it has.
        MethodNotAllowed => [ApiError::MethodNotAllowed { allow: "GET".into() }];
    }

    fn describe(doc: &str) -> String {
        doc.lines()
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(" ")
            .trim()
            .to_owned()
    }

    /// One answer: the status that `errors` share, and the response that documents them.
    fn answer(name: &str, doc: &str, errors: &[ApiError]) -> (u16, Response) {
        let status = errors[0].status_code().as_u16();
        let mut response = ResponseBuilder::new()
            .description(describe(doc))
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name(name)))
                    .build(),
            )
            .build();
        // Answers made to be read, not sent: `Unexpected` logs when it answers; not here.
        let answers: Vec<_> =
            tracing::subscriber::with_default(tracing::subscriber::NoSubscriber::default(), || {
                errors.iter().map(|e| e.error_response()).collect()
            });
        for (e, a) in errors.iter().zip(&answers) {
            assert_eq!(
                a.status().as_u16(),
                status,
                "{name}: {e:?} has another status than {:?}",
                errors[0]
            );
        }
        let mut names: Vec<&header::HeaderName> = answers
            .iter()
            .flat_map(|a| a.headers().keys())
            .filter(|h| **h != header::CONTENT_TYPE)
            .collect();
        names.sort_by_key(|h| h.as_str());
        names.dedup();
        for h in names {
            let required = answers.iter().all(|a| a.headers().contains_key(h));
            let values: Vec<&str> = answers
                .iter()
                .filter_map(|a| a.headers().get(h)?.to_str().ok())
                .collect();
            response
                .headers
                .insert(header_title(h), header_doc(h, &values, required).into());
        }
        (status, response)
    }

    /// The document of a header that an error answer carries; `values` are the ones it had.
    fn header_doc(h: &header::HeaderName, values: &[&str], required: bool) -> Header {
        let (description, schema) = match *h {
            header::RETRY_AFTER => {
                assert!(values
                    .iter()
                    .all(|v| v.parse::<u64>().is_ok_and(|n| n >= 1)));
                (
                    "Seconds to wait before retrying.",
                    ObjectBuilder::new()
                        .schema_type(Type::Integer)
                        .minimum(Some(1)),
                )
            }
            header::WWW_AUTHENTICATE => (
                "The scheme to authenticate with.",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .enum_values(Some(dedup(values))),
            ),
            header::ALLOW => (
                "The methods the path has (RFC 9110).",
                ObjectBuilder::new().schema_type(Type::String),
            ),
            _ => panic!("document the header {h} of the error answers"),
        };
        let mut doc = HeaderBuilder::new()
            .schema(Some(schema))
            .description(Some(description))
            .build();
        if required {
            doc.extensions = Some(required_header());
        }
        doc
    }

    /// OpenAPI's `required: true` on a Header Object. utoipa's `Header` has no such field, so
    /// it goes through the map that utoipa flattens into the object.
    pub fn required_header() -> Extensions {
        Extensions::from_iter([("required", true)])
    }

    fn dedup<'a>(values: &[&'a str]) -> Vec<&'a str> {
        let mut v = values.to_vec();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// `retry-after` → `Retry-After`.
    fn header_title(h: &header::HeaderName) -> String {
        match *h {
            header::WWW_AUTHENTICATE => "WWW-Authenticate".into(),
            _ => h
                .as_str()
                .split('-')
                .map(|w| w[..1].to_ascii_uppercase() + &w[1..])
                .collect::<Vec<_>>()
                .join("-"),
        }
    }

    /// The body schema of a documented answer: `{"error": one of its codes, "message"}`, and
    /// `state` for the answers that carry the ticket's state.
    pub fn body_schema(description: &str, errors: &[ApiError]) -> Schema {
        let mut codes: Vec<&str> = errors.iter().map(ApiError::code).collect();
        codes.dedup();
        let with_state = errors.iter().any(|e| {
            matches!(
                e,
                ApiError::NotPayable { .. } | ApiError::NotCancellable { .. }
            )
        });
        let mut object = ObjectBuilder::new();
        if with_state {
            object = object.property(
                "state",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .enum_values(Some(
                        [
                            TicketStatus::Pending,
                            TicketStatus::Confirmed,
                            TicketStatus::Paid,
                            TicketStatus::Cancelled,
                            TicketStatus::Failed,
                        ]
                        .map(TicketStatus::as_str),
                    ))
                    .description(Some(
                        "The ticket's state, for `not_payable` and `not_cancellable`.",
                    )),
            );
        }
        object
            .description(Some(description))
            .property(
                "error",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .enum_values(Some(codes)),
            )
            .required("error")
            .property(
                "message",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .description(Some("Human-readable; do not parse.")),
            )
            .required("message")
            .additional_properties(Some(AdditionalProperties::FreeForm(false)))
            .build()
            .into()
    }
}

/// One error of each kind. Adding a variant to [`ApiError`] breaks the build here until it is
/// listed, so the tests that check the document against every kind see the new one.
#[cfg(test)]
pub(crate) fn every_kind() -> Vec<ApiError> {
    let all = vec![
        ApiError::BadRequest(String::new()),
        ApiError::PayloadTooLarge,
        ApiError::UnsupportedMediaType,
        ApiError::SoldOut,
        ApiError::UnknownProduct,
        ApiError::UnknownTicket,
        ApiError::NotFound,
        ApiError::MethodNotAllowed {
            allow: "POST".into(),
        },
        ApiError::SaleNotStarted,
        ApiError::SaleEnded,
        ApiError::Unauthorized,
        ApiError::Forbidden,
        ApiError::Unauthenticated(String::new()),
        ApiError::UserMismatch,
        ApiError::NoOrder,
        ApiError::NotPayable {
            state: TicketStatus::Pending,
        },
        ApiError::PaymentWindowClosed,
        ApiError::PaymentInProgress,
        ApiError::NotCancellable {
            state: TicketStatus::Failed,
        },
        ApiError::InvalidSignature(String::new()),
        ApiError::UnknownPayment,
        ApiError::QueueNotOpen,
        ApiError::AdmissionRequired,
        ApiError::AdmissionInvalid(String::new()),
        ApiError::NoWaitingRoom,
        ApiError::UnknownQueueEntry,
        ApiError::RateLimited {
            retry_after_secs: 7,
        },
        ApiError::AddressRateLimited {
            retry_after_secs: 7,
        },
        ApiError::AdminLocked {
            retry_after_secs: 7,
        },
        ApiError::Overloaded,
        ApiError::Unavailable(String::new()),
        ApiError::Unexpected(anyhow::anyhow!("x")),
    ];
    for e in &all {
        match e {
            ApiError::BadRequest(_)
            | ApiError::PayloadTooLarge
            | ApiError::UnsupportedMediaType
            | ApiError::SoldOut
            | ApiError::UnknownProduct
            | ApiError::UnknownTicket
            | ApiError::NotFound
            | ApiError::MethodNotAllowed { .. }
            | ApiError::SaleNotStarted
            | ApiError::SaleEnded
            | ApiError::Unauthorized
            | ApiError::Forbidden
            | ApiError::Unauthenticated(_)
            | ApiError::UserMismatch
            | ApiError::NoOrder
            | ApiError::NotPayable { .. }
            | ApiError::PaymentWindowClosed
            | ApiError::PaymentInProgress
            | ApiError::NotCancellable { .. }
            | ApiError::InvalidSignature(_)
            | ApiError::UnknownPayment
            | ApiError::QueueNotOpen
            | ApiError::AdmissionRequired
            | ApiError::AdmissionInvalid(_)
            | ApiError::NoWaitingRoom
            | ApiError::UnknownQueueEntry
            | ApiError::RateLimited { .. }
            | ApiError::AddressRateLimited { .. }
            | ApiError::AdminLocked { .. }
            | ApiError::Overloaded
            | ApiError::Unavailable(_)
            | ApiError::Unexpected(_) => {}
        }
    }
    all
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

/// Maps query-string failures (an unknown or repeated parameter) to 400, with the JSON body
/// every other error has.
pub fn query_error(
    err: actix_web::error::QueryPayloadError,
    _req: &actix_web::HttpRequest,
) -> actix_web::Error {
    ApiError::BadRequest(format!("invalid query: {err}")).into()
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

/// Whole numbers in a JSON body, read the way JSON Schema's `integer` (which the document
/// uses) reads them: `5`, `5.0` and `5e0` are the same number, so all three are `5`; `5.5` is
/// not a whole number. For `#[serde(deserialize_with)]`.
pub mod whole {
    use seckill_shared::UserId;
    use serde::de::{Deserialize, Deserializer, Error, Unexpected};

    fn number<'de, D: Deserializer<'de>>(d: D, what: &str) -> Result<i128, D::Error> {
        let n = serde_json::Number::deserialize(d)?;
        if let Some(i) = n.as_i64() {
            return Ok(i.into());
        }
        if let Some(u) = n.as_u64() {
            return Ok(u.into());
        }
        match n.as_f64() {
            // Every f64 this large is a whole number, and far out of any range we take.
            Some(f) if f.fract() == 0.0 && f.abs() < 1e30 => Ok(f as i128),
            Some(f) => Err(D::Error::invalid_value(Unexpected::Float(f), &what)),
            None => Err(D::Error::custom(format!("{what}: not a number"))),
        }
    }

    /// An optional user id (with `#[serde(default)]`): absent is `None`; present, as
    /// [`user_id`].
    pub fn optional_user_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<UserId>, D::Error> {
        user_id(d).map(Some)
    }

    /// A user id: a whole number from 1 to 9223372036854775807.
    pub fn user_id<'de, D: Deserializer<'de>>(d: D) -> Result<UserId, D::Error> {
        const WHAT: &str = "a user id, a whole number between 1 and 9223372036854775807";
        let n = number(d, WHAT)?;
        u64::try_from(n)
            .ok()
            .and_then(|n| UserId::new(n).ok())
            .ok_or_else(|| D::Error::custom(format!("{n} is not {WHAT}")))
    }

    /// An optional signed 64-bit whole number (with `#[serde(default)]`).
    pub fn optional_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
        i64(d).map(Some)
    }

    /// A signed 64-bit whole number (its range is checked by the handler).
    pub fn i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        const WHAT: &str = "a whole number";
        let n = number(d, WHAT)?;
        i64::try_from(n).map_err(|_| D::Error::custom(format!("{n} is out of range")))
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

    #[test]
    fn whole_numbers_are_read_as_json_schema_integers() {
        #[derive(Deserialize)]
        struct Buy {
            #[serde(deserialize_with = "super::whole::user_id")]
            user_id: seckill_shared::UserId,
        }
        #[derive(Deserialize)]
        struct Stock {
            #[serde(deserialize_with = "super::whole::i64")]
            stock: i64,
        }
        let user = |json: &str| {
            serde_json::from_str::<Object<Buy>>(&format!(r#"{{"user_id":{json}}}"#))
                .map(|b| b.0.user_id.get())
                .ok()
        };
        for (json, expected) in [
            ("244", Some(244)),
            ("244.0", Some(244)),
            ("2.44e2", Some(244)),
            ("1", Some(1)),
            ("9223372036854775807", Some(9223372036854775807)),
            ("244.5", None),
            ("0", None),
            ("0.0", None),
            ("-1", None),
            ("9223372036854775808", None),
            ("1e19", None),
            ("1e300", None),
            ("\"244\"", None),
            ("null", None),
        ] {
            assert_eq!(user(json), expected, "user_id {json}");
        }
        let stock = |json: &str| {
            serde_json::from_str::<Stock>(&format!(r#"{{"stock":{json}}}"#))
                .map(|s| s.stock)
                .ok()
        };
        assert_eq!(stock("67830.0"), Some(67830));
        assert_eq!(stock("-3"), Some(-3));
        assert_eq!(stock("0.5"), None);
        assert_eq!(stock("1e19"), None);
    }
}
