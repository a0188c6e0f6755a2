//! Buyer identity for `--jwt-secret` (HS256) or `--jwt-ed25519-key` with `--jwt-kid` (EdDSA,
//! the key named in each token's header): one token per simulated user, sent as
//! `Authorization: Bearer <token>` on the buy and on every ticket poll, so a benchmark pays
//! the gateway's real verification cost.
//!
//! Signing stays off the measured path: the planned users' tokens (the first
//! [`PRESIGNED_MAX`]) are signed before the load starts. Any other user's (a fresh user of
//! `--until-sold-out`, or a run of more users, such as `--users 1000000000 --duration`, where
//! each request is a new user) is signed when its request comes up, before the request's clock
//! starts. A ticket keeps the token its buy carried, for the polling.

use anyhow::Context;
use hyper::header::HeaderValue;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use secrecy::{ExposeSecret, SecretString};
use std::time::Duration;

/// The claims of a buyer's token: the system's one definition.
pub use seckill_shared::BuyerClaims as Claims;

/// The key a run's tokens are signed with.
pub enum SigningKey<'a> {
    /// `--jwt-secret`: HS256.
    Hs256(&'a SecretString),
    /// `--jwt-ed25519-key` and `--jwt-kid`: EdDSA with an Ed25519 private key (PKCS#8 PEM),
    /// `kid` in every token's header.
    Ed25519 { pem: &'a [u8], kid: &'a str },
}

/// What every token of a run is signed with.
pub struct TokenIssuer {
    key: EncodingKey,
    header: Header,
    issuer: Option<String>,
    audience: Option<String>,
    ttl: Duration,
}

impl TokenIssuer {
    pub fn new(
        key: SigningKey<'_>,
        issuer: Option<String>,
        audience: Option<String>,
        ttl: Duration,
    ) -> anyhow::Result<Self> {
        anyhow::ensure!(!ttl.is_zero(), "--jwt-ttl-secs must be at least 1");
        let (key, header) = match key {
            SigningKey::Hs256(secret) => {
                anyhow::ensure!(
                    !secret.expose_secret().is_empty(),
                    "--jwt-secret must not be empty"
                );
                (
                    EncodingKey::from_secret(secret.expose_secret().as_bytes())
                        .context("--jwt-secret")?,
                    Header::new(Algorithm::HS256),
                )
            }
            SigningKey::Ed25519 { pem, kid } => {
                anyhow::ensure!(!kid.is_empty(), "--jwt-kid must not be empty");
                let mut header = Header::new(Algorithm::EdDSA);
                header.kid = Some(kid.to_owned());
                (
                    EncodingKey::from_ed_pem(pem).context(
                        "--jwt-ed25519-key: not an Ed25519 private key in PKCS#8 PEM \
                         (-----BEGIN PRIVATE KEY-----)",
                    )?,
                    header,
                )
            }
        };
        let issuer = Self {
            key,
            header,
            issuer,
            audience,
            ttl,
        };
        // A key that parses may still not sign (a PEM of another key type): fail now.
        issuer.sign(1).context("signing a test token")?;
        Ok(issuer)
    }

    /// The tokens' algorithm, as their header names it: `HS256` or `EdDSA`.
    pub fn algorithm(&self) -> &'static str {
        match self.header.alg {
            Algorithm::HS256 => "HS256",
            Algorithm::EdDSA => "EdDSA",
            other => unreachable!("no key signs {other:?}"),
        }
    }

    /// The key id every token names, if any.
    pub fn kid(&self) -> Option<&str> {
        self.header.kid.as_deref()
    }

    /// The claims of `user`'s token issued at `now_s` (seconds since the epoch).
    pub fn claims(&self, user: u64, now_s: u64) -> Claims {
        Claims::new(
            user,
            now_s,
            self.ttl.as_secs(),
            self.issuer.clone(),
            self.audience.clone(),
        )
    }

    /// Signs `user`'s token, valid from now for the TTL.
    pub fn sign(&self, user: u64) -> anyhow::Result<String> {
        let now_s = crate::now_us() / 1_000_000;
        Ok(jsonwebtoken::encode(
            &self.header,
            &self.claims(user, now_s),
            &self.key,
        )?)
    }

    /// `Bearer <token>` for `user`, marked sensitive so that no debug output shows it.
    fn bearer(&self, user: u64) -> anyhow::Result<HeaderValue> {
        let mut v = HeaderValue::try_from(format!("Bearer {}", self.sign(user)?))?;
        v.set_sensitive(true);
        Ok(v)
    }
}

/// Users whose tokens are signed before the load starts, at most: about 25 MB of tokens.
pub const PRESIGNED_MAX: u64 = 100_000;

/// Every simulated user's `Authorization` header.
pub struct BuyerTokens {
    issuer: TokenIssuer,
    first_user: u64,
    /// Signed up front: user `first_user + i` at `i`.
    presigned: Vec<HeaderValue>,
}

