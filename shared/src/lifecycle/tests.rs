//! The names are pinned, and the table in docs/DESIGN.md is this one.

use super::*;

/// The model's names, pinned: they label the model checker's traces and the table in
/// `docs/DESIGN.md`, and a failure's reason is the code's text.
#[test]
fn names_are_pinned() {
    use strum::VariantArray;
    let actors = [
        (Actor::Gateway, "gateway"),
        (Actor::Worker, "worker"),
        (Actor::Sweeper, "sweeper"),
        (Actor::Expiry, "expiry"),
        (Actor::Buyer, "buyer"),
        (Actor::Recovery, "recovery"),
        (Actor::Provider, "provider"),
        (Actor::Reconcile, "reconcile"),
    ];
    assert_eq!(actors.len(), Actor::VARIANTS.len());
    for (a, name) in actors {
        assert_eq!((a.name(), a.to_string()), (name, name.to_owned()));
    }
    let reasons = [
        (FailReason::KafkaUnavailable, "kafka_unavailable"),
        (FailReason::Expired, "expired"),
        (FailReason::Lost, "lost"),
        (FailReason::OutOfStock, "out_of_stock"),
        (FailReason::DuplicateUser, "duplicate_user"),
    ];
    assert_eq!(reasons.len(), FailReason::VARIANTS.len());
    for (r, name) in reasons {
        assert_eq!(r.name(), name);
        assert_eq!(r.code().as_str(), name);
    }
    let orders = [
        (OrderStatus::Confirmed, "confirmed"),
        (OrderStatus::Paid, "paid"),
        (OrderStatus::Cancelled, "cancelled"),
    ];
    assert_eq!(orders.len(), OrderStatus::VARIANTS.len());
    for (o, name) in orders {
        assert_eq!(o.name(), name);
        assert_eq!(
            crate::OrderStatus::parse(o.name()).map(|c| c.as_str()),
            Some(name)
        );
    }
    let stores = [
        (Store::Redis, "Redis"),
        (Store::MySql, "MySQL"),
        (Store::Kafka, "Kafka"),
        (Store::Answer, "answer"),
    ];
    assert_eq!(stores.len(), Store::VARIANTS.len());
    for (st, name) in stores {
        assert_eq!(st.name(), name);
    }
}

#[test]
fn each_transition_has_one_row_and_steps() {
    for t in TRANSITIONS {
        assert_eq!(TRANSITIONS.iter().filter(|u| u.id == t.id).count(), 1);
        assert!(!t.steps.is_empty(), "{} has no steps", t.name);
        assert!(!t.actors.is_empty(), "{} has no actor", t.name);
    }
}

/// `docs/DESIGN.md` holds the table as [`markdown_table`] renders it, between its
/// markers. `UPDATE_DESIGN_TABLE=1 cargo test -p seckill-shared --lib lifecycle` writes
/// it there.
#[test]
fn the_design_doc_holds_this_table() {
    const BEGIN: &str = "<!-- lifecycle table: seckill_shared::lifecycle::markdown_table -->\n";
    const END: &str = "<!-- end of the lifecycle table -->";
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/DESIGN.md");
    let doc = std::fs::read_to_string(path).expect("reading docs/DESIGN.md");
    let start = doc
        .find(BEGIN)
        .expect("the table's first marker in docs/DESIGN.md")
        + BEGIN.len();
    let end = start + doc[start..].find(END).expect("the table's last marker");
    let table = markdown_table();
    if doc[start..end] != table && std::env::var_os("UPDATE_DESIGN_TABLE").is_some() {
        std::fs::write(path, format!("{}{table}{}", &doc[..start], &doc[end..]))
            .expect("writing docs/DESIGN.md");
        return;
    }
    assert!(
        doc[start..end] == table,
        "docs/DESIGN.md's lifecycle table differs from the module's; \
         UPDATE_DESIGN_TABLE=1 cargo test -p seckill-shared --lib lifecycle rewrites it"
    );
}

#[test]
fn the_markdown_table_has_a_line_per_step() {
    let table = markdown_table();
    let steps: usize = TRANSITIONS.iter().map(|t| t.steps.len()).sum();
    assert_eq!(table.lines().count(), 2 + steps);
    // No cell may break the table.
    for line in table.lines() {
        assert_eq!(line.matches('|').count(), 9, "{line}");
    }
}
