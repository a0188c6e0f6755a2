//! Buyer identity. The buyer endpoints need `Authorization: Bearer <JWT>`, issued by the
//! shop's account service; the gateway only verifies it, locally. The buyer is the token's
//! `sub` claim. See `docs/SECURITY.md`.
//!
//! Each key verifies exactly one algorithm: the HS256 secret verifies `HS256`, and each JWKS
//! key the one its type implies (Ed25519 → `EdDSA`, P-256 → `ES256`, RSA → `RS256`). A token
//! names its key (`kid`), and its `alg` must be that key's: `none`, or `HS256` signed with an
//! RSA public key, are refused.
//!
//! [`Buyer`] is the extractor: it applies the per-address limit first (cheap, local), then
//! verifies the token.

pub mod address;
pub mod admin;
mod keys;

pub use address::AddressLimiter;
pub use keys::{parse as parse_jwks, JwksFile};

use crate::error::ApiError;
use actix_web::dev::Payload;
use actix_web::{http::header, web, FromRequest, HttpRequest};
use anyhow::Context;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use seckill_shared::config::AuthSettings;
use seckill_shared::{AuthMode, BuyerClaims, UserId};
use secrecy::ExposeSecret;
use serde::Deserialize;
use std::future::{ready, Ready};
use std::sync::Arc;

/// The algorithms a key may verify.
const ACCEPTED: [Algorithm; 4] = [
    Algorithm::HS256,
    Algorithm::EdDSA,
    Algorithm::ES256,
    Algorithm::RS256,
];

/// What [`Authenticator::verify`] reads of a token once its signature is checked: the buyer.
/// `exp`, `nbf`, `iss` and `aud` are checked by [`Validation`], which reads `aud` as a string
/// or a list (RFC 7519 §4.1.3); decoding the claims into [`Claims`] (`aud` a string) would
/// refuse a token whose `aud` is a list that holds ours.
#[derive(Deserialize)]
struct Subject {
    sub: String,
}

/// Verifies buyer tokens.
pub struct Authenticator {
    mode: AuthMode,
    hs256: Option<DecodingKey>,
    jwks: Option<Arc<JwksFile>>,
    /// One validation per accepted algorithm, built once.
    validations: Vec<(Algorithm, Validation)>,
    pub addresses: AddressLimiter,
}

impl Authenticator {
    /// From the buyer-identity settings (after `Settings::require_auth`), with the
    /// per-address limit checked before any token. Reads the JWKS file, if any.
    pub fn from_settings(s: &AuthSettings, addresses: AddressLimiter) -> anyhow::Result<Self> {
        let secret = s.hs256_secret.expose_secret();
        let hs256 = (!secret.is_empty())
            .then(|| DecodingKey::from_secret(secret.as_bytes()))
            .transpose()
            .context("SECKILL_AUTH_HS256_SECRET")?;
        let jwks = (!s.jwks_file.is_empty())
            .then(|| JwksFile::load(s.jwks_file.as_ref()).map(Arc::new))
            .transpose()?;
        if s.mode == AuthMode::Jwt && hs256.is_none() && jwks.is_none() {
            anyhow::bail!(
                "no key for buyer tokens: set SECKILL_AUTH_HS256_SECRET or SECKILL_AUTH_JWKS_FILE"
            );
        }
        let validations = ACCEPTED
            .iter()
            .map(|alg| {
                let mut v = Validation::new(*alg);
                v.leeway = s.leeway_secs;
                v.validate_nbf = true;
                let mut required = vec!["exp", "sub"];
                if s.issuer.is_empty() {
                    v.iss = None;
                } else {
                    v.set_issuer(&[&s.issuer]);
                    required.push("iss");
                }
                if s.audience.is_empty() {
                    // Unset means "not checked": a token naming an audience is still accepted.
                    v.validate_aud = false;
                } else {
                    v.set_audience(&[&s.audience]);
                    required.push("aud");
                }
                v.set_required_spec_claims(&required);
                (*alg, v)
            })
            .collect();
        Ok(Self {
            mode: s.mode,
            hs256,
            jwks,
            validations,
            addresses,
        })
    }

    pub fn mode(&self) -> AuthMode {
        self.mode
    }

    /// The JWKS file, for the task that reloads it.
    pub fn jwks(&self) -> Option<Arc<JwksFile>> {
        self.jwks.clone()
    }

