//! API errors. Every error answers with a JSON body `{"error": "...", "message"?: "..."}`.

use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};
use seckill_shared::api::ErrorBody;
use seckill_shared::TicketStatus;

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
    /// Fewer units left than the buy asked for (and more than none): nothing was reserved.
    #[error("only {left} left: fewer units than asked for; nothing was reserved")]
    NotEnoughStock { left: u64 },
    /// A buy's `quantity` over the product's `max_per_buyer`.
    #[error("at most {max_per_buyer} units per buyer of this product")]
    QuantityOverLimit { max_per_buyer: u16 },
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
    /// A join of a waiting room that asks for a proof of work, without one: the body carries
    /// the challenge.
    #[error("this waiting room asks for a proof of work: solve the challenge and join again with the solution in the Seckill-Pow header")]
    ChallengeRequired(Box<seckill_shared::api::PowChallenge>),
    /// The join's proof of work is malformed, forged, another buyer's or product's, expired,
    /// unsolved, or was used before.
    #[error("{0}")]
    ChallengeInvalid(String),
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
    #[error("too many requests from this buyer; retry in {retry_after_secs} s")]
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
            ApiError::NotEnoughStock { .. } => "not_enough_stock",
            ApiError::QuantityOverLimit { .. } => "quantity_over_limit",
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
            ApiError::ChallengeRequired(_) => "challenge_required",
            ApiError::ChallengeInvalid(_) => "challenge_invalid",
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
            | ApiError::NotEnoughStock { .. }
            | ApiError::QuantityOverLimit { .. }
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
            | ApiError::AdmissionInvalid(_)
            | ApiError::ChallengeInvalid(_) => StatusCode::FORBIDDEN,
            ApiError::ChallengeRequired(_) => StatusCode::PRECONDITION_REQUIRED,
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
            | ApiError::AdmissionInvalid(m)
            | ApiError::ChallengeInvalid(m) => ErrorBody::new(self.code(), m.as_str()),
            ApiError::ChallengeRequired(c) => ErrorBody {
                challenge: Some((**c).clone()),
                ..ErrorBody::new(self.code(), self.to_string())
            },
            ApiError::NotEnoughStock { left } => ErrorBody {
                left: Some(*left),
                ..ErrorBody::new(self.code(), self.to_string())
            },
            ApiError::QuantityOverLimit { max_per_buyer } => ErrorBody {
                max_per_buyer: Some(*max_per_buyer),
                ..ErrorBody::new(self.code(), self.to_string())
            },
            ApiError::NotPayable { state } | ApiError::NotCancellable { state } => ErrorBody {
                state: Some(*state),
                ..ErrorBody::new(self.code(), self.to_string())
            },
            ApiError::Unauthenticated(m) => {
                // RFC 6750 §3.1.
                res.insert_header((header::WWW_AUTHENTICATE, r#"Bearer error="invalid_token""#));
                ErrorBody::new(self.code(), m.as_str())
            }
            ApiError::Unexpected(e) => {
                tracing::error!(error = format!("{e:#}"), "unexpected error");
                ErrorBody::new(self.code(), "internal error")
            }
            ApiError::Unauthorized => {
                res.insert_header((header::WWW_AUTHENTICATE, "Bearer"));
                ErrorBody::new(self.code(), self.to_string())
            }
            _ => ErrorBody::new(self.code(), self.to_string()),
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
pub mod documented;
#[cfg(test)]
mod every_kind;
mod extract;

#[cfg(test)]
pub(crate) use every_kind::every_kind;
pub use extract::{json_error, path_error, query_error, Object};

/// Whole numbers in a JSON body (`seckill_shared::api::whole`).
pub use seckill_shared::api::whole;

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
