//! A ticket: the product (and stock bucket) it belongs to, and a random part.

use super::{ParseError, ProductId, UserId};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A ticket: `<product id>-<32 hex digits>`, 128 random bits from the OS-seeded CSPRNG, and
/// for a product whose stock is split into buckets, `-<bucket>` (1 to 63) when the ticket
/// lives in a bucket other than the first.
///
/// The product id (and bucket) in front let any gateway find the ticket's record in its Redis
/// slot. The random part says nothing about any other order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Ticket {
    text: String,
    product: ProductId,
    bucket: u16,
}

/// The most stock buckets a product can have (`"buckets"` at creation).
pub const MAX_BUCKETS: u16 = 64;

impl Ticket {
    pub fn generate(product: ProductId) -> Self {
        Self::generate_in(product, 0)
    }

    /// A new ticket whose record lives in `bucket` (below [`MAX_BUCKETS`]).
    pub fn generate_in(product: ProductId, bucket: u16) -> Self {
        debug_assert!(bucket < MAX_BUCKETS);
        let bits: u128 = rand::random();
        let text = if bucket == 0 {
            format!("{product}-{bits:032x}")
        } else {
            format!("{product}-{bits:032x}-{bucket}")
        };
        Self {
            text,
            product,
            bucket,
        }
    }

    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let (p, r) = s.split_once('-').ok_or(ParseError::Ticket)?;
        let product = ProductId::parse(p).map_err(|_| ParseError::Ticket)?;
        let (r, bucket) = match r.split_once('-') {
            None => (r, 0),
            Some((r, b)) => {
                // One spelling per bucket: no leading zero, no `-0`.
                let ok = !b.is_empty()
                    && b.len() <= 2
                    && !b.starts_with('0')
                    && b.bytes().all(|c| c.is_ascii_digit());
                let bucket: u16 = b.parse().map_err(|_| ParseError::Ticket)?;
                if !ok || bucket >= MAX_BUCKETS {
                    return Err(ParseError::Ticket);
                }
                (r, bucket)
            }
        };
        if r.len() != 32 || !r.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(ParseError::Ticket);
        }
        Ok(Self {
            text: s.to_owned(),
            product,
            bucket,
        })
    }

    pub fn product(&self) -> ProductId {
        self.product
    }

    /// The stock bucket whose keys hold this ticket's record (0 for a product in one piece).
    pub fn bucket(&self) -> u16 {
        self.bucket
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// The bucket a buyer's tickets live in, for a product in `buckets` pieces: a fixed mix of the
/// user id (splitmix64), so every gateway sends one buyer to the same bucket, and consecutive
/// ids spread evenly.
pub fn home_bucket(user: UserId, buckets: u16) -> u16 {
    if buckets <= 1 {
        return 0;
    }
    let mut z = user.get().wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z % buckets as u64) as u16
}

impl TryFrom<String> for Ticket {
    type Error = ParseError;
    fn try_from(s: String) -> Result<Self, ParseError> {
        Ticket::parse(&s)
    }
}
impl From<Ticket> for String {
    fn from(t: Ticket) -> String {
        t.text
    }
}
impl fmt::Display for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}
