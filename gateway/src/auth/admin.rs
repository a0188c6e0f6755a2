//! The admin's identity: `Authorization: Bearer <SECKILL_ADMIN_TOKEN>`, checked by the
//! [`Admin`] extractor in constant time, and the limit on wrong tokens.
//!
//! The limit on wrong admin tokens (`SECKILL_ADMIN_AUTH_FAILURES_PER_MIN`): each client
//! address may send that many wrong tokens to `/admin` per minute (a burst of that many, then
//! one more every `60 / n` seconds), in this gateway's memory. Past it the address is
//! blocked: every admin request from it gets `429` with `Retry-After`, even with the right
//! token, until one more failure would be allowed. Answering the right token normally while
//! blocked would tell a guesser which guess was right.
//!
//! Only wrong tokens count; a request without one is no guess. The client address is the one
//! the buyers' per-address limit uses (trusted proxies, and an IPv6 client's /64: see
//! [`crate::auth::address`]); the caller passes it keyed.

use super::Authenticator;
use crate::error::ApiError;
use actix_web::dev::Payload;
use actix_web::{http::header, web, FromRequest, HttpRequest};
use dashmap::DashMap;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use secrecy::{ExposeSecret, SecretString};
use std::future::{ready, Ready};
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

/// The admin token and the wrong tokens seen per address, shared by every request handler.
pub struct Admins {
    token: SecretString,
    guard: AdminGuard,
}

impl Admins {
    pub fn new(token: SecretString, failures_per_min: u32) -> Self {
        Self {
            token,
            guard: AdminGuard::new(failures_per_min),
        }
    }

    /// Forgets addresses whose wrong tokens are long past.
    pub fn forget_idle(&self) {
        self.guard.forget_idle()
    }

    /// Checks the bearer token in constant time: `401` without one, `403` when it is wrong,
    /// and `429` from a client address past its budget of wrong tokens, whatever the token.
    /// The address is keyed like the buyers' per-address limit (trusted proxies; an IPv6
    /// client by its /64).
    pub fn authorize(&self, req: &HttpRequest, auth: &Authenticator) -> Result<(), ApiError> {
        let client = auth.addresses.client(req).map(super::address::limit_key);
        if let Some(addr) = client {
            self.guard.check(addr)?;
        }
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or(ApiError::Unauthorized)?;
        if constant_time_eq(
            given.trim().as_bytes(),
            self.token.expose_secret().as_bytes(),
        ) {
            Ok(())
        } else {
            if let Some(addr) = client {
                self.guard.failed(addr)?;
            }
            Err(ApiError::Forbidden)
        }
    }
}

/// Compares in constant time (`subtle`), so the time taken says nothing about the token's
/// contents. Only its length can show: tokens of another length are refused at once.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

/// Extractor: the request carries the admin token ([`Admins::authorize`]). A handler that
/// takes it answers nothing else to anyone without it.
#[derive(Debug, Clone, Copy)]
pub struct Admin;

impl FromRequest for Admin {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let (Some(admins), Some(auth)) = (
            req.app_data::<web::Data<Admins>>(),
            req.app_data::<web::Data<Authenticator>>(),
        ) else {
            return ready(Err(ApiError::Unexpected(anyhow::anyhow!(
                "the gateway's admin identity is not configured"
            ))));
        };
        ready(admins.authorize(req, auth).map(|()| Admin))
    }
}

struct AdminGuard {
    /// Wrong tokens per address; `None` when the limit is off.
    failures: Option<DefaultKeyedRateLimiter<IpAddr>>,
    /// Addresses past their budget, and until when. governor cannot look at a bucket without
    /// taking from it, so a blocked address is remembered here.
    blocked: DashMap<IpAddr, Instant>,
}

/// Whole seconds for `Retry-After`, at least 1.
fn retry_after_secs(wait: Duration) -> u64 {
    wait.as_secs_f64().ceil().max(1.0) as u64
}

impl AdminGuard {
    /// `per_min` wrong tokens per address per minute; 0 turns the limit off.
    pub fn new(per_min: u32) -> Self {
        Self {
            failures: NonZeroU32::new(per_min)
                .map(|n| DefaultKeyedRateLimiter::keyed(Quota::per_minute(n))),
            blocked: DashMap::new(),
        }
    }

    /// Before the token is compared: `429` while `addr` is blocked.
    pub fn check(&self, addr: IpAddr) -> Result<(), ApiError> {
        let Some(until) = self.blocked.get(&addr).map(|u| *u) else {
            return Ok(());
        };
        let now = Instant::now();
        if now >= until {
            self.blocked.remove_if(&addr, |_, u| *u <= now);
            return Ok(());
        }
        Err(ApiError::AdminLocked {
            retry_after_secs: retry_after_secs(until - now),
        })
    }

    /// After a wrong token: counts it. Past the budget the address is blocked, and this
    /// answer is `429` too.
    pub fn failed(&self, addr: IpAddr) -> Result<(), ApiError> {
        let Some(failures) = &self.failures else {
            return Ok(());
        };
        failures.check_key(&addr).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            self.blocked.insert(addr, Instant::now() + wait);
            tracing::warn!(
                %addr,
                retry_after_secs = retry_after_secs(wait),
                "too many wrong admin tokens from this address: its admin requests get 429 for a while"
            );
            ApiError::AdminLocked {
                retry_after_secs: retry_after_secs(wait),
            }
        })
    }

    /// Forgets addresses whose budget is whole again and blocks that have ended.
    pub fn forget_idle(&self) {
        if let Some(failures) = &self.failures {
            failures.retain_recent();
            failures.shrink_to_fit();
        }
        let now = Instant::now();
        self.blocked.retain(|_, until| *until > now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn past_its_budget_an_address_is_blocked_and_others_are_not() {
        let guard = AdminGuard::new(2);
        let (a, b) = (ip("203.0.113.1"), ip("203.0.113.2"));
        assert!(guard.check(a).is_ok());
        assert!(guard.failed(a).is_ok());
        assert!(guard.failed(a).is_ok());
        assert!(
            guard.check(a).is_ok(),
            "two wrong tokens are within the budget"
        );
        match guard.failed(a) {
            Err(ApiError::AdminLocked { retry_after_secs }) => {
                // One failure comes back every 30 s.
                assert!((1..=30).contains(&retry_after_secs), "{retry_after_secs}");
            }
            other => panic!("the third wrong token: {other:?}"),
        }
        // Blocked: every request, whatever its token.
        assert!(matches!(guard.check(a), Err(ApiError::AdminLocked { .. })));
        assert!(guard.check(b).is_ok());
        assert!(guard.failed(b).is_ok());
        guard.forget_idle();
        assert!(guard.check(a).is_err(), "still blocked after a sweep");
    }

    #[test]
    fn a_block_ends() {
        let guard = AdminGuard::new(1);
        let a = ip("2001:db8::1");
        guard
            .blocked
            .insert(a, Instant::now() - Duration::from_millis(1));
        assert!(guard.check(a).is_ok());
        assert!(guard.blocked.is_empty());
    }

    #[test]
    fn zero_turns_the_limit_off() {
        let guard = AdminGuard::new(0);
        let a = ip("203.0.113.1");
        for _ in 0..100 {
            assert!(guard.failed(a).is_ok());
        }
        assert!(guard.check(a).is_ok());
    }
}
