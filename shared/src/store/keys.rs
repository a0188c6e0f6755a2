//! The key layout: every key of a product bucket shares one hash tag, so each script
//! touches one Redis Cluster slot (see the module docs of [`crate::store`]).

use crate::domain::{ProductId, Ticket};
use std::collections::{BTreeMap, HashMap};
use std::sync::{LazyLock, RwLock};

/// The pattern of every bucket's `events` channel in `namespace` (see [`ProductKeys::events`]).
pub fn events_pattern(namespace: &str) -> String {
    format!("sk:{{{namespace}:*}}:events")
}

/// The keys of one product.
#[derive(Debug, Clone)]
pub struct ProductKeys {
    prefix: String,
}

impl ProductKeys {
    pub fn new(namespace: &str, product: ProductId) -> Self {
        Self::bucket(namespace, product, 0)
    }
    /// The keys of one stock bucket: bucket 0 is the product's own tag, and the others' tags
    /// are placed around the cluster's slot ring (`buckets::bucket_tag`).
    pub fn bucket(namespace: &str, product: ProductId, bucket: u16) -> Self {
        let prefix = if bucket == 0 {
            format!("sk:{{{namespace}:{product}}}:")
        } else {
            format!("sk:{{{}}}:", bucket_tag(namespace, product, bucket))
        };
        Self { prefix }
    }
    /// Loans this bucket made to buyers of other buckets (ticket → state).
    pub fn loans(&self) -> String {
        format!("{}loans", self.prefix)
    }
    /// Tickets holding their buyer's place in this bucket while they borrow a unit.
    pub fn borrowing(&self) -> String {
        format!("{}borrowing", self.prefix)
    }
    pub fn stock(&self) -> String {
        format!("{}stock", self.prefix)
    }
    pub fn meta(&self) -> String {
        format!("{}meta", self.prefix)
    }
    pub fn buyers(&self) -> String {
        format!("{}buyers", self.prefix)
    }
    pub fn pending(&self) -> String {
        format!("{}pending", self.prefix)
    }
    /// Where this bucket's accepted orders landed in Kafka: one entry per call that recorded
    /// some (`locate.lua`).
    pub fn located(&self) -> String {
        format!("{}located", self.prefix)
    }
    pub fn ticket(&self, ticket: &Ticket) -> String {
        format!("{}t:{ticket}", self.prefix)
    }
    /// The Pub/Sub channel where this bucket's scripts announce each ticket whose status
    /// changed (`notify.lua`).
    pub fn events(&self) -> String {
        format!("{}events", self.prefix)
    }
    /// Waiting room: the queue (user → place score).
    pub fn queue(&self) -> String {
        format!("{}q", self.prefix)
    }
    /// Waiting room: admitted buyers who have not bought (user → admission expiry, ms).
    pub fn admitted(&self) -> String {
        format!("{}adm", self.prefix)
    }
    /// Waiting room: entries that ended (user → `expired` or `bought`).
    pub fn queue_done(&self) -> String {
        format!("{}qdone", self.prefix)
    }
    /// Waiting room: each buyer's queue id (user → id).
    pub fn queue_ids(&self) -> String {
        format!("{}qid", self.prefix)
    }
    /// Waiting room: the proof-of-work challenges used (nonce → the challenge's expiry, ms),
    /// each kept until it expires.
    pub fn pow_used(&self) -> String {
        format!("{}powused", self.prefix)
    }
}

/// Redis Cluster's slots.
const SLOTS: u32 = 16384;
/// How close to its target slot a bucket's tag must land.
const NEAR: u32 = 16;

/// The Redis Cluster slot of a hash tag: CRC16 (XMODEM) mod 16384.
pub fn slot(tag: &str) -> u16 {
    (u32::from(crc16::State::<crc16::XMODEM>::calculate(tag.as_bytes())) % SLOTS) as u16
}

/// Bucket `b`'s place on the slot ring, as a fraction from bucket 0's: the van der Corput
/// sequence (½, ¼, ¾, ⅛, …), so that the first N buckets sit about 1/N of the ring apart
/// whatever N is.
fn ring_offset(b: u16) -> f64 {
    let (mut x, mut f, mut b) = (0.0, 0.5, b);
    while b > 0 {
        if b & 1 == 1 {
            x += f;
        }
        f /= 2.0;
        b >>= 1;
    }
    x
}

