//! Buyer identity end to end: every way a token can be wrong is refused with `401` and
//! reserves nothing; good tokens of every kind buy; a body or query naming another user is
//! refused; a ticket answers its owner only; `GET /v1/seckill/{p}/order` finds the caller's
//! ticket; a rotated JWKS file is picked up without a restart; the per-address limit comes
//! before the token; too many wrong admin tokens from an address lock it out of `/admin`; and
//! no mangled token is ever accepted (a property test).
//!
//! The keys are the test keys of `testdata/jwt` (see its README).

use crate::helpers::*;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use reqwest::StatusCode;
use seckill_shared::{ProductId, Settings, Ticket};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/jwt");
const ISSUER: &str = "https://accounts.shop.test";
const AUDIENCE: &str = "seckill";

fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

/// The claims of a good token for `user`, for a gateway that checks [`ISSUER`] and
/// [`AUDIENCE`].
fn claims(user: u64) -> Value {
    json!({
        "sub": user.to_string(),
        "exp": now() + 600,
        "iat": now(),
        "iss": ISSUER,
        "aud": AUDIENCE,
    })
}

/// `claims` with `changes` applied: a `null` removes a claim.
fn with(mut claims: Value, changes: Value) -> Value {
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

fn read(file: &str) -> Vec<u8> {
    std::fs::read(Path::new(TESTDATA).join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn sign(alg: Algorithm, kid: Option<&str>, key: &EncodingKey, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    jsonwebtoken::encode(&header, claims, key).expect("signing a test token")
}

/// An HS256 token signed with `secret`.
fn hs256(secret: &[u8], kid: Option<&str>, claims: &Value) -> String {
    sign(
        Algorithm::HS256,
        kid,
        &EncodingKey::from_secret(secret).unwrap(),
        claims,
    )
}

/// A token signed with the private key of `testdata/jwt/<key>.pem` (`ed-*`: EdDSA, `es-*`:
/// ES256, `rs-*`: RS256), naming `kid`.
fn signed_by(key: &str, kid: Option<&str>, claims: &Value) -> String {
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
fn good(key: &str, claims: &Value) -> String {
    signed_by(key, Some(key), claims)
}

/// `{"alg":"none"}`, the claims, and an empty signature, built by hand (no library signs
/// that).
fn unsigned(header: Value, claims: &Value) -> String {
    format!(
        "{}.{}.",
        B64.encode(header.to_string()),
        B64.encode(claims.to_string())
    )
}

/// `token` with its payload replaced by `claims`: the signature is the original one.
fn swap_payload(token: &str, claims: &Value) -> String {
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
struct JwksFile(PathBuf);

impl JwksFile {
    fn copy_of(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "seckill-e2e-jwks-{:016x}.json",
            rand::random::<u64>()
        ));
        std::fs::write(&path, read(name)).unwrap();
        Self(path)
    }

    fn path(&self) -> String {
        self.0.to_str().unwrap().to_owned()
    }

    /// Writes another file of `testdata/jwt` over this one, in place.
    fn overwrite_with(&self, name: &str) {
        std::fs::write(&self.0, read(name)).unwrap();
    }
}

impl Drop for JwksFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A gateway that takes HS256 tokens (the suite's secret) and the keys of `jwks`, and checks
/// the issuer and the audience when `strict`.
async fn gateway(env: &TestEnv, jwks: &JwksFile, strict: bool) -> TestGateway {
    let path = jwks.path();
    env.gateway_with(move |s: &mut Settings| {
        s.auth_jwks_file = path;
        if strict {
            s.auth_issuer = ISSUER.into();
            s.auth_audience = AUDIENCE.into();
        }
    })
    .await
}

/// One answer: status, headers, JSON body (`null` if none).
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Value,
}

/// A request to a buyer endpoint with `authorization` as the whole header value (`None`: no
/// header). `body` makes it a `POST` with that JSON body, else a `GET`.
async fn call(
    gw: &TestGateway,
    path: &str,
    authorization: Option<&str>,
    body: Option<Value>,
) -> Answer {
    let url = format!("{}{path}", gw.base);
    let mut req = match &body {
        Some(b) => gw.http.post(url).json(b),
        None => gw.http.get(url),
    };
    if let Some(a) = authorization {
        req = req.header(AUTHORIZATION, a);
    }
    let res = req.send().await.expect("the gateway answers");
    let status = res.status();
    let headers = res.headers().clone();
    let body = res.json().await.unwrap_or(Value::Null);
    Answer {
        status,
        headers,
        body,
    }
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

async fn buy_as(gw: &TestGateway, product: ProductId, token: &str, body: Value) -> Answer {
    call(
        gw,
        &format!("/v1/seckill/{product}"),
        Some(&bearer(token)),
        Some(body),
    )
    .await
}

async fn my_order(gw: &TestGateway, product: ProductId, token: &str) -> Answer {
    call(
        gw,
        &format!("/v1/seckill/{product}/order"),
        Some(&bearer(token)),
        None,
    )
    .await
}

async fn poll_as(gw: &TestGateway, ticket: &str, token: &str) -> Answer {
    call(
        gw,
        &format!("/v1/orders/{ticket}"),
        Some(&bearer(token)),
        None,
    )
    .await
}

/// A `401` as RFC 6750 has it, whose message says what is wrong without repeating the
/// credentials it was sent.
fn assert_unauthenticated(what: &str, a: &Answer, authorization: Option<&str>) {
    assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{what}: {}", a.body);
    assert_eq!(
        a.headers
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some(r#"Bearer error="invalid_token""#),
        "{what}"
    );
    assert_eq!(a.body["error"], "unauthenticated", "{what}: {}", a.body);
    let message = a.body["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: no message: {}", a.body));
    assert!(!message.is_empty(), "{what}");
    if let Some(sent) = authorization {
        // Neither the token nor any piece of it that could identify it.
        for piece in sent.split([' ', '.']).filter(|p| p.len() >= 8) {
            assert!(
                !message.contains(piece),
                "{what}: the message repeats the credentials: {message}"
            );
        }
    }
}

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

#[tokio::test]
async fn good_tokens_of_every_kind_buy() {
    let env = TestEnv::new().await;
    let jwks = JwksFile::copy_of("jwks.json");
    let gw = gateway(&env, &jwks, true).await;
    let product = env.product(&gw, 20).await;

    let hs = |user: u64| hs256(JWT_SECRET.as_bytes(), None, &claims(user));
    let cases: Vec<(&str, u64, String)> = vec![
        ("HS256", 1, hs(1)),
        (
            "HS256 from `gateway token`'s minter",
            2,
            seckill_gateway::auth::mint_hs256(
                JWT_SECRET,
                seckill_shared::UserId::new(2).unwrap(),
                60,
                Some(ISSUER),
                Some(AUDIENCE),
            )
            .unwrap(),
        ),
        ("EdDSA, ed-1", 3, good("ed-1", &claims(3))),
        ("ES256, es-1", 4, good("es-1", &claims(4))),
        ("RS256, rs-1", 5, good("rs-1", &claims(5))),
        (
            "an aud list that has ours (RFC 7519 §4.1.3)",
            6,
            good(
                "ed-1",
                &with(claims(6), json!({"aud": ["another", AUDIENCE]})),
            ),
        ),
        (
            "expired 10 s ago, within the 30 s leeway",
            7,
            good("es-1", &with(claims(7), json!({"exp": now() - 10}))),
        ),
        (
            "nbf 10 s ahead, within the leeway",
            8,
            good("rs-1", &with(claims(8), json!({"nbf": now() + 10}))),
        ),
        (
            "a claim the gateway does not know",
            9,
            hs256(
                JWT_SECRET.as_bytes(),
                None,
                &with(claims(9), json!({"scope": "buy", "jti": "x"})),
            ),
        ),
    ];
    for (what, user, token) in &cases {
        let a = buy_as(&gw, product, token, json!({})).await;
        assert_eq!(a.status, StatusCode::ACCEPTED, "{what}: {}", a.body);
        assert_eq!(a.body["user_id"], *user, "{what}: {}", a.body);
        let ticket = a.body["ticket"].as_str().unwrap();
        // The same token reads the ticket, and finds it as the buyer's.
        let polled = poll_as(&gw, ticket, token).await;
        assert_eq!(polled.status, StatusCode::OK, "{what}: {}", polled.body);
        assert_eq!(polled.body["ticket"], ticket, "{what}");
        let mine = my_order(&gw, product, token).await;
        assert_eq!(mine.status, StatusCode::OK, "{what}: {}", mine.body);
        assert_eq!(mine.body["ticket"], ticket, "{what}");
    }
    assert_eq!(env.redis_stock(product).await, 20 - cases.len() as i64);
}

#[tokio::test]
async fn a_user_id_that_is_not_the_tokens_is_refused() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 5).await;
    let path = format!("/v1/seckill/{product}");

    let a = buy_as(&gw, product, &token(7), json!({"user_id": 8})).await;
    assert_eq!(
        (a.status, a.body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("user_mismatch")),
        "{}",
        a.body
    );
    // The same for the look-up of one's order.
    let a = call(
        &gw,
        &format!("{path}/order?user_id=8"),
        Some(&bearer(&token(7))),
        None,
    )
    .await;
    assert_eq!(
        (a.status, a.body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("user_mismatch")),
        "{}",
        a.body
    );
    // Nothing was reserved, for either user.
    assert_eq!(env.redis_stock(product).await, 5);
    for user in [7, 8] {
        let a = my_order(&gw, product, &token(user)).await;
        assert_eq!(
            (a.status, a.body["error"].as_str()),
            (StatusCode::NOT_FOUND, Some("no_order")),
            "user {user}: {}",
            a.body
        );
    }

    // The token's own user: bought.
    let a = buy_as(&gw, product, &token(7), json!({"user_id": 7})).await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.body);
    assert_eq!(a.body["user_id"], 7);
    assert_eq!(env.redis_stock(product).await, 4);
    let mine = call(
        &gw,
        &format!("{path}/order?user_id=7"),
        Some(&bearer(&token(7))),
        None,
    )
    .await;
    assert_eq!(mine.status, StatusCode::OK, "{}", mine.body);
    assert_eq!(mine.body["ticket"], a.body["ticket"]);
}

#[tokio::test]
async fn a_ticket_answers_its_owner_only() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let _worker = env.worker().await;
    let product = env.product(&gw, 5).await;
    let (alice, bob) = (1, 2);
    let (status, body) = gw.buy(product, alice).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let ticket = ticket_of(&body);
    let path = format!("/v1/orders/{ticket}");
    let nowhere = format!("/v1/orders/{}", Ticket::generate(product));

    // From Redis, then from MySQL once the Redis copy is gone.
    for copy in ["Redis", "MySQL"] {
        let (status, body) = gw.get_as(&path, Some(alice)).await;
        assert_eq!(status, StatusCode::OK, "{copy}: {body}");
        assert_eq!(body["ticket"], ticket.as_str(), "{copy}");
        assert_eq!(body["user_id"], alice, "{copy}");
        let theirs = gw.get_as(&path, Some(bob)).await;
        let none = gw.get_as(&nowhere, Some(bob)).await;
        assert_eq!(theirs.0, StatusCode::NOT_FOUND, "{copy}: {}", theirs.1);
        assert_eq!(theirs.1["error"], "unknown_ticket", "{copy}");
        assert_eq!(
            theirs, none,
            "{copy}: another's ticket looks like no ticket at all"
        );
        if copy == "Redis" {
            let settled = gw.settled(ticket.as_str(), Duration::from_secs(30)).await;
            assert_eq!(settled["status"], "confirmed", "{settled}");
            let mut conn = env.store.connection();
            let _: () = redis::cmd("DEL")
                .arg(env.store.keys(product).ticket(&ticket))
                .query_async(&mut conn)
                .await
                .unwrap();
        }
    }
    let (status, body) = gw
        .get_as(&format!("/v1/seckill/{product}/order"), Some(bob))
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::NOT_FOUND, Some("no_order")),
        "{body}"
    );
}

