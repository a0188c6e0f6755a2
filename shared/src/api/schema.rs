//! Schemas of the values the server checks beyond their JSON type, for `schema_with`.

use crate::domain::{MAX_ID, MAX_NAME_CHARS, MAX_PRICE, MAX_STOCK};
use crate::{CancelReason, FailureReason, TicketStatus};
use strum::VariantArray;
use utoipa::openapi::schema::{Object, ObjectBuilder, Schema, Type};
use utoipa::openapi::{KnownFormat, RefOr, SchemaFormat};
use utoipa::{PartialSchema, ToSchema};

/// An id (product, user, order): a whole number from 1 to 9223372036854775807 (MySQL's
/// signed BIGINT), in a path as well as in a body.
pub fn id() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
        .minimum(Some(1))
        .maximum(Some(MAX_ID))
        .build()
}

/// A ticket, as `Ticket::parse` reads it: a product id, `-`, 32 lowercase hex digits, and
/// for a product split into stock buckets, `-` and the bucket (1 to 63).
pub fn ticket() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(format!("^{}$", ticket_regex())))
        .examples(["42-9f86d081884c7d659a2feaa0c55ad015"])
        .build()
}

/// The regular expression of a ticket, without anchors.
pub fn ticket_regex() -> String {
    format!(
        "{}-[0-9a-f]{{32}}(?:-{})?",
        decimal_up_to(MAX_ID),
        decimal_up_to(u64::from(crate::MAX_BUCKETS) - 1)
    )
}

/// An expression that matches exactly the numbers 1 to `max` written without leading zeros.
/// A plain `[1-9][0-9]{0,18}` would also match 19-digit numbers above `max`, which the
/// server refuses.
pub fn decimal_up_to(max: u64) -> String {
    let digits: Vec<u8> = max.to_string().bytes().map(|b| b - b'0').collect();
    let n = digits.len();
    let range = |lo: u8, hi: u8| {
        if lo == hi {
            lo.to_string()
        } else {
            format!("[{lo}-{hi}]")
        }
    };
    let rest = |k: usize| match k {
        0 => String::new(),
        1 => "[0-9]".to_owned(),
        k => format!("[0-9]{{{k}}}"),
    };
    let mut branches = Vec::new();
    // Fewer digits than `max`.
    match n {
        1 => {}
        2 => branches.push("[1-9]".to_owned()),
        3 => branches.push("[1-9][0-9]?".to_owned()),
        _ => branches.push(format!("[1-9][0-9]{{0,{}}}", n - 2)),
    }
    // As many digits: the same first `i` digits, then a smaller one, then any.
    for (i, &d) in digits.iter().enumerate() {
        let lo = u8::from(i == 0);
        if d > lo {
            let prefix: String = digits[..i].iter().map(u8::to_string).collect();
            branches.push(format!("{prefix}{}{}", range(lo, d - 1), rest(n - 1 - i)));
        }
    }
    branches.push(max.to_string());
    format!("(?:{})", branches.join("|"))
}

/// A ticket's state, as clients see it.
pub fn ticket_status() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(TicketStatus::VARIANTS.iter().map(|s| s.as_str())))
        .description(Some(
            "`pending` until a worker settled it (a ticket being settled is still `pending`); then `confirmed` or `failed`. A confirmed order with `pay_by_ms` becomes `paid`, or `cancelled` when it is not paid in time or its buyer cancels it.",
        ))
        .build()
}

/// Why a ticket failed, or why its order was cancelled.
pub fn failure_reason() -> Object {
    let reasons: Vec<&str> = FailureReason::VARIANTS
        .iter()
        .map(|r| r.as_str())
        .chain(CancelReason::VARIANTS.iter().map(|r| r.as_str()))
        .collect();
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(reasons))
        .description(Some(
            "Set once failed, or cancelled (`payment_timeout`, `buyer_cancelled`).",
        ))
        .build()
}

