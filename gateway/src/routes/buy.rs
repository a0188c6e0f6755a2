//! `POST /v1/seckill/{product_id}`: buy an order of 1 to `max_per_buyer` units.

use crate::auth::Buyer;
use crate::error::{documented as e, ApiError, Object};
use crate::rate_limit::Decision;
use crate::routes::openapi::answers::{json_answer, location};
use crate::routes::openapi::schema;
use crate::routes::Outcome as OutcomeLabel;
use crate::state::{AppState, ThreadRedis};
use actix_web::http::header;
use actix_web::{web, HttpMessage, HttpRequest, HttpResponse};
use seckill_shared::api::{BuyRequest, TicketBody};
use seckill_shared::locations::Located;
use seckill_shared::recovery::{self, Stuck};
use seckill_shared::reservation::{Reservation, UserLimit};
use seckill_shared::settle::Outcome;
use seckill_shared::store::{RecordStatus, TicketRecord, TicketStore};
use seckill_shared::telemetry;
use seckill_shared::{
    db, now_ms, FailureReason, OrderMessage, ProductId, Ticket, TicketStatus, UserId,
};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::Instrument;
use utoipa::openapi::link::LinkBuilder;
use utoipa::openapi::{RefOr, Response};
use utoipa::IntoResponses;

/// The buy path, cheapest check first:
/// 1. the path and the body (extractors: `400`, `413`, `415`; a `quantity` out of 1 to 100: `400`);
/// 2. the local sold-out marker: `409` with no network call, and not counted as in flight;
/// 2b. the buyer: the per-address limit (`429`), then the token (`401`), then a body
///     `user_id` that is not the token's (`403`);
/// 3. admission: at most `SECKILL_MAX_IN_FLIGHT` buys in flight, else `503` at once;
/// 4. the per-user rate limit (`429` with `Retry-After`): on a Redis Cluster one script call
///    here; on one Redis server it is taken inside the reservation script of step 5;
/// 5. the reservation and the hand-off, in their own task.
///
/// The `buy` span starts once the buy is admitted (step 3): a marker hit logs nothing, and a
/// sold-out flood is mostly marker hits, so it skips the span's cost.
/// Its fields are `product_id` and `user_id`: every event logged while the buy runs carries
/// them. The events about a reserved ticket name it themselves (at `debug`, one event per
/// accepted buy): recording it on the span would cost every buy a second formatting of the
/// span's fields, logged or not.
#[utoipa::path(
    post,
    path = "/v1/seckill/{product_id}",
    operation_id = "buy",
    tag = "buy",
    summary = "Buy an order of one or more units",
    description = "The body's `quantity` (1 to the product's `max_per_buyer`, default 1) is reserved whole or not at all: `409 not_enough_stock` (with `left`) when fewer units are left, `409 quantity_over_limit` (with `max_per_buyer`) when it asks for more than the product allows. A buyer holds one live order per product: buying again answers `200` with the ticket held, whatever quantity is asked. Order of checks: the body; the local sold-out marker (`409` without a network call, and before the token: a sold-out flood costs no verification); the per-address limit (`429`); the buyer's token (`401`; the buyer is its `sub`, and a body `user_id` must equal it, else `403 user_mismatch`); admission (`SECKILL_MAX_IN_FLIGHT`, `503`); the per-user rate limit (`429`); then one atomic reservation in Redis. In `async` mode the order goes to Kafka and the answer is `202` once Kafka has it. In `sync` mode MySQL settles it inside the request: `201` confirmed, or `200` with a failed ticket. A product that Redis lost answers `503` while it is rebuilt from MySQL.",
    params(("product_id" = inline(schema::Id), Path, description = "The product.")),
    request_body = BuyRequest,
    security(("buyer" = [])),
    responses(
        BuyAnswers,
        e::BadRequest,
        e::Unauthenticated,
        e::BuyRefused,
        e::UnknownProduct,
        e::SoldOut,
        e::PayloadTooLarge,
        e::UnsupportedMediaType,
        e::RateLimited,
        e::Internal,
        e::Unavailable,
    ),
)]
pub async fn buy(
    req: HttpRequest,
    state: web::Data<AppState>,
    redis: web::Data<ThreadRedis>,
    path: web::Path<String>,
    body: web::Json<Object<BuyRequest>>,
) -> Result<HttpResponse, ApiError> {
    let started = Instant::now();
    if !telemetry::enabled() {
        return buy_steps(req, state, redis, path, body, started, Traced::No).await;
    }
    // W3C: several `traceparent`s are as none.
    let mut given = req.headers().get_all(telemetry::TRACEPARENT);
    let caller = match (given.next(), given.next()) {
        (Some(one), None) => one.to_str().ok(),
        _ => None,
    };
    let Some(parent) = telemetry::sample_request(caller) else {
        let carried = Arc::new(telemetry::Carried::under(caller));
        let traced = Traced::Carried(carried.clone());
        let answer = buy_steps(req, state, redis, path, body, started, traced).await;
        keep_if_failed_or_slow(&answer, started, &carried);
        return answer;
    };
    let span = tracing::info_span!(
        target: telemetry::TRACED,
        "buy",
        otel.kind = "server",
        http.request.method = "POST",
        http.route = ROUTE,
        http.response.status_code = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        otel.status_description = tracing::field::Empty,
        seckill.sold_out_marker = tracing::field::Empty,
        seckill.ticket = tracing::field::Empty,
        product_id = tracing::field::Empty,
        user_id = tracing::field::Empty,
        trace_id = tracing::field::Empty,
        span_id = tracing::field::Empty,
    );
    telemetry::adopt(&span, parent);
    let answer = buy_steps(req, state, redis, path, body, started, Traced::Yes)
        .instrument(span.clone())
        .await;
    let status = match &answer {
        Ok(res) => res.status(),
        Err(e) => actix_web::ResponseError::status_code(e),
    };
    span.record("http.response.status_code", i64::from(status.as_u16()));
    if status.is_server_error() {
        span.record("otel.status_code", "ERROR");
        if let Err(e) = &answer {
            span.record("otel.status_description", tracing::field::display(e));
        }
    }
    answer
}

