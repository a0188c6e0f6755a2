//! A payment provider the test runs: it records the charges and answers as the test says.

use actix_web::{web, App, HttpResponse, HttpServer};
use seckill_shared::payments::Charge;
use serde_json::json;

/// The secret the test payment provider signs callbacks with.
pub const WEBHOOK_SECRET: &str = "test-webhook-secret";

/// A provider that records the charges it is asked for and answers `201`, or `503` while
/// `down` is set.
#[derive(Clone, Default)]
pub struct Provider {
    pub charges: std::sync::Arc<std::sync::Mutex<Vec<Charge>>>,
    pub down: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// What `GET /charges/{payment_id}` says of a charge the test decided (without sending
    /// its callback): "succeeded" or "declined".
    pub decisions: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, String>>>,
}

impl Provider {
    pub async fn start() -> (Self, String) {
        let p = Provider::default();
        let state = p.clone();
        let server = HttpServer::new(move || {
            let state = state.clone();
            let seen = state.clone();
            App::new()
                .route(
                    "/charges",
                    web::post().to(move |charge: web::Json<Charge>| {
                        let state = state.clone();
                        async move {
                            if state.down.load(std::sync::atomic::Ordering::SeqCst) {
                                return HttpResponse::ServiceUnavailable().finish();
                            }
                            let id = charge.payment_id.clone();
                            state.charges.lock().unwrap().push(charge.into_inner());
                            HttpResponse::Created()
                                .json(json!({"payment_id": id, "status": "pending"}))
                        }
                    }),
                )
                .route(
                    "/charges/{payment_id}",
                    web::get().to(move |id: web::Path<String>| {
                        let state = seen.clone();
                        async move {
                            let id = id.into_inner();
                            if !state
                                .charges
                                .lock()
                                .unwrap()
                                .iter()
                                .any(|c| c.payment_id == id)
                            {
                                return HttpResponse::NotFound()
                                    .json(json!({"error": "no charge"}));
                            }
                            let decision = state.decisions.lock().unwrap().get(&id).cloned();
                            HttpResponse::Ok().json(json!({"payment_id": id, "decision": decision}))
                        }
                    }),
                )
        })
        .workers(1)
        .bind("127.0.0.1:0")
        .unwrap();
        let url = format!("http://{}", server.addrs()[0]);
        tokio::spawn(server.run());
        (p, url)
    }

    pub fn charges(&self) -> Vec<Charge> {
        self.charges.lock().unwrap().clone()
    }
}
