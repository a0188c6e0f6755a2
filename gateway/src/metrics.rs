//! Prometheus metrics of one gateway. Each `Application` has its own registry, so two
//! gateways in one test process keep separate counts. Requests are counted by
//! [`crate::counting`].

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

#[derive(Clone)]
pub struct Metrics {
    pub registry: Registry,
    pub requests: IntCounterVec,
    pub latency: HistogramVec,
    /// The buy path's steps in `latency`, looked up once: a labelled lookup hashes its labels
    /// and takes a lock each time, and every accepted buy observes three steps.
    pub steps: BuySteps,
    /// `requests{route="buy", outcome="202"}`, looked up once, for the same reason.
    pub buys_accepted: IntCounter,
    pub marker_hits: IntCounter,
    pub marker_sets: IntCounter,
    pub marker_drops: IntCounterVec,
    pub markers: IntGauge,
    pub zk_connected: IntGauge,
    pub in_flight: IntGauge,
    /// Orders handed to Kafka, their delivery report not back yet (set at each scrape).
    pub awaiting_kafka: IntGauge,
    pub max_in_flight: IntGauge,
    /// Payment attempts sent to the provider (`sent`), and settled by its callback
    /// (`succeeded`, `declined`, `refund_due`).
    pub payments: IntCounterVec,
    /// Orders cancelled by their buyers.
    pub cancels: IntCounter,
    /// 1 while the last check (every second) of each dependency passed.
    pub dependency_up: IntGaugeVec,
    /// Buyers per reservation call to Redis (`store::batch`).
    pub reserve_batch: Histogram,
}

/// The steps of a buy in `seckill_gateway_latency_seconds{step}` that every accept observes.
/// `rate_limit`, a call of its own on a Redis Cluster only, is not among them: created here,
/// it would show on one Redis server too, where the reservation script takes the token.
#[derive(Clone)]
pub struct BuySteps {
    /// The whole buy, from the handler's start to its answer.
    pub request: Histogram,
    pub redis_reserve: Histogram,
    pub kafka_ack: Histogram,
}

const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "seckill_gateway_requests_total",
                "Requests by route and outcome",
            ),
            &["route", "outcome"],
        )
        .unwrap();
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "seckill_gateway_latency_seconds",
                "Latency of the request and of its steps",
            )
            .buckets(BUCKETS.to_vec()),
            &["step"],
        )
        .unwrap();
        let marker_hits = IntCounter::new(
            "seckill_gateway_sold_out_marker_hits_total",
            "Buys answered 409 by the local marker",
        )
        .unwrap();
        let marker_sets = IntCounter::new(
            "seckill_gateway_sold_out_marker_sets_total",
            "Local sold-out markers set",
        )
        .unwrap();
        let marker_drops = IntCounterVec::new(
            Opts::new(
                "seckill_gateway_sold_out_marker_drops_total",
                "Local sold-out markers dropped, by cause",
            ),
            &["cause"],
        )
        .unwrap();
        let markers = IntGauge::new(
            "seckill_gateway_sold_out_markers",
            "Local sold-out markers set now",
        )
        .unwrap();
        let zk_connected = IntGauge::new(
            "seckill_gateway_zookeeper_connected",
            "1 while the ZooKeeper session and watch are up",
        )
        .unwrap();
        let in_flight = IntGauge::new(
            "seckill_gateway_in_flight",
            "Buys in flight now (admitted, not yet answered)",
        )
        .unwrap();
        let awaiting_kafka = IntGauge::new(
            "seckill_gateway_awaiting_kafka",
            "Orders handed to Kafka whose delivery report has not come back: reserved in Redis, buyer not yet answered",
        )
        .unwrap();
        let max_in_flight = IntGauge::new(
            "seckill_gateway_max_in_flight",
            "SECKILL_MAX_IN_FLIGHT: buys past this many in flight get 503",
        )
        .unwrap();
        let payments = IntCounterVec::new(
            Opts::new(
                "seckill_gateway_payments_total",
                "Payments sent to the provider, and settled by its callback, by status",
            ),
            &["status"],
        )
        .unwrap();
        let cancels = IntCounter::new(
            "seckill_gateway_buyer_cancels_total",
            "Orders cancelled by their buyers",
        )
        .unwrap();
        let dependency_up = IntGaugeVec::new(
            Opts::new(
                "seckill_gateway_dependency_up",
                "1 while the last check (every second) of the dependency passed",
            ),
            &["dependency"],
        )
        .unwrap();
        let reserve_batch = Histogram::with_opts(
            HistogramOpts::new(
                "seckill_gateway_reserve_batch_size",
                "Buyers per reservation call to Redis (buys that wait for the same stock bucket go together)",
            )
            .buckets(vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0]),
        )
        .unwrap();
        let step = |name: &str| latency.with_label_values(&[name]);
        let steps = BuySteps {
            request: step("request"),
            redis_reserve: step("redis_reserve"),
            kafka_ack: step("kafka_ack"),
        };
        let buys_accepted = requests.with_label_values(&["buy", "202"]);
        registry.register(Box::new(reserve_batch.clone())).unwrap();
        registry.register(Box::new(dependency_up.clone())).unwrap();
        registry.register(Box::new(payments.clone())).unwrap();
        registry.register(Box::new(cancels.clone())).unwrap();
        registry.register(Box::new(requests.clone())).unwrap();
        registry.register(Box::new(in_flight.clone())).unwrap();
        registry.register(Box::new(awaiting_kafka.clone())).unwrap();
        registry.register(Box::new(max_in_flight.clone())).unwrap();
        registry.register(Box::new(latency.clone())).unwrap();
        registry.register(Box::new(marker_hits.clone())).unwrap();
        registry.register(Box::new(marker_sets.clone())).unwrap();
        registry.register(Box::new(marker_drops.clone())).unwrap();
        registry.register(Box::new(markers.clone())).unwrap();
        registry.register(Box::new(zk_connected.clone())).unwrap();
        Self {
            registry,
            requests,
            latency,
            steps,
            buys_accepted,
            marker_hits,
            marker_sets,
            marker_drops,
            markers,
            zk_connected,
            in_flight,
            awaiting_kafka,
            max_in_flight,
            payments,
            cancels,
            dependency_up,
            reserve_batch,
        }
    }

    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .expect("encoding metrics");
        String::from_utf8(buf).expect("metrics are UTF-8")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
