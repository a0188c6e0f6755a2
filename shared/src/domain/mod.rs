//! Domain values. Each parses once, at the edge, and is typed from then on: a product id can
//! never meet a user id or a bare string key.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Largest id we accept. Ids are stored as signed BIGINT in MySQL.
pub const MAX_ID: u64 = i64::MAX as u64;

/// Largest stock one product may have.
pub const MAX_STOCK: i64 = 1_000_000_000;
/// Highest price, in minor units.
pub const MAX_PRICE: i64 = 1_000_000_000_000;
/// Longest product name, in characters, once trimmed.
pub const MAX_NAME_CHARS: usize = 200;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParseError {
    #[error("{0} must be a whole number between 1 and {MAX_ID}")]
    Id(&'static str),
    #[error("not a valid ticket")]
    Ticket,
}

fn parse_id(s: &str, what: &'static str) -> Result<u64, ParseError> {
    if s.is_empty() || s.len() > 19 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::Id(what));
    }
    match s.parse::<u64>() {
        Ok(n) if (1..=MAX_ID).contains(&n) => Ok(n),
        _ => Err(ParseError::Id(what)),
    }
}

macro_rules! id_type {
    ($name:ident, $what:literal) => {
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
        )]
        #[serde(try_from = "u64", into = "u64")]
        pub struct $name(u64);

        impl $name {
            pub fn parse(s: &str) -> Result<Self, ParseError> {
                parse_id(s, $what).map(Self)
            }
            pub fn new(n: u64) -> Result<Self, ParseError> {
                if (1..=MAX_ID).contains(&n) {
                    Ok(Self(n))
                } else {
                    Err(ParseError::Id($what))
                }
            }
            pub fn get(self) -> u64 {
                self.0
            }
            /// The id as MySQL's signed BIGINT. Never negative: ids are checked on the way in.
            pub fn as_i64(self) -> i64 {
                self.0 as i64
            }
        }
        impl TryFrom<u64> for $name {
            type Error = ParseError;
            fn try_from(n: u64) -> Result<Self, ParseError> {
                Self::new(n)
            }
        }
        impl From<$name> for u64 {
            fn from(id: $name) -> u64 {
                id.0
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id_type!(ProductId, "product id");
id_type!(UserId, "user id");

/// How long a gateway holds an order's Kafka location for the next reservation call of its
/// bucket to carry, at most (ms).
pub const HOLD_LOCATED_MS: u64 = 10;

mod messages;
mod states;
#[cfg(test)]
mod tests;
mod ticket;

pub use messages::*;
pub use states::*;
pub use ticket::*;
