//! Payment attempts: recorded in MySQL, sent to the provider, settled by its signed callback.
//!
//! Paying and cancelling decide on the same order row, each with one conditional `UPDATE`:
//! a success makes the order `paid` only while it is `confirmed` and its deadline is ahead;
//! the cancel (expiry or buyer) only takes a `confirmed` order. Whichever commits first wins,
//! and the other finds the row changed. A success that loses is `refund_due`.
//!
//! A new attempt is recorded under the same row lock ([`record`]), so two pays of one order
//! at once never both reach the provider.

use super::{Charge, ChargeOutcome, PaymentStatus};
use crate::config::PaymentSettings;
use anyhow::Context;
use rand::RngCore;
use secrecy::{ExposeSecret, SecretString};
use sqlx::MySqlPool;
use std::time::Duration;

/// The provider, and the secret its callbacks are signed with.
pub struct Payments {
    provider_url: String,
    callback_url: String,
    webhook_secret: SecretString,
    client: reqwest::Client,
    /// The longest a call to the provider takes.
    timeout: Duration,
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
    /// The order this callback paid, if it did, and its units.
    pub paid_order: Option<(u64, u16)>,
    /// The order's trace (W3C `traceparent`), read only when traces are on: the callback's
    /// span joins it.
    pub traceparent: Option<String>,
}

impl Payments {
    pub fn from_settings(s: &PaymentSettings) -> anyhow::Result<Self> {
        Ok(Self {
            provider_url: s.provider_url.trim_end_matches('/').to_owned(),
            callback_url: s.callback_url.clone(),
            webhook_secret: s.webhook_secret.clone(),
            timeout: s.provider_timeout(),
            client: reqwest::Client::builder()
                .timeout(s.provider_timeout())
                .connect_timeout(s.provider_timeout().min(Duration::from_secs(2)))
                .build()
                .context("building the payment provider's HTTP client")?,
        })
    }

    /// Attempts recorded after this time may still be on their way to the provider.
    pub fn sending_since(&self, now_ms: i64) -> i64 {
        now_ms - self.timeout.as_millis() as i64 - 1000
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

/// What the provider says of a charge it was sent (`GET {url}/charges/{payment_id}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChargeState {
    Decided(ChargeOutcome),
    /// Taken, not decided yet.
    Undecided,
    /// The provider never took it (`404`): no money moved.
    Unknown,
}

impl Payments {
    /// Asks the provider about a charge whose callback never came.
    pub async fn charge_state(&self, payment_id: &str) -> anyhow::Result<ChargeState> {
        #[derive(serde::Deserialize)]
        struct View {
            decision: Option<ChargeOutcome>,
        }
        anyhow::ensure!(
            !self.provider_url.is_empty(),
            "no payment provider is configured (SECKILL_PAYMENT_PROVIDER_URL)"
        );
        let res = self
            .client
            .get(format!("{}/charges/{payment_id}", self.provider_url))
            .send()
            .await
            .context("asking the payment provider")?;
        if res.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(ChargeState::Unknown);
        }
        anyhow::ensure!(
            res.status().is_success(),
            "the payment provider answered {}",
            res.status()
        );
        let view: View = res.json().await.context("reading the provider's answer")?;
        Ok(view
            .decision
            .map_or(ChargeState::Undecided, ChargeState::Decided))
    }
}

/// Payments sent to the provider (`processing`) at or before `sent_before_ms` whose callback
/// has not come, oldest first.
pub async fn waiting_for_callback(
    db: &MySqlPool,
    sent_before_ms: i64,
    limit: usize,
) -> anyhow::Result<Vec<String>> {
    sqlx::query_scalar(
        "SELECT payment_id FROM payments WHERE status = 'processing' AND created_at_ms <= ? \
         ORDER BY created_at_ms LIMIT ?",
    )
    .bind(sent_before_ms)
    .bind(limit as i64)
    .fetch_all(db)
    .await
    .context("reading payments waiting for the provider")
}

/// `pay_` and 32 hex digits from a CSPRNG.
pub fn new_payment_id() -> String {
    let mut b = [0u8; 16];
    rand::rng().fill_bytes(&mut b);
    format!("pay_{}", hex::encode(b))
}

/// A row of `payments`, as [`by_key`], [`record`] and [`settle`] select it.
#[derive(sqlx::FromRow)]
struct PaymentRow {
    payment_id: String,
    ticket: String,
    user_id: i64,
    status: String,
    amount: i64,
    currency: String,
}