/// A buyer whose `202` was lost asks for their ticket: found whatever the local sold-out marker
/// says, then from MySQL once Redis has forgotten it; a failed ticket too. Someone who never
/// bought has none.
#[tokio::test]
async fn my_order_finds_the_callers_ticket_whatever_the_marker_says() {
    let env = TestEnv::new().await;
    let gw = env.gateway_with(|s| s.sold_out_ttl_ms = 60_000).await;
    gw.wait_for_zookeeper().await;
    let product = env.product(&gw, 1).await;
    let my = |user: u64| {
        let gw = &gw;
        async move {
            gw.get_as(&format!("/v1/seckill/{product}/order"), Some(user))
                .await
        }
    };

    let (status, first) = gw.buy(product, 1).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{first}");
    assert_eq!(gw.buy(product, 2).await.0, StatusCode::CONFLICT);
    assert_eq!(gw.metric("seckill_gateway_sold_out_markers").await, 1.0);
    // While the marker is set, a buy, even the buyer's own again, is answered 409 from it.
    let (status, again) = gw.buy(product, 1).await;
    assert_eq!(status, StatusCode::CONFLICT, "{again}");
    assert!(
        gw.metric("seckill_gateway_sold_out_marker_hits_total")
            .await
            >= 1.0
    );
    // The marker answers before the token is looked at: a sold-out flood costs no
    // verification, and a 409 reserves nothing.
    let res = gw
        .http
        .post(format!("{}/v1/seckill/{product}", gw.base))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CONFLICT);

    let (status, mine) = my(1).await;
    assert_eq!(status, StatusCode::OK, "{mine}");
    assert_eq!(mine["ticket"], first["ticket"], "{mine}");
    assert_eq!(mine["user_id"], 1);
    for user in [2, 3] {
        let (status, body) = my(user).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (StatusCode::NOT_FOUND, Some("no_order")),
            "user {user}: {body}"
        );
    }

    // Settled, then forgotten by Redis: MySQL has the order.
    let _worker = env.worker_with(|s| s.chaos_fail_users = "4".into()).await;
    let ticket = ticket_of(&first);
    let settled = gw.settled(ticket.as_str(), Duration::from_secs(30)).await;
    assert_eq!(settled["status"], "confirmed", "{settled}");
    let keys = env.store.keys(product);
    let mut conn = env.store.connection();
    let _: () = redis::cmd("DEL")
        .arg(keys.ticket(&ticket))
        .arg(keys.buyers())
        .query_async(&mut conn)
        .await
        .unwrap();
    let (status, mine) = my(1).await;
    assert_eq!(status, StatusCode::OK, "{mine}");
    assert_eq!(
        (&mine["ticket"], &mine["status"], &mine["order_id"]),
        (&first["ticket"], &settled["status"], &settled["order_id"]),
        "{mine}"
    );

    // A failed ticket is found too, once its unit has gone back.
    let other = env.product(&gw, 5).await;
    let (status, body) = gw.buy(other, 4).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let failed = gw
        .settled(body["ticket"].as_str().unwrap(), Duration::from_secs(30))
        .await;
    assert_eq!(failed["status"], "failed", "{failed}");
    let (status, mine) = gw
        .get_as(&format!("/v1/seckill/{other}/order"), Some(4))
        .await;
    assert_eq!(status, StatusCode::OK, "{mine}");
    assert_eq!(
        (&mine["ticket"], &mine["status"], &mine["reason"]),
        (&body["ticket"], &failed["status"], &failed["reason"]),
        "{mine}"
    );
}

