//! `GET /openapi.json` against what the gateway really does: every response the tests see is
//! checked against the served document (status, required headers and their values, body schema,
//! with the `jsonschema` crate), every status the document lists is produced by some request,
//! and the constraints it states are the ones the server enforces.

use crate::helpers::token as buyer;
use crate::helpers::*;
use jsonschema::{Draft, Registry, Validator};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

/// The base URI the document is registered under, for `$ref`s into it.
const DOC_URI: &str = "urn:seckill:openapi";

/// The OpenAPI document a gateway serves, with a JSON Schema (2020-12, formats asserted)
/// validator for every schema in it that an answer can be checked against.
pub struct Spec {
    doc: Value,
    /// JSON pointer of a schema in the document → its validator.
    validators: HashMap<String, Validator>,
}

/// (method, path template, status)
pub type Key = (String, String, u16);

/// A JSON pointer as a URI fragment: `{` and `}` (of path templates) percent-encoded.
fn fragment(pointer: &str) -> String {
    pointer
        .replace('%', "%25")
        .replace('{', "%7B")
        .replace('}', "%7D")
}

/// `a/b~c` → `a~1b~0c`, one JSON-pointer token.
fn token(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

impl Spec {
    /// The document the gateway serves.
    pub async fn fetch(gw: &TestGateway) -> Self {
        let res = gw
            .http
            .get(format!("{}/openapi.json", gw.base))
            .send()
            .await
            .expect("GET /openapi.json");
        assert_eq!(res.status(), 200);
        Self::new(res.json().await.expect("openapi.json is JSON"))
    }

    /// The document the gateway library builds (the same one it serves).
    pub fn built() -> Self {
        Self::new(
            serde_json::from_str(seckill_gateway::routes::openapi::json())
                .expect("openapi.json is JSON"),
        )
    }

    fn new(doc: Value) -> Self {
        assert_eq!(doc["openapi"], "3.1.0");
        let registry = Registry::new()
            .draft(Draft::Draft202012)
            .add(DOC_URI, doc.clone())
            .expect("the document is a resource")
            .prepare()
            .expect("the document's references resolve");
        // Every schema of a body, a header or a component.
        let mut pointers = Vec::new();
        let mut responses = Vec::new();
        for (path, ops) in doc["paths"].as_object().unwrap() {
            for (method, op) in ops.as_object().unwrap() {
                for status in op["responses"].as_object().unwrap().keys() {
                    responses.push(format!(
                        "/paths/{}/{method}/responses/{status}",
                        token(path)
                    ));
                }
                if op["requestBody"].is_object() {
                    pointers.push(format!(
                        "/paths/{}/{method}/requestBody/content/application~1json/schema",
                        token(path)
                    ));
                }
                for (i, _) in op["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .enumerate()
                {
                    pointers.push(format!(
                        "/paths/{}/{method}/parameters/{i}/schema",
                        token(path)
                    ));
                }
            }
        }
        for status in doc["x-fallback-responses"].as_object().unwrap().keys() {
            responses.push(format!("/x-fallback-responses/{status}"));
        }
        for r in responses {
            let response = doc.pointer(&r).unwrap();
            for media in response["content"]
                .as_object()
                .into_iter()
                .flat_map(|c| c.keys())
            {
                pointers.push(format!("{r}/content/{}/schema", token(media)));
            }
            for name in response["headers"]
                .as_object()
                .into_iter()
                .flat_map(|h| h.keys())
            {
                pointers.push(format!("{r}/headers/{}/schema", token(name)));
            }
        }
        for name in doc["components"]["schemas"].as_object().unwrap().keys() {
            pointers.push(format!("/components/schemas/{}", token(name)));
        }
        let validators = pointers
            .into_iter()
            .map(|p| {
                let v = jsonschema::options()
                    .with_draft(Draft::Draft202012)
                    .should_validate_formats(true)
                    .with_registry(&registry)
                    .build(&json!({"$ref": format!("{DOC_URI}#{}", fragment(&p))}))
                    .unwrap_or_else(|e| panic!("the schema at {p} compiles: {e}"));
                (p, v)
            })
            .collect();
        Self { doc, validators }
    }

    /// Validates `value` against the schema at `pointer` in the document.
    pub fn validate(&self, pointer: &str, value: &Value) -> Result<(), String> {
        let v = self
            .validators
            .get(pointer)
            .unwrap_or_else(|| panic!("no schema at {pointer}"));
        let errors: Vec<String> = v
            .iter_errors(value)
            .map(|e| format!("{} at `{}`", e, e.instance_path()))
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    /// Every documented (method, path, status).
    pub fn documented(&self) -> BTreeSet<Key> {
        let mut out = BTreeSet::new();
        for (path, ops) in self.doc["paths"].as_object().unwrap() {
            for (method, op) in ops.as_object().unwrap() {
                for status in op["responses"].as_object().unwrap().keys() {
                    out.insert((
                        method.to_ascii_uppercase(),
                        path.clone(),
                        status.parse().unwrap(),
                    ));
                }
            }
        }
        out
    }

    /// The documented path that `path` (as sent, without the query) matches, the way actix
    /// matches: same number of segments, `{param}` matches one non-empty segment.
    pub fn template(&self, path: &str) -> Option<String> {
        let segs: Vec<&str> = path.split('/').collect();
        self.doc["paths"]
            .as_object()
            .unwrap()
            .keys()
            .find(|t| {
                let tsegs: Vec<&str> = t.split('/').collect();
                tsegs.len() == segs.len()
                    && tsegs.iter().zip(&segs).all(|(t, s)| {
                        if t.starts_with('{') {
                            !s.is_empty()
                        } else {
                            t == s
                        }
                    })
            })
            .cloned()
    }

    /// Checks one response against the document. Returns the key it covers.
    pub fn check(
        &self,
        method: &str,
        path: &str,
        status: u16,
        headers: &reqwest::header::HeaderMap,
        body: &[u8],
    ) -> Result<Key, String> {
        let what = format!("{method} {path} → {status}");
        let template = self.template(path);
        let op = template
            .as_ref()
            .map(|t| (t, method.to_ascii_lowercase()))
            .filter(|(t, m)| self.doc["paths"][t][m].is_object());
        let at = match (&template, op) {
            (Some(_), Some((t, m))) => format!("/paths/{}/{m}/responses/{status}", token(t)),
            // A path with no such method: 405; no such path: 404.
            (Some(_), None) if status == 405 => "/x-fallback-responses/405".into(),
            (Some(_), None) => {
                return Err(format!("{what}: expected 405 for an undocumented method"))
            }
            (None, _) if status == 404 => "/x-fallback-responses/404".into(),
            (None, _) => return Err(format!("{what}: expected 404 for an unknown path")),
        };
        let response = self
            .doc
            .pointer(&at)
            .ok_or_else(|| format!("{what}: status not documented"))?;
        for (name, h) in response["headers"].as_object().into_iter().flatten() {
            let Some(value) = headers.get(name.as_str()) else {
                if h["required"] == true {
                    return Err(format!("{what}: header {name} is missing"));
                }
                continue;
            };
            let text = value
                .to_str()
                .map_err(|_| format!("{what}: header {name} is not text"))?;
            // A header is text; one documented as a number is checked as the number it spells.
            let value = match h["schema"]["type"].as_str() {
                Some("integer" | "number") => serde_json::from_str(text)
                    .map_err(|_| format!("{what}: header {name}: {text:?} is not a number"))?,
                _ => Value::String(text.to_owned()),
            };
            self.validate(&format!("{at}/headers/{}/schema", token(name)), &value)
                .map_err(|e| format!("{what}: header {name}: {e}"))?;
        }
        if method != "HEAD" {
            let content = response["content"].as_object().expect("content");
            let ctype = headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            let (media, _) = content
                .iter()
                .find(|(m, _)| ctype.starts_with(m.as_str()))
                .ok_or_else(|| format!("{what}: content type {ctype:?} not documented"))?;
            if media == "application/json" {
                let value: Value = serde_json::from_slice(body).map_err(|e| {
                    format!(
                        "{what}: body is not JSON ({e}): {}",
                        String::from_utf8_lossy(body)
                    )
                })?;
                self.validate(&format!("{at}/content/application~1json/schema"), &value)
                    .map_err(|e| format!("{what}: {e}: {value}"))?;
            }
        }
        let template = template.unwrap_or_else(|| "(unmatched)".into());
        Ok((method.to_owned(), template, status))
    }
}

/// Sends requests and checks each answer against the document, remembering what it covered.
struct Recorder {
    spec: Spec,
    http: reqwest::Client,
    seen: Mutex<BTreeSet<Key>>,
}

impl Recorder {
    async fn send(
        &self,
        gw: &TestGateway,
        method: Method,
        path: &str,
        token: Option<&str>,
        content_type: Option<&str>,
        body: Option<String>,
    ) -> (u16, Value) {
        self.send_with(gw, method, path, token, &[], content_type, body)
            .await
    }

    /// [`Self::send`] with extra request headers.
    #[allow(clippy::too_many_arguments)]
    async fn send_with(
        &self,
        gw: &TestGateway,
        method: Method,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, String)],
        content_type: Option<&str>,
        body: Option<String>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", gw.base));
        for (name, value) in headers {
            req = req.header(*name, value);
        }
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(c) = content_type {
            req = req.header("content-type", c);
        }
        if let Some(b) = body {
            req = req.body(b);
        }
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let bytes = res.bytes().await.unwrap();
        let without_query = path.split_once('?').map_or(path, |(p, _)| p);
        let key = self
            .spec
            .check(method.as_str(), without_query, status, &headers, &bytes)
            .unwrap_or_else(|e| panic!("{e}"));
        self.seen.lock().unwrap().insert(key);
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    async fn json(
        &self,
        gw: &TestGateway,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Value,
    ) -> (u16, Value) {
        self.send(
            gw,
            method,
            path,
            token,
            Some("application/json"),
            Some(body.to_string()),
        )
        .await
    }
}

#[tokio::test]
async fn every_documented_status_is_produced_and_every_answer_matches_the_document() {
    let env = TestEnv::new().await;
    // Two buys per user, then 429.
    let gw = env
        .gateway_with(|s| {
            s.rate_limit_burst = 2;
            s.rate_limit_per_user_per_sec = 0.05;
        })
        .await;
    // Sync mode confirms a buy in the request, and this one has a payment provider.
    let (_provider, provider_url) = Provider::start().await;
    let sync = env
        .gateway_with(|s| {
            s.gateway_mode = seckill_shared::GatewayMode::Sync;
            s.payment_provider_url = provider_url.clone();
            s.payment_callback_url = "http://127.0.0.1:1/v1/payments/callback".into();
            s.payment_webhook_secret = WEBHOOK_SECRET.into();
        })
        .await;
    let redis_down = env
        .gateway_with(|s| s.redis_url = "redis://127.0.0.1:1/".into())
        .await;
    let mysql_down = env
        .gateway_with(|s| {
            s.mysql_url = "mysql://seckill:seckill@127.0.0.1:1/nothing".into();
            s.payment_webhook_secret = WEBHOOK_SECRET.into();
        })
        .await;
    // One buyer request per second per client address.
    let limited = env
        .gateway_with(|s| s.rate_limit_per_address_per_sec = 1)
        .await;
    // One wrong admin token per minute per client address.
    let locked = env
        .gateway_with(|s| s.admin_auth_failures_per_min = 1)
        .await;
    gw.wait_for_zookeeper().await;
    let r = Recorder {
        spec: Spec::fetch(&gw).await,
        http: reqwest::Client::builder()
            .pool_idle_timeout(Duration::from_secs(2))
            .build()
            .unwrap(),
        seen: Mutex::default(),
    };
    let t = Some(ADMIN_TOKEN);
    // Buyers' tokens.
    let tokens = [1, 2, 3, 4, 5, 9].map(buyer);
    let [u1, u2, u3, u4, u5, u9] = tokens.each_ref().map(|t| Some(t.as_str()));
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(5000));
    use Method as M;

    // Admin.
    let (s, created) = r
        .json(
            &gw,
            M::POST,
            "/admin/products",
            t,
            json!({"name": "a", "stock": 5}),
        )
        .await;
    assert_eq!(s, 201);
    let p = created["id"].as_u64().unwrap();
    r.json(
        &gw,
        M::POST,
        "/admin/products",
        t,
        json!({"name": "", "stock": 1}),
    )
    .await;
    r.json(
        &gw,
        M::POST,
        "/admin/products",
        None,
        json!({"name": "a", "stock": 1}),
    )
    .await;
    r.json(
        &gw,
        M::POST,
        "/admin/products",
        Some("wrong"),
        json!({"name": "a", "stock": 1}),
    )
    .await;
    r.send(
        &gw,
        M::POST,
        "/admin/products",
        t,
        Some("application/json"),
        Some(big.clone()),
    )
    .await;
    r.send(
        &gw,
        M::POST,
        "/admin/products",
        t,
        Some("text/plain"),
        Some("{}".into()),
    )
    .await;
    for sub in ["", "/preload", "/reconcile"] {
        let m = if sub.is_empty() { M::GET } else { M::POST };
        let good = format!("/admin/products/{p}{sub}");
        r.send(&gw, m.clone(), &good, None, None, None).await;
        r.send(&gw, m.clone(), &good, Some("wrong"), None, None)
            .await;
        r.send(
            &gw,
            m.clone(),
            &format!("/admin/products/abc{sub}"),
            t,
            None,
            None,
        )
        .await;
        r.send(
            &gw,
            m.clone(),
            &format!("/admin/products/424242{sub}"),
            t,
            None,
            None,
        )
        .await;
    }
    assert_eq!(
        r.send(
            &gw,
            M::POST,
            &format!("/admin/products/{p}/preload"),
            t,
            None,
            None
        )
        .await
        .0,
        200
    );
    assert_eq!(
        r.send(&gw, M::GET, &format!("/admin/products/{p}"), t, None, None)
            .await
            .0,
        200
    );

    // Buy.
    let buy = format!("/v1/seckill/{p}");
    let (s, first) = r.json(&gw, M::POST, &buy, u1, json!({"user_id": 1})).await;
    assert_eq!(s, 202, "{first}");
    assert_eq!(r.json(&gw, M::POST, &buy, u1, json!({})).await.0, 200);
    assert_eq!(
        r.json(&gw, M::POST, &buy, u1, json!({"user_id": 1}))
            .await
            .0,
        429
    );
    r.json(&gw, M::POST, "/v1/seckill/abc", u2, json!({"user_id": 2}))
        .await;
    r.json(
        &gw,
        M::POST,
        "/v1/seckill/999999",
        u2,
        json!({"user_id": 2}),
    )
    .await;
    r.send(&gw, M::POST, &buy, u2, Some("application/json"), Some(big))
        .await;
    r.send(
        &gw,
        M::POST,
        &buy,
        u2,
        Some("text/plain"),
        Some("{}".into()),
    )
    .await;
    // No token, a bad one, or a body naming another user.
    let (s, body) = r
        .json(&gw, M::POST, &buy, None, json!({"user_id": 2}))
        .await;
    assert_eq!((s, body["error"].as_str()), (401, Some("unauthenticated")));
    let (s, body) = r
        .json(&gw, M::POST, &buy, Some("not.a.jwt"), json!({"user_id": 2}))
        .await;
    assert_eq!((s, body["error"].as_str()), (401, Some("unauthenticated")));
    let (s, body) = r.json(&gw, M::POST, &buy, u2, json!({"user_id": 3})).await;
    assert_eq!((s, body["error"].as_str()), (403, Some("user_mismatch")));
    r.send(&gw, M::GET, &buy, None, None, None).await; // 405
    r.send(&gw, M::GET, "/nowhere", None, None, None).await; // 404
    let (_, later) = gw
        .admin_post(
            "/admin/products",
            json!({"name": "later", "stock": 1, "starts_at": "2999-01-01T00:00:00Z"}),
        )
        .await;
    let later = later["id"].as_u64().unwrap();
    gw.admin_post(&format!("/admin/products/{later}/preload"), Value::Null)
        .await;
    let (s, body) = r
        .json(
            &gw,
            M::POST,
            &format!("/v1/seckill/{later}"),
            u2,
            json!({"user_id": 2}),
        )
        .await;
    assert_eq!((s, body["error"].as_str()), (403, Some("sale_not_started")));
    // Sync mode: 201, then sold out.
    let (_, one) = gw
        .admin_post("/admin/products", json!({"name": "one", "stock": 1}))
        .await;
    let one = one["id"].as_u64().unwrap();
    gw.admin_post(&format!("/admin/products/{one}/preload"), Value::Null)
        .await;
    let one = format!("/v1/seckill/{one}");
    assert_eq!(
        r.json(&sync, M::POST, &one, u3, json!({"user_id": 3}))
            .await
            .0,
        201
    );
    assert_eq!(
        r.json(&sync, M::POST, &one, u4, json!({"user_id": 4}))
            .await
            .0,
        409
    );

    // Orders: a ticket answers its owner only.
    let ticket = first["ticket"].as_str().unwrap();
    let mine = format!("/v1/orders/{ticket}");
    assert_eq!(r.send(&gw, M::GET, &mine, u1, None, None).await.0, 200);
    let (s, body) = r.send(&gw, M::GET, &mine, u2, None, None).await;
    assert_eq!((s, body["error"].as_str()), (404, Some("unknown_ticket")));
    let (s, body) = r.send(&gw, M::GET, &mine, None, None, None).await;
    assert_eq!((s, body["error"].as_str()), (401, Some("unauthenticated")));
    r.send(&gw, M::GET, "/v1/orders/nope", u1, None, None).await;
    let unknown = format!("/v1/orders/{p}-{}", "0".repeat(32));
    let (s, body) = r.send(&gw, M::GET, &unknown, u1, None, None).await;
    assert_eq!((s, body["error"].as_str()), (404, Some("unknown_ticket")));

    // The caller's own ticket for a product.
    let my = format!("/v1/seckill/{p}/order");
    let (s, body) = r.send(&gw, M::GET, &my, u1, None, None).await;
    assert_eq!((s, &body["ticket"]), (200, &first["ticket"]), "{body}");
    let (s, body) = r
        .send(&gw, M::GET, &format!("{my}?user_id=1"), u1, None, None)
        .await;
    assert_eq!((s, &body["ticket"]), (200, &first["ticket"]), "{body}");
    let (s, body) = r.send(&gw, M::GET, &my, u5, None, None).await;
    assert_eq!((s, body["error"].as_str()), (404, Some("no_order")));
    let (s, body) = r
        .send(&gw, M::GET, &format!("{my}?user_id=2"), u1, None, None)
        .await;
    assert_eq!((s, body["error"].as_str()), (403, Some("user_mismatch")));
    let (s, body) = r.send(&gw, M::GET, &my, None, None, None).await;
    assert_eq!((s, body["error"].as_str()), (401, Some("unauthenticated")));
    for bad in [
        format!("{my}?user_id=abc"),
        format!("{my}?other=1"),
        "/v1/seckill/abc/order".into(),
    ] {
        let (s, body) = r.send(&gw, M::GET, &bad, u1, None, None).await;
        assert_eq!(
            (s, body["error"].as_str()),
            (400, Some("bad_request")),
            "{bad}"
        );
    }

    // The per-address limit, on every buyer endpoint, before the token is looked at.
    for (m, path) in [
        (M::POST, buy.clone()),
        (M::GET, mine.clone()),
        (M::GET, my.clone()),
    ] {
        eventually(
            &format!("{m} {path} to be over the per-address limit"),
            Duration::from_secs(10),
            || async {
                let (s, body) = if m == M::POST {
                    r.json(&limited, m.clone(), &path, None, json!({})).await
                } else {
                    r.send(&limited, m.clone(), &path, None, None, None).await
                };
                (s == 429).then(|| assert_eq!(body["error"], "rate_limited", "{body}"))
            },
        )
        .await;
    }

    // Redis loses a product on sale (its keys are gone): its buys, and the polls of a ticket
    // only Kafka holds, get 503 with Retry-After while the gateway rebuilds it.
    let lost = env.product(&gw, 5).await;
    let (s, pending) = gw.buy(lost, 101).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{pending}");
    env.lose_redis_keys(&format!("{lost}}}:*")).await;
    let (s, body) = r
        .json(
            &gw,
            M::POST,
            &format!("/v1/seckill/{lost}"),
            Some(&buyer(102)),
            json!({"user_id": 102}),
        )
        .await;
    assert_eq!(s, 503, "{body}");
    let in_kafka = format!("/v1/orders/{}", pending["ticket"].as_str().unwrap());
    let (s, body) = r
        .send(&gw, M::GET, &in_kafka, Some(&buyer(101)), None, None)
        .await;
    assert_eq!(s, 503, "{body}");

    // Payments: a priced product, an order confirmed in the request (sync mode). Buyers of
    // their own, whose per-user buckets are full.
    let ptokens = [11, 12, 13].map(buyer);
    let [u1, u2, u3] = ptokens.each_ref().map(|t| Some(t.as_str()));
    let (_, priced) = r
        .json(
            &gw,
            M::POST,
            "/admin/products",
            t,
            json!({"name": "paid", "stock": 3, "price": 100, "payment_window_secs": 60}),
        )
        .await;
    let pp = priced["id"].as_u64().unwrap();
    assert_eq!(
        r.send(
            &gw,
            M::POST,
            &format!("/admin/products/{pp}/preload"),
            t,
            None,
            None
        )
        .await
        .0,
        200
    );
    let (s, order) = r
        .json(&sync, M::POST, &format!("/v1/seckill/{pp}"), u1, json!({}))
        .await;
    assert_eq!(s, 201, "{order}");
    let order_ticket = order["ticket"].as_str().unwrap().to_owned();
    let (s, order2) = r
        .json(&sync, M::POST, &format!("/v1/seckill/{pp}"), u2, json!({}))
        .await;
    assert_eq!(s, 201, "{order2}");
    let ticket2 = order2["ticket"].as_str().unwrap().to_owned();
    let (pay, cancel) = (
        format!("/v1/orders/{order_ticket}/pay"),
        format!("/v1/orders/{order_ticket}/cancel"),
    );
    let key = |k: &str| [("Idempotency-Key", k.to_owned())];
    let (s, payment) = r
        .send_with(&sync, M::POST, &pay, u1, &key("k1"), None, None)
        .await;
    assert_eq!(s, 202, "{payment}");
    r.send(&sync, M::POST, &pay, u1, None, None).await; // 400: no key
    r.send_with(&sync, M::POST, &pay, None, &key("k1"), None, None)
        .await; // 401
    r.send_with(&sync, M::POST, &pay, u3, &key("k1"), None, None)
        .await; // 404
    let (s, _) = r
        .send_with(&sync, M::POST, &pay, u1, &key("k2"), None, None)
        .await;
    assert_eq!(s, 409, "in progress");
    r.send_with(&limited, M::POST, &pay, u1, &key("k1"), None, None)
        .await;
    r.send_with(&limited, M::POST, &pay, u1, &key("k1"), None, None)
        .await; // 429
    r.send_with(&mysql_down, M::POST, &pay, u1, &key("k1"), None, None)
        .await; // 503
    r.send(&sync, M::POST, &cancel, None, None, None).await; // 401
    r.send(&sync, M::POST, &cancel, u3, None, None).await; // 404
    r.send(&sync, M::POST, "/v1/orders/nope/cancel", u1, None, None)
        .await; // 400
                // Another buyer's ticket (404), then 429: the owner's cancel must not go through here.
    r.send(&limited, M::POST, &cancel, u3, None, None).await;
    r.send(&limited, M::POST, &cancel, u3, None, None).await; // 429
    r.send(&mysql_down, M::POST, &cancel, u1, None, None).await; // 503
    let (s, body) = r
        .send(
            &sync,
            M::POST,
            &format!("/v1/orders/{ticket2}/cancel"),
            u2,
            None,
            None,
        )
        .await;
    assert_eq!(s, 200, "{body}");
    // The provider's callbacks.
    let signed = |body: &Value| {
        let raw = body.to_string();
        let sig = seckill_shared::payments::sign(
            WEBHOOK_SECRET.as_bytes(),
            seckill_shared::now_ms() / 1000,
            raw.as_bytes(),
        );
        (raw, [("Seckill-Signature", sig)])
    };
    let callback = "/v1/payments/callback";
    let (raw, sig) = signed(&json!({"payment_id": payment["payment_id"], "status": "succeeded"}));
    let (s, body) = r
        .send_with(
            &sync,
            M::POST,
            callback,
            None,
            &sig,
            Some("application/json"),
            Some(raw.clone()),
        )
        .await;
    assert_eq!(s, 200, "{body}");
    let (s, body) = r
        .send_with(&sync, M::POST, &cancel, u1, &[], None, None)
        .await;
    assert_eq!(s, 409, "a paid order: {body}");
    r.send(
        &sync,
        M::POST,
        callback,
        None,
        Some("application/json"),
        Some(raw.clone()),
    )
    .await; // 401
    let (raw_bad, sig_bad) = signed(&json!({"payment_id": 7}));
    r.send_with(
        &sync,
        M::POST,
        callback,
        None,
        &sig_bad,
        Some("application/json"),
        Some(raw_bad),
    )
    .await; // 400
    let (raw_unknown, sig_unknown) = signed(
        &json!({"payment_id": "pay_00000000000000000000000000000000", "status": "declined"}),
    );
    r.send_with(
        &sync,
        M::POST,
        callback,
        None,
        &sig_unknown,
        Some("application/json"),
        Some(raw_unknown),
    )
    .await; // 404
    r.send(
        &sync,
        M::POST,
        callback,
        None,
        Some("application/json"),
        Some(format!("{{\"pad\": \"{}\"}}", "x".repeat(5000))),
    )
    .await; // 413
    r.send_with(
        &mysql_down,
        M::POST,
        callback,
        None,
        &sig,
        Some("application/json"),
        Some(raw),
    )
    .await; // 503

    // The waiting room: a product whose sale has started, and one whose room is not open.
    // Buyers of their own: this gateway's buckets hold two requests each.
    let qtokens = [21, 22, 23, 24].map(buyer);
    let [q1, q2, q3, q4] = qtokens.each_ref().map(|t| Some(t.as_str()));
    let past = chrono::Utc::now() - chrono::Duration::seconds(1);
    let future = chrono::Utc::now() + chrono::Duration::hours(1);
    let (_, roomed) = r
        .json(
            &gw,
            M::POST,
            "/admin/products",
            t,
            json!({"name": "queued", "stock": 2, "starts_at": past.to_rfc3339(), "waiting_room": {"admit_per_sec": 100}}),
        )
        .await;
    let qp = roomed["id"].as_u64().unwrap();
    assert_eq!(
        r.send(
            &gw,
            M::POST,
            &format!("/admin/products/{qp}/preload"),
            t,
            None,
            None
        )
        .await
        .0,
        200
    );
    let (_, closed) = r
        .json(
            &gw,
            M::POST,
            "/admin/products",
            t,
            json!({"name": "later", "stock": 2, "waiting_room": {"opens_at": future.to_rfc3339()}}),
        )
        .await;
    let cp = closed["id"].as_u64().unwrap();
    assert_eq!(
        r.send(
            &gw,
            M::POST,
            &format!("/admin/products/{cp}/preload"),
            t,
            None,
            None
        )
        .await
        .0,
        200
    );
    let join_path = format!("/v1/seckill/{qp}/queue");
    let (s, entry) = r.send(&gw, M::POST, &join_path, q1, None, None).await;
    assert_eq!(s, 202, "{entry}");
    let poll_path = format!(
        "/v1/seckill/{qp}/queue/{}",
        entry["queue_id"].as_str().unwrap()
    );
    let (s, polled) = r.send(&gw, M::GET, &poll_path, q1, None, None).await;
    assert_eq!(s, 200, "{polled}");
    r.send(&gw, M::POST, "/v1/seckill/abc/queue", q1, None, None)
        .await; // 400
    r.send(&gw, M::POST, &join_path, None, None, None).await; // 401
    let (s, body) = r
        .send(
            &gw,
            M::POST,
            &format!("/v1/seckill/{cp}/queue"),
            q3,
            None,
            None,
        )
        .await;
    assert_eq!(s, 403, "{body}");
    let (s, body) = r
        .send(
            &gw,
            M::POST,
            &format!("/v1/seckill/{p}/queue"),
            q4,
            None,
            None,
        )
        .await;
    assert_eq!(s, 404, "{body}");
    r.send(
        &gw,
        M::GET,
        &format!("/v1/seckill/{qp}/queue/nope"),
        q1,
        None,
        None,
    )
    .await; // 400
    r.send(&gw, M::GET, &poll_path, None, None, None).await; // 401
    r.send(&gw, M::GET, &poll_path, q2, None, None).await; // 404: another buyer's
    r.send(&limited, M::POST, &join_path, q2, None, None).await;
    r.send(&limited, M::POST, &join_path, q2, None, None).await; // 429
    r.send(&limited, M::GET, &poll_path, q1, None, None).await;
    r.send(&limited, M::GET, &poll_path, q1, None, None).await; // 429
    r.send(&redis_down, M::POST, &join_path, q1, None, None)
        .await; // 503
    r.send(&redis_down, M::GET, &poll_path, q1, None, None)
        .await; // 503
                // Buying without the admission, and with it.
    let (s, body) = r
        .json(&gw, M::POST, &format!("/v1/seckill/{qp}"), q1, json!({}))
        .await;
    assert_eq!(
        (s, body["error"].as_str()),
        (403, Some("admission_required")),
        "{body}"
    );
    let admitted = polled["admission_token"]
        .as_str()
        .expect("admitted at once")
        .to_owned();
    let (s, body) = r
        .send_with(
            &gw,
            M::POST,
            &format!("/v1/seckill/{qp}"),
            q1,
            &[("Seckill-Admission", admitted)],
            Some("application/json"),
            Some("{}".into()),
        )
        .await;
    assert_eq!(s, 202, "{body}");

    // The product list and the dashboard's overview.
    for path in ["/admin/products", "/admin/overview"] {
        assert_eq!(r.send(&gw, M::GET, path, t, None, None).await.0, 200);
        let bad = format!("{path}?limit=0");
        assert_eq!(r.send(&gw, M::GET, &bad, t, None, None).await.0, 400);
        assert_eq!(r.send(&gw, M::GET, path, None, None, None).await.0, 401);
        let wrong = Some("wrong");
        assert_eq!(r.send(&gw, M::GET, path, wrong, None, None).await.0, 403);
        assert_eq!(
            r.send(&mysql_down, M::GET, path, t, None, None).await.0,
            503
        );
    }

    // Past its wrong admin tokens, an address gets 429 on every admin route, right token or not.
    let wrong = Some("wrong");
    assert_eq!(
        r.send(&locked, M::GET, "/admin/products", wrong, None, None)
            .await
            .0,
        403
    );
    assert_eq!(
        r.send(&locked, M::GET, "/admin/products", wrong, None, None)
            .await
            .0,
        429
    );
    let new_product = json!({"name": "a", "stock": 1});
    assert_eq!(
        r.json(&locked, M::POST, "/admin/products", t, new_product)
            .await
            .0,
        429
    );
    for (m, path) in [
        (M::GET, "/admin/products".to_owned()),
        (M::GET, "/admin/overview".to_owned()),
        (M::GET, format!("/admin/products/{p}")),
        (M::POST, format!("/admin/products/{p}/preload")),
        (M::POST, format!("/admin/products/{p}/reconcile")),
    ] {
        assert_eq!(
            r.send(&locked, m, &path, t, None, None).await.0,
            429,
            "{path}"
        );
    }

    // Operations, and the dashboard's page (it holds no data, and asks for the token).
    for path in [
        "/healthz",
        "/readyz",
        "/livez",
        "/metrics",
        "/openapi.json",
        "/admin/dashboard",
        "/admin/dashboard/app.js",
        "/admin/dashboard/style.css",
    ] {
        assert_eq!(
            r.send(&gw, M::GET, path, None, None, None).await.0,
            200,
            "{path}"
        );
    }

    // Dependencies down: 503 everywhere they are needed.
    let (admin_p, preload_p, reconcile_p) = (
        format!("/admin/products/{p}"),
        format!("/admin/products/{p}/preload"),
        format!("/admin/products/{p}/reconcile"),
    );
    futures::join!(
        r.json(&redis_down, M::POST, &buy, u9, json!({"user_id": 9})),
        r.send(&redis_down, M::GET, &unknown, u9, None, None),
        r.send(&redis_down, M::GET, &my, u9, None, None),
        r.send(&redis_down, M::GET, "/healthz", None, None, None),
        r.send(&redis_down, M::GET, "/readyz", None, None, None),
        r.json(
            &mysql_down,
            M::POST,
            "/admin/products",
            t,
            json!({"name": "a", "stock": 1})
        ),
        r.send(&mysql_down, M::GET, &admin_p, t, None, None),
        r.send(&mysql_down, M::POST, &preload_p, t, None, None),
        r.send(&mysql_down, M::POST, &reconcile_p, t, None, None),
    );
    assert_eq!(
        r.send(
            &gw,
            M::POST,
            &format!("/admin/products/{p}/reconcile"),
            t,
            None,
            None
        )
        .await
        .0,
        200
    );

    // Every documented status was produced, except the unexpected-error 500s.
    let seen = r.seen.lock().unwrap().clone();
    let missing: Vec<_> = r
        .spec
        .documented()
        .into_iter()
        .filter(|k| k.2 != 500 && !seen.contains(k))
        .collect();
    assert!(
        missing.is_empty(),
        "documented but never produced: {missing:?}"
    );
    assert_eq!(StatusCode::OK, gw.get_json("/livez").await.0);
}

/// The document states the limits the server enforces: an id or a ticket that the document
/// allows is one the server takes, and the other way round.
#[test]
fn the_document_states_what_the_server_enforces() {
    use seckill_shared::domain::MAX_ID;
    use seckill_shared::{ProductId, Ticket};
    let spec = Spec::built();
    let path_id = "/paths/~1v1~1seckill~1{product_id}/post/parameters/0/schema";
    let body = "/components/schemas/BuyRequest";
    for n in [
        json!(0),
        json!(1),
        json!(9),
        json!(10),
        json!(MAX_ID - 1),
        json!(MAX_ID),
        json!(MAX_ID + 1),
        json!(u64::MAX),
        json!(-1),
        json!(1.5),
        json!(244.0),
        json!(1e3),
        json!(1e19),
        json!("1"),
        json!(null),
    ] {
        // What `POST /v1/seckill/{id}` reads `user_id` with.
        let server = seckill_gateway::error::whole::user_id(n.clone()).is_ok();
        assert_eq!(spec.validate(path_id, &n).is_ok(), server, "product id {n}");
        let buy = json!({ "user_id": n });
        assert_eq!(spec.validate(body, &buy).is_ok(), server, "{buy}");
        if let Some(k) = n.as_u64() {
            assert_eq!(ProductId::parse(&k.to_string()).is_ok(), server, "{n}");
        }
    }
    assert!(spec.validate(body, &json!({"user_id": 1, "x": 1})).is_err());
    // `user_id` is optional: the buyer is the token's `sub`.
    assert!(spec.validate(body, &json!({})).is_ok());

    let ticket = "/paths/~1v1~1orders~1{ticket}/get/parameters/0/schema";
    let hex = "0123456789abcdef".repeat(2);
    let mut tickets: Vec<String> = [1, 9, 10, 99, 100, 4242, MAX_ID / 10, MAX_ID - 1, MAX_ID]
        .into_iter()
        .chain([MAX_ID + 1, MAX_ID + 10, u64::MAX])
        .map(|p| format!("{p}-{hex}"))
        .collect();
    // Every 19-digit number just above or below the limit at each digit.
    let max = MAX_ID.to_string();
    for i in 0..max.len() {
        for d in b'0'..=b'9' {
            let mut s = max.clone().into_bytes();
            s[i] = d;
            if s[0] != b'0' {
                tickets.push(format!("{}-{hex}", String::from_utf8(s).unwrap()));
            }
        }
    }
    tickets.extend([
        format!("0-{hex}"),
        format!("-{hex}"),
        format!("1-{}", hex.to_uppercase()),
        format!("1-{}", &hex[1..]),
        format!("1-{hex}0"),
        format!("1-{}g", &hex[1..]),
        format!("1_{hex}"),
        format!("+1-{hex}"),
        format!("1-{hex}\n"),
        "".into(),
    ]);
    for _ in 0..20 {
        let p = ProductId::new(rand::random::<u64>() >> 1).unwrap_or(ProductId::new(1).unwrap());
        tickets.push(Ticket::generate(p).to_string());
    }
    for t in &tickets {
        assert_eq!(
            spec.validate(ticket, &json!(t)).is_ok(),
            Ticket::parse(t).is_ok(),
            "ticket {t:?}"
        );
    }
    // The one difference: the server also reads a product id with leading zeros, which no
    // ticket it hands out has; the document does not promise it.
    let padded = format!("01-{hex}");
    assert!(Ticket::parse(&padded).is_ok() && spec.validate(ticket, &json!(padded)).is_err());

    // A product's name: 1 to 200 characters once trimmed, the way `create_product` checks it.
    let name = "/components/schemas/NewProduct";
    let a200 = "a".repeat(200);
    for n in [
        String::new(),
        " ".into(),
        "\t\n \u{3000}\u{85}".into(),
        "a".into(),
        " a ".into(),
        a200.clone(),
        format!("{a200}a"),
        format!("  {a200}\u{2028}"),
        format!("a{}a", " ".repeat(198)),
        format!("a{}a", " ".repeat(199)),
        "\u{1c}".into(),
        "\u{200b}".into(),
        "\u{feff}".into(),
        "é ü 漢字 🦀".into(),
    ] {
        let trimmed = n.trim();
        let server = !trimmed.is_empty() && trimmed.chars().count() <= 200;
        let product = json!({"name": n, "stock": 1});
        assert_eq!(spec.validate(name, &product).is_ok(), server, "name {n:?}");
    }
    // Stock: what `create_product` reads, then the range it checks.
    for stock in [
        json!(0),
        json!(1_000_000_000),
        json!(1_000_000_001),
        json!(-1),
        json!(67830.0),
        json!(0.5),
        json!(1e10),
        json!("1"),
    ] {
        let server = seckill_gateway::error::whole::i64(stock.clone())
            .is_ok_and(|n| (0..=1_000_000_000).contains(&n));
        let product = json!({"name": "a", "stock": stock});
        assert_eq!(
            spec.validate(name, &product).is_ok(),
            server,
            "stock {stock}"
        );
    }
}

/// A product with a waiting room keeps its stock in one bucket: the document says so itself
/// (`NewProduct.not`), so a client, or schemathesis, needs no hook to know it. For each body,
/// the document allows it exactly when the server creates the product.
#[tokio::test]
async fn the_document_says_a_waiting_room_takes_one_bucket() {
    let spec = Spec::built();
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let room = json!({"admit_per_sec": 10});
    let mut bodies = vec![];
    for buckets in [
        json!(null),
        json!(1),
        json!(1.0),
        json!(2),
        json!(33.0),
        json!(64),
    ] {
        for waiting_room in [None, Some(json!(null)), Some(room.clone())] {
            let mut b = json!({"name": "x", "stock": 5});
            if !buckets.is_null() {
                b["buckets"] = buckets.clone();
            }
            if let Some(w) = &waiting_room {
                b["waiting_room"] = w.clone();
            }
            bodies.push(b);
        }
    }
    let mut refused = 0;
    for body in bodies {
        let (status, answer) = gw.admin_post("/admin/products", body.clone()).await;
        let server = status == StatusCode::CREATED;
        assert!(
            server || status == StatusCode::BAD_REQUEST,
            "{status} {answer}"
        );
        refused += usize::from(!server);
        assert_eq!(
            spec.validate("/components/schemas/NewProduct", &body)
                .is_ok(),
            server,
            "{body}: the server answered {status} {answer}"
        );
    }
    assert_eq!(refused, 3, "a waiting room with 2, 33.0 and 64 buckets");
}