const ROUTE: &str = "/v1/seckill/{product_id}";

/// What the reservation script decided, as a span attribute.
fn reservation_label(r: &Reservation) -> &'static str {
    match r {
        Reservation::Reserved => "reserved",
        Reservation::AlreadyHolds(_) => "already_holds",
        Reservation::SoldOut => "sold_out",
        Reservation::UnknownProduct => "unknown_product",
        Reservation::NotStarted => "not_started",
        Reservation::Ended => "ended",
        Reservation::AdmissionRequired => "admission_required",
        Reservation::NotAdmitted => "not_admitted",
        Reservation::RateLimited { .. } => "rate_limited",
        Reservation::OverLimit { .. } => "quantity_over_limit",
        Reservation::NotEnough { .. } => "not_enough_stock",
    }
}

/// How a buy is traced (issue 37).
#[derive(Clone)]
enum Traced {
    /// Traces are off.
    No,
    /// Sampled: its spans are made as it goes.
    Yes,
    /// Not sampled, with traces on: its message carries [`telemetry::Carried`]'s
    /// `traceparent`, and the buy keeps a span of its own if it fails or is slow.
    Carried(Arc<telemetry::Carried>),
}

impl Traced {
    fn is_traced(&self) -> bool {
        matches!(self, Traced::Yes)
    }
}

/// An untraced buy whose answer was a server error, or that took longer than
/// `SECKILL_TRACE_SLOW_MS`, keeps a span of its own: the sampler decided before anyone knew.
/// It is a child of the span its message names, so it shares the order's trace.
fn keep_if_failed_or_slow(
    answer: &Result<HttpResponse, ApiError>,
    started: Instant,
    carried: &telemetry::Carried,
) {
    let took = started.elapsed();
    let (status, error) = match answer {
        Ok(res) => (res.status(), None),
        Err(e) => (
            actix_web::ResponseError::status_code(e),
            Some(e.to_string()),
        ),
    };
    let failed = status.is_server_error();
    let slow = telemetry::slow().is_some_and(|s| took >= s);
    if !failed && !slow {
        return;
    }
    let end = std::time::SystemTime::now();
    let mut span = telemetry::Late::new("buy", end - took, end)
        .kind(telemetry::SpanKind::Server)
        .attr(telemetry::KeyValue::new("http.route", ROUTE))
        .attr(telemetry::KeyValue::new(
            "http.response.status_code",
            i64::from(status.as_u16()),
        ))
        .attr(telemetry::KeyValue::new(
            "seckill.kept",
            if failed { "error" } else { "slow" },
        ))
        .error(error.filter(|_| failed));
    for kv in carried.attributes() {
        span = span.attr(kv);
    }
    span.emit(carried.parent().as_ref());
}

