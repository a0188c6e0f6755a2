//! The provider's endpoints: `POST /charges`, `GET /charges/{payment_id}` and `GET /stats`.

use super::callback::Dispatcher;
use super::ledger::{Ledger, Opened, Overrides};
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse, ResponseError};
use seckill_shared::payments::{Charge, ChargeOutcome};
use serde::Serialize;
use std::time::Duration;

/// Test hook: `succeeded` or `declined` instead of the random outcome.
pub const DECISION_HEADER: &str = "Provider-Decision";
/// Test hook: the delay before the decision, in milliseconds, instead of the random one.
pub const DELAY_HEADER: &str = "Provider-Delay-Ms";

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/charges", web::post().to(create_charge))
        .route("/charges/{payment_id}", web::get().to(show_charge))
        .route("/stats", web::get().to(stats));
}

/// Every error answers `{"error": "<message>"}`.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("{0}")]
    Invalid(String),
    #[error("no charge {0}")]
    UnknownCharge(String),
    #[error("payment_id {0} was already charged with a different body")]
    Conflict(String),
}

impl ResponseError for ProviderError {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::Invalid(_) => StatusCode::BAD_REQUEST,
            Self::UnknownCharge(_) => StatusCode::NOT_FOUND,
            Self::Conflict(_) => StatusCode::CONFLICT,
        }
    }

    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.status_code())
            .json(serde_json::json!({ "error": self.to_string() }))
    }
}

/// A body that is not a [`Charge`] answers 400 with a JSON body.
pub fn json_error(err: actix_web::error::JsonPayloadError, _req: &HttpRequest) -> actix_web::Error {
    ProviderError::Invalid(format!("invalid JSON body: {err}")).into()
}

#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "snake_case")]
enum ChargeStatus {
    Pending,
}

#[derive(Debug, Serialize)]
struct ChargeAccepted {
    payment_id: String,
    status: ChargeStatus,
}

async fn create_charge(
    req: HttpRequest,
    charge: web::Json<Charge>,
    ledger: web::Data<Ledger>,
    dispatcher: web::Data<Dispatcher>,
) -> Result<HttpResponse, ProviderError> {
    let charge = charge.into_inner();
    check(&charge)?;
    let overrides = overrides(&req)?;
    let payment_id = charge.payment_id.clone();
    match ledger.open(charge.clone(), overrides) {
        Opened::New(plan) => dispatcher.schedule(charge, plan),
        Opened::Repeat => {}
        Opened::Conflict => return Err(ProviderError::Conflict(payment_id)),
    }
    Ok(HttpResponse::Created().json(ChargeAccepted {
        payment_id,
        status: ChargeStatus::Pending,
    }))
}

fn check(charge: &Charge) -> Result<(), ProviderError> {
    let invalid = |m: &str| Err(ProviderError::Invalid(m.into()));
    if charge.payment_id.is_empty() {
        return invalid("payment_id must not be empty");
    }
    if charge.amount <= 0 {
        return invalid("amount must be above 0");
    }
    if charge.currency.len() != 3 || !charge.currency.bytes().all(|b| b.is_ascii_alphabetic()) {
        return invalid("currency must be three letters (ISO 4217)");
    }
    match reqwest::Url::parse(&charge.callback_url) {
        Ok(u) if u.scheme() == "http" && u.host().is_some() => Ok(()),
        _ => invalid("callback_url must be an http:// URL (the provider speaks no TLS)"),
    }
}

fn overrides(req: &HttpRequest) -> Result<Overrides, ProviderError> {
    let header = |name: &str| -> Result<Option<&str>, ProviderError> {
        req.headers()
            .get(name)
            .map(|v| {
                v.to_str()
                    .map_err(|_| ProviderError::Invalid(format!("{name} is not text")))
            })
            .transpose()
    };
    let outcome = match header(DECISION_HEADER)? {
        None => None,
        Some("succeeded") => Some(ChargeOutcome::Succeeded),
        Some("declined") => Some(ChargeOutcome::Declined),
        Some(_) => {
            return Err(ProviderError::Invalid(format!(
                "{DECISION_HEADER} must be succeeded or declined"
            )))
        }
    };
    let delay = header(DELAY_HEADER)?
        .map(|v| {
            v.parse::<u64>().map(Duration::from_millis).map_err(|_| {
                ProviderError::Invalid(format!("{DELAY_HEADER} must be a number of milliseconds"))
            })
        })
        .transpose()?;
    Ok(Overrides { outcome, delay })
}

async fn show_charge(
    payment_id: web::Path<String>,
    ledger: web::Data<Ledger>,
) -> Result<HttpResponse, ProviderError> {
    let payment_id = payment_id.into_inner();
    match ledger.view(&payment_id) {
        Some(view) => Ok(HttpResponse::Ok().json(view)),
        None => Err(ProviderError::UnknownCharge(payment_id)),
    }
}

async fn stats(ledger: web::Data<Ledger>) -> HttpResponse {
    HttpResponse::Ok().json(ledger.stats())
}
