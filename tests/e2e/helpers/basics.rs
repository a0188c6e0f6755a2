//! The suite's secrets, a buyer's token, and waiting for something to become true.

use std::future::Future;
use std::time::{Duration, Instant};

/// The admin token of every test gateway and worker (at least 32 bytes, as the programs require).
pub const ADMIN_TOKEN: &str = "test-admin-token-of-32-bytes-or-more";

/// The secret the test gateways sign waiting-room admissions with.
pub const ADMISSION_SECRET: &str = "test-admission-secret-of-32-bytes-or-more";

/// The HS256 secret every test gateway verifies buyer tokens with.
pub const JWT_SECRET: &str = "test-hs256-secret-of-32-bytes-or-more";

/// A buyer's token for `user`, valid for 10 minutes.
pub fn token(user: u64) -> String {
    seckill_gateway::auth::mint_hs256(
        JWT_SECRET,
        seckill_shared::UserId::new(user).expect("a user id"),
        600,
        None,
        None,
    )
    .expect("signing a test token")
}

/// Polls `check` every 50 ms until it returns `Some`, or fails the test after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
