//! A fake gateway for the load's tests: one product sold from an in-memory stock, whose first
//! orders fail and hand their unit back later; its admin view; ticket polls; and a record of
//! every request with its `Authorization` header. With a payment window, confirmed orders
//! can be paid (`POST /v1/orders/{ticket}/pay`, decided `pay_delay` later, one payment in
//! progress at a time), cancelled by their buyer (`POST /v1/orders/{ticket}/cancel`, refused
//! while pending), and are cancelled, their unit back on sale, when not paid in time. With `waiting_room`, buys need an admission
//! from its waiting room: buyers (named by their HS256 token's `sub`, signed with
//! [`ROOM_JWT_SECRET`]) join, poll, and are admitted in join order within ceil(1.5 × stock).

use seckill_shared::api::{
    ErrorBody, OrdersByState, PaymentBody, ProductView, QueueBody, SaleState, TicketBody,
    WaitingRoomView,
};
use seckill_shared::{Ticket, TicketStatus, UserId};
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
    /// Sell through a waiting room.
    pub waiting_room: bool,
}

/// The secret the buyers' tokens are signed with in a waiting-room fake.
pub const ROOM_JWT_SECRET: &str = "k3y";
/// The fake's admission factor.
const ROOM_FACTOR: f64 = 1.5;

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
            waiting_room: false,
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
    /// Every request to cancel: its ticket and the status answered.
    pub cancels: Vec<(String, u16)>,
    /// Orders their buyer cancelled.
    pub buyer_cancelled: u64,
    pub seen: Vec<Seen>,
    orders: HashMap<String, Order>,
    live_ticket: HashMap<u64, String>,
    issued: u64,
    sold_out_once: bool,
    /// Waiting room: the line in join order, each buyer's queue id, the admitted (user ->
    /// until ms), the ended (user -> `bought`).
    pub queue: std::collections::VecDeque<u64>,
    pub entries: HashMap<u64, String>,
    pub admitted: HashMap<u64, i64>,
    pub done: HashMap<u64, &'static str>,
    /// The most admitted at once.
    pub max_admitted: usize,
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
            let (code, answer) = answer(&sale, &cfg, &method, &path, &headers, &body);
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
    headers: &HashMap<String, String>,
    body: &[u8],
) -> (u16, String) {
    let authorization = headers.get("authorization").cloned();
    let idempotency_key = headers.get("idempotency-key").map(String::as_str);
    let admission = headers.get("seckill-admission").map(String::as_str);
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
        ("POST", ["v1", "seckill", _, "queue"]) if cfg.waiting_room => {
            let Some(user) = token_user(authorization.as_deref()) else {
                return (401, err("unauthenticated"));
            };
            if let std::collections::hash_map::Entry::Vacant(e) = s.entries.entry(user) {
                e.insert(format!("{user:032x}"));
                s.queue.push_back(user);
            }
            (202, room_state(&mut s, user))
        }
        ("GET", ["v1", "seckill", _, "queue", qid]) if cfg.waiting_room => {
            let Some(user) = token_user(authorization.as_deref()) else {
                return (401, err("unauthenticated"));
            };
            if s.entries.get(&user).map(String::as_str) != Some(*qid) {
                return (404, err("unknown_queue_entry"));
            }
            (200, room_state(&mut s, user))
        }
        ("POST", ["v1", "seckill", product]) => {
            let Some(user) = user else {
                return (400, err("invalid"));
            };
            if cfg.waiting_room && !s.live_ticket.contains_key(&user) {
                let held = s
                    .admitted
                    .get(&user)
                    .map(|until| admission_token(user, *until));
                if held.is_none() || held.as_deref() != admission {
                    return (403, err("admission_invalid"));
                }
                if s.stock > 0 {
                    s.admitted.remove(&user);
                    s.done.insert(user, "bought");
                    // As reserve.lua: the latest admissions go back to the head of the line
                    // when the units left shrink below the cap.
                    let cap = (ROOM_FACTOR * (s.stock - 1).max(0) as f64).ceil() as usize;
                    while s.admitted.len() > cap {
                        let (&latest, _) =
                            s.admitted.iter().max_by_key(|(u, t)| (**t, **u)).unwrap();
                        s.admitted.remove(&latest);
                        s.queue.push_front(latest);
                    }
                }
            }
            if let Some(t) = s.live_ticket.get(&user) {
                return (200, ticket_json(t, &s.orders[t]));
            }
            if s.stock <= 0 || (cfg.stale_marker && s.sold_out_once) {
                s.sold_out_once = true;
                return (409, err("sold_out"));
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
            (202, ticket_json(&ticket, &s.orders[&ticket]))
        }
        ("GET", ["admin", "products", id]) => {
            if authorization.as_deref() != Some(&format!("Bearer {}", cfg.admin_token)) {
                return (401, err("unauthorized"));
            }
            (200, product_json(&s, cfg, id.parse::<u64>().unwrap_or(0)))
        }
        ("GET", ["v1", "orders", ticket]) => match s.orders.get(*ticket) {
            Some(o) => (200, ticket_json(ticket, o)),
            None => (404, err("unknown_ticket")),
        },
        ("POST", ["v1", "orders", ticket, "pay"]) => {
            let Some(key) = idempotency_key else {
                return (400, err("invalid"));
            };
            let (code, body) = pay(&mut s, sale, cfg, ticket, key);
            s.pays.push((key.to_owned(), code));
            (code, body)
        }
        ("POST", ["v1", "orders", ticket, "cancel"]) => {
            let (code, body) = cancel(&mut s, ticket);
            s.cancels.push(((*ticket).to_owned(), code));
            (code, body)
        }
        _ => (404, err("not_found")),
    }
}

