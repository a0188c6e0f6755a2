//! The per-address limit: requests to the buyer endpoints each client address may make per
//! second (`SECKILL_RATE_LIMIT_PER_ADDRESS_PER_SEC`), in this gateway's memory. It runs before
//! the token is verified, so a flood of garbage tokens from one address costs a map lookup
//! each, not a signature check.
//!
//! The client's address is the connection's peer, unless that peer is a trusted proxy
//! (`SECKILL_TRUSTED_PROXIES`): then it is the right-most `X-Forwarded-For` entry that is not a
//! trusted proxy itself. Entries a client wrote (to the left) are never believed.
//!
//! An IPv6 client is limited by its /64 ([`limit_key`]): one host or subscriber is given a
//! whole /64, and rotating through it does not make more clients.

use crate::error::ApiError;
use actix_web::HttpRequest;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use ipnet::IpNet;
use seckill_shared::config::GatewaySettings;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::Duration;

/// How often addresses that are back to a full bucket are forgotten.
pub const FORGET_EVERY: Duration = Duration::from_secs(10);

/// The key an address is limited under: an IPv4 address as itself (and an IPv4-mapped IPv6
/// one, as a dual-stack listener reports IPv4 peers, as that IPv4 address), an IPv6 address by
/// its /64, the block one subscriber or host is given (RFC 6177).
pub fn limit_key(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V4(_) => addr,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(std::net::Ipv6Addr::from(
                u128::from(v6) & !((1u128 << 64) - 1),
            )),
        },
    }
}

pub struct AddressLimiter {
    /// `None` when the limit is off.
    limiter: Option<DefaultKeyedRateLimiter<IpAddr>>,
    trusted: Vec<IpNet>,
}

impl AddressLimiter {
    pub fn from_settings(s: &GatewaySettings) -> anyhow::Result<Self> {
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
        limiter.check_key(&limit_key(addr)).map_err(|not_until| {
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

    /// One IPv6 host owns a /64: its addresses share one limit, another /64 has its own, and
    /// an IPv4 client (plain or IPv4-mapped) is limited as itself.
    #[test]
    fn an_ipv6_client_is_limited_by_its_slash_64() {
        assert_eq!(
            limit_key(ip("2001:db8:1:2:aaaa::1")),
            limit_key(ip("2001:db8:1:2:ffff::9"))
        );
        assert_ne!(
            limit_key(ip("2001:db8:1:2::1")),
            limit_key(ip("2001:db8:1:3::1"))
        );
        assert_eq!(limit_key(ip("::ffff:1.2.3.4")), ip("1.2.3.4"));
        assert_eq!(limit_key(ip("1.2.3.4")), ip("1.2.3.4"));
        let l = AddressLimiter::new(1, vec![]);
        let from = |peer: &str| {
            actix_web::test::TestRequest::default()
                .peer_addr(peer.parse().unwrap())
                .to_http_request()
        };
        assert!(l.check(&from("[2001:db8::1]:1000")).is_ok());
        assert!(
            l.check(&from("[2001:db8::2]:1000")).is_err(),
            "the same /64, over its limit"
        );
        assert!(l.check(&from("[2001:db8:0:1::1]:1000")).is_ok());
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