/// The steps of [`buy`]; a traced buy runs in its span, and each step gets a span.
async fn buy_steps(
    req: HttpRequest,
    state: web::Data<AppState>,
    redis: web::Data<ThreadRedis>,
    path: web::Path<String>,
    body: web::Json<Object<BuyRequest>>,
    started: Instant,
    traced: Traced,
) -> Result<HttpResponse, ApiError> {
    let product = ProductId::parse(&path)?;
    // The body's own checks come with the body's: a quantity out of range is `400`, sold out
    // or not.
    let quantity = match body.0 .0.quantity {
        None => 1,
        Some(q) if (1..=i64::from(seckill_shared::MAX_PER_BUYER)).contains(&q) => q as u16,
        Some(_) => {
            return Err(ApiError::BadRequest(format!(
                "quantity must be between 1 and {}",
                seckill_shared::MAX_PER_BUYER
            )))
        }
    };
    match &traced {
        Traced::Yes => {
            tracing::Span::current().record("product_id", product.as_i64());
        }
        Traced::Carried(c) => c.note_product(product.get()),
        Traced::No => {}
    }

    // The marker first: a sold-out flood is answered without verifying its tokens (a `409`
    // reserves nothing and says only what every buyer may know).
    if state.sold_out.is_sold_out(product) {
        if traced.is_traced() {
            tracing::Span::current().record("seckill.sold_out_marker", "hit");
        }
        req.extensions_mut().insert(OutcomeLabel("sold_out_marker"));
        return Err(ApiError::SoldOut);
    }
    let identity = if traced.is_traced() {
        tracing::Span::current().record("seckill.sold_out_marker", "miss");
        tracing::info_span!(target: telemetry::TRACED, "identity")
    } else {
        tracing::Span::none()
    };
    let (user, admitted) = identity.in_scope(|| -> Result<_, ApiError> {
        let user = Buyer(state.auth.buyer(&req)?).resolve(body.0 .0.user_id)?;
        // A waiting-room product needs the buyer's admission: its token is verified here,
        // with no network call, before anything touches Redis; the reservation checks that
        // it still holds.
        let admitted = match req
            .headers()
            .get(crate::waiting_room::ADMISSION_HEADER)
            .map(|v| v.to_str().unwrap_or_default())
        {
            None => false,
            Some(token) => {
                state
                    .admissions
                    .verify(token.trim(), product, user, now_ms())
                    .map_err(|e| ApiError::AdmissionInvalid(e.to_string()))?;
                true
            }
        };
        Ok((user, admitted))
    })?;
    drop(identity);
    match &traced {
        Traced::Yes => {
            tracing::Span::current().record("user_id", user.as_i64());
        }
        Traced::Carried(c) => c.note_user(user.get()),
        Traced::No => {}
    }
    let buying = Buying {
        product,
        user,
        quantity,
        admitted,
        limit: None,
        traced,
    };
    admit_and_reserve(req, state, redis, buying, started).await
}

