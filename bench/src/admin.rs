//! The gateway's admin API, as the benchmark subcommands (`expiry`, `queue-sale`) use it to
//! set up their products.

use anyhow::Context;
use secrecy::{ExposeSecret, SecretString};

/// One gateway's admin API.
pub struct Admin<'a> {
    pub http: &'a reqwest::Client,
    pub base: &'a str,
    pub token: &'a SecretString,
}

impl Admin<'_> {
    /// `POST path`; the answer's text, or an error naming the status.
    pub async fn post(
        &self,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> anyhow::Result<String> {
        let mut req = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(self.token.expose_secret());
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.with_context(|| format!("POST {path}"))?;
        let status = resp.status();
        let text = resp.text().await.with_context(|| format!("POST {path}"))?;
        anyhow::ensure!(status.is_success(), "POST {path}: {status}: {text}");
        Ok(text)
    }

    /// Creates a product from `body` (the body of `POST /admin/products`) and preloads it;
    /// its id.
    pub async fn product(&self, body: serde_json::Value) -> anyhow::Result<u64> {
        let text = self.post("/admin/products", Some(body)).await?;
        let id = serde_json::from_str::<seckill_shared::api::Created>(&text)
            .context("the created product's id")?
            .id;
        self.post(&format!("/admin/products/{id}/preload"), None)
            .await?;
        Ok(id)
    }
}
