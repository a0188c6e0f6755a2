//! Waiting rooms: the admission token a buyer gets when their place comes up.
//!
//! The queue itself, and who is admitted when, live in Redis (`shared/src/waiting_room/queue.lua`).
//! The token is the buyer's pass to the buy path: `v1.<product>.<user>.<until ms>.<hex
//! HMAC-SHA256 of "v1.<product>.<user>.<until ms>">` with `SECKILL_ADMISSION_SECRET`, so every
//! gateway verifies any gateway's tokens locally, before the buy touches Redis stock. The
//! reservation script then checks that the admission still holds in Redis (it may have been
//! taken back to keep the cap, or ended by a purchase).

use crate::error::ApiError;
use hmac::{KeyInit, Mac};
use seckill_shared::api::{PowChallenge, QueueBody};
use seckill_shared::waiting_room::{pow, QueueState};
use seckill_shared::{ProductId, UserId};
use secrecy::{ExposeSecret, SecretString};
use subtle::ConstantTimeEq;

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// The buy's header that carries the token.
pub const ADMISSION_HEADER: &str = "Seckill-Admission";

/// The answer for `user`'s place in `product`'s waiting room (`found`), as a join, a poll or
/// a live stream gives it. `expected`: the queue id the request names. States that are no
/// place (no waiting room, never joined, …) are the errors a poll answers.
pub fn shape(
    admissions: &Admissions,
    product: ProductId,
    user: UserId,
    found: QueueState,
    expected: Option<&str>,
    now: i64,
) -> Result<QueueBody, ApiError> {
    let mine = |id: &str| expected.is_none_or(|e| e == id);
    let body = |queue_id: String, state: &'static str| QueueBody {
        queue_id,
        state: state.to_owned(),
        position: None,
        ahead: None,
        estimated_wait_ms: None,
        unlikely: false,
        refresh_after_ms: 1000,
        admission_token: None,
        admitted_until_ms: None,
    };
    Ok(match found {
        QueueState::UnknownProduct => return Err(ApiError::UnknownProduct),
        QueueState::NoWaitingRoom => return Err(ApiError::NoWaitingRoom),
        QueueState::NotOpen => return Err(ApiError::QueueNotOpen),
        QueueState::NotJoined => return Err(ApiError::UnknownQueueEntry),
        QueueState::SaleEnded => return Err(ApiError::SaleEnded),
        QueueState::Challenge {
            joins_per_sec,
            pow: settings,
        } => {
            let bits = pow::difficulty(
                joins_per_sec,
                settings.min_bits,
                settings.max_bits,
                settings.target_joins_per_sec,
            );
            return Err(ApiError::ChallengeRequired(Box::new(
                admissions.challenge(product, user, bits, now),
            )));
        }
        QueueState::ChallengeUsed => {
            return Err(ApiError::ChallengeInvalid(
                "this challenge was used before: join without Seckill-Pow for your entry, or for a new challenge".into(),
            ))
        }
        QueueState::Room(_) => {
            return Err(ApiError::Unexpected(anyhow::anyhow!(
                "a tick's answer where a place was asked for"
            )))
        }
        QueueState::Waiting { queue_id, .. }
        | QueueState::Admitted { queue_id, .. }
        | QueueState::Expired { queue_id }
        | QueueState::Bought { queue_id }
        | QueueState::Ended { queue_id }
            if !mine(&queue_id) =>
        {
            return Err(ApiError::UnknownQueueEntry)
        }
        QueueState::Waiting {
            queue_id,
            ahead,
            sold_out,
            admit_per_sec,
            starts_at_ms,
            measured_per_sec,
            unlikely,
            ..
        } => {
            if sold_out {
                QueueBody {
                    refresh_after_ms: 2000,
                    ..body(queue_id, "sold_out")
                }
            } else {
                let to_start = (starts_at_ms - now).max(0) as u64;
                // The rate actually measured; the configured one until a window closed. A
                // measured 0 is a stalled admission (the admitted have not bought): no honest
                // estimate.
                let rate = match measured_per_sec {
                    Some(r) if r > 0.0 => Some(r),
                    Some(_) => None,
                    None => Some(admit_per_sec),
                };
                let wait = ahead
                    .zip(rate)
                    .map(|(a, r)| to_start + (a as f64 * 1000.0 / r) as u64);
                QueueBody {
                    position: ahead.map(|a| a + 1),
                    ahead,
                    estimated_wait_ms: wait,
                    unlikely,
                    refresh_after_ms: wait
                        .map_or(to_start.clamp(250, 1000), |w| (w / 4).clamp(250, 2000)),
                    ..body(queue_id, "waiting")
                }
            }
        }
        QueueState::Admitted { queue_id, until_ms } => QueueBody {
            admission_token: Some(admissions.sign(product, user, until_ms)),
            admitted_until_ms: Some(until_ms),
            estimated_wait_ms: Some(0),
            ..body(queue_id, "admitted")
        },
        QueueState::Expired { queue_id } => body(queue_id, "expired"),
        QueueState::Bought { queue_id } => body(queue_id, "bought"),
        QueueState::Ended { queue_id } => body(queue_id, "ended"),
    })
}

/// Signs and verifies admission tokens, and the proof-of-work challenges of a join.
pub struct Admissions {
    secret: SecretString,
    /// Signs the challenges (derived from the secret: [`pow::key_from`]).
    pow_key: [u8; 32],
    pub ttl_ms: u64,
}

/// Why a token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionError {
    #[error("the admission token is malformed or its signature does not match")]
    Forged,
    #[error("the admission token is for another buyer or product")]
    NotYours,
    #[error("the admission token has expired")]
    Expired,
}