    /// The buyer a token names. The error says which check failed, and never holds the
    /// token.
    pub fn verify(&self, token: &str) -> Result<UserId, String> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| format!("{} in the token's header", describe(e.kind())))?;
        let key: &DecodingKey;
        let held;
        match header.alg {
            Algorithm::HS256 => {
                key = self
                    .hs256
                    .as_ref()
                    .ok_or("HS256 tokens are not accepted here")?;
            }
            alg @ (Algorithm::EdDSA | Algorithm::ES256 | Algorithm::RS256) => {
                let jwks = self
                    .jwks
                    .as_ref()
                    .ok_or_else(|| format!("{alg:?} tokens are not accepted here"))?;
                let kid = header
                    .kid
                    .as_deref()
                    .ok_or("the token names no key (kid)")?;
                held = jwks.get(kid).ok_or("unknown key id (kid)")?;
                if held.alg != alg {
                    return Err(format!(
                        "the key {kid:?} verifies {:?}, not {alg:?}",
                        held.alg
                    ));
                }
                key = &held.key;
            }
            other => return Err(format!("algorithm {other:?} is not accepted")),
        }
        let validation = &self
            .validations
            .iter()
            .find(|(a, _)| *a == header.alg)
            .expect("a validation per accepted algorithm")
            .1;
        let data = jsonwebtoken::decode::<Subject>(token, key, validation).map_err(|e| match e
            .kind()
        {
            ErrorKind::Json(_) => "malformed claims: not JSON, or no sub string".to_owned(),
            kind => describe(kind),
        })?;
        UserId::parse(&data.claims.sub)
            .map_err(|_| "the sub claim is not a user id (a decimal 1..2^63-1)".to_owned())
    }

    /// The buyer of a request: the per-address limit, then the token. `None` when
    /// authentication is off (`SECKILL_AUTH_MODE=none`).
    pub fn buyer(&self, req: &HttpRequest) -> Result<Option<UserId>, ApiError> {
        self.addresses.check(req)?;
        if self.mode == AuthMode::None {
            return Ok(None);
        }
        let value = req
            .headers()
            .get(header::AUTHORIZATION)
            .ok_or_else(|| ApiError::Unauthenticated("missing bearer token".into()))?;
        let token = value
            .to_str()
            .ok()
            .and_then(|v| {
                let (scheme, token) = v.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            })
            .ok_or_else(|| {
                ApiError::Unauthenticated("expected Authorization: Bearer <token>".into())
            })?;
        self.verify(token)
            .map(Some)
            .map_err(ApiError::Unauthenticated)
    }
}

/// What failed, in words: never the token itself.
fn describe(kind: &ErrorKind) -> String {
    match kind {
        ErrorKind::InvalidSignature
        | ErrorKind::InvalidEcdsaKey
        | ErrorKind::InvalidEddsaKey
        | ErrorKind::InvalidRsaKey(_)
        | ErrorKind::InvalidKeyFormat => "bad signature".into(),
        ErrorKind::ExpiredSignature => "the token has expired".into(),
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".into(),
        ErrorKind::InvalidIssuer => "wrong issuer (iss)".into(),
        ErrorKind::InvalidAudience => "wrong audience (aud)".into(),
        ErrorKind::MissingRequiredClaim(c) => format!("the token has no {c} claim"),
        ErrorKind::InvalidClaimFormat(c) => format!("the {c} claim is malformed"),
        ErrorKind::InvalidAlgorithm | ErrorKind::UnsupportedAlgorithm => {
            "algorithm not accepted".into()
        }
        ErrorKind::Json(_) => "malformed JSON, or an algorithm not accepted,".into(),
        _ => "malformed token".into(),
    }
}

/// The authenticated buyer of a request (see [`Authenticator::buyer`]).
pub struct Buyer(pub Option<UserId>);

impl Buyer {
    /// The buyer, given the `user_id` the request named (the body's, or a query's).
    /// With a token, a named user must be the token's (`403 user_mismatch`); without
    /// authentication, the named user is required.
    pub fn resolve(&self, named: Option<UserId>) -> Result<UserId, ApiError> {
        match (self.0, named) {
            (Some(sub), Some(named)) if named != sub => Err(ApiError::UserMismatch),
            (Some(sub), _) => Ok(sub),
            (None, Some(named)) => Ok(named),
            (None, None) => Err(ApiError::BadRequest(
                "user_id is required: buyers are not authenticated (SECKILL_AUTH_MODE=none)".into(),
            )),
        }
    }
}

impl FromRequest for Buyer {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(match req.app_data::<web::Data<Authenticator>>() {
            Some(auth) => auth.buyer(req).map(Buyer),
            None => Err(ApiError::Unexpected(anyhow::anyhow!(
                "the gateway's buyer identity is not configured"
            ))),
        })
    }
}

/// An HS256 token for `user`, valid for `ttl_secs`: for development and tests
/// (`gateway token`), never the production path (tokens come from the account service).
pub fn mint_hs256(
    secret: &str,
    user: UserId,
    ttl_secs: u64,
    issuer: Option<&str>,
    audience: Option<&str>,
) -> anyhow::Result<String> {
    let claims = BuyerClaims::new(
        user.get(),
        jsonwebtoken::get_current_timestamp(),
        ttl_secs,
        issuer.map(str::to_owned),
        audience.map(str::to_owned),
    );
    let key = EncodingKey::from_secret(secret.as_bytes()).context("the HS256 secret")?;
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &key).context("signing a token")
}

#[cfg(test)]
mod tests;
