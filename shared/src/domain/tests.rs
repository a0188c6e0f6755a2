//! Ids, tickets and the texts of states and reasons.

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
    assert!(!String::from_utf8_lossy(&bytes).contains("quantity"));
    let mut v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    v["v"] = 3.into();
    assert!(OrderMessage::decode(v.to_string().as_bytes()).is_err());
    v["v"] = 1.into();
    v["product_id"] = 4.into();
    assert!(OrderMessage::decode(v.to_string().as_bytes()).is_err());
}

/// An order of several units is version 2 with its quantity; one of one unit is written as
/// before quantities, and a quantity out of range is refused.
#[test]
fn an_order_of_several_units_carries_its_quantity() {
    let t = Ticket::generate(ProductId::new(3).unwrap());
    let m = OrderMessage::of(t, UserId::new(5).unwrap(), 1000, 4);
    let bytes = m.encode();
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        text.contains("\"v\":2") && text.contains("\"quantity\":4"),
        "{text}"
    );
    assert_eq!(OrderMessage::decode(&bytes).unwrap(), m);
    let mut v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    for bad in [0, 101] {
        v["quantity"] = bad.into();
        assert!(
            OrderMessage::decode(v.to_string().as_bytes()).is_err(),
            "{bad}"
        );
    }
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