#[tokio::test]
async fn a_rotated_jwks_file_is_picked_up_without_a_restart() {
    let env = TestEnv::new().await;
    let jwks = JwksFile::copy_of("jwks.json");
    let gw = gateway(&env, &jwks, false).await;
    let product = env.product(&gw, 10).await;
    let plain = |user: u64| json!({"sub": user.to_string(), "exp": now() + 600});
    let ed2 = good("ed-2", &plain(11));
    let ed1 = good("ed-1", &plain(12));

    let a = buy_as(&gw, product, &ed2, json!({})).await;
    assert_unauthenticated("ed-2 before the rotation", &a, Some(&ed2));
    let a = my_order(&gw, product, &ed1).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND, "ed-1 before: {}", a.body);

    jwks.overwrite_with("jwks-rotated.json");
    let bought = eventually(
        "the gateway to take ed-2's token",
        Duration::from_secs(10),
        || async {
            let a = buy_as(&gw, product, &ed2, json!({})).await;
            match a.status {
                StatusCode::UNAUTHORIZED => None,
                StatusCode::ACCEPTED => Some(a.body),
                other => panic!("ed-2 after the rotation: {other} {}", a.body),
            }
        },
    )
    .await;
    assert_eq!(bought["user_id"], 11);
    // ed-1 is gone; the keys the file kept still work.
    let a = buy_as(&gw, product, &ed1, json!({})).await;
    assert_unauthenticated("ed-1 after the rotation", &a, Some(&ed1));
    let a = buy_as(&gw, product, &good("es-1", &plain(13)), json!({})).await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "es-1: {}", a.body);
    assert_eq!(env.redis_stock(product).await, 8);
}

