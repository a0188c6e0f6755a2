//! What verifying a buyer's token costs, next to one bare Ed25519 signature check.
//!
//! `cargo bench -p seckill-gateway --bench auth`
//!
//! - `auth/hs256`: `Authenticator::verify` of an HS256 token (header, HMAC, claims, `sub`);
//! - `auth/eddsa`: the same for an EdDSA token whose key comes from a JWKS file;
//! - `ed25519/verify`: one Ed25519 signature check of the same token's signing input, the
//!   floor that `auth/eddsa` cannot go below (docs/BENCHMARKS.md compares the two).

use criterion::{criterion_group, criterion_main, Criterion};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header};
use seckill_gateway::auth::{mint_hs256, AddressLimiter, Authenticator};
use seckill_shared::config::AuthSettings;
use seckill_shared::{BuyerClaims, UserId};
use std::hint::black_box;

const SECRET: &str = "a-benchmark-hs256-secret-of-32-bytes";
const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/jwt");

fn verify(c: &mut Criterion) {
    let settings = AuthSettings {
        hs256_secret: SECRET.into(),
        jwks_file: format!("{TESTDATA}/jwks.json"),
        ..AuthSettings::default()
    };
    let auth = Authenticator::from_settings(&settings, AddressLimiter::new(0, Vec::new())).unwrap();
    let user = UserId::new(1_234_567).unwrap();
    let hs = mint_hs256(SECRET, user, 3600, None, None).unwrap();
    c.bench_function("auth/hs256", |b| {
        b.iter(|| auth.verify(black_box(&hs)).unwrap())
    });

    let pem = std::fs::read(format!("{TESTDATA}/ed-1.pem")).unwrap();
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some("ed-1".into());
    let claims = BuyerClaims::new(
        user.get(),
        jsonwebtoken::get_current_timestamp(),
        3600,
        None,
        None,
    );
    let ed =
        jsonwebtoken::encode(&header, &claims, &EncodingKey::from_ed_pem(&pem).unwrap()).unwrap();
    c.bench_function("auth/eddsa", |b| {
        b.iter(|| auth.verify(black_box(&ed)).unwrap())
    });

    let (message, signature) = ed.rsplit_once('.').unwrap();
    let public =
        DecodingKey::from_ed_pem(&std::fs::read(format!("{TESTDATA}/ed-1.pub.pem")).unwrap())
            .unwrap();
    c.bench_function("ed25519/verify", |b| {
        b.iter(|| {
            assert!(jsonwebtoken::crypto::verify(
                black_box(signature),
                black_box(message.as_bytes()),
                &public,
                Algorithm::EdDSA,
            )
            .unwrap())
        })
    });
}

criterion_group!(benches, verify);
criterion_main!(benches);
