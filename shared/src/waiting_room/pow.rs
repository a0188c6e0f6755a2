//! A proof of work before joining a waiting room (issue 36): the challenge a gateway hands a
//! buyer, the work the buyer does, and the check, in one SHA-256.
//!
//! The gateway asks for it on a join (`428 challenge_required`) when the product's
//! `waiting_room.pow` is set; `queue.lua` counts the joins asked for, which the difficulty
//! follows ([`difficulty`]), and marks each challenge used.
//!
//! Wire format:
//! - The challenge is a token, `v1.<product>.<user>.<expires ms>.<bits>.<nonce: 32 hex>.<hex
//!   HMAC-SHA256 of everything before the last dot>`, signed by the gateway: it binds the
//!   challenge to one buyer, one product, a deadline and a difficulty, and any gateway can
//!   check any gateway's.
//! - The buyer finds a whole number `n` (decimal, at most 20 digits) such that SHA-256 of the
//!   ASCII text `<token>:<n>` starts with at least `bits` zero bits, and sends that text as it
//!   is (the join's `Seckill-Pow` header).
//! - The check is the signature (in constant time), the binding, the deadline, and one hash.

use crate::domain::{ProductId, UserId};
use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// The algorithm's name, as a challenge states it.
pub const ALGORITHM: &str = "sha256-leading-zero-bits";
/// The most zero bits a challenge may ask for (beyond it no buyer could solve it in time).
pub const MAX_BITS: u8 = 32;
/// The join's header that carries a solution.
pub const HEADER: &str = "Seckill-Pow";
/// How long a challenge may be solved for.
pub const CHALLENGE_TTL_MS: i64 = 60_000;

/// The key challenges are signed with, derived from `secret` (`SECKILL_ADMISSION_SECRET`) so
/// that it is never the admission tokens' own key.
pub fn key_from(secret: &[u8]) -> [u8; 32] {
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(b"seckill proof-of-work challenges v1");
    mac.finalize().into_bytes().into()
}

/// A challenge: what a token carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    pub product: ProductId,
    pub user: UserId,
    /// After this, ms since the epoch, the challenge is refused.
    pub expires_at_ms: i64,
    /// Leading zero bits the hash of a solution must have.
    pub bits: u8,
    /// Random: each challenge is used once (the nonce is what a store remembers).
    pub nonce: [u8; 16],
}

/// Why a solution was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PowError {
    #[error("the proof of work is malformed")]
    Malformed,
    #[error("the challenge's signature does not match")]
    Forged,
    #[error("the challenge is for another buyer or product")]
    NotYours,
    #[error("the challenge has expired")]
    Expired,
    #[error("the solution does not meet the challenge's difficulty")]
    Unsolved,
}

impl Challenge {
    /// The signed token.
    pub fn token(&self, key: &[u8]) -> String {
        let body = format!(
            "v1.{}.{}.{}.{}.{}",
            self.product,
            self.user,
            self.expires_at_ms,
            self.bits,
            hex::encode(self.nonce)
        );
        let mac = hex::encode(sign(key, &body));
        format!("{body}.{mac}")
    }

