//! Unit tests of key handling. Every way a token can be wrong is tested end to end, against a
//! running gateway, in `tests/e2e/auth/`.

use super::*;
use jsonwebtoken::{encode, EncodingKey, Header};

const SECRET: &str = "an-hs256-secret-of-at-least-32-bytes!";
const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/jwt");

fn settings(jwks: bool) -> AuthSettings {
    AuthSettings {
        hs256_secret: SECRET.into(),
        jwks_file: if jwks {
            format!("{TESTDATA}/jwks.json")
        } else {
            String::new()
        },
        ..AuthSettings::default()
    }
}

/// An authenticator of `s`, with no per-address limit.
fn authenticator(s: &AuthSettings) -> anyhow::Result<Authenticator> {
    Authenticator::from_settings(s, AddressLimiter::new(0, Vec::new()))
}

fn claims(sub: &str) -> BuyerClaims {
    BuyerClaims {
        sub: sub.into(),
        ..BuyerClaims::new(1, jsonwebtoken::get_current_timestamp(), 600, None, None)
    }
}

fn signed(alg: Algorithm, kid: &str, pem: &str, claims: &BuyerClaims) -> String {
    let pem = std::fs::read(format!("{TESTDATA}/{pem}")).unwrap();
    let key = match alg {
        Algorithm::EdDSA => EncodingKey::from_ed_pem(&pem),
        Algorithm::ES256 => EncodingKey::from_ec_pem(&pem),
        _ => EncodingKey::from_rsa_pem(&pem),
    }
    .unwrap();
    let mut header = Header::new(alg);
    header.kid = Some(kid.into());
    encode(&header, claims, &key).unwrap()
}

#[test]
fn every_configured_key_verifies_its_own_algorithm() {
    let auth = authenticator(&settings(true)).unwrap();
    let hs = mint_hs256(SECRET, UserId::new(7).unwrap(), 60, None, None).unwrap();
    assert_eq!(auth.verify(&hs).unwrap().get(), 7);
    for (alg, kid, pem) in [
        (Algorithm::EdDSA, "ed-1", "ed-1.pem"),
        (Algorithm::ES256, "es-1", "es-1.pem"),
        (Algorithm::RS256, "rs-1", "rs-1.pem"),
    ] {
        let token = signed(alg, kid, pem, &claims("42"));
        assert_eq!(auth.verify(&token).unwrap().get(), 42, "{alg:?}");
    }
}

#[test]
fn a_key_never_verifies_another_algorithm_or_a_key_it_is_not() {
    let auth = authenticator(&settings(true)).unwrap();
    // An Ed25519 signature presented under the P-256 key's kid.
    let token = signed(Algorithm::EdDSA, "es-1", "ed-1.pem", &claims("1"));
    let err = auth.verify(&token).unwrap_err();
    assert!(err.contains("verifies ES256"), "{err}");
    // The right kid, the wrong private key.
    let token = signed(Algorithm::EdDSA, "ed-1", "ed-2.pem", &claims("1"));
    assert_eq!(auth.verify(&token).unwrap_err(), "bad signature");
    // Without a JWKS file, no asymmetric token is accepted.
    let hs_only = authenticator(&settings(false)).unwrap();
    let token = signed(Algorithm::RS256, "rs-1", "rs-1.pem", &claims("1"));
    assert!(hs_only.verify(&token).unwrap_err().contains("not accepted"));
}

#[test]
fn sub_must_be_a_user_id() {
    let auth = authenticator(&settings(false)).unwrap();
    let key = EncodingKey::from_secret(SECRET.as_bytes()).unwrap();
    for sub in ["0", "-1", "abc", "9223372036854775808", " 7", ""] {
        let token = encode(&Header::default(), &claims(sub), &key).unwrap();
        let err = auth.verify(&token).unwrap_err();
        assert!(err.contains("sub"), "{sub:?}: {err}");
    }
}

#[test]
fn an_unset_audience_is_not_checked_and_a_set_one_is_required() {
    let open = authenticator(&settings(false)).unwrap();
    let with_aud = mint_hs256(SECRET, UserId::new(3).unwrap(), 60, None, Some("shop")).unwrap();
    assert!(open.verify(&with_aud).is_ok());
    let strict = authenticator(&AuthSettings {
        audience: "seckill".into(),
        issuer: "accounts".into(),
        ..settings(false)
    })
    .unwrap();
    let none = mint_hs256(SECRET, UserId::new(3).unwrap(), 60, Some("accounts"), None).unwrap();
    assert!(strict.verify(&none).unwrap_err().contains("aud"));
    let good = mint_hs256(
        SECRET,
        UserId::new(3).unwrap(),
        60,
        Some("accounts"),
        Some("seckill"),
    )
    .unwrap();
    assert_eq!(strict.verify(&good).unwrap().get(), 3);
}

#[test]
fn a_jwks_file_with_a_key_it_cannot_use_is_refused_whole() {
    let ed = r#"{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"a"}"#;
    assert_eq!(
        parse_jwks(&format!(r#"{{"keys":[{ed}]}}"#)).unwrap().len(),
        1
    );
    for (doc, why) in [
        (r#"{"keys":[]}"#.to_owned(), "no keys"),
        (format!(r#"{{"keys":[{ed},{ed}]}}"#), "two keys"),
        (
            r#"{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"s"}]}"#.to_owned(),
            "shared secret",
        ),
        (
            ed.replace(r#""kid":"a""#, r#""kid":"a","alg":"RS256""#)
                .pipe(|k| format!(r#"{{"keys":[{k}]}}"#)),
            "declares alg",
        ),
        (
            ed.replace(r#","kid":"a""#, "")
                .pipe(|k| format!(r#"{{"keys":[{k}]}}"#)),
            "no kid",
        ),
    ] {
        let err = format!("{:#}", parse_jwks(&doc).err().expect(why));
        assert!(err.contains(why), "{why}: {err}");
    }
}

trait Pipe: Sized {
    fn pipe<T>(self, f: impl FnOnce(Self) -> T) -> T {
        f(self)
    }
}
impl Pipe for String {}