impl TryFrom<PaymentRow> for Payment {
    type Error = anyhow::Error;

    fn try_from(r: PaymentRow) -> anyhow::Result<Payment> {
        Ok(Payment {
            status: PaymentStatus::parse(&r.status)
                .with_context(|| format!("unknown payment status {:?} in MySQL", r.status))?,
            payment_id: r.payment_id,
            ticket: r.ticket,
            user_id: r.user_id as u64,
            amount: r.amount,
            currency: r.currency,
        })
    }
}

/// The attempt made with this key for this ticket, if any.
pub async fn by_key<'e>(
    db: impl sqlx::Executor<'e, Database = sqlx::MySql>,
    ticket: &str,
    key: &str,
) -> anyhow::Result<Option<Payment>> {
    sqlx::query_as::<_, PaymentRow>(
        "SELECT payment_id, ticket, user_id, status, amount, currency FROM payments \
         WHERE ticket = ? AND idempotency_key = ?",
    )
    .bind(ticket)
    .bind(key)
    .fetch_optional(db)
    .await
    .context("reading a payment")?
    .map(Payment::try_from)
    .transpose()
}

/// What [`record`] found for a new attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// Recorded (`unsent`): send it.
    New,
    /// An attempt with this key exists already (a concurrent repeat): answer that one.
    Repeat(Payment),
    /// Another attempt awaits the provider's callback, or is being sent right now:
    /// `409 payment_in_progress`.
    InProgress,
    /// Another attempt was recorded, longer ago than a call to the provider can take, and the
    /// provider never confirmed taking it (it was down, or its answer was lost): that attempt
    /// is sent again, with its own payment id, which the provider dedupes by. A new payment
    /// id could charge twice.
    Unsent(Payment),
    /// The order is no longer payable (paid, or cancelled meanwhile), or unknown.
    NotPayable(Option<String>),
    /// The order's payment window closed while the request waited for the lock.
    WindowClosed,
}

/// Records a new attempt (`unsent`) with this key, unless another attempt of the order is in
/// progress. One transaction holds the order's row lock while it looks and inserts, so two
/// pays of one order at once (a double tap, two devices) are decided one after the other:
/// at most one attempt is ever in progress, and at most one charge is asked for.
///
/// An `unsent` attempt recorded after `sending_since_ms` may still be on its way to the
/// provider, so it counts as in progress.
pub async fn record(
    db: &MySqlPool,
    p: &Payment,
    key: &str,
    sending_since_ms: i64,
) -> anyhow::Result<Recorded> {
    let mut tx = db.begin().await.context("starting a transaction")?;
    let order: Option<(String, Option<i64>)> =
        sqlx::query_as("SELECT status, pay_by_ms FROM orders WHERE ticket = ? FOR UPDATE")
            .bind(&p.ticket)
            .fetch_optional(&mut *tx)
            .await
            .context("locking the order")?;
    let (status, pay_by_ms) = order.unzip();
    if status.as_deref() != Some("confirmed") {
        return Ok(Recorded::NotPayable(status));
    }
    // Stamped under the lock: attempts of one order are recorded in this order, and none is
    // sent once the window has closed (the request may have waited for the lock past it).
    let now_ms = crate::now_ms();
    if pay_by_ms.flatten().is_some_and(|by| now_ms >= by) {
        return Ok(Recorded::WindowClosed);
    }
    if let Some(repeat) = by_key(&mut *tx, &p.ticket, key).await? {
        if repeat.status != PaymentStatus::Unsent {
            return Ok(Recorded::Repeat(repeat));
        }
        // The same key's attempt, not taken by the provider: send it only if no one else is.
        return Ok(
            if claim(tx, &repeat.payment_id, sending_since_ms, now_ms).await? {
                Recorded::Repeat(repeat)
            } else {
                Recorded::InProgress
            },
        );
    }
    if let Some(other) = sqlx::query_as::<_, PaymentRow>(
        "SELECT payment_id, ticket, user_id, status, amount, currency, created_at_ms FROM payments \
         WHERE ticket = ? AND status IN ('unsent', 'processing') ORDER BY created_at_ms LIMIT 1",
    )
    .bind(&p.ticket)
    .fetch_optional(&mut *tx)
    .await
    .context("reading payments")?
    {
        let other = Payment::try_from(other)?;
        if other.status != PaymentStatus::Unsent {
            return Ok(Recorded::InProgress);
        }
        // Claimed under the order's lock, and committed: a second pay right after this one
        // finds it being sent, and waits (before, both sent it: two charges asked for).
        return Ok(if claim(tx, &other.payment_id, sending_since_ms, now_ms).await? {
            Recorded::Unsent(other)
        } else {
            Recorded::InProgress
        });
    }
    sqlx::query(
        "INSERT INTO payments (payment_id, ticket, user_id, idempotency_key, amount, currency, status, created_at_ms) \
         VALUES (?, ?, ?, ?, ?, ?, 'unsent', ?)",
    )
    .bind(&p.payment_id)
    .bind(&p.ticket)
    .bind(p.user_id as i64)
    .bind(key)
    .bind(p.amount)
    .bind(&p.currency)
    .bind(now_ms)
    .execute(&mut *tx)
    .await
    .context("recording a payment")?;
    tx.commit().await.context("committing a payment")?;
    Ok(Recorded::New)
}

