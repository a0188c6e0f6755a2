//! Whole numbers in a JSON body, read the way JSON Schema's `integer` (which the document
//! uses) reads them: `5`, `5.0` and `5e0` are the same number, so all three are `5`; `5.5` is
//! not a whole number. For `#[serde(deserialize_with)]`.

use crate::UserId;
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

/// `1`: the default of a ticket's `quantity` in an answer from a build before quantities.
pub fn one() -> u16 {
    1
}
