//! A fake gateway for the load's tests: one product sold from an in-memory stock, whose first
//! orders fail and hand their unit back later; its admin view; ticket polls; and a record of
//! every request with its `Authorization` header. With a payment window, confirmed orders
//! can be paid (`POST /v1/orders/{ticket}/pay`, decided `pay_delay` later) and are cancelled,
//! their unit back on sale, when not paid in time.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, Clone)]
pub struct Config {
    pub stock: i64,
    /// The first orders to fail (reason `chaos`); each hands its unit back `fail_after` after
    /// its buy.
    pub fail_first: u64,
    pub fail_after: Duration,
    /// The other orders are confirmed this long after their buy.
    pub confirm_after: Duration,
    /// Once sold out, answer 409 whatever the stock: a sold-out marker that never drops.
    pub stale_marker: bool,
    /// `GET /admin/products/{id}` needs `Bearer <admin_token>`.
    pub admin_token: &'static str,
    /// Confirmed orders must be paid this long after their confirmation. `None`: no window.
    pub pay_window: Option<Duration>,
    /// A payment is decided this long after it is taken.
    pub pay_delay: Duration,
    /// The first payments taken are declined.
    pub decline_first: u64,
    /// The first requests to pay are answered 503.
    pub unavailable_first: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            stock: 10,
            fail_first: 0,
            fail_after: Duration::from_millis(300),
            confirm_after: Duration::from_millis(10),
            stale_marker: false,
            admin_token: "admin",
            pay_window: None,
            pay_delay: Duration::from_millis(20),
            decline_first: 0,
            unavailable_first: 0,
        }
    }
}

/// One request the fake received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// The `user_id` of a buy's body.
    pub user: Option<u64>,
    pub authorization: Option<String>,
}

#[derive(Debug, Clone)]
struct Order {
    user: u64,
    status: &'static str,
    order_id: Option<u64>,
    reason: Option<&'static str>,
    pay_by_ms: Option<i64>,
    paid_at_ms: Option<i64>,
    cancelled_at_ms: Option<i64>,
    /// Idempotency-Key -> payment id.
    payments: HashMap<String, String>,
    paying: bool,
}

/// The fake's state, for the test to look at.
#[derive(Debug, Default)]
pub struct Sale {
    pub stock: i64,
    pub stock_db: i64,
    pub pending: i64,
    pub confirmed: u64,
    pub failed: u64,
    pub paid: u64,
    pub cancelled: u64,
    /// Every request to pay: its Idempotency-Key and the status answered.
    pub pays: Vec<(String, u16)>,
    /// Payments taken (answered 202 with a new payment).
    pub payments: u64,
    pub seen: Vec<Seen>,
    orders: HashMap<String, Order>,
    live_ticket: HashMap<u64, String>,
    issued: u64,
    sold_out_once: bool,
}

pub type Shared = Arc<Mutex<Sale>>;

/// Starts the fake on a free port.
pub async fn start(cfg: Config) -> (SocketAddr, Shared) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let sale: Shared = Arc::new(Mutex::new(Sale {
        stock: cfg.stock,
        stock_db: cfg.stock,
        ..Default::default()
    }));
    let cfg = Arc::new(cfg);
    let state = sale.clone();
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(serve(s, state.clone(), cfg.clone()));
        }
    });
    (addr, sale)
}

async fn serve(mut s: TcpStream, sale: Shared, cfg: Arc<Config>) {
    let mut got: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        while let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).into_owned();
            let mut lines = head.split("\r\n");
            let mut first = lines.next().unwrap_or_default().split(' ');
            let method = first.next().unwrap_or_default().to_owned();
            let path = first.next().unwrap_or_default().to_owned();
            let headers: HashMap<String, String> = lines
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
                .collect();
            let len: usize = headers
                .get("content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            if got.len() < end + 4 + len {
                break;
            }
            let body = got[end + 4..end + 4 + len].to_vec();
            got.drain(..end + 4 + len);
            let (code, answer) = answer(
                &sale,
                &cfg,
                &method,
                &path,
                headers.get("authorization").cloned(),
                headers.get("idempotency-key").map(String::as_str),
                &body,
            );
            let reply = format!(
                "HTTP/1.1 {code} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
                answer.len()
            );
            if s.write_all(reply.as_bytes()).await.is_err() {
                return;
            }
        }
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