#[tokio::test]
async fn the_per_address_limit_answers_429_before_the_token_is_looked_at() {
    let env = TestEnv::new().await;
    let per_sec = 3;
    let gw = env
        .gateway_with(|s| s.rate_limit_per_address_per_sec = per_sec)
        .await;
    let product = env.product(&gw, 5).await;
    let path = format!("/v1/seckill/{product}");

    // A burst of garbage, each request claiming to come from elsewhere: no proxy is trusted,
    // so X-Forwarded-For changes nothing.
    let started = Instant::now();
    let mut answers = Vec::new();
    for i in 0..20 {
        let res = gw
            .http
            .post(format!("{}{path}", gw.base))
            .bearer_auth(format!("garbage-{i}"))
            .header("x-forwarded-for", format!("203.0.113.{i}"))
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        let status = res.status();
        let retry_after = res
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_owned());
        let body: Value = res.json().await.unwrap();
        answers.push((status, retry_after, body));
    }
    let elapsed = started.elapsed();
    let statuses: Vec<u16> = answers.iter().map(|a| a.0.as_u16()).collect();
    let unauthenticated = statuses.iter().filter(|s| **s == 401).count();
    let limited = statuses.iter().filter(|s| **s == 429).count();
    assert_eq!(
        unauthenticated + limited,
        answers.len(),
        "only 401 and 429: {statuses:?}"
    );
    // The bucket holds `per_sec` requests and refills at `per_sec` a second.
    assert!(
        statuses[..per_sec as usize].iter().all(|s| *s == 401),
        "{statuses:?}"
    );
    let refilled = (elapsed.as_secs_f64() * per_sec as f64).ceil() as usize;
    assert!(
        unauthenticated <= per_sec as usize + refilled,
        "{unauthenticated} let through in {elapsed:?}: {statuses:?}"
    );
    assert!(limited >= 1, "{statuses:?}");
    for (status, retry_after, body) in &answers {
        if *status == StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(body["error"], "rate_limited", "{body}");
            let secs: u64 = retry_after
                .as_deref()
                .expect("Retry-After")
                .parse()
                .unwrap();
            assert!(secs >= 1, "Retry-After {secs}");
        } else {
            assert_eq!(body["error"], "unauthenticated", "{body}");
        }
    }
    assert_eq!(env.redis_stock(product).await, 5);

    // The limit passes: a good token buys again.
    let body = eventually(
        "the address to be under its limit",
        Duration::from_secs(10),
        || async {
            let a = buy_as(&gw, product, &token(1), json!({})).await;
            match a.status {
                StatusCode::TOO_MANY_REQUESTS => None,
                StatusCode::ACCEPTED => Some(a.body),
                other => panic!("{other} {}", a.body),
            }
        },
    )
    .await;
    assert_eq!(body["user_id"], 1);
}

