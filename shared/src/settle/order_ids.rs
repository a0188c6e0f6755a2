//! How a batch learns the ids MySQL gave its new orders.

use anyhow::Context;
use sqlx::mysql::MySqlPool;

/// How a batch learns the ids MySQL gave its new orders.
///
/// With `innodb_autoinc_lock_mode` 0 or 1 (MariaDB's default), the rows of one multi-row
/// `INSERT` get consecutive ids, `auto_increment_increment` apart, starting at the id the
/// server reports: no query needed. With 2 (MySQL 8's default) that is not guaranteed, so
/// the ids are read back by ticket. Reading them back was ~20% of a 500-order transaction
/// (docs/BENCHMARKS.md).
#[derive(Debug, Default)]
pub struct OrderIds {
    /// `Some(increment)` when ids are consecutive, `None` when they must be read back.
    consecutive: tokio::sync::OnceCell<Option<u64>>,
    force_read_back: bool,
}

impl OrderIds {
    /// Always reads the ids back (tests of that path on servers that would not need it).
    pub fn read_back() -> Self {
        Self {
            force_read_back: true,
            ..Self::default()
        }
    }

    pub(super) async fn step(&self, db: &MySqlPool) -> anyhow::Result<Option<u64>> {
        if self.force_read_back {
            return Ok(None);
        }
        self.consecutive
            .get_or_try_init(|| async {
                let (mode, increment): (i64, i64) = sqlx::query_as(
                    "SELECT CAST(@@innodb_autoinc_lock_mode AS SIGNED), CAST(@@auto_increment_increment AS SIGNED)",
                )
                .fetch_one(db)
                .await
                .context("reading the auto-increment settings")?;
                tracing::info!(
                    innodb_autoinc_lock_mode = mode,
                    auto_increment_increment = increment,
                    "order ids {}",
                    if mode <= 1 { "follow the insert" } else { "are read back" }
                );
                anyhow::Ok((mode <= 1 && increment >= 1).then_some(increment as u64))
            })
            .await
            .copied()
    }
}