/// A waiting-room entry's state.
pub fn queue_state() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some([
            "waiting", "admitted", "sold_out", "expired", "bought", "ended",
        ]))
        .build()
}

/// What the provider's callback reports.
pub fn charge_outcome() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(["succeeded", "declined"]))
        .build()
}

/// A payment's state.
pub fn payment_status() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(["processing", "succeeded", "declined", "refund_due"]))
        .build()
}

/// A price in minor units.
pub fn price() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
        .minimum(Some(0))
        .maximum(Some(MAX_PRICE))
        .build()
}

/// A payment window in seconds.
pub fn payment_window() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
        .minimum(Some(0))
        .maximum(Some(crate::config::MAX_PAYMENT_WINDOW_SECS))
        .build()
}

/// The stock of a new product.
pub fn stock() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
        .minimum(Some(0))
        .maximum(Some(MAX_STOCK))
        .build()
}

/// Characters that `str::trim` removes (Unicode `White_Space`), as inclusive ranges.
pub const WHITE_SPACE: &[(char, char)] = &[
    ('\u{9}', '\u{d}'),
    (' ', ' '),
    ('\u{85}', '\u{85}'),
    ('\u{a0}', '\u{a0}'),
    ('\u{1680}', '\u{1680}'),
    ('\u{2000}', '\u{200a}'),
    ('\u{2028}', '\u{2029}'),
    ('\u{202f}', '\u{202f}'),
    ('\u{205f}', '\u{205f}'),
    ('\u{3000}', '\u{3000}'),
];

/// The name of a new product: 1 to 200 characters once white space is trimmed from both
/// ends. Spelled as a pattern, since `maxLength` would count the trimmed white space.
pub fn product_name() -> Object {
    let ranges: String = WHITE_SPACE
        .iter()
        .map(|&(a, b)| {
            let u = |c: char| format!("\\u{:04x}", c as u32);
            if a == b {
                u(a)
            } else {
                format!("{}-{}", u(a), u(b))
            }
        })
        .collect();
    let (ws, non_ws) = (format!("[{ranges}]"), format!("[^{ranges}]"));
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(format!(
            "^{ws}*{non_ws}(?:[\\s\\S]{{0,{}}}{non_ws})?{ws}*$",
            MAX_NAME_CHARS - 2
        )))
        .description(Some(format!(
            "1 to {MAX_NAME_CHARS} characters once white space is trimmed from both ends; stored trimmed."
        )))
        .examples(["Phone X"])
        .build()
}

/// The id of a confirmed order.
pub fn order_id() -> Object {
    let mut id = id();
    id.description = Some("Set once confirmed.".into());
    id
}

/// A path parameter that is an id ([`id`]).
pub struct Id;
impl PartialSchema for Id {
    fn schema() -> RefOr<Schema> {
        id().into()
    }
}
impl ToSchema for Id {}

/// A path parameter that is a ticket ([`ticket`]).
pub struct TicketText;
impl PartialSchema for TicketText {
    fn schema() -> RefOr<Schema> {
        ticket().into()
    }
}
impl ToSchema for TicketText {}

/// A waiting-room queue id: 32 lowercase hex digits.
pub struct QueueId;
impl PartialSchema for QueueId {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some("^[0-9a-f]{32}$"))
            .into()
    }
}
impl ToSchema for QueueId {}

/// The `Idempotency-Key` header of a payment: 1 to 255 visible ASCII characters.
pub struct IdempotencyKey;
impl PartialSchema for IdempotencyKey {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some("^[!-~]{1,255}$"))
            .min_length(Some(1))
            .max_length(Some(255))
            .into()
    }
}
impl ToSchema for IdempotencyKey {}

/// A JSON object.
pub struct AnyObject;
impl PartialSchema for AnyObject {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new().schema_type(Type::Object).into()
    }
}
impl ToSchema for AnyObject {}