/// Steps 3 to 5 of [`buy`]. The `buy` span covers what can log: the rate limit's own call and
/// the buy task. It is entered on each poll of what it instruments, so the handler's own
/// future, which only waits for the task, goes without it.
async fn admit_and_reserve(
    req: HttpRequest,
    state: web::Data<AppState>,
    redis: web::Data<ThreadRedis>,
    mut buying: Buying,
    started: Instant,
) -> Result<HttpResponse, ApiError> {
    let (product, user, traced) = (buying.product, buying.user, buying.traced.is_traced());
    let Some(permit) = state.admission.try_admit() else {
        req.extensions_mut().insert(OutcomeLabel("overloaded"));
        return Err(ApiError::Overloaded);
    };
    // A traced buy already runs in its span (see `buy`).
    let span = if traced {
        tracing::Span::current()
    } else {
        tracing::info_span!("buy", product_id = product.get(), user_id = user.get())
    };
    // On one Redis server the token is taken inside the reservation script (one call per
    // buy); on a cluster, here first.
    buying.limit = redis.rate_limiter.as_ref().and_then(|l| l.user_limit(user));
    if let (Some(limiter), None) = (&redis.rate_limiter, &buying.limit) {
        let t0 = Instant::now();
        let decision = limiter
            .check(user)
            .instrument(span.clone())
            .await
            .map_err(|e| ApiError::unavailable("Redis", e))?;
        state
            .metrics
            .latency
            .with_label_values(&["rate_limit"])
            .observe(t0.elapsed().as_secs_f64());
        if let Decision::Limited { retry_after } = decision {
            return Err(ApiError::RateLimited {
                retry_after_secs: Decision::retry_after_secs(retry_after),
            });
        }
    }

    // Reservation and hand-off run in their own task: if the client goes away mid-request,
    // the task still finishes, so no reservation is left half done. The task holds the
    // admission permit until it ends, and runs in the `buy` span.
    let task_state = state.clone();
    let result = actix_web::rt::spawn(
        async move {
            let _permit = permit;
            reserve_and_hand_off(task_state, &redis.store, buying).await
        }
        .instrument(span),
    )
    .await
    .map_err(|e| ApiError::Unexpected(anyhow::anyhow!("buy task failed: {e}")))?;
    state
        .metrics
        .steps
        .request
        .observe(started.elapsed().as_secs_f64());
    result
}

/// The buy task. Its future is copied into the task when spawned, and an async fn's future
/// is as large as its largest branch: the branches no accept takes (sync mode's MySQL
/// settle, a ticket already held, sold out, an unknown product, Kafka refusing the order) are
/// boxed, so the future stays at about 1 KB instead of about 9 (a test holds it under 2 KB).
/// One buy, admitted: what [`reserve_and_hand_off`] needs.
struct Buying {
    product: ProductId,
    user: UserId,
    /// Units asked for.
    quantity: u16,
    admitted: bool,
    limit: Option<UserLimit>,
    traced: Traced,
}

async fn reserve_and_hand_off(
    state: web::Data<AppState>,
    store: &TicketStore,
    buying: Buying,
) -> Result<HttpResponse, ApiError> {
    let Buying {
        product,
        user,
        quantity,
        admitted,
        limit,
        traced,
    } = buying;
    let now = now_ms();
    let t0 = Instant::now();
    let span = if traced.is_traced() {
        tracing::info_span!(
            target: telemetry::TRACED,
            "redis.reserve",
            otel.kind = "client",
            db.system.name = "redis",
            seckill.batch_size = tracing::field::Empty,
            seckill.reservation = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
            otel.status_description = tracing::field::Empty,
        )
    } else {
        tracing::Span::none()
    };
    let reserved = store
        .reserve_units(product, user, now, admitted, limit.as_ref(), quantity)
        .instrument(span.clone())
        .await;
    // The ticket the buyer is told of: the one reserved, or the one already held.
    let told = match &reserved {
        Ok((ticket, Reservation::Reserved)) => Some(ticket),
        Ok((_, Reservation::AlreadyHolds(held))) => Some(held),
        _ => None,
    };
    if let (Traced::Carried(c), Some(t)) = (&traced, told) {
        c.note_ticket(t.as_str());
    }
    if traced.is_traced() {
        if let Some(t) = told {
            tracing::Span::current().record("seckill.ticket", t.as_str());
        }
        match &reserved {
            Ok((_, r)) => {
                span.record("seckill.reservation", reservation_label(r));
            }
            Err(e) => {
                span.record("otel.status_code", "ERROR");
                span.record("otel.status_description", tracing::field::display(e));
            }
        }
    }
    drop(span);
    let (ticket, reservation) = reserved.map_err(|e| ApiError::unavailable("Redis", e))?;
    state
        .metrics
        .steps
        .redis_reserve
        .observe(t0.elapsed().as_secs_f64());

    match reservation {
        Reservation::Reserved => {
            let order = OrderMessage::of(ticket.clone(), user, now, quantity);
            let answer = if state.sync_mode {
                Box::pin(settle_now(&state, order)).await
            } else {
                hand_off(&state, store, order, traced).await
            };
            if let Ok(res) = &answer {
                tracing::debug!(status = res.status().as_u16(), %ticket, "reserved and handed off");
            }
            answer
        }
        Reservation::AlreadyHolds(held) => {
            let body = Box::pin(held_ticket(&state, &held, user)).await?;
            Ok(HttpResponse::Ok()
                .insert_header((header::LOCATION, order_location(&held)))
                .json(body))
        }
        Reservation::SoldOut => {
            Box::pin(state.sold_out.on_sold_out(product, &state.store)).await;
            Err(ApiError::SoldOut)
        }
        // Some units are left: no sold-out marker (a smaller buy may go through). A product in
        // buckets held the units it found for this order, and gave them back: every gateway
        // drops a marker it may have set meanwhile.
        Reservation::NotEnough { left } => {
            if state.store.buckets(product).await.unwrap_or(1) > 1 {
                Box::pin(state.sold_out.publish_units_back(product)).await;
            }
            Err(ApiError::NotEnoughStock { left })
        }
        Reservation::OverLimit { max_per_buyer } => {
            Err(ApiError::QuantityOverLimit { max_per_buyer })
        }
        Reservation::UnknownProduct => Err(Box::pin(state.recovery.on_unknown_product(
            &state.store,
            &state.db,
            product,
        ))
        .await),
        Reservation::RateLimited { retry_after_ms } => Err(ApiError::RateLimited {
            retry_after_secs: Decision::retry_after_secs(std::time::Duration::from_millis(
                retry_after_ms,
            )),
        }),
        Reservation::NotStarted => Err(ApiError::SaleNotStarted),
        Reservation::Ended => Err(ApiError::SaleEnded),
        Reservation::AdmissionRequired => Err(ApiError::AdmissionRequired),
        Reservation::NotAdmitted => Err(ApiError::AdmissionInvalid(
            "your admission no longer holds (it lapsed, or your place went back to the head of the queue): poll your queue entry".into(),
        )),
    }
}

