//! Micro-benchmarks of the pure functions on the buy and drain paths.
//!
//! `cargo bench -p seckill-shared --bench hot_paths`
//!
//! - ticket ids: `Ticket::generate` (once per buy) and `Ticket::parse` (every poll);
//! - the Kafka message: `OrderMessage::encode` (once per buy) and `decode` (once per order in
//!   the worker);
//! - Redis key building: `ProductKeys` and the five keys of the reservation script (once per
//!   buy);
//! - a waiting room's proof of work: `pow::verify` of a solved challenge (once per join, when
//!   the product asks for one; issue 36's goal: under 2 µs);
//! - traces on, a buy not sampled: what it adds to the buy's tracing work (issue 37).

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

fn proof_of_work(c: &mut Criterion) {
    use seckill_shared::waiting_room::pow::{self, Challenge};
    let (product, user) = (ProductId::new(42).unwrap(), UserId::new(7).unwrap());
    let key = b"a gateway's proof-of-work key, 32 bytes or more....";
    let token = Challenge {
        product,
        user,
        expires_at_ms: i64::MAX,
        bits: 12,
        nonce: [3; 16],
    }
    .token(key);
    let solved = pow::solve(&token, 12);
    c.bench_function("pow/verify", |b| {
        b.iter(|| pow::verify(black_box(&solved), key, product, user, 0).unwrap())
    });
}

/// What an untraced buy costs the gateway once traces are on (issue 37), against traces off,
/// each under its own subscriber (JSON logs to nowhere at `info`), on the tracing work of a
/// buy: its `buy` span made, entered six times (each poll of the buy task), a `debug` event
/// that is off, then closed. With traces on, an untraced buy also draws from the sampler (at
/// 1 %), makes its `telemetry::Carried` (a fresh `traceparent` for its Kafka message, and what
/// a kept span would name) and records its batch size on the current span. `traces/untraced_buy` is the draw and the `traceparent` alone.
fn traces(c: &mut Criterion) {
    use seckill_shared::config::LogFormat;
    use seckill_shared::telemetry::{self, TraceSettings};
    use tracing_subscriber::EnvFilter;
    let vars = |k: &str| match k {
        // Nobody listens there; no span of these is ever exported.
        "OTEL_EXPORTER_OTLP_ENDPOINT" => Some("http://127.0.0.1:9".to_owned()),
        "OTEL_TRACES_SAMPLER" => Some("traceidratio".to_owned()),
        "OTEL_TRACES_SAMPLER_ARG" => Some("0.01".to_owned()),
        _ => None,
    };
    let settings = TraceSettings::from_vars("bench", vars).unwrap().unwrap();
    let provider = telemetry::provider(&settings).unwrap();
    let _telemetry = telemetry::init_with(
        LogFormat::Json,
        Some(settings),
        std::time::Duration::from_secs(2),
    )
    .unwrap();
    assert!(telemetry::enabled());
    c.bench_function("traces/untraced_buy", |b| {
        b.iter(|| {
            let traced = telemetry::sample_request(black_box(None));
            (traced.is_some(), telemetry::unsampled_traceparent())
        })
    });

    use opentelemetry::trace::TracerProvider as _;
    let off = telemetry::dispatch(LogFormat::Json, EnvFilter::new("info"), None, std::io::sink);
    let on = telemetry::dispatch(
        LogFormat::Json,
        EnvFilter::new("info"),
        Some(provider.tracer("bench")),
        std::io::sink,
    );
    let spans = |traces_on: bool| {
        let span = tracing::info_span!("buy", product_id = 7u64, user_id = black_box(9u64));
        for poll in 0..6 {
            let _entered = span.enter();
            if traces_on && poll == 2 {
                // What the gateway does for an untraced buy (`routes/buy.rs`).
                let traced = telemetry::sample_request(black_box(None));
                let carried = std::sync::Arc::new(telemetry::Carried::under(None));
                carried.note_product(7);
                carried.note_user(9);
                black_box((traced.is_some(), carried.traceparent.clone()));
                tracing::Span::current().record("seckill.batch_size", 3i64);
                carried.note_ticket(black_box("7-1f2e3d4c5b6a79881f2e3d4c5b6a7988"));
            }
            if poll == 5 {
                tracing::debug!(status = 202u16, ticket = "7-ab", "reserved and handed off");
            }
        }
    };
    tracing::dispatcher::with_default(&off, || {
        c.bench_function("traces/buy_spans/off", |b| b.iter(|| spans(false)));
    });
    tracing::dispatcher::with_default(&on, || {
        c.bench_function("traces/buy_spans/on_untraced", |b| b.iter(|| spans(true)));
    });
    let _ = provider.shutdown();
}

criterion_group!(benches, tickets, messages, keys, proof_of_work, traces);
criterion_main!(benches);
