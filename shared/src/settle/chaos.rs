//! Fault injection in the batch step, for tests and demos.

use crate::domain::{OrderMessage, Ticket};
use std::collections::HashSet;
use std::time::Duration;

/// Fault injection for tests and demos.
#[derive(Debug, Clone, Default)]
pub struct Chaos {
    pub fail_users: HashSet<u64>,
    pub fail_rate: f64,
    pub delay: Duration,
    /// Users whose settle fails once after the MySQL commit, as if the reply was lost.
    pub lose_commit_users: HashSet<u64>,
    /// Kill the process right after the commit that brings the orders committed to
    /// `SECKILL_CHAOS_ABORT_AFTER_COMMIT`.
    pub abort_after_commit: crate::crash_point::CrashPoint,
    /// Tickets whose commit was already "lost" once.
    lost_commits: std::sync::Arc<std::sync::Mutex<HashSet<String>>>,
}

impl Chaos {
    pub fn from_settings(s: &crate::config::ChaosSettings) -> Self {
        Self {
            fail_users: s.fail_users().unwrap_or_default(),
            lose_commit_users: s.lose_commit_users().unwrap_or_default(),
            lost_commits: Default::default(),
            abort_after_commit: crate::crash_point::CrashPoint::new(s.abort_after_commit),
            fail_rate: s.fail_rate,
            delay: s.delay(),
        }
    }

    /// Fails once, after the commit, if a claimed order is of a `lose_commit_users` user.
    pub(super) fn lose_commit(&self, claimed: &[OrderMessage]) -> anyhow::Result<()> {
        if self.lose_commit_users.is_empty() {
            return Ok(());
        }
        let mut lost = self.lost_commits.lock().expect("lock poisoned");
        for m in claimed {
            if self.lose_commit_users.contains(&m.user_id.get())
                && lost.insert(m.ticket.as_str().to_owned())
            {
                anyhow::bail!("chaos: the reply of the commit of {} was lost", m.ticket);
            }
        }
        Ok(())
    }

    /// Kills the process if this commit brings the orders committed to `abort_after_commit`,
    /// after printing which tickets MySQL now holds and which Redis records still say
    /// `processing`.
    pub(super) fn abort_after_commit(
        &self,
        claimed: &[OrderMessage],
        record_key: impl Fn(&Ticket) -> String,
    ) {
        self.abort_after_commit.count(claimed.len(), || {
            let tickets: Vec<&str> = claimed.iter().map(|m| m.ticket.as_str()).collect();
            let records: Vec<String> = claimed.iter().map(|m| record_key(&m.ticket)).collect();
            format!(
                "killing this worker after the commit of {} orders, before their Redis confirm: tickets {} records {}",
                claimed.len(),
                tickets.join(","),
                records.join(",")
            )
        });
    }

    /// Sleeps for the chaos users and says whether this order must fail.
    pub(super) async fn should_fail(&self, user: u64) -> bool {
        let targeted = self.fail_users.contains(&user);
        if targeted && !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        targeted || (self.fail_rate > 0.0 && rand::random::<f64>() < self.fail_rate)
    }
}