/// The `sub` of a buyer's HS256 token, signed with [`ROOM_JWT_SECRET`].
fn token_user(authorization: Option<&str>) -> Option<u64> {
    let token = authorization?.strip_prefix("Bearer ")?;
    let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::HS256);
    v.validate_aud = false;
    v.required_spec_claims.clear();
    let key = jsonwebtoken::DecodingKey::from_secret(ROOM_JWT_SECRET.as_bytes()).ok()?;
    let claims = jsonwebtoken::decode::<super::buyer_token::Claims>(token, &key, &v).ok()?;
    claims.claims.sub.parse().ok()
}

fn admission_token(user: u64, until: i64) -> String {
    format!("adm-{user}-{until}")
}

/// Admits the head of the line within ceil(factor × stock), then the buyer's entry.
fn room_state(s: &mut Sale, user: u64) -> String {
    let cap = (ROOM_FACTOR * s.stock.max(0) as f64).ceil() as usize;
    while s.admitted.len() < cap {
        let Some(u) = s.queue.pop_front() else { break };
        s.admitted.insert(u, now_ms() + 5000);
    }
    s.max_admitted = s.max_admitted.max(s.admitted.len());
    let qid = s.entries[&user].clone();
    let mut body = QueueBody {
        queue_id: qid,
        state: String::new(),
        position: None,
        ahead: None,
        estimated_wait_ms: None,
        unlikely: false,
        refresh_after_ms: 20,
        admission_token: None,
        admitted_until_ms: None,
    };
    body.state = match (s.done.get(&user), s.admitted.get(&user)) {
        (Some(d), _) => (*d).into(),
        (None, Some(until)) => {
            body.admission_token = Some(admission_token(user, *until));
            body.admitted_until_ms = Some(*until);
            "admitted".into()
        }
        _ if s.stock <= 0 && s.pending == 0 => "sold_out".into(),
        _ => "waiting".into(),
    };
    serde_json::to_string(&body).unwrap()
}

fn now_ms() -> i64 {
    (crate::now_us() / 1000) as i64
}