impl BuyerTokens {
    /// Signs the tokens of the first planned users: `first_user ..`, `users` of them (at most
    /// [`PRESIGNED_MAX`]), on every CPU (an Ed25519 signature takes tens of µs).
    pub fn new(issuer: TokenIssuer, first_user: u64, users: u64) -> anyhow::Result<Self> {
        let end = first_user.saturating_add(users.min(PRESIGNED_MAX));
        let n = end - first_user;
        let threads = std::thread::available_parallelism().map_or(1, |t| t.get() as u64);
        let chunk = n.div_ceil(threads.clamp(1, n.max(1)));
        let presigned = std::thread::scope(|s| {
            let parts: Vec<_> = (first_user..end)
                .step_by(chunk.max(1) as usize)
                .map(|from| {
                    let (issuer, to) = (&issuer, from.saturating_add(chunk).min(end));
                    s.spawn(move || {
                        (from..to)
                            .map(|u| issuer.bearer(u))
                            .collect::<anyhow::Result<Vec<_>>>()
                    })
                })
                .collect();
            parts
                .into_iter()
                .map(|p| p.join().expect("signing does not panic"))
                .collect::<anyhow::Result<Vec<_>>>()
        })?
        .concat();
        // A run of fresh users only: make sure signing works before the load starts.
        issuer.bearer(first_user)?;
        Ok(Self {
            issuer,
            first_user,
            presigned,
        })
    }

    /// What the tokens are signed with.
    pub fn issuer(&self) -> &TokenIssuer {
        &self.issuer
    }

