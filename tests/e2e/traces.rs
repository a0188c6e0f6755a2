//! Traces (issue 37): a gateway and a worker process export OTLP/HTTP to a receiver run by the
//! test, which decodes what they send with `opentelemetry-proto`. One trace goes from the
//! buyer's request to the worker's commit, through the order's Kafka message.

use crate::helpers::*;
use crate::process::Proc;
use actix_web::{web, App, HttpResponse, HttpServer};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use prost::Message;
use reqwest::StatusCode;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SETTLE: Duration = Duration::from_secs(30);

/// One span as received, with what the tests look at.
#[derive(Debug, Clone)]
struct Got {
    service: String,
    name: String,
    kind: i32,
    trace: String,
    id: String,
    parent: String,
    attrs: HashMap<String, String>,
    links: Vec<(String, String)>,
    /// 0 unset, 1 ok, 2 error.
    status: i32,
    message: String,
}

const SERVER: i32 = 2;
const CLIENT: i32 = 3;
const PRODUCER: i32 = 4;
const CONSUMER: i32 = 5;
const ERROR: i32 = 2;

fn text(v: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::IntValue(i)) => i.to_string(),
        Some(Any::BoolValue(b)) => b.to_string(),
        Some(Any::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

/// An OTLP/HTTP receiver (`POST /v1/traces`, protobuf) on a free port.
struct Receiver {
    spans: Arc<Mutex<Vec<Got>>>,
    endpoint: String,
    _server: actix_web::dev::ServerHandle,
}

impl Receiver {
    fn start() -> Self {
        let spans: Arc<Mutex<Vec<Got>>> = Arc::default();
        let data = web::Data::new(spans.clone());
        let server = HttpServer::new(move || {
            App::new().app_data(data.clone()).route(
                "/v1/traces",
                web::post().to(
                    |body: web::Bytes, spans: web::Data<Arc<Mutex<Vec<Got>>>>| async move {
                        let req = match ExportTraceServiceRequest::decode(body) {
                            Ok(r) => r,
                            Err(e) => return HttpResponse::BadRequest().body(e.to_string()),
                        };
                        let mut got = spans.lock().unwrap();
                        for rs in req.resource_spans {
                            let service = rs
                                .resource
                                .iter()
                                .flat_map(|r| &r.attributes)
                                .find(|a| a.key == "service.name")
                                .map(|a| text(&a.value))
                                .unwrap_or_default();
                            for s in rs.scope_spans.into_iter().flat_map(|s| s.spans) {
                                got.push(Got {
                                    service: service.clone(),
                                    name: s.name,
                                    kind: s.kind,
                                    trace: hex::encode(&s.trace_id),
                                    id: hex::encode(&s.span_id),
                                    parent: hex::encode(&s.parent_span_id),
                                    attrs: s
                                        .attributes
                                        .iter()
                                        .map(|a| (a.key.clone(), text(&a.value)))
                                        .collect(),
                                    links: s
                                        .links
                                        .iter()
                                        .map(|l| {
                                            (hex::encode(&l.trace_id), hex::encode(&l.span_id))
                                        })
                                        .collect(),
                                    status: s.status.as_ref().map_or(0, |st| st.code),
                                    message: s.status.map(|st| st.message).unwrap_or_default(),
                                });
                            }
                        }
                        HttpResponse::Ok()
                            .content_type("application/x-protobuf")
                            .finish()
                    },
                ),
            )
        })
        .workers(1)
        .bind(("127.0.0.1", 0))
        .expect("binding the OTLP receiver");
        let port = server.addrs()[0].port();
        let server = server.run();
        let handle = server.handle();
        tokio::spawn(server);
        Self {
            spans,
            endpoint: format!("http://127.0.0.1:{port}"),
            _server: handle,
        }
    }

    fn spans(&self) -> Vec<Got> {
        self.spans.lock().unwrap().clone()
    }

    /// The variables that point a process at this receiver, exporting every 100 ms.
    fn vars<'a>(&'a self, sampler: &'a str, arg: &'a str) -> Vec<(&'a str, &'a str)> {
        vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", self.endpoint.as_str()),
            ("OTEL_TRACES_SAMPLER", sampler),
            ("OTEL_TRACES_SAMPLER_ARG", arg),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ]
    }
}