fn answer(
    sale: &Shared,
    cfg: &Arc<Config>,
    method: &str,
    path: &str,
    authorization: Option<String>,
    idempotency_key: Option<&str>,
    body: &[u8],
) -> (u16, String) {
    let user = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["user_id"].as_u64());
    let mut s = sale.lock().unwrap();
    s.seen.push(Seen {
        method: method.to_owned(),
        path: path.to_owned(),
        user,
        authorization: authorization.clone(),
    });
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (method, parts.as_slice()) {
        ("POST", ["v1", "seckill", product]) => {
            let Some(user) = user else {
                return (400, r#"{"error":"invalid"}"#.into());
            };
            if let Some(t) = s.live_ticket.get(&user) {
                return (200, format!(r#"{{"ticket":"{t}","status":"pending"}}"#));
            }
            if s.stock <= 0 || (cfg.stale_marker && s.sold_out_once) {
                s.sold_out_once = true;
                return (409, r#"{"error":"sold_out"}"#.into());
            }
            s.stock -= 1;
            s.pending += 1;
            s.issued += 1;
            let n = s.issued;
            let ticket = format!("{product}-{n:032x}");
            s.orders.insert(
                ticket.clone(),
                Order {
                    user,
                    status: "pending",
                    order_id: None,
                    reason: None,
                    pay_by_ms: None,
                    paid_at_ms: None,
                    cancelled_at_ms: None,
                    payments: HashMap::new(),
                    paying: false,
                },
            );
            s.live_ticket.insert(user, ticket.clone());
            let fails = n <= cfg.fail_first;
            let after = if fails {
                cfg.fail_after
            } else {
                cfg.confirm_after
            };
            let (sale, t, window) = (sale.clone(), ticket.clone(), cfg.pay_window);
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                {
                    let mut s = sale.lock().unwrap();
                    s.pending -= 1;
                    if fails {
                        s.stock += 1;
                        s.failed += 1;
                        s.live_ticket.remove(&user);
                    } else {
                        s.stock_db -= 1;
                        s.confirmed += 1;
                    }
                    let o = s.orders.get_mut(&t).unwrap();
                    if fails {
                        o.status = "failed";
                        o.reason = Some("chaos");
                    } else {
                        o.status = "confirmed";
                        o.order_id = Some(n);
                        o.pay_by_ms = window.map(|w| now_ms() + w.as_millis() as i64);
                    }
                }
                if let (false, Some(w)) = (fails, window) {
                    tokio::time::sleep(w).await;
                    let mut s = sale.lock().unwrap();
                    let o = s.orders.get_mut(&t).unwrap();
                    if o.status == "confirmed" {
                        o.status = "cancelled";
                        o.reason = Some("payment_timeout");
                        o.cancelled_at_ms = Some(now_ms());
                        s.cancelled += 1;
                        s.stock += 1;
                        s.stock_db += 1;
                        s.live_ticket.remove(&user);
                    }
                }
            });
            (
                202,
                format!(r#"{{"ticket":"{ticket}","status":"pending","user_id":{user}}}"#),
            )
        }
        ("GET", ["admin", "products", id]) => {
            if authorization.as_deref() != Some(&format!("Bearer {}", cfg.admin_token)) {
                return (401, r#"{"error":"unauthorized"}"#.into());
            }
            (
                200,
                serde_json::json!({
                    "id": id.parse::<u64>().unwrap_or(0), "name": "fake",
                    "initial_stock": cfg.stock,
                    "stock_db": s.stock_db, "stock_redis": s.stock, "pending": s.pending,
                    "confirmed": s.confirmed, "failed": s.failed,
                    "paid": s.paid, "cancelled": s.cancelled,
                    "orders_db": {
                        "confirmed": s.orders.values().filter(|o| o.status == "confirmed").count(),
                        "paid": s.orders.values().filter(|o| o.status == "paid").count(),
                        "cancelled": s.orders.values().filter(|o| o.status == "cancelled").count(),
                    },
                    "starts_at": null, "ends_at": null
                })
                .to_string(),
            )
        }
        ("GET", ["v1", "orders", ticket]) => match s.orders.get(*ticket) {
            Some(o) => (
                200,
                serde_json::json!({
                    "ticket": ticket, "user_id": o.user, "status": o.status,
                    "order_id": o.order_id, "reason": o.reason, "pay_by_ms": o.pay_by_ms,
                    "paid_at_ms": o.paid_at_ms, "cancelled_at_ms": o.cancelled_at_ms
                })
                .to_string(),
            ),
            None => (404, r#"{"error":"unknown_ticket"}"#.into()),
        },
        ("POST", ["v1", "orders", ticket, "pay"]) => {
            let Some(key) = idempotency_key else {
                return (400, r#"{"error":"invalid"}"#.into());
            };
            let (code, body) = pay(&mut s, sale, cfg, ticket, key);
            s.pays.push((key.to_owned(), code));
            (code, body)
        }
        _ => (404, r#"{"error":"not_found"}"#.into()),
    }
}

fn now_ms() -> i64 {
    (crate::now_us() / 1000) as i64
}

/// `POST /v1/orders/{ticket}/pay` with `key`.
fn pay(s: &mut Sale, sale: &Shared, cfg: &Config, ticket: &str, key: &str) -> (u16, String) {
    if (s.pays.len() as u64) < cfg.unavailable_first {
        return (503, r#"{"error":"unavailable"}"#.into());
    }
    let payments = s.payments;
    let Some(o) = s.orders.get_mut(ticket) else {
        return (404, r#"{"error":"unknown_ticket"}"#.into());
    };
    let accepted = |id: &str| {
        (
            202,
            format!(r#"{{"payment_id":"{id}","status":"processing"}}"#),
        )
    };
    if let Some(id) = o.payments.get(key) {
        return accepted(id);
    }
    let Some(pay_by) = o.pay_by_ms.filter(|_| o.status == "confirmed") else {
        let state = o.status;
        return (
            409,
            format!(r#"{{"error":"not_payable","state":"{state}"}}"#),
        );
    };
    if now_ms() >= pay_by {
        return (409, r#"{"error":"payment_window_closed"}"#.into());
    }
    if o.paying {
        return (409, r#"{"error":"payment_in_progress"}"#.into());
    }
    let n = payments + 1;
    let id = format!("pay_{n:032x}");
    o.payments.insert(key.to_owned(), id.clone());
    o.paying = true;
    s.payments = n;
    let declined = n <= cfg.decline_first;
    let (sale, t, delay) = (sale.clone(), ticket.to_owned(), cfg.pay_delay);
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let mut s = sale.lock().unwrap();
        let o = s.orders.get_mut(&t).unwrap();
        o.paying = false;
        if !declined && o.status == "confirmed" && o.pay_by_ms.is_some_and(|by| now_ms() < by) {
            o.status = "paid";
            o.paid_at_ms = Some(now_ms());
            s.paid += 1;
        }
    });
    accepted(&id)
}

/// The user a ticket was issued to.
pub fn ticket_user(sale: &Shared, ticket: &str) -> Option<u64> {
    sale.lock().unwrap().orders.get(ticket).map(|o| o.user)
}
