//! A fake gateway for the load's tests: one product sold from an in-memory stock, whose first
//! orders fail and hand their unit back later; its admin view; ticket polls; and a record of
//! every request with its `Authorization` header.

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
}

/// The fake's state, for the test to look at.
#[derive(Debug, Default)]
pub struct Sale {
    pub stock: i64,
    pub stock_db: i64,
    pub pending: i64,
    pub confirmed: u64,
    pub failed: u64,
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
                },
            );
            s.live_ticket.insert(user, ticket.clone());
            let fails = n <= cfg.fail_first;
            let after = if fails {
                cfg.fail_after
            } else {
                cfg.confirm_after
            };
            let (sale, t) = (sale.clone(), ticket.clone());
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
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
                    "id": id.parse::<u64>().unwrap_or(0), "name": "fake", "initial_stock": 0,
                    "stock_db": s.stock_db, "stock_redis": s.stock, "pending": s.pending,
                    "confirmed": s.confirmed, "failed": s.failed,
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
                    "order_id": o.order_id, "reason": o.reason
                })
                .to_string(),
            ),
            None => (404, r#"{"error":"unknown_ticket"}"#.into()),
        },
        _ => (404, r#"{"error":"not_found"}"#.into()),
    }
}

/// The user a ticket was issued to.
pub fn ticket_user(sale: &Shared, ticket: &str) -> Option<u64> {
    sale.lock().unwrap().orders.get(ticket).map(|o| o.user)
}