    /// `user`'s `Authorization` header value: presigned, or signed now.
    pub fn header(&self, user: u64) -> HeaderValue {
        match user
            .checked_sub(self.first_user)
            .and_then(|i| self.presigned.get(usize::try_from(i).ok()?))
        {
            Some(v) => v.clone(),
            None => self
                .issuer
                .bearer(user)
                .expect("signing worked for the first user, so it works for every user"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{DecodingKey, Validation};

    fn decode(header: &HeaderValue, secret: &str, validation: &Validation) -> Claims {
        let token = header.to_str().unwrap().strip_prefix("Bearer ").unwrap();
        jsonwebtoken::decode::<Claims>(
            token,
            &DecodingKey::from_secret(secret.as_bytes()).unwrap(),
            validation,
        )
        .unwrap()
        .claims
    }

    #[test]
    fn a_token_decodes_with_the_same_secret_and_names_the_user() {
        let secret = SecretString::from("s3cret");
        let issuer = TokenIssuer::new(
            SigningKey::Hs256(&secret),
            Some("seckill-bench".into()),
            Some("seckill".into()),
            Duration::from_secs(600),
        )
        .unwrap();
        let before = crate::now_us() / 1_000_000;
        let tokens = BuyerTokens::new(issuer, 10, 3).unwrap();
        let after = crate::now_us() / 1_000_000;

        let mut v = Validation::new(Algorithm::HS256);
        v.set_issuer(&["seckill-bench"]);
        v.set_audience(&["seckill"]);
        v.set_required_spec_claims(&["exp", "sub", "iss", "aud"]);
        // A presigned user and a fresh one.
        for user in [11, 5000] {
            let h = tokens.header(user);
            assert!(h.is_sensitive());
            let c = decode(&h, "s3cret", &v);
            assert_eq!(c.sub, user.to_string());
            assert!(
                (before..=crate::now_us() / 1_000_000).contains(&c.iat),
                "{c:?}"
            );
            assert_eq!(c.exp, c.iat + 600);
            assert_eq!(c.iss.as_deref(), Some("seckill-bench"));
            assert_eq!(c.aud.as_deref(), Some("seckill"));
        }
        // Presigned: the same header every time, signed before the load.
        assert_eq!(tokens.header(11), tokens.header(11));
        assert_eq!(tokens.presigned.len(), 3);
        assert!(decode(&tokens.header(12), "s3cret", &v).iat <= after);

        // Another secret, issuer or audience is refused.
        let token = tokens.header(11);
        let token = token.to_str().unwrap().strip_prefix("Bearer ").unwrap();
        let wrong_key = DecodingKey::from_secret(b"other").unwrap();
        assert!(jsonwebtoken::decode::<Claims>(token, &wrong_key, &v).is_err());
        let key = DecodingKey::from_secret(b"s3cret").unwrap();
        let mut other_aud = v.clone();
        other_aud.set_audience(&["elsewhere"]);
        assert!(jsonwebtoken::decode::<Claims>(token, &key, &other_aud).is_err());
        let mut other_iss = v.clone();
        other_iss.set_issuer(&["elsewhere"]);
        assert!(jsonwebtoken::decode::<Claims>(token, &key, &other_iss).is_err());
    }

    #[test]
    fn without_issuer_and_audience_the_claims_leave_them_out() {
        let secret = SecretString::from("k");
        let issuer = TokenIssuer::new(
            SigningKey::Hs256(&secret),
            None,
            None,
            Duration::from_secs(3600),
        )
        .unwrap();
        let c = issuer.claims(42, 1_000);
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            serde_json::json!({"sub": "42", "exp": 4_600, "iat": 1_000})
        );
        let tokens = BuyerTokens::new(issuer, 1, 1).unwrap();
        let c = decode(&tokens.header(1), "k", &Validation::new(Algorithm::HS256));
        assert_eq!((c.sub.as_str(), c.iss, c.aud), ("1", None, None));

        assert!(TokenIssuer::new(
            SigningKey::Hs256(&SecretString::from("")),
            None,
            None,
            Duration::from_secs(1)
        )
        .is_err());
        assert!(TokenIssuer::new(SigningKey::Hs256(&secret), None, None, Duration::ZERO).is_err());
    }

    #[test]
    fn presigned_tokens_are_in_user_order() {
        let secret = SecretString::from("k");
        let v = Validation::new(Algorithm::HS256);
        for users in [0, 1, 2, 7, 1000] {
            let issuer = TokenIssuer::new(
                SigningKey::Hs256(&secret),
                None,
                None,
                Duration::from_secs(60),
            )
            .unwrap();
            let tokens = BuyerTokens::new(issuer, 40, users).unwrap();
            assert_eq!(tokens.presigned.len() as u64, users);
            for (i, h) in tokens.presigned.iter().enumerate() {
                assert_eq!(decode(h, "k", &v).sub, (40 + i).to_string());
            }
        }
    }

    fn testdata(name: &str) -> Vec<u8> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/jwt/");
        std::fs::read(format!("{path}{name}")).unwrap()
    }

    #[test]
    fn an_ed25519_token_verifies_with_the_public_key_and_names_its_kid() {
        let pem = testdata("ed-1.pem");
        let issuer = TokenIssuer::new(
            SigningKey::Ed25519 {
                pem: &pem,
                kid: "ed-1",
            },
            Some("seckill-bench".into()),
            Some("seckill".into()),
            Duration::from_secs(600),
        )
        .unwrap();
        assert_eq!((issuer.algorithm(), issuer.kid()), ("EdDSA", Some("ed-1")));
        let tokens = BuyerTokens::new(issuer, 10, 3).unwrap();
        assert_eq!(tokens.issuer().algorithm(), "EdDSA");
        assert_eq!(tokens.presigned.len(), 3);

        let public = DecodingKey::from_ed_pem(&testdata("ed-1.pub.pem")).unwrap();
        let mut v = Validation::new(Algorithm::EdDSA);
        v.set_issuer(&["seckill-bench"]);
        v.set_audience(&["seckill"]);
        v.set_required_spec_claims(&["exp", "sub", "iss", "aud"]);
        // A presigned user and a fresh one: the same claims as the HS256 tokens'.
        for user in [11, 5000] {
            let h = tokens.header(user);
            assert!(h.is_sensitive());
            let token = h.to_str().unwrap().strip_prefix("Bearer ").unwrap();
            let header = jsonwebtoken::decode_header(token).unwrap();
            assert_eq!(header.alg, Algorithm::EdDSA);
            assert_eq!(header.kid.as_deref(), Some("ed-1"));
            let c = jsonwebtoken::decode::<Claims>(token, &public, &v)
                .unwrap()
                .claims;
            assert_eq!(c.sub, user.to_string());
            assert_eq!(c.exp, c.iat + 600);
            assert_eq!(c.iss.as_deref(), Some("seckill-bench"));
            assert_eq!(c.aud.as_deref(), Some("seckill"));

            // Another key's public half refuses it.
            let other = DecodingKey::from_ed_pem(&testdata("ed-2.pub.pem")).unwrap();
            assert!(jsonwebtoken::decode::<Claims>(token, &other, &v).is_err());
        }
    }

    #[test]
    fn an_ed25519_key_must_be_a_private_key_and_have_a_kid() {
        let sign = |pem: &[u8], kid: &str| {
            TokenIssuer::new(
                SigningKey::Ed25519 { pem, kid },
                None,
                None,
                Duration::from_secs(60),
            )
        };
        assert!(sign(&testdata("ed-1.pem"), "ed-1").is_ok());
        assert!(sign(&testdata("ed-1.pem"), "").is_err());
        // The public key, another curve's private key, or no PEM at all.
        assert!(sign(&testdata("ed-1.pub.pem"), "ed-1").is_err());
        assert!(sign(&testdata("es-1.pem"), "es-1").is_err());
        assert!(sign(b"not a key", "ed-1").is_err());
    }
}
