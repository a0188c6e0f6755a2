//! The payment window: `POST /v1/orders/{ticket}/pay`, `POST /v1/orders/{ticket}/cancel`
//! and the provider's `POST /v1/payments/callback`. See [`seckill_shared::payments::attempts`].

use crate::auth::Buyer;
use crate::error::{documented as e, ApiError};
use crate::routes::openapi::schema;
use crate::state::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use seckill_shared::api::{CallbackBody, PaymentBody, TicketBody};
use seckill_shared::payments::attempts::{self as payments, Payment, Recorded};
use seckill_shared::payments::cancel::{self, BuyerCancel};
use seckill_shared::payments::{self as pay, Callback, PaymentStatus};
use seckill_shared::telemetry;
use seckill_shared::{db, now_ms, Ticket, TicketStatus, UserId};

/// The largest callback body, as for every JSON body.
const MAX_CALLBACK_BYTES: usize = 4096;

/// The longest `Idempotency-Key`.
const MAX_KEY_LEN: usize = 255;

/// The ticket's order as MySQL knows it, if the caller owns it. A ticket still in flight
/// (only in Redis) is `pending`.
async fn owned_order(
    state: &AppState,
    buyer: &Buyer,
    ticket: &Ticket,
) -> Result<db::SettledTicket, ApiError> {
    let owner = |user_id: u64| buyer.0.is_none_or(|b| b.get() == user_id);
    match db::settled_ticket(&state.db, ticket).await {
        Ok(Some(s)) if owner(s.user_id) => Ok(s),
        Ok(Some(_)) => Err(ApiError::UnknownTicket),
        Ok(None) => match state.store.ticket(ticket).await {
            Ok(Some(r)) if owner(r.user_id) => Ok(db::SettledTicket {
                status: r.status,
                user_id: r.user_id,
                quantity: r.quantity,
                ..Default::default()
            }),
            Ok(_) => Err(ApiError::UnknownTicket),
            Err(e) => Err(ApiError::unavailable("Redis", e)),
        },
        Err(e) => Err(ApiError::unavailable("MySQL", e)),
    }
}

fn idempotency_key(req: &HttpRequest) -> Result<String, ApiError> {
    let key = req
        .headers()
        .get("Idempotency-Key")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .unwrap_or_default();
    if key.is_empty() || key.len() > MAX_KEY_LEN || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ApiError::BadRequest(format!(
            "an Idempotency-Key header of 1 to {MAX_KEY_LEN} visible ASCII characters is required"
        )));
    }
    Ok(key.to_owned())
}