/// `POST /v1/orders/{ticket}/pay` with `key`.
fn pay(s: &mut Sale, sale: &Shared, cfg: &Config, ticket: &str, key: &str) -> (u16, String) {
    if (s.pays.len() as u64) < cfg.unavailable_first {
        return (503, err("unavailable"));
    }
    let payments = s.payments;
    let Some(o) = s.orders.get_mut(ticket) else {
        return (404, err("unknown_ticket"));
    };
    let accepted = |id: &str| {
        let body = PaymentBody {
            payment_id: id.to_owned(),
            status: "processing".into(),
        };
        (202, serde_json::to_string(&body).unwrap())
    };
    if let Some(id) = o.payments.get(key) {
        return accepted(id);
    }
    let Some(pay_by) = o.pay_by_ms.filter(|_| o.status == "confirmed") else {
        return (409, err_in("not_payable", o.status));
    };
    if now_ms() >= pay_by {
        return (409, err("payment_window_closed"));
    }
    if o.paying {
        return (409, err("payment_in_progress"));
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

/// `POST /v1/orders/{ticket}/cancel`: a confirmed order with a payment window is cancelled,
/// its unit back on sale; a cancelled one is answered again; anything else is refused with
/// its state.
fn cancel(s: &mut Sale, ticket: &str) -> (u16, String) {
    let Some(o) = s.orders.get_mut(ticket) else {
        return (404, err("unknown_ticket"));
    };
    match (o.status, o.pay_by_ms) {
        ("confirmed", Some(_)) => {
            o.status = "cancelled";
            o.reason = Some("buyer_cancelled");
            o.cancelled_at_ms = Some(now_ms());
            let user = o.user;
            s.cancelled += 1;
            s.buyer_cancelled += 1;
            s.stock += 1;
            s.stock_db += 1;
            s.live_ticket.remove(&user);
        }
        ("cancelled", _) => {}
        (state, _) => return (409, err_in("not_cancellable", state)),
    }
    (200, ticket_json(ticket, &s.orders[ticket]))
}

/// An error answer's body, as the gateway writes it.
fn err(code: &str) -> String {
    serde_json::to_string(&ErrorBody::new(code, format!("fake: {code}"))).unwrap()
}

/// An error answer about a ticket in `state`.
fn err_in(code: &str, state: &str) -> String {
    let body = ErrorBody {
        state: Some(status(state)),
        ..ErrorBody::new(code, format!("fake: {code}"))
    };
    serde_json::to_string(&body).unwrap()
}

fn status(s: &str) -> TicketStatus {
    serde_json::from_value(serde_json::Value::from(s)).expect("a ticket status")
}

/// A ticket's body, as the gateway answers a buy, a poll or a cancel.
fn ticket_json(ticket: &str, o: &Order) -> String {
    let t = Ticket::parse(ticket).expect("the fake's tickets parse");
    let body = TicketBody {
        status: status(o.status),
        order_id: o.order_id,
        reason: o.reason.map(str::to_owned),
        pay_by_ms: o.pay_by_ms,
        paid_at_ms: o.paid_at_ms,
        cancelled_at_ms: o.cancelled_at_ms,
        ..TicketBody::pending(&t, UserId::new(o.user).expect("a user id"), 1)
    };
    serde_json::to_string(&body).unwrap()
}

/// The product's admin view.
fn product_json(s: &Sale, cfg: &Config, id: u64) -> String {
    let count = |st: &str| s.orders.values().filter(|o| o.status == st).count() as i64;
    let view = ProductView {
        id,
        name: "fake".into(),
        stock_db: s.stock_db,
        initial_stock: cfg.stock,
        stock_redis: Some(s.stock),
        pending: s.pending,
        confirmed: s.confirmed as i64,
        paid: s.paid as i64,
        cancelled: s.cancelled as i64,
        failed: s.failed as i64,
        failed_by_reason: Default::default(),
        state: SaleState::OnSale,
        orders_db: OrdersByState {
            confirmed: count("confirmed"),
            paid: count("paid"),
            cancelled: count("cancelled"),
        },
        price: 0,
        currency: "CNY".into(),
        payment_window_secs: 0,
        max_per_buyer: 1,
        waiting_room: cfg.waiting_room.then_some(WaitingRoomView {
            admit_per_sec: 100.0,
            max_admitted_factor: ROOM_FACTOR,
            opens_at: None,
            pow: None,
            admitted: s.admitted.len() as u64,
            waiting: s.queue.len() as u64,
        }),
        starts_at: None,
        ends_at: None,
        closed_at: None,
        buckets: Vec::new(),
    };
    serde_json::to_string(&view).unwrap()
}

/// The user a ticket was issued to.
pub fn ticket_user(sale: &Shared, ticket: &str) -> Option<u64> {
    sale.lock().unwrap().orders.get(ticket).map(|o| o.user)
}
