//! `GET /openapi.json` against what the gateway really does: every response the tests see is
//! checked against the document (status, required headers, body schema), and every status the
//! document lists is produced by some request.

use crate::helpers::*;
use reqwest::{Method, StatusCode};
use seckill_gateway::routes::openapi::DOCUMENT;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

/// The OpenAPI document, with a small validator for the subset of JSON Schema it uses:
/// `$ref`, `type` (one or a list), `enum`, `required`, `properties`, `additionalProperties:
/// false`, `minimum`, `maximum`, `minLength` and `maxLength`.
pub struct Spec {
    doc: Value,
}

/// (method, path template, status)
pub type Key = (String, String, u16);

impl Spec {
    pub fn load() -> Self {
        Self {
            doc: serde_json::from_str(DOCUMENT).expect("openapi.json is JSON"),
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
            .map(|t| &self.doc["paths"][t][method.to_ascii_lowercase()])
            .filter(|op| op.is_object());
        let response = match (&template, op) {
            (Some(_), Some(op)) => op["responses"]
                .get(status.to_string())
                .ok_or_else(|| format!("{what}: status not documented"))?,
            // A path with no such method: 405; no such path: 404.
            (Some(_), None) => self.doc["x-fallback-responses"]
                .get("405")
                .filter(|_| status == 405)
                .ok_or_else(|| format!("{what}: expected 405 for an undocumented method"))?,
            (None, _) => self.doc["x-fallback-responses"]
                .get("404")
                .filter(|_| status == 404)
                .ok_or_else(|| format!("{what}: expected 404 for an unknown path"))?,
        };
        let response = self.resolve(response);
        if let Some(hs) = response["headers"].as_object() {
            for (name, h) in hs {
                if h["required"] == true && !headers.contains_key(name.as_str()) {
                    return Err(format!("{what}: header {name} is missing"));
                }
            }
            if let Some(v) = headers.get("retry-after") {
                let secs: u64 = v
                    .to_str()
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| format!("{what}: Retry-After {v:?} is not seconds"))?;
                if secs < 1 {
                    return Err(format!("{what}: Retry-After is 0"));
                }
            }
        }
        if method != "HEAD" {
            let content = response["content"].as_object().expect("content");
            let ctype = headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            let (media, schema) = content
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
                self.validate(&schema["schema"], &value, "body")
                    .map_err(|e| format!("{what}: {e}: {value}"))?;
            }
        }
        let template = template.unwrap_or_else(|| "(unmatched)".into());
        Ok((method.to_owned(), template, status))
    }

    fn resolve<'a>(&'a self, v: &'a Value) -> &'a Value {
        match v.get("$ref").and_then(Value::as_str) {
            Some(r) => self.resolve(
                self.doc
                    .pointer(r.strip_prefix('#').unwrap())
                    .unwrap_or_else(|| panic!("{r} does not resolve")),
            ),
            None => v,
        }
    }

    pub fn validate(&self, schema: &Value, v: &Value, at: &str) -> Result<(), String> {
        let schema = self.resolve(schema);
        if let Some(t) = schema.get("type") {
            let types: Vec<&str> = match t {
                Value::String(s) => vec![s.as_str()],
                Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                _ => panic!("bad type in schema"),
            };
            let ok = types.iter().any(|t| match *t {
                "object" => v.is_object(),
                "array" => v.is_array(),
                "string" => v.is_string(),
                "integer" => v.is_i64() || v.is_u64(),
                "number" => v.is_number(),
                "boolean" => v.is_boolean(),
                "null" => v.is_null(),
                other => panic!("unknown type {other}"),
            });
            if !ok {
                return Err(format!("{at}: {v} is not {types:?}"));
            }
        }
        if let Some(Value::Array(allowed)) = schema.get("enum") {
            if !allowed.contains(v) {
                return Err(format!("{at}: {v} is not one of {allowed:?}"));
            }
        }
        if let Some(n) = v.as_f64() {
            if schema
                .get("minimum")
                .and_then(Value::as_f64)
                .is_some_and(|m| n < m)
                || schema
                    .get("maximum")
                    .and_then(Value::as_f64)
                    .is_some_and(|m| n > m)
            {
                return Err(format!("{at}: {v} is out of range"));
            }
        }
        if let Some(s) = v.as_str() {
            let len = s.chars().count() as u64;
            if schema
                .get("minLength")
                .and_then(Value::as_u64)
                .is_some_and(|m| len < m)
                || schema
                    .get("maxLength")
                    .and_then(Value::as_u64)
                    .is_some_and(|m| len > m)
            {
                return Err(format!("{at}: {v} has the wrong length"));
            }
        }
        if let Some(obj) = v.as_object() {
            if let Some(Value::Array(required)) = schema.get("required") {
                for r in required {
                    let r = r.as_str().unwrap();
                    if !obj.contains_key(r) {
                        return Err(format!("{at}: `{r}` is missing"));
                    }
                }
            }
            let props = schema.get("properties").and_then(Value::as_object);
            for (k, x) in obj {
                match props.and_then(|p| p.get(k)) {
                    Some(s) => self.validate(s, x, &format!("{at}.{k}"))?,
                    None if schema.get("additionalProperties") == Some(&json!(false)) => {
                        return Err(format!("{at}: `{k}` is not documented"))
                    }
                    None => {}
                }
            }
        }
        Ok(())
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
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", gw.base));
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
        let key = self
            .spec
            .check(method.as_str(), path, status, &headers, &bytes)
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
    let sync = env.gateway_with(|s| s.gateway_mode = "sync".into()).await;
    let redis_down = env
        .gateway_with(|s| s.redis_url = "redis://127.0.0.1:1/".into())
        .await;
    let mysql_down = env
        .gateway_with(|s| {
            s.mysql_url = "mysql://seckill:seckill@127.0.0.1:1/nothing".into();
        })
        .await;
    gw.wait_for_zookeeper().await;
    let r = Recorder {
        spec: Spec::load(),
        http: reqwest::Client::builder()
            .pool_idle_timeout(Duration::from_secs(2))
            .build()
            .unwrap(),
        seen: Mutex::default(),
    };
    let t = Some(ADMIN_TOKEN);
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
    let (s, first) = r
        .json(&gw, M::POST, &buy, None, json!({"user_id": 1}))
        .await;
    assert_eq!(s, 202, "{first}");
    assert_eq!(
        r.json(&gw, M::POST, &buy, None, json!({"user_id": 1}))
            .await
            .0,
        200
    );
    assert_eq!(
        r.json(&gw, M::POST, &buy, None, json!({"user_id": 1}))
            .await
            .0,
        429
    );
    r.json(&gw, M::POST, "/v1/seckill/abc", None, json!({"user_id": 2}))
        .await;
    r.json(
        &gw,
        M::POST,
        "/v1/seckill/999999",
        None,
        json!({"user_id": 2}),
    )
    .await;
    r.send(
        &gw,
        M::POST,
        &buy,
        None,
        Some("application/json"),
        Some(big),
    )
    .await;
    r.send(
        &gw,
        M::POST,
        &buy,
        None,
        Some("text/plain"),
        Some("{}".into()),
    )
    .await;
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
    r.json(
        &gw,
        M::POST,
        &format!("/v1/seckill/{later}"),
        None,
        json!({"user_id": 2}),
    )
    .await;
    // Sync mode: 201, then sold out.
    let (_, one) = gw
        .admin_post("/admin/products", json!({"name": "one", "stock": 1}))
        .await;
    let one = one["id"].as_u64().unwrap();
    gw.admin_post(&format!("/admin/products/{one}/preload"), Value::Null)
        .await;
    let one = format!("/v1/seckill/{one}");
    assert_eq!(
        r.json(&sync, M::POST, &one, None, json!({"user_id": 3}))
            .await
            .0,
        201
    );
    assert_eq!(
        r.json(&sync, M::POST, &one, None, json!({"user_id": 4}))
            .await
            .0,
        409
    );

    // Orders.
    let ticket = first["ticket"].as_str().unwrap();
    assert_eq!(
        r.send(
            &gw,
            M::GET,
            &format!("/v1/orders/{ticket}"),
            None,
            None,
            None
        )
        .await
        .0,
        200
    );
    r.send(&gw, M::GET, "/v1/orders/nope", None, None, None)
        .await;
    let unknown = format!("/v1/orders/{p}-{}", "0".repeat(32));
    r.send(&gw, M::GET, &unknown, None, None, None).await;

    // Operations.
    for path in ["/healthz", "/readyz", "/livez", "/metrics", "/openapi.json"] {
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
        r.json(&redis_down, M::POST, &buy, None, json!({"user_id": 9})),
        r.send(&redis_down, M::GET, &unknown, None, None, None),
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