/// Async mode: publish, answer `202` once Kafka has it, give the unit back if it cannot.
async fn hand_off(
    state: &AppState,
    store: &TicketStore,
    order: OrderMessage,
    traced: Traced,
) -> Result<HttpResponse, ApiError> {
    let t0 = Instant::now();
    // The order's message carries the trace on (W3C `traceparent`): the `kafka.publish` span's
    // for a traced buy, the carried one for another when traces are on.
    let (span, traceparent): (_, Option<Cow<str>>) = match &traced {
        Traced::Yes => {
            let span = tracing::info_span!(
                target: telemetry::TRACED,
                "kafka.publish",
                otel.kind = "producer",
                messaging.system = "kafka",
                messaging.destination.partition.id = tracing::field::Empty,
                messaging.kafka.offset = tracing::field::Empty,
                otel.status_code = tracing::field::Empty,
                otel.status_description = tracing::field::Empty,
            );
            let tp = telemetry::traceparent_of(&span);
            (span, Some(Cow::Owned(tp)))
        }
        Traced::Carried(c) => (tracing::Span::none(), Some(Cow::Borrowed(&c.traceparent))),
        Traced::No => (tracing::Span::none(), None),
    };
    let published = state
        .publisher
        .publish(&order, traceparent.as_deref())
        .instrument(span.clone())
        .await;
    if !span.is_none() {
        match &published {
            Ok((partition, offset)) => {
                span.record("messaging.destination.partition.id", partition);
                span.record("messaging.kafka.offset", offset);
            }
            Err(e) => {
                span.record("otel.status_code", "ERROR");
                span.record("otel.status_description", tracing::field::display(e));
            }
        }
    }
    drop(span);
    state
        .metrics
        .steps
        .kafka_ack
        .observe(t0.elapsed().as_secs_f64());
    match published {
        Ok((partition, offset)) => {
            // Where the order landed, so the sweeper never fails it for waiting in Kafka. Off
            // the answer's path, in the bucket's next call on this thread's connection: until
            // it is recorded, the sweeper treats the ticket as one without a location, whose
            // timeout is far longer than this takes.
            store.locate_soon(Located {
                ticket: order.ticket.clone(),
                reserved_at_ms: order.reserved_at_ms,
                partition,
                offset,
            });
            Ok(HttpResponse::Accepted()
                .insert_header((header::LOCATION, order_location(&order.ticket)))
                .json(TicketBody::pending(
                    &order.ticket,
                    order.user_id,
                    order.quantity,
                )))
        }
        Err(e) => {
            tracing::warn!(error = format!("{e:#}"), ticket = %order.ticket, "Kafka did not take the order; giving its unit back");
            Box::pin(failed_publish(state, &order)).await
        }
    }
}

