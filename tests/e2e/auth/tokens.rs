//! Tokens of every kind, good and bad: claims, signatures with the test keys of
//! `testdata/jwt`, and a JWKS file of the test's own.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/jwt");
pub(crate) const ISSUER: &str = "https://accounts.shop.test";
pub(crate) const AUDIENCE: &str = "seckill";

pub(crate) fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

/// The claims of a good token for `user`, for a gateway that checks [`ISSUER`] and
/// [`AUDIENCE`].
pub(crate) fn claims(user: u64) -> Value {
    json!({
        "sub": user.to_string(),
        "exp": now() + 600,
        "iat": now(),
        "iss": ISSUER,
        "aud": AUDIENCE,
    })
}

/// `claims` with `changes` applied: a `null` removes a claim.
pub(crate) fn with(mut claims: Value, changes: Value) -> Value {
    let map = claims.as_object_mut().unwrap();
    for (k, v) in changes.as_object().unwrap() {
        if v.is_null() {
            map.remove(k);
        } else {
            map.insert(k.clone(), v.clone());
        }
    }
    claims
}

pub(crate) fn read(file: &str) -> Vec<u8> {
    std::fs::read(Path::new(TESTDATA).join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn sign(alg: Algorithm, kid: Option<&str>, key: &EncodingKey, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    jsonwebtoken::encode(&header, claims, key).expect("signing a test token")
}

/// An HS256 token signed with `secret`.
pub(crate) fn hs256(secret: &[u8], kid: Option<&str>, claims: &Value) -> String {
    sign(
        Algorithm::HS256,
        kid,
        &EncodingKey::from_secret(secret).unwrap(),
        claims,
    )
}

/// A token signed with the private key of `testdata/jwt/<key>.pem` (`ed-*`: EdDSA, `es-*`:
/// ES256, `rs-*`: RS256), naming `kid`.
pub(crate) fn signed_by(key: &str, kid: Option<&str>, claims: &Value) -> String {
    let pem = read(&format!("{key}.pem"));
    let (alg, key) = match &key[..2] {
        "ed" => (Algorithm::EdDSA, EncodingKey::from_ed_pem(&pem)),
        "es" => (Algorithm::ES256, EncodingKey::from_ec_pem(&pem)),
        "rs" => (Algorithm::RS256, EncodingKey::from_rsa_pem(&pem)),
        other => panic!("no test key of kind {other}"),
    };
    sign(alg, kid, &key.unwrap(), claims)
}

/// A token signed with `key`, under its own kid.
pub(crate) fn good(key: &str, claims: &Value) -> String {
    signed_by(key, Some(key), claims)
}

/// `{"alg":"none"}`, the claims, and an empty signature, built by hand (no library signs
/// that).
pub(crate) fn unsigned(header: Value, claims: &Value) -> String {
    format!(
        "{}.{}.",
        B64.encode(header.to_string()),
        B64.encode(claims.to_string())
    )
}

/// `token` with its payload replaced by `claims`: the signature is the original one.
pub(crate) fn swap_payload(token: &str, claims: &Value) -> String {
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3, "{token}");
    format!(
        "{}.{}.{}",
        parts[0],
        B64.encode(claims.to_string()),
        parts[2]
    )
}

/// A copy of a JWKS file of `testdata/jwt` in a file of its own, removed on drop.
pub(crate) struct JwksFile(PathBuf);

impl JwksFile {
    pub(crate) fn copy_of(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "seckill-e2e-jwks-{:016x}.json",
            rand::random::<u64>()
        ));
        std::fs::write(&path, read(name)).unwrap();
        Self(path)
    }

    pub(crate) fn path(&self) -> String {
        self.0.to_str().unwrap().to_owned()
    }

    /// Writes another file of `testdata/jwt` over this one, in place.
    pub(crate) fn overwrite_with(&self, name: &str) {
        std::fs::write(&self.0, read(name)).unwrap();
    }
}

impl Drop for JwksFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
