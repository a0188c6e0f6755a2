//! Payments: the attempts in MySQL, the call to the provider, and its signed callback.
//!
//! Paying and cancelling decide on the same order row, each with one conditional `UPDATE`:
//! a success makes the order `paid` only while it is `confirmed` and its deadline is ahead;
//! the cancel (expiry or buyer) only takes a `confirmed` order. Whichever commits first wins,
//! and the other finds the row changed. A success that loses is `refund_due`.

use anyhow::Context;
use rand::RngCore;
use seckill_shared::payment::{Charge, ChargeOutcome, PaymentStatus};
use seckill_shared::Settings;
use secrecy::{ExposeSecret, SecretString};
use sqlx::{MySqlPool, Row};
use std::time::Duration;

/// The provider, and the secret its callbacks are signed with.
pub struct Payments {
    provider_url: String,
    callback_url: String,
    webhook_secret: SecretString,
    client: reqwest::Client,
}

/// A payment attempt, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payment {
    pub payment_id: String,
    pub ticket: String,
    pub user_id: u64,
    pub status: PaymentStatus,
    pub amount: i64,
    pub currency: String,
}

/// How a callback settled a payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    pub payment: Payment,
    /// This callback changed it (a repeat changes nothing).
    pub changed: bool,
}

impl Payments {
    pub fn from_settings(s: &Settings) -> anyhow::Result<Self> {
        Ok(Self {
            provider_url: s.payment_provider_url.trim_end_matches('/').to_owned(),
            callback_url: s.payment_callback_url.clone(),
            webhook_secret: s.payment_webhook_secret.clone(),
            client: reqwest::Client::builder()
                .timeout(s.payment_provider_timeout())
                .connect_timeout(s.payment_provider_timeout().min(Duration::from_secs(2)))
                .build()
                .context("building the payment provider's HTTP client")?,
        })
    }

    pub fn webhook_secret(&self) -> Option<&[u8]> {
        let s = self.webhook_secret.expose_secret();
        (!s.is_empty()).then_some(s.as_bytes())
    }

    /// Asks the provider to charge. `Ok` once it accepted the charge (any `2xx`).
    pub async fn send(&self, p: &Payment) -> anyhow::Result<()> {
        anyhow::ensure!(
            !self.provider_url.is_empty(),
            "no payment provider is configured (SECKILL_PAYMENT_PROVIDER_URL)"
        );
        let charge = Charge {
            payment_id: p.payment_id.clone(),
            ticket: p.ticket.clone(),
            amount: p.amount,
            currency: p.currency.clone(),
            callback_url: self.callback_url.clone(),
        };
        let res = self
            .client
            .post(format!("{}/charges", self.provider_url))
            .header("Idempotency-Key", &p.payment_id)
            .json(&charge)
            .send()
            .await
            .context("calling the payment provider")?;
        anyhow::ensure!(
            res.status().is_success(),
            "the payment provider answered {}",
            res.status()
        );
        Ok(())
    }
}

/// `pay_` and 32 hex digits from a CSPRNG.
pub fn new_payment_id() -> String {
    let mut b = [0u8; 16];
    rand::rng().fill_bytes(&mut b);
    format!("pay_{}", hex::encode(b))
}

fn from_row(r: &sqlx::mysql::MySqlRow) -> anyhow::Result<Payment> {
    let status: String = r.get("status");
    Ok(Payment {
        payment_id: r.get("payment_id"),
        ticket: r.get("ticket"),
        user_id: r.get::<i64, _>("user_id") as u64,
        status: PaymentStatus::parse(&status)
            .with_context(|| format!("unknown payment status {status:?} in MySQL"))?,
        amount: r.get("amount"),
        currency: r.get("currency"),
    })
}

/// The attempt made with this key for this ticket, if any.
pub async fn by_key(db: &MySqlPool, ticket: &str, key: &str) -> anyhow::Result<Option<Payment>> {
    sqlx::query(
        "SELECT payment_id, ticket, user_id, status, amount, currency FROM payments \
         WHERE ticket = ? AND idempotency_key = ?",
    )
    .bind(ticket)
    .bind(key)
    .fetch_optional(db)
    .await
    .context("reading a payment")?
    .as_ref()
    .map(from_row)
    .transpose()
}