/// Kafka reported the order failed, though its message may have landed and a worker may have
/// it: give the unit back if nobody has it, and let MySQL decide what the buyer is told (see
/// [`failed_publish`](seckill_shared::reservation::failed_publish)).
async fn failed_publish(state: &AppState, order: &OrderMessage) -> Result<HttpResponse, ApiError> {
    give_back_or_keep(state, order).await?;
    tracing::warn!(ticket = %order.ticket, "Kafka's report was lost, but the order stands: answering 202");
    let body = match state.store.ticket(&order.ticket).await {
        Ok(Some(rec)) => with_order(state, &order.ticket, rec).await,
        _ => match db::settled_ticket(&state.db, &order.ticket).await {
            Ok(Some(s)) => TicketBody::from_settled(&order.ticket, s),
            _ => TicketBody::pending(&order.ticket, order.user_id, order.quantity),
        },
    };
    Ok(HttpResponse::Accepted()
        .insert_header((header::LOCATION, order_location(&order.ticket)))
        .json(body))
}

/// Sync mode (the seed's design): settle the order inside the request.
async fn settle_now(state: &AppState, order: OrderMessage) -> Result<HttpResponse, ApiError> {
    let settled = state.settler.settle(std::slice::from_ref(&order)).await;
    match settled {
        Ok(report) => {
            if !report.given_back.is_empty() {
                state.sold_out.publish_not_sold_out(order.product_id).await;
            }
            let mut body = TicketBody::pending(&order.ticket, order.user_id, order.quantity);
            match report.outcomes.into_iter().next().map(|(_, o)| o) {
                Some(Outcome::Confirmed { order_id, .. }) => {
                    body.status = TicketStatus::Confirmed;
                    body.order_id = Some(order_id);
                    Ok(HttpResponse::Created()
                        .insert_header((header::LOCATION, order_location(&order.ticket)))
                        .json(body))
                }
                Some(Outcome::Failed {
                    reason: FailureReason::OutOfStock,
                }) => Err(ApiError::SoldOut),
                Some(Outcome::Failed { reason }) => {
                    body.status = TicketStatus::Failed;
                    body.reason = Some(reason.as_str().to_owned());
                    Ok(HttpResponse::Ok().json(body))
                }
                other => Err(ApiError::Unexpected(anyhow::anyhow!(
                    "sync settle left the order {other:?}"
                ))),
            }
        }
        Err(e) => {
            // The outcome is unknown: the MySQL commit may have happened before the error (the
            // Redis confirm failed, or the commit's reply was lost). Giving the unit back now
            // could sell a unit MySQL already sold, so MySQL decides, under the product's row
            // lock: an order row confirms the ticket, otherwise it fails for good and only
            // then is its unit given back. If MySQL cannot answer either, the ticket stays
            // unsettled for the sweeper, which follows the same rule.
            tracing::warn!(error = format!("{e:#}"), ticket = %order.ticket, "sync settle failed; asking MySQL");
            match recovery::settle_stuck(
                &state.store,
                &state.db,
                &order.ticket,
                order.user_id.get(),
                order.quantity,
            )
            .await
            {
                Ok(Stuck::Confirmed { order_id }) => {
                    let mut body =
                        TicketBody::pending(&order.ticket, order.user_id, order.quantity);
                    body.status = TicketStatus::Confirmed;
                    body.order_id = Some(order_id);
                    Ok(HttpResponse::Created()
                        .insert_header((header::LOCATION, order_location(&order.ticket)))
                        .json(body))
                }
                Ok(Stuck::Failed { given_back }) => {
                    if given_back {
                        state.sold_out.publish_not_sold_out(order.product_id).await;
                    }
                    Err(ApiError::unavailable("MySQL", e))
                }
                Err(e2) => {
                    tracing::error!(error = format!("{e2:#}"), ticket = %order.ticket, "could not settle through MySQL; the sweeper will");
                    Err(ApiError::unavailable("MySQL", e))
                }
            }
        }
    }
}

