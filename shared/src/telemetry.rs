//! Logging with `tracing`. The level comes from `RUST_LOG` (default `info`).

use crate::config::LogFormat;
use tracing_subscriber::EnvFilter;

/// Installs the global subscriber: JSON lines (`json`) or human-readable (`pretty`).
/// Safe to call more than once; later calls do nothing.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if format == LogFormat::Json {
        builder.json().with_current_span(true).try_init()
    } else {
        builder.compact().try_init()
    };
}
