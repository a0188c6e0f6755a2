//! The provider in-process on port 0, calling back a small actix receiver that records what it
//! gets (and can fail its first requests).

use super::args::ProviderArgs;
use super::callback::Retry;
use super::routes::{DECISION_HEADER, DELAY_HEADER};
use super::Provider;
use actix_web::dev::ServerHandle;
use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use bytes::Bytes;
use seckill_shared::payments::{self, Callback, ChargeOutcome};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const SECRET: &str = "whsec-provider-test";

fn args() -> ProviderArgs {
    ProviderArgs {
        listen: "127.0.0.1:0".parse().unwrap(),
        webhook_secret: SECRET.into(),
        decline_rate: 0.0,
        delay_ms: 2,
        late_rate: 0.0,
        late_delay_ms: 2,
        duplicate_rate: 0.0,
        seed: Some(1),
    }
}

/// Fast retries, so a failing receiver costs milliseconds.
const FAST_RETRY: Retry = Retry {
    first_delay: Duration::from_millis(1),
    max_delay: Duration::from_millis(5),
    attempts: 10,
    total: Duration::from_secs(5),
};

/// One request the receiver got.
#[derive(Debug, Clone, PartialEq)]
struct Received {
    signature: Option<String>,
    content_type: Option<String>,
    body: Bytes,
}

impl Received {
    fn callback(&self) -> Callback {
        serde_json::from_slice(&self.body).expect("the body is a Callback")
    }
}

#[derive(Default)]
struct Inbox {
    got: Mutex<Vec<Received>>,
    /// Answer 500 to this many requests first.
    failures_left: AtomicUsize,
}

impl Inbox {
    fn got(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    fn for_payment(&self, payment_id: &str) -> Vec<Received> {
        self.got()
            .into_iter()
            .filter(|r| r.callback().payment_id == payment_id)
            .collect()
    }
}

async fn receive(req: HttpRequest, body: Bytes, inbox: web::Data<Inbox>) -> HttpResponse {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    inbox.got.lock().unwrap().push(Received {
        signature: header(payments::SIGNATURE_HEADER),
        content_type: header("content-type"),
        body,
    });
    let fail = inbox
        .failures_left
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    if fail {
        HttpResponse::InternalServerError().finish()
    } else {
        HttpResponse::NoContent().finish()
    }
}

struct TestApp {
    base: String,
    callback_url: String,
    inbox: web::Data<Inbox>,
    ledger: std::sync::Arc<super::ledger::Ledger>,
    http: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    provider: Option<JoinHandle<anyhow::Result<()>>>,
    receiver: ServerHandle,
}

async fn spawn_app(args: ProviderArgs, receiver_failures: usize) -> TestApp {
    let inbox = web::Data::new(Inbox {
        failures_left: AtomicUsize::new(receiver_failures),
        ..Inbox::default()
    });
    let data = inbox.clone();
    let receiver = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .default_service(web::to(receive))
    })
    .workers(1)
    .disable_signals()
    .bind("127.0.0.1:0")
    .unwrap();
    let callback_url = format!("http://{}/v1/payments/callback", receiver.addrs()[0]);
    let receiver = receiver.run();
    let receiver_handle = receiver.handle();
    tokio::spawn(receiver);

    let provider = Provider::build_with(&args, FAST_RETRY).unwrap();
    let base = format!("http://{}", provider.addr());
    let ledger = provider.ledger();
    let (stop, stopped) = oneshot::channel::<()>();
    let provider = tokio::spawn(provider.run_until_stopped(async {
        let _ = stopped.await;
    }));
    TestApp {
        base,
        callback_url,
        inbox,
        ledger,
        http: reqwest::Client::new(),
        stop: Some(stop),
        provider: Some(provider),
        receiver: receiver_handle,
    }
}

impl TestApp {
    fn charge(&self, payment_id: &str) -> Value {
        json!({
            "payment_id": payment_id,
            "ticket": "tkt-1",
            "amount": 1999,
            "currency": "CNY",
            "callback_url": self.callback_url,
        })
    }

    /// `POST /charges` with the test hooks' headers.
    async fn post_charge(&self, body: &Value, headers: &[(&str, &str)]) -> (u16, Value) {
        let mut req = self.http.post(format!("{}/charges", self.base)).json(body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let r = req.send().await.unwrap();
        (r.status().as_u16(), r.json().await.unwrap())
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap())
    }