fn one<'a>(spans: &'a [Got], what: &str, pred: impl Fn(&Got) -> bool) -> &'a Got {
    let found: Vec<&Got> = spans.iter().filter(|s| pred(s)).collect();
    assert_eq!(found.len(), 1, "one {what}, got {found:#?}");
    found[0]
}

fn child<'a>(spans: &'a [Got], parent: &Got, name: &str) -> &'a Got {
    one(spans, name, |s| {
        s.name == name && s.parent == parent.id && s.trace == parent.trace
    })
}

/// `user` buys `product` with these `traceparent` headers; the ticket (its owner noted).
async fn buy_with_traceparents(
    gw: &TestGateway,
    product: seckill_shared::ProductId,
    user: u64,
    traceparents: &[&str],
) -> String {
    let mut req = gw
        .http
        .post(format!("{}/v1/seckill/{product}", gw.base))
        .bearer_auth(token(user))
        .json(&serde_json::json!({ "user_id": user }));
    for tp in traceparents {
        req = req.header("traceparent", *tp);
    }
    let res = req.send().await.unwrap();
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let body: serde_json::Value = res.json().await.unwrap();
    let ticket = ticket_of(&body).to_string();
    gw.owns(&ticket, user);
    ticket
}

/// Both processes stop cleanly: each sends what it still buffered before it exits. Returns
/// what each wrote to stderr (when captured).
async fn stop(gateway: Proc, worker: Proc) -> (Vec<String>, Vec<String>) {
    gateway.sigterm();
    worker.sigterm();
    let g = gateway.exits_cleanly("the gateway").await;
    let w = worker.exits_cleanly("the worker").await;
    (g.stderr, w.stderr)
}