impl Admissions {
    /// Signs with `secret` (`SECKILL_ADMISSION_SECRET`, which [`Settings::require_admission_secret`]
    /// fills in or refuses). An empty one is refused: no key is derived from another secret.
    ///
    /// [`Settings::require_admission_secret`]: seckill_shared::Settings::require_admission_secret
    pub fn new(secret: SecretString, ttl_ms: u64) -> anyhow::Result<Self> {
        anyhow::ensure!(
            !secret.expose_secret().is_empty(),
            "SECKILL_ADMISSION_SECRET is not set: the gateway signs waiting-room admissions with it"
        );
        let pow_key = pow::key_from(secret.expose_secret().as_bytes());
        Ok(Self {
            secret,
            pow_key,
            ttl_ms,
        })
    }

    /// A new challenge for `user` to join `product`'s waiting room, of `bits`.
    pub fn challenge(
        &self,
        product: ProductId,
        user: UserId,
        bits: u8,
        now_ms: i64,
    ) -> PowChallenge {
        let mut nonce = [0u8; 16];
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut nonce);
        let c = pow::Challenge {
            product,
            user,
            expires_at_ms: now_ms + pow::CHALLENGE_TTL_MS,
            bits,
            nonce,
        };
        PowChallenge {
            token: c.token(&self.pow_key),
            algorithm: pow::ALGORITHM.into(),
            bits,
            expires_at_ms: c.expires_at_ms,
        }
    }

    /// Checks a join's `Seckill-Pow` value: the challenge it solves, or why it is refused.
    pub fn check_pow(
        &self,
        value: &str,
        product: ProductId,
        user: UserId,
        now_ms: i64,
    ) -> Result<pow::Challenge, ApiError> {
        pow::verify(value, &self.pow_key, product, user, now_ms).map_err(|e| {
            ApiError::ChallengeInvalid(format!("{e}: join without Seckill-Pow for a new challenge"))
        })
    }

    fn mac(&self, text: &str) -> Vec<u8> {
        let mut m = HmacSha256::new_from_slice(self.secret.expose_secret().as_bytes())
            .expect("HMAC takes a key of any size");
        m.update(text.as_bytes());
        m.finalize().into_bytes().to_vec()
    }

    /// The token admitting `user` to buy `product` until `until_ms`.
    pub fn sign(&self, product: ProductId, user: UserId, until_ms: i64) -> String {
        let text = format!("v1.{product}.{user}.{until_ms}");
        let mac = hex::encode(self.mac(&text));
        format!("{text}.{mac}")
    }

    /// Checks a token for this buyer, product and time.
    pub fn verify(
        &self,
        token: &str,
        product: ProductId,
        user: UserId,
        now_ms: i64,
    ) -> Result<(), AdmissionError> {
        let (text, mac) = token.rsplit_once('.').ok_or(AdmissionError::Forged)?;
        let mac = hex::decode(mac).map_err(|_| AdmissionError::Forged)?;
        if !bool::from(mac.ct_eq(&self.mac(text))) {
            return Err(AdmissionError::Forged);
        }
        let parts: Vec<&str> = text.split('.').collect();
        let [version, p, u, until] = parts[..] else {
            return Err(AdmissionError::Forged);
        };
        if version != "v1" {
            return Err(AdmissionError::Forged);
        }
        if p != product.to_string() || u != user.to_string() {
            return Err(AdmissionError::NotYours);
        }
        let until: i64 = until.parse().map_err(|_| AdmissionError::Forged)?;
        if now_ms >= until {
            return Err(AdmissionError::Expired);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admissions(secret: &str) -> Admissions {
        Admissions::new(secret.to_owned().into(), 60_000).unwrap()
    }

    #[test]
    fn without_a_secret_nothing_signs() {
        assert!(Admissions::new(SecretString::default(), 60_000).is_err());
    }

    #[test]
    fn gateways_with_the_same_secret_accept_each_others_tokens() {
        let (p, u) = (ProductId::new(4).unwrap(), UserId::new(9).unwrap());
        let t = admissions(&"a".repeat(32)).sign(p, u, 1_000);
        assert_eq!(admissions(&"a".repeat(32)).verify(&t, p, u, 0), Ok(()));
        assert_eq!(
            admissions(&"b".repeat(32)).verify(&t, p, u, 0),
            Err(AdmissionError::Forged)
        );
    }

    #[test]
    fn a_token_admits_its_buyer_to_its_product_until_it_expires() {
        let a = admissions("s".repeat(32).as_str());
        let (p, u) = (ProductId::new(4).unwrap(), UserId::new(9).unwrap());
        let t = a.sign(p, u, 1_000);
        assert_eq!(a.verify(&t, p, u, 999), Ok(()));
        assert_eq!(a.verify(&t, p, u, 1_000), Err(AdmissionError::Expired));
        assert_eq!(
            a.verify(&t, ProductId::new(5).unwrap(), u, 0),
            Err(AdmissionError::NotYours)
        );
        assert_eq!(
            a.verify(&t, p, UserId::new(10).unwrap(), 0),
            Err(AdmissionError::NotYours)
        );
    }

    #[test]
    fn forged_tokens_are_refused() {
        let a = admissions("s".repeat(32).as_str());
        let (p, u) = (ProductId::new(4).unwrap(), UserId::new(9).unwrap());
        let t = a.sign(p, u, 1_000);
        let other = admissions("t".repeat(32).as_str()).sign(p, u, 1_000);
        let later = t.replace(".1000.", ".9999.");
        for bad in [
            "",
            "v1",
            "v1.4.9.1000",
            "v1.4.9.1000.zz",
            other.as_str(),
            later.as_str(),
        ] {
            assert_eq!(a.verify(bad, p, u, 0), Err(AdmissionError::Forged), "{bad}");
        }
    }
}
