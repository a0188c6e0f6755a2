//! Requests whose answers are checked against the document as they come, and what they
//! covered.

use crate::helpers::*;
use crate::openapi::spec::{Key, Spec};
use reqwest::Method;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Mutex;

/// Sends requests and checks each answer against the document, remembering what it covered.
pub(crate) struct Recorder {
    pub(crate) spec: Spec,
    pub(crate) http: reqwest::Client,
    pub(crate) seen: Mutex<BTreeSet<Key>>,
}

impl Recorder {
    pub(crate) async fn send(
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
    pub(crate) async fn send_with(
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

    pub(crate) async fn json(
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