    /// Polls `probe` every few milliseconds for up to 10 s.
    async fn eventually<T>(&self, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(t) = probe() {
                return t;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn callbacks_for(&self, payment_id: &str, n: usize) -> Vec<Received> {
        self.eventually(&format!("{n} callback(s) for {payment_id}"), || {
            let got = self.inbox.for_payment(payment_id);
            (got.len() >= n).then_some(got)
        })
        .await
    }

    /// Waits until the provider has counted `n` delivered callbacks for `payment_id`.
    async fn delivered(&self, payment_id: &str, n: u64) {
        self.eventually(&format!("{payment_id} counted {n} callback(s)"), || {
            let sent = self.ledger.view(payment_id)?.callbacks_sent;
            (sent >= n).then_some(())
        })
        .await
    }

    /// Stops the provider (it must return promptly) and the receiver.
    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        let provider = self.provider.take().unwrap();
        tokio::time::timeout(Duration::from_secs(10), provider)
            .await
            .expect("the provider stops")
            .unwrap()
            .unwrap();
        self.receiver.stop(false).await;
    }
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[tokio::test]
async fn a_charge_is_pending_then_called_back_with_a_signature_verify_accepts() {
    let app = spawn_app(args(), 0).await;
    let (status, body) = app.post_charge(&app.charge("pay_1"), &[]).await;
    assert_eq!(status, 201);
    assert_eq!(body, json!({"payment_id": "pay_1", "status": "pending"}));

    let got = app.callbacks_for("pay_1", 1).await;
    let cb = &got[0];
    let signature = cb.signature.as_deref().expect("a Seckill-Signature header");
    assert_eq!(
        payments::verify(SECRET.as_bytes(), signature, &cb.body, unix_now()),
        Ok(())
    );
    assert_eq!(
        payments::verify(b"another secret", signature, &cb.body, unix_now()),
        Err(payments::SignatureError::Mismatch)
    );
    assert_eq!(
        cb.callback(),
        Callback {
            payment_id: "pay_1".into(),
            status: ChargeOutcome::Succeeded
        }
    );
    assert_eq!(cb.content_type.as_deref(), Some("application/json"));

    app.delivered("pay_1", 1).await;
    let (status, view) = app.get("/charges/pay_1").await;
    assert_eq!(status, 200);
    assert_eq!(
        view,
        json!({"payment_id": "pay_1", "ticket": "tkt-1", "amount": 1999, "currency": "CNY",
               "decision": "succeeded", "callbacks_sent": 1})
    );
    let (status, stats) = app.get("/stats").await;
    assert_eq!(status, 200);
    assert_eq!(
        stats,
        json!({"charges": 1, "succeeded": 1, "declined": 0, "late": 0,
               "callbacks_sent": 1, "callback_failures": 0})
    );
    let (status, err) = app.get("/charges/nope").await;
    assert_eq!(status, 404);
    assert!(err["error"].is_string(), "{err}");
    app.stop().await;
}

#[tokio::test]
async fn a_repeated_charge_answers_the_same_and_schedules_no_second_callback() {
    let app = spawn_app(args(), 0).await;
    let charge = app.charge("pay_r");
    let first = app.post_charge(&charge, &[(DELAY_HEADER, "1")]).await;
    let again = app.post_charge(&charge, &[(DELAY_HEADER, "1")]).await;
    assert_eq!(first.0, 201);
    assert_eq!(first, again);
    // The same payment_id with another body is refused.
    let mut other = charge.clone();
    other["amount"] = json!(1);
    let (status, err) = app.post_charge(&other, &[]).await;
    assert_eq!(status, 409);
    assert!(err["error"].as_str().unwrap().contains("pay_r"), "{err}");

    // A sentinel charge called back well after pay_r's delay: by then a second pay_r callback
    // would have come too.
    app.post_charge(&app.charge("pay_s"), &[(DELAY_HEADER, "100")])
        .await;
    app.callbacks_for("pay_s", 1).await;
    app.delivered("pay_r", 1).await;
    assert_eq!(app.inbox.for_payment("pay_r").len(), 1);
    assert_eq!(app.ledger.view("pay_r").unwrap().callbacks_sent, 1);
    assert_eq!(app.ledger.stats().charges, 2);
    app.stop().await;
}

#[tokio::test]
async fn the_provider_decision_header_overrides_the_random_outcome() {
    let app = spawn_app(
        ProviderArgs {
            decline_rate: 1.0,
            ..args()
        },
        0,
    )
    .await;
    let (status, _) = app
        .post_charge(&app.charge("pay_ok"), &[(DECISION_HEADER, "succeeded")])
        .await;
    assert_eq!(status, 201);
    app.post_charge(&app.charge("pay_no"), &[]).await;
    let ok = app.callbacks_for("pay_ok", 1).await;
    let no = app.callbacks_for("pay_no", 1).await;
    assert_eq!(ok[0].callback().status, ChargeOutcome::Succeeded);
    assert_eq!(no[0].callback().status, ChargeOutcome::Declined);
    for r in ok.iter().chain(&no) {
        let sig = r.signature.as_deref().unwrap();
        assert_eq!(
            payments::verify(SECRET.as_bytes(), sig, &r.body, unix_now()),
            Ok(())
        );
    }
    app.delivered("pay_no", 1).await;
    let (_, view) = app.get("/charges/pay_no").await;
    assert_eq!(view["decision"], "declined");

    for (name, value) in [(DECISION_HEADER, "maybe"), (DELAY_HEADER, "soon")] {
        let (status, err) = app
            .post_charge(&app.charge("pay_bad"), &[(name, value)])
            .await;
        assert_eq!(status, 400, "{name}: {value}");
        assert!(err["error"].as_str().unwrap().contains(name), "{err}");
    }
    assert!(app.ledger.view("pay_bad").is_none());
    app.stop().await;
}

#[tokio::test]
async fn a_failing_receiver_gets_the_same_signed_callback_until_it_accepts() {
    let app = spawn_app(args(), 3).await;
    app.post_charge(&app.charge("pay_f"), &[]).await;
    let got = app.callbacks_for("pay_f", 4).await;
    assert!(got.iter().all(|r| *r == got[0]), "{got:?}");
    app.delivered("pay_f", 1).await;
    let stats = app.ledger.stats();
    assert_eq!((stats.callbacks_sent, stats.callback_failures), (1, 3));
    app.stop().await;
}

#[tokio::test]
async fn a_duplicate_is_the_same_signed_callback_sent_twice() {
    let app = spawn_app(
        ProviderArgs {
            duplicate_rate: 1.0,
            ..args()
        },
        0,
    )
    .await;
    app.post_charge(&app.charge("pay_d"), &[]).await;
    let got = app.callbacks_for("pay_d", 2).await;
    assert_eq!(got[0], got[1]);
    app.delivered("pay_d", 2).await;
    app.stop().await;
}

#[tokio::test]
async fn a_late_charge_waits_the_late_delay() {
    let app = spawn_app(
        ProviderArgs {
            delay_ms: 60_000,
            late_rate: 1.0,
            late_delay_ms: 5,
            ..args()
        },
        0,
    )
    .await;
    app.post_charge(&app.charge("pay_l"), &[]).await;
    app.callbacks_for("pay_l", 1).await;
    assert_eq!(app.ledger.stats().late, 1);
    app.stop().await;
}

#[tokio::test]
async fn stopping_returns_promptly_with_callbacks_still_due() {
    let app = spawn_app(args(), 0).await;
    app.post_charge(&app.charge("pay_w"), &[(DELAY_HEADER, "60000")])
        .await;
    assert_eq!(app.ledger.view("pay_w").unwrap().decision, None);
    app.stop().await;
}

#[tokio::test]
async fn a_body_that_is_not_a_charge_is_answered_400_in_json() {
    let app = spawn_app(args(), 0).await;
    let raw = app
        .http
        .post(format!("{}/charges", app.base))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status().as_u16(), 400);
    let err: Value = raw.json().await.unwrap();
    assert!(err["error"].as_str().unwrap().contains("JSON"), "{err}");

    let mut bad = Vec::new();
    bad.push(json!({"payment_id": "p"}));
    for (field, value) in [
        ("payment_id", json!("")),
        ("amount", json!(0)),
        ("currency", json!("yuan")),
        ("callback_url", json!("https://gateway/cb")),
        ("callback_url", json!("not a url")),
    ] {
        let mut c = app.charge("p");
        c[field] = value;
        bad.push(c);
    }
    for body in bad {
        let (status, err) = app.post_charge(&body, &[]).await;
        assert_eq!(status, 400, "{body}");
        assert!(err["error"].is_string(), "{err}");
    }
    assert_eq!(app.ledger.stats().charges, 0);
    app.stop().await;
}
