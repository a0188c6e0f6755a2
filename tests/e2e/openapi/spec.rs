//! The served document, compiled: a validator for every schema an answer can be checked
//! against, and the check of one answer (status, required headers, body).

use crate::helpers::*;
use jsonschema::{Draft, Registry, Validator};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};

/// The base URI the document is registered under, for `$ref`s into it.
const DOC_URI: &str = "urn:seckill:openapi";

/// The OpenAPI document a gateway serves, with a JSON Schema (2020-12, formats asserted)
/// validator for every schema in it that an answer can be checked against.
pub struct Spec {
    pub(crate) doc: Value,
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
        if status == 204 {
            // No Content: none documented, none sent.
            if response.get("content").is_some() || !body.is_empty() {
                return Err(format!("{what}: a 204 with content"));
            }
        } else if method != "HEAD" {
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
            if media == "text/event-stream" {
                // Each event's data is one JSON value of the schema; comments and `retry:`
                // lines aside.
                let text = std::str::from_utf8(body).map_err(|_| format!("{what}: not text"))?;
                let events: Vec<&str> = text
                    .split("\n\n")
                    .filter_map(|block| block.lines().find_map(|l| l.strip_prefix("data: ")))
                    .collect();
                if events.is_empty() {
                    return Err(format!("{what}: a stream with no event: {text:?}"));
                }
                for data in events {
                    let value: Value = serde_json::from_str(data).map_err(|e| {
                        format!("{what}: an event's data is not JSON ({e}): {data}")
                    })?;
                    self.validate(&format!("{at}/content/text~1event-stream/schema"), &value)
                        .map_err(|e| format!("{what}: {e}: {value}"))?;
                }
            }
        }
        let template = template.unwrap_or_else(|| "(unmatched)".into());
        Ok((method.to_owned(), template, status))
    }
}
