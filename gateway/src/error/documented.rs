//! Each type here is one documented answer (an `IntoResponses` for `#[utoipa::path]`) and
//! stands for the errors listed with it. Its status, the `error` codes of its body and its
//! headers are read from what `ApiError::error_response` really sends for those errors, so
//! the document cannot drift from the code. Its schema is a component of the same name.

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
    /// The waiting room does not open before `opens_at`, the sale is past its `ends_at` (a
    /// buyer who had joined gets their entry, `ended`), or, in a room with a proof of work,
    /// the `Seckill-Pow` solution of a buyer not in it is refused: malformed, sent twice, not
    /// signed by a gateway, another buyer's or product's, expired, not meeting its bits, or
    /// used before (`challenge_invalid`; join again without it for a new challenge, or for
    /// your entry if you are in).
    QueueRefused => [
        ApiError::QueueNotOpen,
        ApiError::SaleEnded,
        ApiError::ChallengeInvalid(String::new()),
    ];
    /// The waiting room asks for a proof of work before a join: `challenge` says what to
    /// solve. Join again with `Seckill-Pow: <token>:<n>`. Nothing was added.
    ChallengeRequired => [ApiError::ChallengeRequired(Box::new(example_challenge()))];
    /// The product has no waiting room (or is not known).
    NoWaitingRoom => [ApiError::NoWaitingRoom, ApiError::UnknownProduct];
    /// No such queue entry (or another buyer's), or the product has no waiting room (or
    /// is not known).
    UnknownQueueEntry => [
        ApiError::UnknownQueueEntry,
        ApiError::NoWaitingRoom,
        ApiError::UnknownProduct,
    ];
    /// No unit left (`sold_out`); or fewer left than the buy's `quantity` (`not_enough_stock`,
    /// with `left`: nothing was reserved, a smaller buy may go through); or a `quantity` over
    /// the product's `max_per_buyer` (`quantity_over_limit`, with `max_per_buyer`).
    SoldOut => [
        ApiError::SoldOut,
        ApiError::NotEnoughStock { left: 1 },
        ApiError::QuantityOverLimit { max_per_buyer: 2 },
    ];
    /// The user is over the per-user rate limit (`SECKILL_RATE_LIMIT_PER_USER_PER_SEC`,
    /// `SECKILL_RATE_LIMIT_BURST`; for the waiting room
    /// `SECKILL_QUEUE_RATE_LIMIT_PER_USER_PER_SEC`), shared by every gateway, or the client address is over
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
    /// (`SECKILL_MAX_IN_FLIGHT` buys, or `SECKILL_SSE_MAX_STREAMS` live streams). Nothing was
    /// done. Retry after `Retry-After`.
    Unavailable => [ApiError::Unavailable(String::new()), ApiError::Overloaded];
    /// An unexpected error; logged by the gateway.
    Internal => [ApiError::Unexpected(anyhow::anyhow!("unexpected"))];
    /// No route matches the path.
    NotFound => [ApiError::NotFound];
    /// The path exists, but not with this method; `Allow` lists the methods it has.
    MethodNotAllowed => [ApiError::MethodNotAllowed { allow: "GET".into() }];
}

/// A challenge, for the answers made to be documented.
pub(crate) fn example_challenge() -> seckill_shared::api::PowChallenge {
    seckill_shared::api::PowChallenge {
        token: String::new(),
        algorithm: seckill_shared::waiting_room::pow::ALGORITHM.into(),
        bits: 0,
        expires_at_ms: 0,
    }
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
    let with_challenge = errors
        .iter()
        .any(|e| matches!(e, ApiError::ChallengeRequired(_)));
    let mut object = ObjectBuilder::new();
    if errors
        .iter()
        .any(|e| matches!(e, ApiError::NotEnoughStock { .. }))
    {
        object = object.property(
            "left",
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(1))
                .description(Some("Units left, for `not_enough_stock`.")),
        );
    }
    if errors
        .iter()
        .any(|e| matches!(e, ApiError::QuantityOverLimit { .. }))
    {
        object = object.property(
            "max_per_buyer",
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(1))
                .maximum(Some(100))
                .description(Some(
                    "The product's limit of units per buyer, for `quantity_over_limit`.",
                )),
        );
    }
    if with_challenge {
        object = object.property("challenge", Ref::from_schema_name("PowChallenge"));
        if errors.len() == 1 {
            object = object.required("challenge");
        }
    }
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