/// Bucket tags kept per process at most.
const MAX_CACHED_TAGS: usize = 65_536;

/// (namespace, product, bucket) → tag.
type TagCache = HashMap<(String, ProductId, u16), String>;
static TAGS: LazyLock<RwLock<TagCache>> = LazyLock::new(Default::default);

/// The hash tag of bucket `b` (≥ 1): `<namespace>:<product>.<b>.<k>`, with the first `k` whose
/// slot lies within 16 slots of bucket 0's slot plus `ring_offset` of the ring. A cluster
/// made by `redis-cli --cluster create` gives each of its P primaries one contiguous 1/P of the
/// ring, so 2 buckets always land on 2 of 3 primaries, and N buckets on N primaries (N = 2 or
/// 4) unless bucket 0 sits within 16 slots of a range's edge (about 1 product in 60); random
/// tags would share a primary by chance. A cluster resharded unevenly loses this. Found once per process and bucket (about
/// 512 tries of CRC16), then cached.
pub fn bucket_tag(namespace: &str, product: ProductId, b: u16) -> String {
    let key = (namespace.to_owned(), product, b);
    if let Some(t) = TAGS.read().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return t.clone();
    }
    let base = u32::from(slot(&format!("{namespace}:{product}")));
    let target = (base + (ring_offset(b) * f64::from(SLOTS)) as u32) % SLOTS;
    let tag = (0u64..)
        .map(|k| format!("{namespace}:{product}.{b}.{k}"))
        .find(|t| {
            let d = u32::from(slot(t)).abs_diff(target);
            d.min(SLOTS - d) < NEAR
        })
        .expect("some k lands near the target slot");
    let mut tags = TAGS.write().unwrap_or_else(|e| e.into_inner());
    // Products come and go; a process that somehow saw this many starts over.
    if tags.len() >= MAX_CACHED_TAGS {
        tags.clear();
    }
    tags.insert(key, tag.clone());
    tag
}

/// The positions of `tickets`, grouped by the bucket each lives in (in bucket order).
pub(crate) fn by_bucket<'a>(
    tickets: impl Iterator<Item = &'a Ticket>,
) -> BTreeMap<u16, Vec<usize>> {
    let mut out: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
    for (i, t) in tickets.enumerate() {
        out.entry(t.bucket()).or_default().push(i);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_keys_of_a_product_share_one_hash_tag() {
        let p = ProductId::new(42).unwrap();
        let k = ProductKeys::new("ns1", p);
        let t = Ticket::generate(p);
        for key in [
            k.stock(),
            k.meta(),
            k.buyers(),
            k.pending(),
            k.located(),
            k.ticket(&t),
        ] {
            let open = key.find('{').unwrap();
            let close = key[open..].find('}').unwrap() + open;
            assert_eq!(&key[open + 1..close], "ns1:42", "{key}");
        }
        assert_ne!(ProductKeys::new("ns2", p).stock(), k.stock());
    }

    /// Redis's own example: `123456789` is slot 12739.
    #[test]
    fn slots_are_redis_cluster_slots() {
        assert_eq!(slot("123456789"), 12739);
        assert_eq!(ring_offset(1), 0.5);
        assert_eq!(ring_offset(2), 0.25);
        assert_eq!(ring_offset(3), 0.75);
    }

    /// On three equal primaries, 2 buckets always land on 2 primaries; on four, 4 land on 4
    /// for all but the products whose bucket 0 sits at a range's edge.
    #[test]
    fn buckets_spread_over_equal_primaries() {
        let owner = |slot: u16, primaries: u32| u32::from(slot) * primaries / SLOTS;
        let mut four_on_four = 0;
        for p in 1..=1000u64 {
            let product = ProductId::new(p).unwrap();
            let slot_of = |b: u16| {
                if b == 0 {
                    slot(&format!("ns:{product}"))
                } else {
                    slot(&bucket_tag("ns", product, b))
                }
            };
            assert_ne!(owner(slot_of(0), 3), owner(slot_of(1), 3), "product {p}");
            let four: std::collections::BTreeSet<u32> =
                (0..4).map(|b| owner(slot_of(b), 4)).collect();
            four_on_four += usize::from(four.len() == 4);
        }
        assert!(four_on_four >= 970, "{four_on_four} of 1000");
    }
}
