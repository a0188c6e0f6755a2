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

/// What a client sees of a ticket. Internally a ticket that a worker has claimed is
/// `processing`; clients see it as `pending`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    Default,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::Display,
    strum::VariantArray,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum TicketStatus {
    #[default]
    Pending,
    /// Ordered; when the product has a payment window, to be paid by `pay_by_ms`.
    Confirmed,
    /// Paid within the window: final.
    Paid,
    /// Not paid in time, or cancelled by the buyer; its unit went back on sale.
    Cancelled,
    Failed,
}

impl TicketStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The state of an order row in MySQL (`orders.status`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::Display,
    strum::VariantArray,
)]
#[strum(serialize_all = "lowercase")]
pub enum OrderStatus {
    Confirmed,
    Paid,
    Cancelled,
}

impl OrderStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }

    pub fn public(self) -> TicketStatus {
        match self {
            Self::Confirmed => TicketStatus::Confirmed,
            Self::Paid => TicketStatus::Paid,
            Self::Cancelled => TicketStatus::Cancelled,
        }
    }
}

/// Why an order was cancelled (`orders.cancel_reason`, and the ticket's `reason`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::Display,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum CancelReason {
    /// Not paid by `pay_by_ms`; a worker cancelled it.
    PaymentTimeout,
    /// The buyer cancelled it.
    BuyerCancelled,
}

impl CancelReason {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }
}

/// Why a ticket failed. Stored as its text in Redis (`reason`) and MySQL
/// (`failed_tickets.reason`), and shown to the buyer; every variant is one the code builds,
/// so the API document's list of reasons ([`strum::VariantArray::VARIANTS`]) names only
/// reasons that can happen.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::Display,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum FailureReason {
    /// Failed on purpose by fault injection (`SECKILL_CHAOS_*`).
    Chaos,
    /// MySQL does not know the product.
    UnknownProduct,
    /// The user already holds an order for the product.
    DuplicateUser,
    /// MySQL had no unit left. Redis reserved one, so the stores had diverged.
    OutOfStock,
    /// No worker took the order: its message never reached the consumer group.
    Expired,
    /// A worker claimed it, then the worker and the message were both lost.
    Lost,
    /// The gateway could not hand the order to Kafka.
    KafkaUnavailable,
}

impl FailureReason {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }
}

/// The message the gateway puts on Kafka for each reserved unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderMessage {
    /// Format version. Bump it when a field changes meaning.
    pub v: u32,
    pub ticket: Ticket,
    pub product_id: ProductId,
    pub user_id: UserId,
    /// When the unit was reserved in Redis, ms since the epoch.
    pub reserved_at_ms: i64,
}

impl OrderMessage {
    pub const VERSION: u32 = 1;

    pub fn new(ticket: Ticket, user_id: UserId, reserved_at_ms: i64) -> Self {
        Self {
            v: Self::VERSION,
            product_id: ticket.product(),
            ticket,
            user_id,
            reserved_at_ms,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("an order message always serialises")
    }

    /// Decodes and checks a message: a known version, and a ticket that belongs to its product.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        let m: OrderMessage = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if m.v != Self::VERSION {
            return Err(format!("unsupported message version {}", m.v));
        }
        if m.ticket.product() != m.product_id {
            return Err("ticket does not belong to product".into());
        }
        Ok(m)
    }
}

/// The claims of a buyer's token (JWT) that this system writes and reads: the buyer (`sub`, a
/// user id in decimal), expiry and issue time (seconds since the epoch), and an optional
/// issuer and audience. The gateway verifies them (`gateway::auth`); `gateway token` and
/// `seckill-bench load` sign them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuyerClaims {
    pub sub: String,
    pub exp: u64,
    #[serde(default)]
    pub iat: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iss: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aud: Option<String>,
}