/// A buy that confirms and one that fails, every trace kept (`always_on`): each is one trace
/// from the gateway's request span to the worker's commit, with the steps as children, the
/// batch's MySQL transaction linked, and the failure marked on the worker's span.
#[tokio::test]
async fn a_buy_is_one_trace_from_the_request_to_the_commit_and_a_failure_is_marked() {
    let env = TestEnv::new().await;
    let receiver = Receiver::start();
    let vars = receiver.vars("always_on", "");
    let gateway = Proc::gateway(&env, &vars).await;
    let mut worker_vars = vars.clone();
    worker_vars.push(("SECKILL_CHAOS_FAIL_USERS", "2"));
    let worker = Proc::worker(&env, &worker_vars).await;
    let gw = TestGateway::at(gateway.base.clone(), reqwest::Client::new());
    let product = env.product(&gw, 5).await;

    let (status, body) = gw.buy(product, 1).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let confirmed = ticket_of(&body).to_string();
    let (status, body) = gw.buy(product, 2).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let failed = ticket_of(&body).to_string();
    assert_eq!(gw.settled(&confirmed, SETTLE).await["status"], "confirmed");
    assert_eq!(gw.settled(&failed, SETTLE).await["status"], "failed");
    stop(gateway, worker).await;
    let spans = receiver.spans();

    for (ticket, outcome) in [(&confirmed, "confirmed"), (&failed, "failed")] {
        let buy = one(&spans, "buy span", |s| {
            s.name == "buy" && s.attrs.get("seckill.ticket") == Some(ticket)
        });
        assert_eq!(buy.service, "seckill-gateway");
        assert_eq!(buy.kind, SERVER);
        assert_eq!(buy.parent, "", "the request's span is the trace's root");
        assert_eq!(buy.attrs["http.response.status_code"], "202");
        assert_eq!(buy.attrs["seckill.sold_out_marker"], "miss");
        assert_eq!(buy.attrs["product_id"], product.to_string());
        assert_ne!(buy.status, ERROR, "{buy:?}");
        child(&spans, buy, "identity");
        let reserve = child(&spans, buy, "redis.reserve");
        assert_eq!(reserve.kind, CLIENT);
        assert_eq!(reserve.attrs["seckill.batch_size"], "1", "{reserve:?}");
        assert_eq!(reserve.attrs["seckill.reservation"], "reserved");
        let publish = child(&spans, buy, "kafka.publish");
        assert_eq!(publish.kind, PRODUCER);
        assert!(
            publish.attrs.contains_key("messaging.kafka.offset"),
            "{publish:?}"
        );

        // The worker's span of the order: a child of the publish, through the message.
        let order = child(&spans, publish, "order.settle");
        assert_eq!(order.service, "seckill-worker");
        assert_eq!(order.kind, CONSUMER);
        assert_eq!(order.attrs["seckill.ticket"], *ticket);
        assert_eq!(order.attrs["seckill.outcome"], outcome);
        child(&spans, order, "redis.claim");
        let tx = child(&spans, order, "mysql.transaction");
        assert_eq!(tx.links.len(), 1, "{tx:?}");
        let batch_tx = one(&spans, "the batch's transaction", |s| {
            (s.trace.clone(), s.id.clone()) == tx.links[0]
        });
        assert_eq!(batch_tx.name, "mysql.transaction");
        let batch = one(&spans, "the batch", |s| s.id == batch_tx.parent);
        assert_eq!(batch.name, "settle.batch");
        assert_eq!(batch.parent, "");
        assert_ne!(batch.trace, order.trace, "the batch is a trace of its own");

        if outcome == "confirmed" {
            assert_ne!(order.status, ERROR, "{order:?}");
            child(&spans, order, "redis.confirm");
        } else {
            assert_eq!(order.status, ERROR, "{order:?}");
            assert!(order.message.contains("chaos"), "{order:?}");
            assert_eq!(order.attrs["seckill.reason"], "chaos");
            child(&spans, order, "redis.compensate");
            // The unit went back, and every gateway was told: in the order's trace.
            let announce = child(&spans, order, "zookeeper.announce");
            assert_eq!(announce.kind, CLIENT);
            assert_eq!(announce.attrs["seckill.sold_out"], "false");
        }
        // Every span of the order's trace came from these two processes and this buy.
        for s in spans.iter().filter(|s| s.trace == buy.trace) {
            assert!(
                s.service == "seckill-gateway" || s.service == "seckill-worker",
                "{s:?}"
            );
        }
    }
}

