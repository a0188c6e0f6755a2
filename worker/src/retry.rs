//! How the worker's loops retry a failing step: a batch step, a publish, an expiry round.

use backon::ExponentialBuilder;
use std::time::Duration;

/// The longest wait between two tries of a failing step.
pub(crate) const MAX_RETRY_DELAY: Duration = Duration::from_secs(5);

/// Backoff between tries of a failing step: 100 ms doubling to 5 s, with jitter.
pub(crate) fn retry_policy() -> ExponentialBuilder {
    ExponentialBuilder::new()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(MAX_RETRY_DELAY)
        .with_jitter()
        .without_max_times()
}
