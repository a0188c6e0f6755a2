//! Waiting rooms: the admission token a buyer gets when their place comes up.
//!
//! The queue itself, and who is admitted when, live in Redis (`shared/src/waiting_room/queue.lua`).
//! The token is the buyer's pass to the buy path: `v1.<product>.<user>.<until ms>.<hex
//! HMAC-SHA256 of "v1.<product>.<user>.<until ms>">` with `SECKILL_ADMISSION_SECRET`, so every
//! gateway verifies any gateway's tokens locally, before the buy touches Redis stock. The
//! reservation script then checks that the admission still holds in Redis (it may have been
//! taken back to keep the cap, or ended by a purchase).

use hmac::{KeyInit, Mac};
use seckill_shared::{ProductId, UserId};
use secrecy::{ExposeSecret, SecretString};
use subtle::ConstantTimeEq;

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// The buy's header that carries the token.
pub const ADMISSION_HEADER: &str = "Seckill-Admission";

/// Signs and verifies admission tokens.
pub struct Admissions {
    secret: SecretString,
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
        Ok(Self { secret, ttl_ms })
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