/// `SECKILL_ADMIN_AUTH_FAILURES_PER_MIN` (the default, 10): an address that sent that many
/// wrong admin tokens gets `429` with `Retry-After` on its next one, and then on every admin
/// request, the right token included, until one more failure is allowed (6 s later). Other
/// addresses, and the address's buys, are not affected; a missing token counts for nothing.
#[tokio::test]
async fn wrong_admin_tokens_from_an_address_lock_it_out_of_admin_even_with_the_right_token() {
    let env = TestEnv::new().await;
    let per_min = Settings::default().admin_auth_failures_per_min;
    assert_eq!(per_min, 10);
    // The client is the address 127.0.0.1 forwards (a trusted proxy), so that a test from
    // one host has several addresses.
    let gw = env
        .gateway_with(|s| {
            s.admin_auth_failures_per_min = per_min;
            s.trusted_proxies = "127.0.0.1".into();
        })
        .await;
    let product = env.product(&gw, 5).await;
    let path = format!("/admin/products/{product}");
    let (guesser, other) = ("203.0.113.7", "203.0.113.8");
    let admin = |token: Option<String>, from: &'static str| {
        let mut req = gw
            .http
            .get(format!("{}{path}", gw.base))
            .header("x-forwarded-for", from);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        async move {
            let res = req.send().await.unwrap();
            let status = res.status();
            let retry_after = res
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().parse::<u64>().unwrap());
            let body: Value = res.json().await.unwrap();
            (status, retry_after, body)
        }
    };

    // No token is no guess.
    for _ in 0..2 * per_min {
        assert_eq!(admin(None, guesser).await.0, StatusCode::UNAUTHORIZED);
    }
    for i in 0..per_min {
        let (status, _, body) = admin(Some(format!("wrong-token-{i}")), guesser).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "wrong token {i}: {body}");
    }
    let (status, retry_after, body) = admin(Some("wrong-token-last".into()), guesser).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["error"], "rate_limited", "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("wrong admin tokens"),
        "{body}"
    );
    let secs = retry_after.expect("Retry-After");
    assert!((1..=6).contains(&secs), "Retry-After {secs}");

    // Now the right token is refused too, on every admin route, while the block lasts.
    let (status, retry_after, body) = admin(Some(ADMIN_TOKEN.into()), guesser).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["error"], "rate_limited", "{body}");
    assert!(retry_after.is_some_and(|s| s >= 1), "{body}");
    let res = gw
        .http
        .post(format!("{}/admin/products", gw.base))
        .header("x-forwarded-for", guesser)
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"name": "x", "stock": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        admin(None, guesser).await.0,
        StatusCode::TOO_MANY_REQUESTS,
        "blocked before the token is looked at"
    );

    // Another address is not; nor are the guesser's buys.
    let (status, _, body) = admin(Some(ADMIN_TOKEN.into()), other).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let res = gw
        .http
        .post(format!("{}/v1/seckill/{product}", gw.base))
        .header("x-forwarded-for", guesser)
        .bearer_auth(token(1))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::ACCEPTED);

    // The block passes: the right token works again.
    let body = eventually(
        "the guesser's block to end",
        Duration::from_secs(10),
        || async {
            let (status, _, body) = admin(Some(ADMIN_TOKEN.into()), guesser).await;
            match status {
                StatusCode::TOO_MANY_REQUESTS => None,
                StatusCode::OK => Some(body),
                other => panic!("{other} {body}"),
            }
        },
    )
    .await;
    assert_eq!(body["id"], product.as_i64());
}

