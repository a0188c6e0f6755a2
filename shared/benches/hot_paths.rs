//! Micro-benchmarks of the pure functions on the buy and drain paths.
//!
//! `cargo bench -p seckill-shared --bench hot_paths`
//!
//! - ticket ids: `Ticket::generate` (once per buy) and `Ticket::parse` (every poll);
//! - the Kafka message: `OrderMessage::encode` (once per buy) and `decode` (once per order in
//!   the worker);
//! - Redis key building: `ProductKeys` and the five keys of the reservation script (once per
//!   buy).

use criterion::{criterion_group, criterion_main, Criterion};
use seckill_shared::store::ProductKeys;
use seckill_shared::{OrderMessage, ProductId, Ticket, UserId};
use std::hint::black_box;

fn tickets(c: &mut Criterion) {
    let product = ProductId::new(42).unwrap();
    c.bench_function("ticket/generate", |b| {
        b.iter(|| Ticket::generate(black_box(product)))
    });
    let text = Ticket::generate(product).to_string();
    c.bench_function("ticket/parse", |b| {
        b.iter(|| Ticket::parse(black_box(&text)).unwrap())
    });
}

fn messages(c: &mut Criterion) {
    let product = ProductId::new(42).unwrap();
    let order = OrderMessage::new(
        Ticket::generate(product),
        UserId::new(1_234_567).unwrap(),
        1_764_400_000_000,
    );
    c.bench_function("order_message/encode", |b| {
        b.iter(|| black_box(&order).encode())
    });
    let bytes = order.encode();
    c.bench_function("order_message/decode", |b| {
        b.iter(|| OrderMessage::decode(black_box(&bytes)).unwrap())
    });
}

fn keys(c: &mut Criterion) {
    let product = ProductId::new(42).unwrap();
    let ticket = Ticket::generate(product);
    c.bench_function("product_keys/new", |b| {
        b.iter(|| ProductKeys::new(black_box("bench-ns"), black_box(product)))
    });
    c.bench_function("product_keys/reserve_keys", |b| {
        b.iter(|| {
            let k = ProductKeys::new(black_box("bench-ns"), black_box(product));
            [
                k.stock(),
                k.meta(),
                k.buyers(),
                k.pending(),
                k.ticket(black_box(&ticket)),
            ]
        })
    });
}

criterion_group!(benches, tickets, messages, keys);
criterion_main!(benches);