/// At a sampler of 0, a failed order still keeps the worker's part of its trace (under the
/// id its message carried), and a confirmed order that was not slow keeps nothing; a caller's
/// sampled `traceparent` makes its buy traced whatever the share (parent-based).
#[tokio::test]
async fn unsampled_orders_keep_only_failures_and_a_callers_sampled_trace_is_followed() {
    let env = TestEnv::new().await;
    let receiver = Receiver::start();
    let mut vars = receiver.vars("parentbased_traceidratio", "0");
    vars.push(("SECKILL_TRACE_SLOW_MS", "600000"));
    let gateway = Proc::gateway(&env, &vars).await;
    let mut worker_vars = vars.clone();
    worker_vars.push(("SECKILL_CHAOS_FAIL_USERS", "2"));
    let worker = Proc::worker(&env, &worker_vars).await;
    let gw = TestGateway::at(gateway.base.clone(), reqwest::Client::new());
    let product = env.product(&gw, 5).await;

    let (status, body) = gw.buy(product, 1).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let quiet = ticket_of(&body).to_string();
    // A caller that did not sample its own request: the order keeps the caller's trace id.
    let unsampled_caller = "5bf92f3577b34da6a3ce929d0e0e4737";
    let failed = buy_with_traceparents(
        &gw,
        product,
        2,
        &[&format!("00-{unsampled_caller}-00f067aa0ba902b7-00")],
    )
    .await;
    // Two `traceparent`s are as none (W3C): not the sampled caller's child.
    let doubled = buy_with_traceparents(
        &gw,
        product,
        4,
        &[
            "00-6bf92f3577b34da6a3ce929d0e0e4738-00f067aa0ba902b7-01",
            "00-6bf92f3577b34da6a3ce929d0e0e4738-00f067aa0ba902b8-01",
        ],
    )
    .await;
    // A shop's front end that traces its own request.
    let caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let followed = buy_with_traceparents(
        &gw,
        product,
        3,
        &[&format!("00-{caller_trace}-00f067aa0ba902b7-01")],
    )
    .await;
    for t in [&quiet, &followed, &doubled] {
        assert_eq!(gw.settled(t, SETTLE).await["status"], "confirmed");
    }
    assert_eq!(gw.settled(&failed, SETTLE).await["status"], "failed");
    stop(gateway, worker).await;
    let spans = receiver.spans();

    let about = |ticket: &str| -> Vec<Got> {
        spans
            .iter()
            .filter(|s| s.attrs.get("seckill.ticket").map(String::as_str) == Some(ticket))
            .cloned()
            .collect()
    };
    assert!(about(&quiet).is_empty(), "{:#?}", about(&quiet));
    assert!(about(&doubled).is_empty(), "{:#?}", about(&doubled));
    let kept = about(&failed);
    assert_eq!(kept.len(), 1, "only the worker's span: {kept:#?}");
    let order = &kept[0];
    assert_eq!(order.name, "order.settle");
    assert_eq!(order.status, ERROR);
    assert_eq!(order.attrs["seckill.kept"], "failed");
    assert_ne!(order.parent, "", "it keeps the id its message carried");
    assert_eq!(order.trace, unsampled_caller, "in the caller's trace");
    child(&spans, order, "mysql.transaction");
    child(&spans, order, "redis.compensate");

    let caller = about(&followed);
    let buy = one(&caller, "the caller's buy", |s| s.name == "buy");
    assert_eq!(buy.trace, caller_trace);
    assert_eq!(
        buy.parent, "00f067aa0ba902b7",
        "a child of the caller's span"
    );
    let publish = child(&spans, buy, "kafka.publish");
    let order = child(&spans, publish, "order.settle");
    assert_eq!(order.attrs["seckill.kept"], "sampled");
}

