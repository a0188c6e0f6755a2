//! Every way a token can be wrong is refused with `401` and reserves nothing.

use crate::auth::calls::{
    assert_unauthenticated, bearer, buy_as, call, gateway, my_order, poll_as,
};
use crate::auth::tokens::{
    claims, good, hs256, now, read, signed_by, swap_payload, unsigned, with, JwksFile,
};
use crate::helpers::*;
use reqwest::StatusCode;
use serde_json::json;

/// Every way a token can be wrong, for `victim`: (what, the Authorization header).
fn bad_tokens(victim: u64) -> Vec<(String, Option<String>)> {
    let c = claims(victim);
    let rsa_public = read("rs-1.pub.pem");
    let ed_public = read("ed-1.pub.pem");
    let other = victim + 1000;
    let mut cases: Vec<(String, Option<String>)> = vec![
        ("no Authorization header".into(), None),
        (
            "another scheme".into(),
            Some("Basic dXNlcjpwYXNzd29yZA==".into()),
        ),
        ("Bearer and no token".into(), Some("Bearer".into())),
        (
            "not a JWT".into(),
            Some("Bearer not-a-json-web-token".into()),
        ),
        ("empty segments".into(), Some("Bearer ..".into())),
        (
            "segments that are not base64 JSON".into(),
            Some("Bearer aaaaaaaa.bbbbbbbb.cccccccc".into()),
        ),
        (
            "the admin token".into(),
            Some(format!("Bearer {ADMIN_TOKEN}")),
        ),
    ];
    let mut jwt = |what: &str, token: String| cases.push((what.into(), Some(bearer(&token))));

    let whole = good("ed-1", &c);
    jwt("a good token cut short", whole[..whole.len() - 6].into());
    jwt(
        "a good token without its signature",
        whole[..=whole.rfind('.').unwrap()].into(),
    );
    jwt(
        "alg none",
        unsigned(json!({"alg": "none", "typ": "JWT"}), &c),
    );
    jwt(
        "alg none naming a key",
        unsigned(json!({"alg": "none", "typ": "JWT", "kid": "ed-1"}), &c),
    );
    jwt(
        "alg none with a good token's signature",
        format!(
            "{}{}",
            unsigned(json!({"alg": "none", "typ": "JWT"}), &c),
            whole.rsplit('.').next().unwrap()
        ),
    );
    jwt(
        "HS256 signed with another secret",
        hs256(b"another-hs256-secret-of-32-bytes-or-more", None, &c),
    );
    jwt(
        "HS256 keyed with the RSA public key, kid rs-1",
        hs256(&rsa_public, Some("rs-1"), &c),
    );
    jwt(
        "HS256 keyed with the RSA public key, no kid",
        hs256(&rsa_public, None, &c),
    );
    jwt(
        "HS256 keyed with the Ed25519 public key, kid ed-1",
        hs256(&ed_public, Some("ed-1"), &c),
    );
    jwt(
        "expired beyond the leeway",
        hs256(
            JWT_SECRET.as_bytes(),
            None,
            &with(c.clone(), json!({"exp": now() - 120, "iat": now() - 720})),
        ),
    );
    jwt(
        "not valid yet beyond the leeway",
        good("es-1", &with(c.clone(), json!({"nbf": now() + 120}))),
    );
    jwt(
        "no exp",
        good("rs-1", &with(c.clone(), json!({"exp": null}))),
    );
    jwt(
        "exp not a number",
        good("ed-1", &with(c.clone(), json!({"exp": "tomorrow"}))),
    );
    jwt(
        "wrong iss",
        good(
            "ed-1",
            &with(c.clone(), json!({"iss": "https://evil.test"})),
        ),
    );
    jwt(
        "no iss",
        good("ed-1", &with(c.clone(), json!({"iss": null}))),
    );
    jwt(
        "wrong aud",
        hs256(
            JWT_SECRET.as_bytes(),
            None,
            &with(c.clone(), json!({"aud": "another-service"})),
        ),
    );
    jwt(
        "aud list without ours",
        good(
            "es-1",
            &with(c.clone(), json!({"aud": ["another", "and-another"]})),
        ),
    );
    jwt(
        "no aud",
        good("rs-1", &with(c.clone(), json!({"aud": null}))),
    );
    jwt(
        "no sub",
        good("ed-1", &with(c.clone(), json!({"sub": null}))),
    );
    jwt(
        "sub 0",
        hs256(
            JWT_SECRET.as_bytes(),
            None,
            &with(c.clone(), json!({"sub": "0"})),
        ),
    );
    jwt(
        "sub not a number",
        good("ed-1", &with(c.clone(), json!({"sub": "alice"}))),
    );
    jwt(
        "sub a JSON number",
        good("ed-1", &with(c.clone(), json!({"sub": victim}))),
    );
    jwt("unknown kid (ed-2 is not in the file)", good("ed-2", &c));
    jwt(
        "unknown kid, signed by a known key",
        signed_by("ed-1", Some("nobody"), &c),
    );
    jwt("EdDSA with no kid", signed_by("ed-1", None, &c));
    jwt("ES256 with no kid", signed_by("es-1", None, &c));
    jwt(
        "an EdDSA token naming the ES256 key",
        signed_by("ed-1", Some("es-1"), &c),
    );
    jwt(
        "an RS256 token naming the ES256 key",
        signed_by("rs-1", Some("es-1"), &c),
    );
    jwt(
        "the right kid, another private key",
        signed_by("ed-2", Some("ed-1"), &c),
    );
    // A good signature over `other`'s claims, with the payload swapped for the victim's.
    for key in ["ed-1", "es-1", "rs-1"] {
        jwt(
            &format!("{key}: a good signature on a changed payload"),
            swap_payload(&good(key, &claims(other)), &c),
        );
    }
    jwt(
        "HS256: a good signature on a changed payload",
        swap_payload(&hs256(JWT_SECRET.as_bytes(), None, &claims(other)), &c),
    );
    cases
}