/// Another attempt of this ticket still waiting for the provider.
pub async fn in_progress(db: &MySqlPool, ticket: &str) -> anyhow::Result<bool> {
    let n: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM payments WHERE ticket = ? AND status IN ('unsent', 'processing')",
    )
    .bind(ticket)
    .fetch_one(db)
    .await
    .context("reading payments")?;
    Ok(n > 0)
}

/// Records a new attempt (`unsent`). `None` when one with this key exists already (a
/// concurrent repeat): the caller reads and answers that one.
pub async fn record(db: &MySqlPool, p: &Payment, key: &str, now_ms: i64) -> anyhow::Result<bool> {
    let res = sqlx::query(
        "INSERT IGNORE INTO payments (payment_id, ticket, user_id, idempotency_key, amount, currency, status, created_at_ms) \
         VALUES (?, ?, ?, ?, ?, ?, 'unsent', ?)",
    )
    .bind(&p.payment_id)
    .bind(&p.ticket)
    .bind(p.user_id as i64)
    .bind(key)
    .bind(p.amount)
    .bind(&p.currency)
    .bind(now_ms)
    .execute(db)
    .await
    .context("recording a payment")?;
    Ok(res.rows_affected() == 1)
}

/// The provider took the charge: `unsent` → `processing`.
pub async fn mark_sent(db: &MySqlPool, payment_id: &str) -> anyhow::Result<()> {
    sqlx::query(
        "UPDATE payments SET status = 'processing' WHERE payment_id = ? AND status = 'unsent'",
    )
    .bind(payment_id)
    .execute(db)
    .await
    .context("marking a payment sent")?;
    Ok(())
}

/// Applies the provider's callback, once. A success pays the order only if it is still
/// `confirmed` and within its window, in one conditional `UPDATE` of the order row; else the
/// payment is `refund_due`.
pub async fn settle(
    db: &MySqlPool,
    payment_id: &str,
    outcome: ChargeOutcome,
    now_ms: i64,
) -> anyhow::Result<Option<Settled>> {
    let mut tx = db.begin().await.context("starting a transaction")?;
    let Some(row) = sqlx::query(
        "SELECT payment_id, ticket, user_id, status, amount, currency FROM payments \
         WHERE payment_id = ? FOR UPDATE",
    )
    .bind(payment_id)
    .fetch_optional(&mut *tx)
    .await
    .context("locking a payment")?
    else {
        return Ok(None);
    };
    let mut payment = from_row(&row)?;
    if !matches!(
        payment.status,
        PaymentStatus::Unsent | PaymentStatus::Processing
    ) {
        // A repeated (or late duplicate) callback: already settled, nothing changes.
        return Ok(Some(Settled {
            payment,
            changed: false,
        }));
    }
    payment.status = match outcome {
        ChargeOutcome::Declined => PaymentStatus::Declined,
        ChargeOutcome::Succeeded => {
            let paid = sqlx::query(
                "UPDATE orders SET status = 'paid', paid_at_ms = ? \
                 WHERE ticket = ? AND status = 'confirmed' AND pay_by_ms > ?",
            )
            .bind(now_ms)
            .bind(&payment.ticket)
            .bind(now_ms)
            .execute(&mut *tx)
            .await
            .context("paying the order")?;
            if paid.rows_affected() == 1 {
                PaymentStatus::Succeeded
            } else {
                PaymentStatus::RefundDue
            }
        }
    };
    sqlx::query("UPDATE payments SET status = ?, settled_at_ms = ? WHERE payment_id = ?")
        .bind(payment.status.as_str())
        .bind(now_ms)
        .bind(payment_id)
        .execute(&mut *tx)
        .await
        .context("settling a payment")?;
    tx.commit().await.context("committing a payment")?;
    Ok(Some(Settled {
        payment,
        changed: true,
    }))
}