/// The order's row keeps its trace: the provider's callback and the expiry that cancels an
/// unpaid order each join it, as children of the buy's `kafka.publish`. And a log line written
/// inside a traced buy names the trace and the span.
#[tokio::test]
async fn the_payment_callback_and_the_expiry_join_the_orders_trace_and_logs_name_it() {
    let env = TestEnv::new().await;
    let receiver = Receiver::start();
    let (provider, provider_url) = Provider::start().await;
    let vars = receiver.vars("always_on", "");
    let (mut cmd, port) = Proc::gateway_command(&env, &[]);
    cmd.envs(vars.iter().copied())
        .env("SECKILL_LOG_FORMAT", "json")
        .env("RUST_LOG", "info,seckill_gateway=debug")
        .env("SECKILL_PAYMENT_PROVIDER_URL", &provider_url)
        .env(
            "SECKILL_PAYMENT_CALLBACK_URL",
            "http://gateway.invalid/v1/payments/callback",
        )
        .env("SECKILL_PAYMENT_WEBHOOK_SECRET", WEBHOOK_SECRET);
    let gateway = Proc::spawn(cmd, port, true);
    gateway.wait_until(|v| v["status"] == "ok", "/livez").await;
    let worker = Proc::worker(&env, &vars).await;
    let gw = TestGateway::at(gateway.base.clone(), reqwest::Client::new());
    let priced = |window: i64| serde_json::json!({"name": "paid item", "stock": 5, "price": 1999, "currency": "EUR", "payment_window_secs": window});
    let mut products = Vec::new();
    for window in [600, 1] {
        let (status, body) = gw.admin_post("/admin/products", priced(window)).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let id = body["id"].as_u64().unwrap();
        let (status, body) = gw
            .admin_post(
                &format!("/admin/products/{id}/preload"),
                serde_json::Value::Null,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        products.push(seckill_shared::ProductId::new(id).unwrap());
    }

    // Paid: the pay is sent to the provider, whose callback the test signs and sends.
    let (status, body) = gw.buy(products[0], 1).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let paid = ticket_of(&body).to_string();
    assert_eq!(gw.settled(&paid, SETTLE).await["status"], "confirmed");
    let res = gw
        .http
        .post(format!("{}/v1/orders/{paid}/pay", gw.base))
        .bearer_auth(token(1))
        .header("Idempotency-Key", "k1")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let payment: serde_json::Value = res.json().await.unwrap();
    let payment_id = payment["payment_id"].as_str().unwrap().to_owned();
    let raw =
        serde_json::to_vec(&serde_json::json!({"payment_id": payment_id, "status": "succeeded"}))
            .unwrap();
    let res = gw
        .http
        .post(format!("{}/v1/payments/callback", gw.base))
        .header("Content-Type", "application/json")
        .header(
            seckill_shared::payments::SIGNATURE_HEADER,
            seckill_shared::payments::sign(
                WEBHOOK_SECRET.as_bytes(),
                seckill_shared::now_ms() / 1000,
                &raw,
            ),
        )
        .body(raw)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(provider.charges.lock().unwrap().len(), 1);

    // Expired: a window of one second, two orders unpaid.
    let mut expired = Vec::new();
    for user in [2, 3] {
        let (status, body) = gw.buy(products[1], user).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        expired.push(ticket_of(&body).to_string());
    }
    for t in &expired {
        eventually("the unpaid order to be cancelled", SETTLE, || async {
            let (_, body) = gw.get_json(&format!("/v1/orders/{t}")).await;
            (body["status"] == "cancelled").then_some(())
        })
        .await;
    }
    let (gateway_log, _) = stop(gateway, worker).await;
    let spans = receiver.spans();

    let publish_of = |ticket: &str| {
        let buy = one(&spans, "buy span", |s| {
            s.name == "buy" && s.attrs.get("seckill.ticket").map(String::as_str) == Some(ticket)
        });
        (buy.clone(), child(&spans, buy, "kafka.publish").clone())
    };
    let (buy, publish) = publish_of(&paid);
    let callback = child(&spans, &publish, "payment.callback");
    assert_eq!(callback.service, "seckill-gateway");
    assert_eq!(callback.kind, SERVER);
    assert_eq!(callback.attrs["seckill.payment_status"], "succeeded");
    assert_eq!(callback.attrs["seckill.payment_id"], payment_id);
    assert_ne!(callback.status, ERROR);
    // Each expired order's own trace has its expiry, naming its ticket.
    for t in &expired {
        let (_, publish) = publish_of(t);
        let expire = child(&spans, &publish, "payment.expire");
        assert_eq!(expire.service, "seckill-worker");
        assert_eq!(expire.attrs["seckill.ticket"], *t);
    }

    // The gateway's log line about the paid ticket's buy, inside its traced span.
    let events = crate::logs::events(&gateway_log);
    let line = events
        .iter()
        .find(|e| e["fields"]["ticket"] == paid.as_str())
        .unwrap_or_else(|| panic!("no log line names {paid}"));
    assert_eq!(line["span"]["name"], "buy", "{line}");
    assert_eq!(line["span"]["trace_id"], buy.trace.as_str(), "{line}");
    assert_eq!(line["span"]["span_id"], buy.id.as_str(), "{line}");
}

/// What the sampler passed over is still kept when it turns out to matter: an untraced buy
/// answered `503` (Kafka unreachable) keeps a `buy` span marked failed, and an order slower
/// than `SECKILL_TRACE_SLOW_MS` keeps the worker's spans.
#[tokio::test]
async fn an_unsampled_buy_that_fails_and_an_unsampled_slow_order_keep_their_spans() {
    let env = TestEnv::new().await;
    let receiver = Receiver::start();
    let vars = receiver.vars("parentbased_traceidratio", "0");

    let mut down = vars.clone();
    down.extend([
        ("SECKILL_KAFKA_BROKERS", "127.0.0.1:1"),
        ("SECKILL_KAFKA_DELIVERY_TIMEOUT_MS", "1000"),
    ]);
    let gateway = Proc::gateway(&env, &down).await;
    let gw = TestGateway::at(gateway.base.clone(), reqwest::Client::new());
    let product = env.product(&gw, 5).await;
    let (status, body) = gw.buy(product, 1).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    gateway.sigterm();
    gateway.exits_cleanly("the gateway").await;

    // Every buy and every order is slower than 1 ms.
    let mut slow = vars.clone();
    slow.push(("SECKILL_TRACE_SLOW_MS", "1"));
    let gateway = Proc::gateway(&env, &slow).await;
    let worker = Proc::worker(&env, &slow).await;
    let gw = TestGateway::at(gateway.base.clone(), reqwest::Client::new());
    // Priced, with a window of one second: the slow order, kept, is left unpaid and expires.
    let (status, body) = gw
        .admin_post(
            "/admin/products",
            serde_json::json!({"name": "paid item", "stock": 5, "price": 100, "currency": "EUR", "payment_window_secs": 1}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let priced = body["id"].as_u64().unwrap();
    let (status, body) = gw
        .admin_post(
            &format!("/admin/products/{priced}/preload"),
            serde_json::Value::Null,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = gw
        .buy(seckill_shared::ProductId::new(priced).unwrap(), 2)
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let ticket = ticket_of(&body).to_string();
    eventually(
        "the slow order to be confirmed, then cancelled unpaid",
        SETTLE,
        || async {
            let (_, body) = gw.get_json(&format!("/v1/orders/{ticket}")).await;
            (body["status"] == "cancelled").then_some(())
        },
    )
    .await;
    stop(gateway, worker).await;
    let spans = receiver.spans();

    let failed = one(&spans, "the failed buy's span", |s| {
        s.name == "buy" && s.attrs["seckill.kept"] == "error"
    });
    assert_eq!(failed.service, "seckill-gateway");
    assert_eq!(failed.attrs["product_id"], product.to_string());
    assert_eq!(failed.attrs["user_id"], "1");
    assert_eq!(failed.status, ERROR, "{failed:?}");
    assert_eq!(failed.attrs["http.response.status_code"], "503");
    assert_eq!(failed.attrs["seckill.kept"], "error");
    assert!(!failed.message.is_empty(), "{failed:?}");

    let order = one(&spans, "the slow order's span", |s| {
        s.name == "order.settle"
    });
    assert_eq!(order.attrs["seckill.ticket"], ticket);
    assert_eq!(order.attrs["seckill.kept"], "slow");
    assert_ne!(order.status, ERROR);
    child(&spans, order, "redis.confirm");
    // The slow buy's own span is in the order's trace, a sibling under the span its message
    // names, and names the ticket, the product and the buyer.
    let buy = one(&spans, "the slow buy's span", |s| {
        s.name == "buy" && s.attrs["seckill.kept"] == "slow"
    });
    assert_eq!(buy.trace, order.trace);
    assert_eq!(buy.parent, order.parent);
    assert_eq!(buy.attrs["seckill.ticket"], ticket);
    assert_eq!(buy.attrs["user_id"], "2");
    assert_eq!(buy.status, 0, "{buy:?}");
    // Its row was marked kept: its expiry joins the same trace.
    let expire = one(&spans, "the slow order's expiry", |s| {
        s.name == "payment.expire"
    });
    assert_eq!(expire.trace, order.trace);
    assert_eq!(expire.parent, order.parent);
    assert_eq!(expire.attrs["seckill.ticket"], ticket);
}