/// The bytes a token may be made of in a header value (no CR, LF or NUL, which the client
/// cannot send), or a good token changed in a few places, never with whitespace at its ends
/// (the gateway trims it, which would leave the good token).
#[derive(Debug, Clone)]
enum Mangled {
    Random(Vec<u8>),
    Mutated {
        base: usize,
        edits: Vec<(prop::sample::Index, u8, u8)>,
    },
}

fn header_byte() -> impl Strategy<Value = u8> {
    prop_oneof![8 => 0x20u8..=0x7e, 1 => 0x80u8..=0xff, 1 => Just(b'\t')]
}

/// Not whitespace: the bytes an edit puts in.
fn edit_byte() -> impl Strategy<Value = u8> {
    prop_oneof![8 => 0x21u8..=0x7e, 1 => 0x80u8..=0xff]
}

fn mangled(bases: usize) -> impl Strategy<Value = Mangled> {
    prop_oneof![
        prop::collection::vec(header_byte(), 0..400).prop_map(Mangled::Random),
        (
            0..bases,
            prop::collection::vec((any::<prop::sample::Index>(), edit_byte(), 0..3u8), 1..4)
        )
            .prop_map(|(base, edits)| Mangled::Mutated { base, edits }),
    ]
}

impl Mangled {
    fn bytes(&self, bases: &[String]) -> Vec<u8> {
        match self {
            Mangled::Random(b) => b.clone(),
            Mangled::Mutated { base, edits } => {
                let mut t = bases[*base].clone().into_bytes();
                for (at, byte, how) in edits {
                    match how {
                        // Flip: another byte in its place.
                        0 if !t.is_empty() => {
                            let i = at.index(t.len());
                            t[i] = match (t[i] == *byte, *byte == b'A') {
                                (false, _) => *byte,
                                (true, false) => b'A',
                                (true, true) => b'B',
                            };
                        }
                        // Delete.
                        1 if t.len() > 1 => {
                            t.remove(at.index(t.len()));
                        }
                        // Insert.
                        _ => t.insert(at.index(t.len() + 1), *byte),
                    }
                }
                t
            }
        }
    }
}

