//! The per-address limit: requests to the buyer endpoints each client address may make per
//! second (`SECKILL_RATE_LIMIT_PER_ADDRESS_PER_SEC`), in this gateway's memory. It runs before
//! the token is verified, so a flood of garbage tokens from one address costs a map lookup
//! each, not a signature check.
//!
//! The client's address is the connection's peer, unless that peer is a trusted proxy
//! (`SECKILL_TRUSTED_PROXIES`): then it is the right-most `X-Forwarded-For` entry that is not a
//! trusted proxy itself. Entries a client wrote (to the left) are never believed.

use crate::error::ApiError;
use actix_web::HttpRequest;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use ipnet::IpNet;
use seckill_shared::Settings;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::Duration;

/// How often addresses that are back to a full bucket are forgotten.
pub const FORGET_EVERY: Duration = Duration::from_secs(10);

pub struct AddressLimiter {
    /// `None` when the limit is off.
    limiter: Option<DefaultKeyedRateLimiter<IpAddr>>,
    trusted: Vec<IpNet>,
}

impl AddressLimiter {
    pub fn from_settings(s: &Settings) -> anyhow::Result<Self> {
        let trusted = s
            .trusted_proxies()
            .map_err(|e| anyhow::anyhow!("SECKILL_TRUSTED_PROXIES: {e}"))?;
        Ok(Self::new(s.rate_limit_per_address_per_sec, trusted))
    }

    pub fn new(per_sec: u32, trusted: Vec<IpNet>) -> Self {
        Self {
            limiter: NonZeroU32::new(per_sec)
                .map(|n| DefaultKeyedRateLimiter::keyed(Quota::per_second(n))),
            trusted,
        }
    }

    /// `429` with `Retry-After` when the request's client address is over its limit.
    pub fn check(&self, req: &HttpRequest) -> Result<(), ApiError> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        let Some(addr) = self.client(req) else {
            return Ok(());
        };
        limiter.check_key(&addr).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            ApiError::AddressRateLimited {
                retry_after_secs: wait.as_secs_f64().ceil().max(1.0) as u64,
            }
        })
    }

    /// The client's address (see the module's documentation).
    pub fn client(&self, req: &HttpRequest) -> Option<IpAddr> {
        let peer = req.peer_addr()?.ip();
        let forwarded = req
            .headers()
            .get_all("x-forwarded-for")
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .collect::<Vec<_>>();
        Some(self.client_of(peer, &forwarded))
    }

    /// [`AddressLimiter::client`] on parsed inputs: the peer, and the `X-Forwarded-For`
    /// entries in order.
    pub fn client_of(&self, peer: IpAddr, forwarded: &[&str]) -> IpAddr {
        if !self.is_trusted(peer) {
            return peer;
        }
        let mut client = peer;
        for entry in forwarded.iter().rev() {
            match entry.parse::<IpAddr>() {
                Ok(addr) if self.is_trusted(addr) => client = addr,
                Ok(addr) => return addr,
                // Garbage where an address should be: stop at the last trusted hop.
                Err(_) => return client,
            }
        }
        client
    }

    fn is_trusted(&self, addr: IpAddr) -> bool {
        self.trusted.iter().any(|net| net.contains(&addr))
    }

    /// Forgets addresses whose bucket is full again, so the map holds only recent clients.
    pub fn forget_idle(&self) {
        if let Some(limiter) = &self.limiter {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }

    /// Addresses currently remembered.
    pub fn remembered(&self) -> usize {
        self.limiter.as_ref().map_or(0, |l| l.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_forwards() {
        let l = AddressLimiter::new(1, vec!["10.0.0.0/8".parse().unwrap()]);
        assert_eq!(l.client_of(ip("1.2.3.4"), &["9.9.9.9"]), ip("1.2.3.4"));
    }

    #[test]
    fn behind_trusted_proxies_the_rightmost_untrusted_hop_is_the_client() {
        let l = AddressLimiter::new(
            1,
            vec![
                "10.0.0.0/8".parse().unwrap(),
                "192.168.1.1/32".parse().unwrap(),
            ],
        );
        // The client wrote 6.6.6.6 itself; the proxies appended 5.5.5.5 and 192.168.1.1.
        assert_eq!(
            l.client_of(ip("10.1.1.1"), &["6.6.6.6", "5.5.5.5", "192.168.1.1"]),
            ip("5.5.5.5")
        );
        // Nothing forwarded: the proxy itself.
        assert_eq!(l.client_of(ip("10.1.1.1"), &[]), ip("10.1.1.1"));
        // Garbage stops at the last trusted hop.
        assert_eq!(
            l.client_of(ip("10.1.1.1"), &["5.5.5.5", "junk", "192.168.1.1"]),
            ip("192.168.1.1")
        );
    }

    #[test]
    fn the_limit_is_per_address_and_zero_turns_it_off() {
        let on = AddressLimiter::new(2, vec![]);
        let limiter = on.limiter.as_ref().unwrap();
        assert!(limiter.check_key(&ip("1.1.1.1")).is_ok());
        assert!(limiter.check_key(&ip("1.1.1.1")).is_ok());
        assert!(limiter.check_key(&ip("1.1.1.1")).is_err());
        assert!(limiter.check_key(&ip("2.2.2.2")).is_ok());
        assert!(AddressLimiter::new(0, vec![]).limiter.is_none());
    }
}
