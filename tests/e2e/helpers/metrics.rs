//! Reading a Prometheus text: a sample's value, and whether a family is declared.

/// One sample's value in a Prometheus text; see [`TestGateway::metric`].
pub fn sample_value(text: &str, sample: &str) -> f64 {
    if let Some(v) = text.lines().find_map(|l| {
        l.strip_prefix(sample)
            .and_then(|rest| rest.strip_prefix(' '))
    }) {
        return v.trim().parse().unwrap();
    }
    assert_declared(text, sample.split('{').next().unwrap());
    0.0
}

/// Panics unless the Prometheus text declares the metric `family` (`_bucket`, `_sum`,
/// `_count` and `_total` samples count as their family's).
pub fn assert_declared(text: &str, family: &str) {
    let declared = text.lines().any(|l| {
        l.strip_prefix("# TYPE ")
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|name| {
                name == family
                    || family
                        .strip_prefix(name)
                        .is_some_and(|s| ["_bucket", "_sum", "_count", "_total"].contains(&s))
            })
    });
    assert!(declared, "no metric {family} in /metrics");
}

#[test]
fn a_missing_metric_is_not_read_as_zero() {
    let text = "# TYPE seckill_buys_total counter\nseckill_buys_total{outcome=\"accepted\"} 3\n\
                # TYPE seckill_wait_seconds histogram\nseckill_wait_seconds_count 2\n";
    assert_eq!(
        sample_value(text, "seckill_buys_total{outcome=\"accepted\"}"),
        3.0
    );
    assert_eq!(
        sample_value(text, "seckill_buys_total{outcome=\"sold_out\"}"),
        0.0
    );
    assert_eq!(sample_value(text, "seckill_wait_seconds_count"), 2.0);
    assert_eq!(sample_value(text, "seckill_wait_seconds_sum"), 0.0);
    let typo = std::panic::catch_unwind(|| sample_value(text, "seckill_buy_total"));
    assert!(typo.is_err(), "a metric that does not exist fails");
}