#[test]
fn mangled_tokens_are_never_accepted() {
    // proptest's strategies and shrinking are deep: give them room in debug builds.
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(mangled_tokens)
        .unwrap()
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e));
}

fn mangled_tokens() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let jwks = JwksFile::copy_of("jwks.json");
    let (env, gw, product) = rt.block_on(async {
        let env = TestEnv::new().await;
        let gw = gateway(&env, &jwks, false).await;
        let product = env.product(&gw, 5).await;
        (env, gw, product)
    });
    // A good token of each kind, for users 21 to 24.
    let plain = |user: u64| json!({"sub": user.to_string(), "exp": now() + 600});
    let bases = vec![
        token(21),
        good("ed-1", &plain(22)),
        good("es-1", &plain(23)),
        good("rs-1", &plain(24)),
    ];
    rt.block_on(async {
        for (user, t) in (21..).zip(&bases) {
            let a = my_order(&gw, product, t).await;
            assert_eq!(
                (a.status, a.body["error"].as_str()),
                (StatusCode::NOT_FOUND, Some("no_order")),
                "the unmangled token of user {user} is good: {}",
                a.body
            );
        }
    });

    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        max_shrink_time: 30_000,
        ..Config::default()
    });
    let started = Instant::now();
    let endpoints = [
        format!("/v1/seckill/{product}"),
        format!("/v1/seckill/{product}/order"),
        format!("/v1/orders/{}", Ticket::generate(product)),
    ];
    let result = runner.run(
        &(mangled(bases.len()), 0..endpoints.len()),
        |(m, endpoint)| {
            let token = m.bytes(&bases);
            prop_assume!(!bases.iter().any(|b| b.as_bytes() == token.as_slice()));
            let mut value = b"Bearer ".to_vec();
            value.extend_from_slice(&token);
            let value = HeaderValue::from_bytes(&value)
                .map_err(|e| TestCaseError::fail(format!("not a header value: {e}")))?;
            let path = &endpoints[endpoint];
            rt.block_on(async {
                let url = format!("{}{path}", gw.base);
                let req = if endpoint == 0 {
                    gw.http.post(url).json(&json!({}))
                } else {
                    gw.http.get(url)
                };
                let res = req
                    .header(AUTHORIZATION, value)
                    .send()
                    .await
                    .map_err(|e| TestCaseError::fail(format!("no answer: {e:#}")))?;
                let status = res.status();
                let challenge = res.headers().get("www-authenticate").cloned();
                let body: Value = res.json().await.unwrap_or(Value::Null);
                let what = format!(
                    "{path} with {:?} → {status}: {body}",
                    String::from_utf8_lossy(&token)
                );
                prop_assert!(!status.is_success(), "accepted: {}", what);
                prop_assert!(!status.is_server_error(), "{}", what);
                prop_assert_eq!(status, StatusCode::UNAUTHORIZED, "{}", what);
                prop_assert_eq!(body["error"].as_str(), Some("unauthenticated"), "{}", what);
                prop_assert!(challenge.is_some(), "no WWW-Authenticate: {}", what);
                if token.len() >= 16 {
                    let message = body["message"].as_str().unwrap_or_default();
                    prop_assert!(
                        !message.contains(&*String::from_utf8_lossy(&token)),
                        "{}",
                        what
                    );
                }
                Ok::<(), TestCaseError>(())
            })
        },
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    eprintln!("{cases} mangled tokens refused in {:?}", started.elapsed());

    rt.block_on(async {
        assert_eq!(env.redis_stock(product).await, 5, "nothing reserved");
        assert_eq!(env.store.counts(product).await.unwrap().buyers, 0);
    });
}