/// The two steps of [`failed_publish`](seckill_shared::reservation::failed_publish): `Ok` when
/// the order stands (the buyer holds the unit), else `503` with the unit given back.
async fn give_back_or_keep(state: &AppState, order: &OrderMessage) -> Result<(), ApiError> {
    use seckill_shared::reservation::failed_publish::{self as failed, Release, Verdict};
    let released = failed::release(&state.store, order, state.admissions.ttl_ms).await;
    if released == Release::Released {
        state.sold_out.publish_not_sold_out(order.product_id).await;
    }
    match failed::decide(&state.store, &state.db, order, released).await {
        Verdict::Held => Ok(()),
        Verdict::NotHeld => Err(ApiError::retry_later("Kafka")),
    }
}

/// The `Location` of a ticket's order: `/v1/orders/{ticket}`.
fn order_location(ticket: &Ticket) -> String {
    ["/v1/orders/", ticket.as_str()].concat()
}

/// A ticket from its Redis copy; a confirmed one with what MySQL says of its payment (or as
/// Redis has it, while MySQL is down).
pub async fn with_order(state: &AppState, ticket: &Ticket, rec: TicketRecord) -> TicketBody {
    with_order_told(state, ticket, rec).await.0
}

/// [`with_order`], and whether MySQL had its say: `false` for a confirmed or paid ticket
/// whose order MySQL could not be read for (its deadline, whether it was paid or cancelled
/// since, are not known), `true` otherwise.
pub async fn with_order_told(
    state: &AppState,
    ticket: &Ticket,
    rec: TicketRecord,
) -> (TicketBody, bool) {
    if !matches!(rec.state, RecordStatus::Confirmed | RecordStatus::Paid) {
        return (TicketBody::from_record(ticket, rec), true);
    }
    match db::settled_ticket(&state.db, ticket).await {
        Ok(Some(s)) if s.user_id == rec.user_id => {
            return (TicketBody::from_record_and_order(ticket, rec, s), true)
        }
        Ok(_) => {}
        Err(e) => tracing::debug!(
            error = format!("{e:#}"),
            "MySQL unavailable; the ticket as Redis has it"
        ),
    }
    (TicketBody::from_record(ticket, rec), false)
}

/// A buyer who buys again is answered with the ticket they hold, a promise. A ticket still
/// `pending`, with no Kafka location, and older than any publish of it can take was reserved
/// by a gateway that died before Kafka took its order (or before it recorded where): the
/// sweeper would fail it for good. So its order is published again, and where it landed is
/// recorded, before the answer: a worker then settles it (a second message of one order
/// changes nothing). If Kafka cannot take it now, the answer is `503`, as for a new buy.
/// A younger one may still be under way (the buyer's first request, on a gateway that may be
/// dying): the answer waits, at most until it is that old, for it to be located or to move on.
/// `false` when the ticket moved on meanwhile (settled, or expired by the sweeper): the
/// record read before is stale.
async fn ensure_in_kafka(
    state: &AppState,
    held: &Ticket,
    user: UserId,
    record: &TicketRecord,
) -> Result<bool, ApiError> {
    if state.sync_mode || record.state != RecordStatus::Pending || record.location.is_some() {
        return Ok(true);
    }
    let mut fresh = true;
    loop {
        match state.store.location(held).await {
            Ok(Some(_)) => return Ok(fresh),
            Ok(None) => {}
            Err(e) => return Err(ApiError::unavailable("Redis", e)),
        }
        let wait = state.republish_after_ms - (now_ms() - record.created_at_ms);
        if wait <= 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(wait.clamp(1, 100) as u64)).await;
        fresh = false;
        match state.store.ticket(held).await {
            Ok(Some(now)) if now.state == RecordStatus::Pending && now.location.is_none() => {}
            Ok(Some(_)) => return Ok(false),
            // Redis lost it meanwhile: nothing tells whether its order is anywhere.
            Ok(None) => {
                return Err(ApiError::unavailable(
                    "Redis",
                    anyhow::anyhow!("the held ticket {held} vanished while its buy again waited"),
                ))
            }
            Err(e) => return Err(ApiError::unavailable("Redis", e)),
        }
    }
    let order = OrderMessage::of(held.clone(), user, record.created_at_ms, record.quantity);
    let traceparent = telemetry::enabled().then(telemetry::unsampled_traceparent);
    let (partition, offset) = match state
        .publisher
        .publish(&order, traceparent.as_deref())
        .await
    {
        Ok(landed) => landed,
        Err(e) => {
            // As for a new buy: the unit goes back unless the order stands, so that a 503
            // never leaves a unit with this buyer.
            tracing::warn!(error = format!("{e:#}"), ticket = %held, "could not publish a held ticket's order again");
            Box::pin(give_back_or_keep(state, &order)).await?;
            return Ok(false);
        }
    };
    let located = Located {
        ticket: held.clone(),
        reserved_at_ms: record.created_at_ms,
        partition,
        offset,
    };
    state
        .store
        .locate(held.product(), std::slice::from_ref(&located))
        .await
        .map_err(|e| ApiError::unavailable("Redis", e))?;
    // On the record too, while it is pending: a sweeper that read it without a location
    // before this then leaves it alone. If the sweeper was first, the ticket has failed and
    // the answer says so (its message is skipped by the worker's claim).
    let held_now = state
        .store
        .locate_held(held, partition, offset)
        .await
        .map_err(|e| ApiError::unavailable("Redis", e))?;
    tracing::warn!(ticket = %held, partition, offset, held_now, "a held ticket had no order in Kafka (its gateway died); published it again");
    Ok(held_now)
}