    /// The challenge a token carries, if `key` signed it.
    pub fn parse(token: &str, key: &[u8]) -> Result<Self, PowError> {
        let (body, mac) = token.rsplit_once('.').ok_or(PowError::Malformed)?;
        // Lowercase hex only: a token has one spelling (an upper-case signature decodes to the
        // same bytes, so it would be a second token for one challenge).
        if !is_lower_hex(mac) {
            return Err(PowError::Malformed);
        }
        let mac = hex::decode(mac).map_err(|_| PowError::Malformed)?;
        if !bool::from(sign(key, body).as_slice().ct_eq(&mac)) {
            return Err(PowError::Forged);
        }
        let mut parts = body.split('.');
        let mut next = || parts.next().ok_or(PowError::Malformed);
        if next()? != "v1" {
            return Err(PowError::Malformed);
        }
        let product = ProductId::parse(next()?).map_err(|_| PowError::Malformed)?;
        let user: u64 = next()?.parse().map_err(|_| PowError::Malformed)?;
        let user = UserId::new(user).map_err(|_| PowError::Malformed)?;
        let expires_at_ms = next()?.parse().map_err(|_| PowError::Malformed)?;
        let bits: u8 = next()?.parse().map_err(|_| PowError::Malformed)?;
        let nonce = next()?;
        if !is_lower_hex(nonce) {
            return Err(PowError::Malformed);
        }
        let nonce: [u8; 16] = hex::decode(nonce)
            .ok()
            .and_then(|n| n.try_into().ok())
            .ok_or(PowError::Malformed)?;
        if parts.next().is_some() || bits > MAX_BITS {
            return Err(PowError::Malformed);
        }
        Ok(Self {
            product,
            user,
            expires_at_ms,
            bits,
            nonce,
        })
    }
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn sign(key: &[u8], body: &str) -> Vec<u8> {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(body.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// Whether SHA-256 of `text` starts with at least `bits` zero bits.
pub fn meets(text: &str, bits: u8) -> bool {
    let mut need = u32::from(bits);
    for byte in Sha256::digest(text.as_bytes()) {
        if need == 0 {
            return true;
        }
        let zeros = byte.leading_zeros();
        if zeros >= need {
            return true;
        }
        if zeros < 8 {
            return false;
        }
        need -= 8;
    }
    need == 0
}

/// Checks a join's `Seckill-Pow` value (`<token>:<n>`) for `product` and `user` at `now_ms`:
/// the challenge it solves, if it does.
pub fn verify(
    value: &str,
    key: &[u8],
    product: ProductId,
    user: UserId,
    now_ms: i64,
) -> Result<Challenge, PowError> {
    let (token, n) = value.rsplit_once(':').ok_or(PowError::Malformed)?;
    if n.is_empty() || n.len() > 20 || !n.bytes().all(|b| b.is_ascii_digit()) {
        return Err(PowError::Malformed);
    }
    let challenge = Challenge::parse(token, key)?;
    if challenge.product != product || challenge.user != user {
        return Err(PowError::NotYours);
    }
    if now_ms >= challenge.expires_at_ms {
        return Err(PowError::Expired);
    }
    if !meets(value, challenge.bits) {
        return Err(PowError::Unsolved);
    }
    Ok(challenge)
}

/// What a buyer's client does: the first `n` from 0 whose `<token>:<n>` meets `bits`, as the
/// value to send. About 2^bits hashes.
pub fn solve(token: &str, bits: u8) -> String {
    (0u64..)
        .map(|n| format!("{token}:{n}"))
        .find(|v| meets(v, bits))
        .expect("some number solves it")
}

/// The difficulty for `joins_per_sec` measured: `min_bits` below twice
/// `target_joins_per_sec`, then one bit more (twice the work) for each whole doubling of the
/// demand past the target (2×: +1, 4×: +2, …), up to `max_bits`. The work a join costs grows
/// as the demand does.
pub fn difficulty(joins_per_sec: f64, min_bits: u8, max_bits: u8, target_joins_per_sec: f64) -> u8 {
    let over = joins_per_sec / target_joins_per_sec.max(f64::MIN_POSITIVE);
    let extra = if over >= 2.0 {
        over.log2().floor()
    } else {
        0.0
    };
    let bits = f64::from(min_bits) + extra.min(f64::from(MAX_BITS));
    (bits.min(f64::from(max_bits.min(MAX_BITS))) as u8).max(min_bits.min(MAX_BITS))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"a key for the tests";

    fn challenge(bits: u8) -> Challenge {
        Challenge {
            product: ProductId::new(7).unwrap(),
            user: UserId::new(42).unwrap(),
            expires_at_ms: 10_000,
            bits,
            nonce: [9; 16],
        }
    }

    #[test]
    fn a_token_carries_its_challenge_and_only_its_key_signs_it() {
        let c = challenge(12);
        let token = c.token(KEY);
        assert_eq!(Challenge::parse(&token, KEY), Ok(c.clone()));
        assert_eq!(
            Challenge::parse(&token, b"another key"),
            Err(PowError::Forged)
        );
        // Any byte changed breaks the signature.
        let tampered = token.replacen(".12.", ".2.", 1);
        assert_eq!(Challenge::parse(&tampered, KEY), Err(PowError::Forged));
        // The same signature in upper case decodes to the same bytes: refused all the same.
        let (body, mac) = token.rsplit_once('.').unwrap();
        let upper = format!("{body}.{}", mac.to_ascii_uppercase());
        assert_eq!(Challenge::parse(&upper, KEY), Err(PowError::Malformed));
        for bad in ["", "v1", "v1.7.42.10000.12.zz.00", "x.y"] {
            assert!(Challenge::parse(bad, KEY).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_solution_is_checked_against_its_buyer_product_deadline_and_difficulty() {
        let c = challenge(8);
        let token = c.token(KEY);
        let solved = solve(&token, 8);
        let (p, u) = (c.product, c.user);
        assert_eq!(verify(&solved, KEY, p, u, 9_999), Ok(c));
        assert_eq!(verify(&solved, KEY, p, u, 10_000), Err(PowError::Expired));
        let other = UserId::new(43).unwrap();
        assert_eq!(verify(&solved, KEY, p, other, 0), Err(PowError::NotYours));
        let elsewhere = ProductId::new(8).unwrap();
        assert_eq!(
            verify(&solved, KEY, elsewhere, u, 0),
            Err(PowError::NotYours)
        );
        // A number that does not solve it (the first that does is `solved`'s; one before it
        // does not, unless it is 0).
        let n: u64 = solved.rsplit_once(':').unwrap().1.parse().unwrap();
        if n > 0 {
            let wrong = format!("{token}:{}", n - 1);
            assert_eq!(verify(&wrong, KEY, p, u, 0), Err(PowError::Unsolved));
        }
        for bad in [
            token.clone(),
            format!("{token}:"),
            format!("{token}:-1"),
            format!("{token}:1x"),
        ] {
            assert_eq!(
                verify(&bad, KEY, p, u, 0),
                Err(PowError::Malformed),
                "{bad}"
            );
        }
    }

    #[test]
    fn leading_zero_bits_are_counted_across_bytes() {
        let token = challenge(0).token(KEY);
        for bits in [0u8, 1, 4, 8, 9, 12, 16] {
            let v = solve(&token, bits);
            assert!(meets(&v, bits), "{bits}");
            let hash = Sha256::digest(v.as_bytes());
            let zeros: u32 = {
                let mut z = 0;
                for b in hash {
                    z += b.leading_zeros();
                    if b != 0 {
                        break;
                    }
                }
                z
            };
            assert!(zeros >= u32::from(bits), "{bits}: {zeros}");
            assert!(!meets(&v, zeros as u8 + 1), "exactly {zeros}");
        }
    }

    #[test]
    fn the_difficulty_follows_demand_between_its_bounds() {
        let d = |jps| difficulty(jps, 4, 20, 100.0);
        assert_eq!(d(0.0), 4, "few joins: the floor");
        assert_eq!(d(100.0), 4, "at the target");
        assert_eq!(d(150.0), 4, "not yet a whole doubling");
        assert_eq!(d(199.9), 4);
        assert_eq!(d(200.0), 5, "twice the target: twice the work");
        assert_eq!(d(399.0), 5);
        assert_eq!(d(400.0), 6);
        assert_eq!(d(1e12), 20, "the ceiling");
        assert_eq!(
            difficulty(1e12, 4, 60, 1.0),
            MAX_BITS,
            "never past MAX_BITS"
        );
        assert_eq!(
            difficulty(50.0, 4, 20, 0.0),
            20,
            "a target of 0: the ceiling"
        );
    }
}
