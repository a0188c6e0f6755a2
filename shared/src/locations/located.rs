//! A Kafka location of an accepted order, and its entry in a bucket's `located` list.

use crate::domain::Ticket;
use std::collections::HashMap;
use std::fmt::Write as _;

/// Kafka locations per entry of a `located` list at most (one reservation call carries one
/// entry).
pub const MAX_LOCATED: usize = 64;

pub use crate::domain::HOLD_LOCATED_MS;

/// Where an accepted order landed in Kafka, with when its unit was reserved (its score in the
/// pending set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub ticket: Ticket,
    pub reserved_at_ms: i64,
    pub partition: i32,
    pub offset: i64,
}

/// One entry of a bucket's `located` list: the newest reservation time among its orders, then
/// `<ticket> <partition> <offset>` per order, space separated (tickets hold no space). The
/// time lets `trim_located.lua` drop the entry without looking up its tickets.
/// No orders make no entry: an empty string, which `reserve.lua` skips.
pub fn located_entry(located: &[Located]) -> String {
    let Some(newest) = located.iter().map(|l| l.reserved_at_ms).max() else {
        return String::new();
    };
    let mut entry = String::with_capacity(16 + located.len() * 48);
    write!(entry, "{newest}").expect("writing to a String");
    for l in located {
        write!(entry, " {} {} {}", l.ticket, l.partition, l.offset).expect("writing to a String");
    }
    entry
}

/// Adds an entry's locations to `out`; a damaged triple is skipped (its ticket then keeps the
/// sweeper's timeout for an unknown location).
pub(crate) fn parse_located_entry(entry: &str, out: &mut HashMap<String, (i32, i64)>) {
    let mut words = entry.split(' ').skip(1);
    while let (Some(t), Some(p), Some(o)) = (words.next(), words.next(), words.next()) {
        if let (Ok(p), Ok(o)) = (p.parse(), o.parse()) {
            out.insert(t.to_owned(), (p, o));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ProductId;

    #[test]
    fn a_located_entry_reads_back_and_skips_a_damaged_triple() {
        let p = ProductId::new(42).unwrap();
        let (a, b) = (Ticket::generate(p), Ticket::generate_in(p, 3));
        let at = |ticket: &Ticket, reserved_at_ms, partition, offset| Located {
            ticket: ticket.clone(),
            reserved_at_ms,
            partition,
            offset,
        };
        let entry = located_entry(&[at(&a, 900, 0, 17), at(&b, 800, 7, 1 << 40)]);
        assert_eq!(entry, format!("900 {a} 0 17 {b} 7 1099511627776"));
        let mut out = HashMap::new();
        parse_located_entry(&entry, &mut out);
        parse_located_entry("5 x-1 no 3 y-2 1 2 z-3 4", &mut out);
        assert_eq!(out.len(), 3, "{out:?}");
        assert_eq!(out[a.as_str()], (0, 17));
        assert_eq!(out[b.as_str()], (7, 1 << 40));
        assert_eq!(out["y-2"], (1, 2));
        assert!(located_entry(&[]).is_empty(), "no orders, no entry");
    }
}