#[utoipa::path(
    post,
    path = "/v1/orders/{ticket}/pay",
    operation_id = "payOrder",
    tag = "buy",
    summary = "Pay a confirmed order",
    description = "Records a payment attempt, then asks the payment provider to charge the product's price. The provider's signed callback decides: a success within the window makes the order `paid`. A repeat with the same `Idempotency-Key` answers the same payment and charges nothing more. A declined payment leaves the order `confirmed`: pay again, with a new key, until `pay_by_ms`. No body.",
    params(
        ("ticket" = inline(schema::TicketText), Path, description = "The order's ticket."),
        ("Idempotency-Key" = inline(schema::IdempotencyKey), Header, description = "1 to 255 visible ASCII characters, unique per payment attempt."),
    ),
    security(("buyer" = [])),
    responses(
        (status = 202, description = "Sent to the provider; poll the ticket.", body = PaymentBody),
        e::BadRequest,
        e::Unauthenticated,
        e::UnknownTicket,
        e::NotPayable,
        e::AddressLimited,
        e::Unavailable,
    ),
)]
pub async fn pay(
    req: HttpRequest,
    buyer: Buyer,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let ticket = Ticket::parse(&path)?;
    let key = idempotency_key(&req)?;
    let order = owned_order(&state, &buyer, &ticket).await?;
    let existing = payments::by_key(&state.db, ticket.as_str(), &key)
        .await
        .map_err(|e| ApiError::unavailable("MySQL", e))?;
    // The same request again answers the same payment.
    if let Some(p) = &existing {
        if p.status != PaymentStatus::Unsent {
            return Ok(HttpResponse::Accepted().json(PaymentBody::of(p)));
        }
    }
    // A new payment, or one the provider never took (sent again, with the same payment id,
    // which the provider dedupes by): only for an order still payable.
    if order.status != TicketStatus::Confirmed || order.pay_by_ms.is_none() {
        return Err(ApiError::NotPayable {
            state: order.status,
        });
    }
    let now = now_ms();
    if order.pay_by_ms.is_some_and(|by| now >= by) {
        return Err(ApiError::PaymentWindowClosed);
    }
    let sending_since = state.payments.sending_since(now);
    // This key's attempt, never taken by the provider (`record` claims it, or finds another
    // request sending it: the same key twice at once), or a new one.
    let attempt = match existing {
        Some(p) => p,
        None => {
            let product = db::product(&state.db, ticket.product())
                .await
                .map_err(|e| ApiError::unavailable("MySQL", e))?
                .ok_or(ApiError::UnknownTicket)?;
            Payment {
                payment_id: payments::new_payment_id(),
                ticket: ticket.to_string(),
                user_id: order.user_id,
                status: PaymentStatus::Unsent,
                // The order's whole amount: every unit at the product's price.
                amount: product.price * i64::from(order.quantity.max(1)),
                currency: product.currency,
            }
        }
    };
    let payment = match payments::record(&state.db, &attempt, &key, sending_since)
        .await
        .map_err(|e| ApiError::unavailable("MySQL", e))?
    {
        Recorded::New => attempt,
        // A concurrent repeat recorded it first.
        Recorded::Repeat(p) if p.status != PaymentStatus::Unsent => {
            return Ok(HttpResponse::Accepted().json(PaymentBody::of(&p)));
        }
        Recorded::Repeat(p) | Recorded::Unsent(p) => p,
        Recorded::InProgress => return Err(ApiError::PaymentInProgress),
        Recorded::WindowClosed => return Err(ApiError::PaymentWindowClosed),
        Recorded::NotPayable(status) => {
            return Err(ApiError::NotPayable {
                state: match status.as_deref() {
                    Some("paid") => TicketStatus::Paid,
                    Some("cancelled") => TicketStatus::Cancelled,
                    _ => order.status,
                },
            })
        }
    };
    if let Err(e) = state.payments.send(&payment).await {
        // Not being sent any more: the next pay (this key again, or another) sends it.
        if let Err(e) = payments::release(&state.db, &payment.payment_id, now - sending_since).await
        {
            tracing::warn!(error = format!("{e:#}"), payment = %payment.payment_id, "a failed send keeps its claim until it ages out");
        }
        return Err(ApiError::unavailable("the payment provider", e));
    }
    payments::mark_sent(&state.db, &payment.payment_id)
        .await
        .map_err(|e| ApiError::unavailable("MySQL", e))?;
    state.metrics.payments.with_label_values(&["sent"]).inc();
    Ok(HttpResponse::Accepted().json(PaymentBody {
        payment_id: payment.payment_id,
        status: PaymentStatus::Processing.as_str().to_owned(),
    }))
}

#[utoipa::path(
    post,
    path = "/v1/orders/{ticket}/cancel",
    operation_id = "cancelOrder",
    tag = "buy",
    summary = "Cancel a confirmed order",
    description = "The owner cancels an order awaiting payment; its unit goes back on sale at once. Cancelling a cancelled order answers it again. No body.",
    params(("ticket" = inline(schema::TicketText), Path, description = "The order's ticket.")),
    security(("buyer" = [])),
    responses(
        (status = 200, description = "Cancelled.", body = TicketBody),
        e::BadRequest,
        e::Unauthenticated,
        e::UnknownTicket,
        e::NotCancellable,
        e::AddressLimited,
        e::Unavailable,
    ),
)]
pub async fn cancel(
    buyer: Buyer,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let ticket = Ticket::parse(&path)?;
    let order = owned_order(&state, &buyer, &ticket).await?;
    let user = UserId::new(order.user_id)
        .map_err(|e| ApiError::Unexpected(anyhow::anyhow!("a stored user: {e}")))?;
    let now = now_ms();
    match cancel::cancel_by_buyer(&state.db, &ticket, user, now)
        .await
        .map_err(|e| ApiError::unavailable("MySQL", e))?
    {
        BuyerCancel::Cancelled(c) => {
            // The commit decided; Redis follows now, or a worker's next round does it.
            match cancel::give_back(&state.store, &state.db, std::slice::from_ref(&c), now).await {
                Ok(back) => {
                    for product in back.keys() {
                        state
                            .sold_out
                            .drop_marker(*product, crate::sold_out::DropCause::ZkFalse);
                        state.sold_out.publish_not_sold_out(*product).await;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = format!("{e:#}"), %ticket, "the unit goes back in Redis on a worker's next round")
                }
            }
            state.metrics.cancels.inc();
        }
        BuyerCancel::NotCancellable(s) if s.public() == TicketStatus::Cancelled => {}
        BuyerCancel::NotCancellable(s) => {
            return Err(ApiError::NotCancellable { state: s.public() })
        }
        BuyerCancel::NoOrder => {
            return Err(ApiError::NotCancellable {
                state: order.status,
            })
        }
    }
    // The ticket as `GET /v1/orders/{ticket}` (and its stream) answers it.
    let body = crate::routes::orders::read_ticket(&state, &ticket, buyer.0).await?;
    Ok(HttpResponse::Ok().json(body))
}