/// Claims an `unsent` attempt for sending: its `created_at_ms` becomes `now_ms`, so that for
/// as long as a call to the provider can take it counts as in progress. `false` when it was
/// stamped after `sending_since_ms` (someone is sending it now) or is no longer `unsent`.
/// Commits `tx`, which holds the order's lock.
async fn claim(
    mut tx: sqlx::Transaction<'_, sqlx::MySql>,
    payment_id: &str,
    sending_since_ms: i64,
    now_ms: i64,
) -> anyhow::Result<bool> {
    let done = sqlx::query(
        "UPDATE payments SET created_at_ms = ? \
         WHERE payment_id = ? AND status = 'unsent' AND created_at_ms < ?",
    )
    .bind(now_ms)
    .bind(payment_id)
    .bind(sending_since_ms)
    .execute(&mut *tx)
    .await
    .context("claiming an unsent payment")?;
    tx.commit().await.context("committing a claim")?;
    Ok(done.rows_affected() == 1)
}

/// A send that failed (the provider refused the charge or could not be reached): the attempt
/// is no longer being sent, so its claim is given back (its stamp moved `window_ms` earlier)
/// and the next pay may send it at once.
pub async fn release(db: &MySqlPool, payment_id: &str, window_ms: i64) -> anyhow::Result<()> {
    sqlx::query(
        "UPDATE payments SET created_at_ms = created_at_ms - ? \
         WHERE payment_id = ? AND status = 'unsent'",
    )
    .bind(window_ms)
    .bind(payment_id)
    .execute(db)
    .await
    .context("releasing an unsent payment")?;
    Ok(())
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
    let Some(row) = sqlx::query_as::<_, PaymentRow>(
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
    let mut payment = Payment::try_from(row)?;
    let mut paid_order = None;
    if !matches!(
        payment.status,
        PaymentStatus::Unsent | PaymentStatus::Processing
    ) {
        // A repeated (or late duplicate) callback: already settled, nothing changes.
        return Ok(Some(Settled {
            payment,
            changed: false,
            paid_order: None,
            traceparent: None,
        }));
    }
    payment.status = match outcome {
        ChargeOutcome::Declined => PaymentStatus::Declined,
        ChargeOutcome::Succeeded => {
            let paid = sqlx::query(
                "UPDATE orders SET status = 'paid', paid_at_ms = ?, restore_due = 1 \
                 WHERE ticket = ? AND status = 'confirmed' AND pay_by_ms > ?",
            )
            .bind(now_ms)
            .bind(&payment.ticket)
            .bind(now_ms)
            .execute(&mut *tx)
            .await
            .context("paying the order")?;
            if paid.rows_affected() == 1 {
                let (id, quantity): (i64, u16) =
                    sqlx::query_as("SELECT id, quantity FROM orders WHERE ticket = ?")
                        .bind(&payment.ticket)
                        .fetch_one(&mut *tx)
                        .await
                        .context("reading the paid order")?;
                paid_order = Some((id as u64, quantity.max(1)));
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
    let traceparent = if crate::telemetry::enabled() {
        sqlx::query_scalar::<_, Option<String>>("SELECT traceparent FROM orders WHERE ticket = ?")
            .bind(&payment.ticket)
            .fetch_optional(&mut *tx)
            .await
            .context("reading the order's trace")?
            .flatten()
    } else {
        None
    };
    tx.commit().await.context("committing a payment")?;
    Ok(Some(Settled {
        payment,
        changed: true,
        paid_order,
        traceparent,
    }))
}