/// The answer to a buyer who buys again: the ticket they hold, its record read once, and its
/// order in Kafka first ([`ensure_in_kafka`]).
async fn held_ticket(
    state: &AppState,
    held: &Ticket,
    user: UserId,
) -> Result<TicketBody, ApiError> {
    match state.store.ticket(held).await {
        Ok(Some(rec)) => {
            if ensure_in_kafka(state, held, user, &rec).await? {
                Ok(with_order(state, held, rec).await)
            } else {
                current_ticket(state, held, user).await
            }
        }
        Ok(None) => current_ticket(state, held, user).await,
        Err(e) => Err(ApiError::unavailable("Redis", e)),
    }
}

pub async fn current_ticket(
    state: &AppState,
    ticket: &Ticket,
    user: UserId,
) -> Result<TicketBody, ApiError> {
    match state.store.ticket(ticket).await {
        Ok(Some(rec)) => Ok(with_order(state, ticket, rec).await),
        Ok(None) => Ok(db::settled_ticket(&state.db, ticket)
            .await
            .map_err(|e| ApiError::unavailable("MySQL", e))?
            .map(|s| TicketBody::from_settled(ticket, s))
            // Neither store has it now (Redis lost the record of an order in flight): what
            // is known is that it is pending; its quantity comes back with its record.
            .unwrap_or_else(|| TicketBody::pending(ticket, user, 1))),
        Err(e) => Err(ApiError::unavailable("Redis", e)),
    }
}

/// The successful answers of a buy (`202`, `201`, `200`): the ticket, where to poll it, and
/// the link to poll it with.
pub struct BuyAnswers;

impl IntoResponses for BuyAnswers {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        let poll = LinkBuilder::new()
            .operation_id("getOrder")
            .parameter("ticket", "$response.body#/ticket")
            .description("Poll the ticket.")
            .build();
        let order = |required| location("/v1/orders/{}", &schema::ticket_regex(), required);
        [
            (
                "202",
                "Reserved and handed to Kafka (async mode); poll the ticket.",
                true,
            ),
            ("201", "Confirmed in MySQL (sync mode).", true),
            (
                "200",
                "The user already holds a ticket for this product: that ticket in its current state, with `Location`. Or, in sync mode, the order failed for good (`status: failed`, `reason`), without `Location`.",
                false,
            ),
        ]
        .into_iter()
        .map(|(status, description, required)| {
            let response = json_answer::<TicketBody>(description)
                .header("Location", order(required))
                .link("GetOrder", poll.clone())
                .build();
            (status.to_owned(), response.into())
        })
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future an async fn of three arguments returns, without calling it.
    fn future_size<A, B, C, Fut>(_: fn(A, B, C) -> Fut) -> usize {
        std::mem::size_of::<Fut>()
    }

    /// Every accept spawns the buy task, which copies its future: a branch that no accept
    /// takes and that awaits something large must stay boxed, or every accept pays for it.
    #[test]
    fn the_buy_task_future_stays_small() {
        let size = future_size::<_, &'static TicketStore, _, _>(reserve_and_hand_off);
        eprintln!("reserve_and_hand_off: {size} bytes");
        const LIMIT: usize = 2048;
        assert!(
            size <= LIMIT,
            "the buy task's future is {size} bytes, over {LIMIT}: box the branch that grew it"
        );
    }
}