#[utoipa::path(
    post,
    path = "/v1/payments/callback",
    operation_id = "paymentCallback",
    tag = "payments",
    summary = "The payment provider's answer",
    description = "Signed: `Seckill-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of \"<t>.<raw body>\" with SECKILL_PAYMENT_WEBHOOK_SECRET>`. A success pays the order if it is still `confirmed` and within its window; otherwise the payment becomes `refund_due`. Repeats change nothing.",
    request_body = CallbackBody,
    params(("Seckill-Signature" = String, Header, description = "`t=<unix seconds>,v1=<hex HMAC-SHA256>`.")),
    responses(
        (status = 200, description = "Applied (or applied before).", body = PaymentBody),
        e::BadRequest,
        e::InvalidSignature,
        e::UnknownPayment,
        e::PayloadTooLarge,
        e::Unavailable,
    ),
)]
pub async fn callback(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    // The same limit as every JSON body (the extractor stops reading at 256 KiB).
    if body.len() > MAX_CALLBACK_BYTES {
        return Err(ApiError::PayloadTooLarge);
    }
    let Some(secret) = state.payments.webhook_secret() else {
        return Err(ApiError::InvalidSignature(
            "callbacks are refused: SECKILL_PAYMENT_WEBHOOK_SECRET is not set".into(),
        ));
    };
    let header = req
        .headers()
        .get(pay::SIGNATURE_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    pay::verify(secret, header, &body, now_ms() / 1000)
        .map_err(|e| ApiError::InvalidSignature(e.to_string()))?;
    let cb: Callback = serde_json::from_slice(&body)
        .map_err(|e| ApiError::BadRequest(format!("invalid callback body: {e}")))?;
    let started = std::time::SystemTime::now();
    let now = now_ms();
    let settled = payments::settle(&state.db, &cb.payment_id, cb.status, now)
        .await
        .map_err(|e| ApiError::unavailable("MySQL", e))?
        .ok_or(ApiError::UnknownPayment)?;
    follow(&state, &settled, now).await;
    if telemetry::enabled() {
        trace_callback(&settled, started);
    }
    Ok(HttpResponse::Ok().json(PaymentBody::of(&settled.payment)))
}

/// The callback's span, in the order's trace (its row keeps the `traceparent` of its Kafka
/// message, flagged sampled when the buy was, or when the worker kept a slow order): kept
/// when the order's trace is, and always for a refund due.
fn trace_callback(settled: &payments::Settled, started: std::time::SystemTime) {
    let Some(order) = settled
        .traceparent
        .as_deref()
        .and_then(telemetry::parse_traceparent)
    else {
        return;
    };
    let p = &settled.payment;
    let refund = p.status == PaymentStatus::RefundDue;
    if !refund && !order.is_sampled() {
        return;
    }
    telemetry::Late::new("payment.callback", started, std::time::SystemTime::now())
        .kind(telemetry::SpanKind::Server)
        .attr(telemetry::KeyValue::new(
            "http.route",
            "/v1/payments/callback",
        ))
        .attr(telemetry::KeyValue::new(
            "http.response.status_code",
            200i64,
        ))
        .attr(telemetry::KeyValue::new("seckill.ticket", p.ticket.clone()))
        .attr(telemetry::KeyValue::new(
            "seckill.payment_id",
            p.payment_id.clone(),
        ))
        .attr(telemetry::KeyValue::new(
            "seckill.payment_status",
            p.status.as_str(),
        ))
        .error(refund.then(|| "paid after the order stopped being payable: refund due".to_owned()))
        .emit(Some(&order));
}

/// After a payment settled in MySQL (by its callback, or by asking the provider): count it,
/// and make Redis follow a paid order.
pub(crate) async fn follow(state: &AppState, settled: &payments::Settled, now: i64) {
    let p = &settled.payment;
    if !settled.changed {
        return;
    }
    state
        .metrics
        .payments
        .with_label_values(&[p.status.as_str()])
        .inc();
    match p.status {
        PaymentStatus::Succeeded => {
            if let (Ok(t), Some((order_id, quantity))) =
                (Ticket::parse(&p.ticket), settled.paid_order)
            {
                let paid = [cancel::PaidOrder {
                    id: order_id,
                    ticket: t,
                    user_id: p.user_id,
                    quantity,
                }];
                if let Err(e) = cancel::follow_paid(&state.store, &state.db, &paid, now).await {
                    tracing::warn!(error = format!("{e:#}"), ticket = %paid[0].ticket, "Redis did not follow a payment yet; a worker's next round does it");
                }
            }
        }
        PaymentStatus::RefundDue => tracing::warn!(
            payment_id = %p.payment_id,
            ticket = %p.ticket,
            amount = p.amount,
            currency = %p.currency,
            "a payment succeeded for an order no longer payable: refund due"
        ),
        _ => {}
    }
}