#[tokio::test]
async fn every_bad_token_gets_401_and_reserves_nothing() {
    let env = TestEnv::new().await;
    let jwks = JwksFile::copy_of("jwks.json");
    let gw = gateway(&env, &jwks, true).await;
    let product = env.product(&gw, 5).await;

    // Someone's ticket, to poll with the bad tokens.
    let owner = 500;
    let a = buy_as(&gw, product, &good("ed-1", &claims(owner)), json!({})).await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.body);
    let ticket = a.body["ticket"].as_str().unwrap().to_owned();

    let victim = 7;
    let cases = bad_tokens(victim);
    for (what, authorization) in &cases {
        let auth = authorization.as_deref();
        let buy = call(
            &gw,
            &format!("/v1/seckill/{product}"),
            auth,
            Some(json!({ "user_id": victim })),
        )
        .await;
        assert_unauthenticated(&format!("buy, {what}"), &buy, auth);
        let poll = call(&gw, &format!("/v1/orders/{ticket}"), auth, None).await;
        assert_unauthenticated(&format!("poll, {what}"), &poll, auth);
        let mine = call(&gw, &format!("/v1/seckill/{product}/order"), auth, None).await;
        assert_unauthenticated(&format!("my order, {what}"), &mine, auth);
    }
    eprintln!("{} bad tokens refused", cases.len());

    // Nothing was reserved: one unit is gone, the owner's.
    assert_eq!(env.redis_stock(product).await, 4);
    assert_eq!(env.store.counts(product).await.unwrap().buyers, 1);
    for user in [victim, victim + 1000] {
        let a = my_order(&gw, product, &good("es-1", &claims(user))).await;
        assert_eq!(
            (a.status, a.body["error"].as_str()),
            (StatusCode::NOT_FOUND, Some("no_order")),
            "user {user}: {}",
            a.body
        );
    }
    let a = poll_as(&gw, &ticket, &good("rs-1", &claims(owner))).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(a.body["user_id"], owner);
}
