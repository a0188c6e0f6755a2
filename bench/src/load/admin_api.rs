//! The product's admin view, `GET /admin/products/{id}`, read with the admin token
//! ([`AdminApi`]), and what its stock means for the sale ([`StockView::reading`]).

use super::engine::error_chain;
use anyhow::Context;
use hyper::header::{HeaderValue, AUTHORIZATION};
use seckill_shared::api::ProductView;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

/// The stock as `GET /admin/products/{id}` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StockView {
    /// `None` while Redis has lost the product.
    pub stock_redis: Option<i64>,
    pub stock_db: i64,
    pub pending: i64,
    /// The sweeper closed the sale: over, with nothing in flight. Its Redis keys may be gone
    /// (expired, or lost to a Redis restart and not rebuilt). Absent before gateways said.
    #[serde(default)]
    pub closed_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// What one look at the stock means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// Units are for sale again: offer fresh buyers.
    UnitsBack,
    /// No stock in either store and nothing pending.
    Empty,
    /// Orders are pending (their units may come back), Redis has lost the product (a
    /// reconcile brings it back), or the stores disagree: look again.
    Wait,
}

impl StockView {
    /// The stock of an admin view.
    pub fn of(v: &ProductView) -> Self {
        Self {
            stock_redis: v.stock_redis,
            stock_db: v.stock_db,
            pending: v.pending,
            closed_at: v.closed_at,
        }
    }

    pub fn reading(&self) -> Reading {
        match self.stock_redis {
            Some(s) if s > 0 => Reading::UnitsBack,
            Some(0) if self.pending == 0 && self.stock_db == 0 => Reading::Empty,
            // Closed with no stock in MySQL: sold out for good, whatever Redis still holds.
            None if self.closed_at.is_some() && self.stock_db == 0 => Reading::Empty,
            _ => Reading::Wait,
        }
    }
}

/// `GET {gateway}/admin/products/{id}` with the admin token, on each gateway in turn.
#[derive(Clone)]
pub struct AdminApi {
    client: reqwest::Client,
    urls: Vec<String>,
    auth: HeaderValue,
    next: usize,
}

impl AdminApi {
    pub fn new(
        client: reqwest::Client,
        gateways: &[String],
        product: u64,
        token: &SecretString,
    ) -> anyhow::Result<Self> {
        let mut auth = HeaderValue::try_from(format!("Bearer {}", token.expose_secret()))
            .context("--admin-token is not a valid header value")?;
        auth.set_sensitive(true);
        Ok(Self {
            client,
            urls: gateways
                .iter()
                .map(|g| format!("{g}/admin/products/{product}"))
                .collect(),
            auth,
            next: 0,
        })
    }

    /// The product's stock, from the first gateway that answers.
    pub async fn stock(&mut self) -> anyhow::Result<StockView> {
        Ok(StockView::of(&self.view().await?))
    }

    /// The product's admin view, from the first gateway that answers.
    pub async fn view(&mut self) -> anyhow::Result<ProductView> {
        let mut errors = Vec::new();
        for _ in 0..self.urls.len() {
            let url = &self.urls[self.next % self.urls.len()];
            self.next = self.next.wrapping_add(1);
            match self.get(url).await {
                Ok(v) => return Ok(v),
                Err(e) => errors.push(format!("GET {url}: {e:#}")),
            }
        }
        anyhow::bail!("{}", errors.join("; "))
    }

    async fn get(&self, url: &str) -> anyhow::Result<ProductView> {
        let res = self
            .client
            .get(url)
            .header(AUTHORIZATION, self.auth.clone())
            .send()
            .await
            .map_err(|e| anyhow::anyhow!(error_chain(&e)))?;
        let status = res.status();
        let body = res
            .bytes()
            .await
            .map_err(|e| anyhow::anyhow!(error_chain(&e)))?;
        anyhow::ensure!(
            status.is_success(),
            "HTTP {}: {}",
            status.as_u16(),
            String::from_utf8_lossy(&body[..body.len().min(200)])
        );
        serde_json::from_slice(&body).context("reading the product's admin view")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_look_at_the_stock_means_units_back_empty_or_wait() {
        let closed = StockView {
            stock_redis: None,
            stock_db: 0,
            pending: 0,
            closed_at: Some(chrono::Utc::now()),
        };
        assert_eq!(closed.reading(), Reading::Empty);
        assert_eq!(
            StockView {
                stock_db: 2,
                ..closed
            }
            .reading(),
            Reading::Wait
        );
        let v = |stock_redis, stock_db, pending| StockView {
            stock_redis,
            stock_db,
            pending,
            closed_at: None,
        };
        assert_eq!(v(Some(2), 2, 0).reading(), Reading::UnitsBack);
        // A unit came back while another order is pending.
        assert_eq!(v(Some(1), 2, 1).reading(), Reading::UnitsBack);
        assert_eq!(v(Some(0), 0, 0).reading(), Reading::Empty);
        // Pending orders may fail and hand their units back.
        assert_eq!(v(Some(0), 3, 3).reading(), Reading::Wait);
        // Redis lost the product; the stores disagree.
        assert_eq!(v(None, 0, 0).reading(), Reading::Wait);
        assert_eq!(v(Some(0), 1, 0).reading(), Reading::Wait);
    }
}