impl BuyerClaims {
    /// `user`'s claims, issued at `now_s` and valid for `ttl_s`.
    pub fn new(
        user: u64,
        now_s: u64,
        ttl_s: u64,
        issuer: Option<String>,
        audience: Option<String>,
    ) -> Self {
        Self {
            sub: user.to_string(),
            exp: now_s.saturating_add(ttl_s),
            iat: now_s,
            iss: issuer,
            aud: audience,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_only_positive_in_range_numbers() {
        assert_eq!(ProductId::parse("42").unwrap().get(), 42);
        for bad in [
            "",
            "0",
            "-1",
            "abc",
            "1.5",
            " 1",
            "9223372036854775808",
            "99999999999999999999",
        ] {
            assert!(ProductId::parse(bad).is_err(), "{bad:?} should not parse");
        }
        assert_eq!(UserId::parse("9223372036854775807").unwrap().get(), MAX_ID);
    }

    #[test]
    fn ids_deserialize_with_range_check() {
        assert!(serde_json::from_str::<UserId>("0").is_err());
        assert!(serde_json::from_str::<UserId>("\"1\"").is_err());
        assert_eq!(serde_json::from_str::<UserId>("7").unwrap().get(), 7);
    }

    #[test]
    fn tickets_are_random_and_round_trip() {
        let p = ProductId::new(9).unwrap();
        let a = Ticket::generate(p);
        let b = Ticket::generate(p);
        assert_ne!(a, b);
        assert_eq!(Ticket::parse(a.as_str()).unwrap(), a);
        assert_eq!(a.product(), p);
        assert_eq!(a.as_str().len(), "9-".len() + 32);
    }

    /// All 128 bits after the product are random: each is set in about half of many tickets,
    /// so a ticket says nothing about the orders before it (a counter, a clock or a shorter
    /// random number would leave bits that hardly ever change).
    #[test]
    fn tickets_carry_128_evenly_random_bits() {
        let p = ProductId::new(9).unwrap();
        let n = 2000;
        let mut ones = [0u32; 128];
        let mut seen = std::collections::HashSet::new();
        for _ in 0..n {
            let t = Ticket::generate(p);
            let bits = u128::from_str_radix(&t.as_str()["9-".len()..], 16).unwrap();
            for (i, count) in ones.iter_mut().enumerate() {
                *count += (bits >> i & 1) as u32;
            }
            assert!(seen.insert(bits));
        }
        // Binomial(2000, 0.5): the standard deviation is ~22, so 40%..60% is > 8 sigma.
        for (i, count) in ones.iter().enumerate() {
            assert!(
                (800..=1200).contains(count),
                "bit {i} set in {count} of {n}"
            );
        }
    }

    #[test]
    fn malformed_tickets_are_rejected() {
        for bad in [
            "",
            "9",
            "9-",
            "x-00000000000000000000000000000000",
            "9-0000",
            "9-0000000000000000000000000000000G",
        ] {
            assert!(Ticket::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bucketed_tickets_name_their_bucket_in_one_spelling() {
        let p = ProductId::new(9).unwrap();
        for b in [0, 1, 9, 10, MAX_BUCKETS - 1] {
            let t = Ticket::generate_in(p, b);
            let back = Ticket::parse(t.as_str()).unwrap();
            assert_eq!((back.product(), back.bucket()), (p, b), "{t}");
            assert_eq!(t.as_str().ends_with(&format!("-{b}")), b > 0);
        }
        let hex = "0123456789abcdef0123456789abcdef";
        for bad in ["0", "00", "01", "64", "100", "", "x", "+1"] {
            assert!(Ticket::parse(&format!("9-{hex}-{bad}")).is_err(), "{bad:?}");
        }
        assert!(Ticket::parse(&format!("9-{hex}-1-2")).is_err());
    }

    /// Every gateway sends a buyer to the same bucket, and buyers spread evenly.
    #[test]
    fn home_buckets_are_fixed_and_even() {
        assert_eq!(home_bucket(UserId::new(77).unwrap(), 1), 0);
        for n in [2u16, 3, 4, 8] {
            let mut counts = vec![0u32; n as usize];
            for u in 1..=40_000u64 {
                let b = home_bucket(UserId::new(u).unwrap(), n);
                assert_eq!(b, home_bucket(UserId::new(u).unwrap(), n));
                counts[b as usize] += 1;
            }
            let even = 40_000 / n as u32;
            for c in counts {
                assert!(c.abs_diff(even) < even / 20, "{n} buckets: {c} vs {even}");
            }
        }
    }

    #[test]
    fn order_message_round_trips_and_checks_version() {
        let t = Ticket::generate(ProductId::new(3).unwrap());
        let m = OrderMessage::new(t, UserId::new(5).unwrap(), 1000);
        let bytes = m.encode();
        assert!(String::from_utf8_lossy(&bytes).contains("\"v\":1"));
        assert_eq!(OrderMessage::decode(&bytes).unwrap(), m);
        let mut v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        v["v"] = 2.into();
        assert!(OrderMessage::decode(v.to_string().as_bytes()).is_err());
        v["v"] = 1.into();
        v["product_id"] = 4.into();
        assert!(OrderMessage::decode(v.to_string().as_bytes()).is_err());
    }

    /// Each enum's text, pinned: it is stored in Redis and MySQL and shown in the API, so a
    /// renamed variant must not change it. Every variant is listed (the count is checked), and
    /// each round-trips through its text and through serde.
    #[test]
    fn texts_are_pinned_and_round_trip() {
        use strum::VariantArray;
        fn check<T>(pinned: &[(T, &str)])
        where
            T: VariantArray + Copy + PartialEq + std::fmt::Debug + std::fmt::Display,
            T: Into<&'static str> + std::str::FromStr,
        {
            assert_eq!(pinned.len(), T::VARIANTS.len(), "every variant is pinned");
            for (v, text) in pinned {
                assert!(T::VARIANTS.contains(v));
                assert_eq!((*v).into(), *text);
                assert_eq!(v.to_string(), *text);
                assert_eq!(text.parse::<T>().ok(), Some(*v));
            }
            assert!("nope".parse::<T>().is_err());
        }
        use FailureReason as F;
        check(&[
            (F::Chaos, "chaos"),
            (F::UnknownProduct, "unknown_product"),
            (F::DuplicateUser, "duplicate_user"),
            (F::OutOfStock, "out_of_stock"),
            (F::Expired, "expired"),
            (F::Lost, "lost"),
            (F::KafkaUnavailable, "kafka_unavailable"),
        ]);
        check(&[
            (CancelReason::PaymentTimeout, "payment_timeout"),
            (CancelReason::BuyerCancelled, "buyer_cancelled"),
        ]);
        check(&[
            (OrderStatus::Confirmed, "confirmed"),
            (OrderStatus::Paid, "paid"),
            (OrderStatus::Cancelled, "cancelled"),
        ]);
        check(&[
            (TicketStatus::Pending, "pending"),
            (TicketStatus::Confirmed, "confirmed"),
            (TicketStatus::Paid, "paid"),
            (TicketStatus::Cancelled, "cancelled"),
            (TicketStatus::Failed, "failed"),
        ]);
        // serde writes the same text as strum.
        for r in F::VARIANTS {
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
            assert_eq!(F::parse(r.as_str()), Some(*r));
        }
        for r in CancelReason::VARIANTS {
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
        }
        for s in TicketStatus::VARIANTS {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        assert_eq!(
            F::parse("unavailable"),
            None,
            "never built, so never advertised"
        );
    }
}
