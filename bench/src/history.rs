//! The history file: JSON lines of three kinds.
//!
//! ```text
//! {"kind":"request","sent_at_us":…,"recv_at_us":…,"gateway":"http://…","user_id":7,"status":202,"ticket":"…","error":null}
//! {"kind":"settled","ticket":"…","user_id":7,"status":"confirmed","order_id":12,"reason":null,"answered_at_us":…,"reserved_at_ms":…,"confirmed_at_ms":…}
//! {"kind":"summary", …}
//! ```
//!
//! `load --pay-rate` adds two kinds ([`PaymentLine`]), written as they happen, so in no set
//! order against the request lines: one line per request to pay, and one per paying buyer when
//! it stops looking at its ticket. `load --cancel-rate` adds a third: one line per request to
//! cancel.
//!
//! ```text
//! {"kind":"pay","ticket":"…","user_id":7,"attempt":1,"idempotency_key":"…","status":202,"payment_id":"pay_…","error":null,"state":null,"sent_at_ms":…,"at_ms":…}
//! {"kind":"pay_end","ticket":"…","user_id":7,"status":"paid","reason":null,"pay_by_ms":…,"paid_at_ms":…,"cancelled_at_ms":null,"attempts":1,"accepted":1,"at_ms":…}
//! {"kind":"cancel","ticket":"…","user_id":8,"attempt":2,"status":200,"error":null,"state":"cancelled","reason":"buyer_cancelled","sent_at_ms":…,"at_ms":…}
//! ```
//!
//! `load --waiting-room` adds five kinds ([`WaitingRoomLine`]), also written as they happen:
//! each join attempt, each admission a buyer saw, each buy with the admission it carried (the
//! buy also has its usual request line), each buyer's last state, and samples of the admin
//! view's admitted-not-bought count against the units left.
//!
//! ```text
//! {"kind":"wr_join","user_id":7,"gateway":"http://…","status":202,"queue_id":"…","state":"waiting","error":null,"sent_at_ms":…,"at_ms":…}
//! {"kind":"wr_admitted","user_id":7,"queue_id":"…","admitted_until_ms":…,"gateway":"http://…","at_ms":…}
//! {"kind":"wr_buy","user_id":7,"admission_token":"…","admitted_until_ms":…,"sent_at_us":…,"gateway":"http://…","status":202,"ticket":"…","error":null}
//! {"kind":"wr_end","user_id":7,"queue_id":"…","state":"bought","polls":9,"poll_errors":0,"at_ms":…}
//! {"kind":"wr_sample","at_ms":…,"admitted":12,"stock_redis":150,"pending":3,"max_admitted_factor":1.5}
//! ```
//!
//! `load` writes it through [`HistoryWriter`], a thread fed by a channel, so file I/O stays off
//! the request path. `audit` reads it back with [`read`], which skips the payment and
//! waiting-room lines, with [`read_with_payments`], or with [`read_all`].

use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufWriter, Write};
use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

/// One request as a load worker recorded it. The gateway is an index into the writer's list,
/// so recording costs no string copy.
#[derive(Debug, Clone)]
pub struct RequestRecord {
    pub sent_at_us: u64,
    pub recv_at_us: u64,
    pub gateway: u16,
    /// `None` for a `--path-get` run.
    pub user_id: Option<u64>,
    /// `None` when no HTTP answer came (transport error).
    pub status: Option<u16>,
    pub ticket: Option<Box<str>>,
    pub error: Option<Box<str>>,
}

#[derive(Serialize)]
struct RequestLineOut<'a> {
    kind: &'static str,
    sent_at_us: u64,
    recv_at_us: u64,
    gateway: &'a str,
    user_id: Option<u64>,
    status: Option<u16>,
    ticket: Option<&'a str>,
    error: Option<&'a str>,
}

/// A ticket's final state after the polling phase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettledLine {
    pub ticket: String,
    pub user_id: u64,
    /// `confirmed`, `failed`, or `pending` when it did not settle in time.
    pub status: String,
    pub order_id: Option<u64>,
    pub reason: Option<String>,
    /// When the load tool received the answer that issued the ticket (its `202` if it saw
    /// one), µs since the epoch, client clock.
    #[serde(default)]
    pub answered_at_us: Option<u64>,
    /// When Redis reserved the unit, ms since the epoch, the gateway's clock (from the ticket).
    #[serde(default)]
    pub reserved_at_ms: Option<i64>,
    /// When the worker confirmed the ticket in Redis after the MySQL commit, ms since the
    /// epoch, the worker's clock (from the ticket).
    #[serde(default)]
    pub confirmed_at_ms: Option<i64>,
}

/// A request line as `audit` reads it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RequestLine {
    pub sent_at_us: u64,
    pub recv_at_us: u64,
    pub gateway: String,
    pub user_id: Option<u64>,
    pub status: Option<u16>,
    pub ticket: Option<String>,
    pub error: Option<String>,
}

/// How `load --until-sold-out` made sure the sale was over before it stopped offering fresh
/// buyers. A history without it is from a load that stopped at its first round of 409s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SaleEndCheck {
    /// `GET /admin/products/{id}`: no stock in Redis nor MySQL and nothing pending, twice in
    /// a row.
    AdminApi,
    /// No admin token: fresh buyers kept probing until none had bought for `--sold-out-quiet`.
    /// Pending orders are not seen.
    Probes,
}

impl SaleEndCheck {
    pub fn label(self) -> &'static str {
        match self {
            Self::AdminApi => "admin_api",
            Self::Probes => "probes",
        }
    }
}

/// The part of the summary's `sale_end` that `audit` needs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SaleEndLine {
    pub checked_by: SaleEndCheck,
}

/// The parts of the summary line `audit` needs; the rest is ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct SummaryLine {
    #[serde(default)]
    pub product: Option<u64>,
    #[serde(default)]
    pub until_sold_out: bool,
    #[serde(default)]
    pub sold_out_reached: Option<bool>,
    /// `--until-sold-out` loads that waited for the sale to be over.
    #[serde(default)]
    pub sale_end: Option<SaleEndLine>,
    /// `load --until-all-paid`: fresh buyers came until every unit was paid.
    #[serde(default)]
    pub until_all_paid: bool,
    /// `--until-all-paid`: whether the admin API showed every unit paid (`orders_db.paid ==
    /// initial_stock`) before the load gave up.
    #[serde(default)]
    pub all_paid_reached: Option<bool>,
}

/// One `POST /v1/orders/{ticket}/pay` of `load --pay-rate`, as sent and answered: a line of
/// kind `pay`. A `503` (or no answer) is retried with the same key, each try its own line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PayLine {
    pub ticket: String,
    pub user_id: u64,
    /// The buyer's payment attempt: 1 for its first `Idempotency-Key`, 2 for its next...
    pub attempt: u32,
    pub idempotency_key: String,
    /// The HTTP status; `None` when no answer came.
    pub status: Option<u16>,
    /// `202`: the payment the gateway recorded.
    #[serde(default)]
    pub payment_id: Option<String>,
    /// `409`: the error code (`not_payable`, `payment_window_closed`, `payment_in_progress`);
    /// no answer: the transport error.
    #[serde(default)]
    pub error: Option<String>,
    /// `409 not_payable`: the ticket's state.
    #[serde(default)]
    pub state: Option<String>,
    /// Sent and answered, ms since the epoch, client clock.
    pub sent_at_ms: i64,
    pub at_ms: i64,
}

/// What a paying buyer of `load --pay-rate` last saw of its ticket when it stopped: a line of
/// kind `pay_end`, one per paying buyer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PayEndLine {
    pub ticket: String,
    pub user_id: u64,
    /// `paid`, `cancelled`, `confirmed` (still unpaid when the buyer stopped looking, after
    /// its payment deadline and a grace), `failed`, `pending` (never confirmed while the buyer
    /// looked), or `unknown` (no poll answered).
    pub status: String,
    /// A cancelled ticket's reason (`payment_timeout`, `buyer_cancelled`), a failed one's.
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub pay_by_ms: Option<i64>,
    #[serde(default)]
    pub paid_at_ms: Option<i64>,
    #[serde(default)]
    pub cancelled_at_ms: Option<i64>,
    /// `Idempotency-Key`s the buyer used.
    pub attempts: u32,
    /// Of those, answered `202`.
    pub accepted: u32,
    /// When the buyer stopped, ms since the epoch, client clock.
    pub at_ms: i64,
}

/// One `POST /v1/orders/{ticket}/cancel` of `load --cancel-rate`, as sent and answered: a
/// line of kind `cancel`. A buyer who cancels tries from its `202` on, so its first tries may
/// be refused while the order is `pending`; each try is its own line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelLine {
    pub ticket: String,
    pub user_id: u64,
    /// The buyer's try: 1, 2...
    pub attempt: u32,
    /// The HTTP status; `None` when no answer came.
    pub status: Option<u16>,
    /// `409`: the error code (`not_cancellable`); another status: its error code, if any; no
    /// answer: the transport error.
    #[serde(default)]
    pub error: Option<String>,
    /// `200`: the ticket's status as answered (`cancelled`); `409`: the state that refused the
    /// cancel (`pending`, `paid`, `failed`...).
    #[serde(default)]
    pub state: Option<String>,
    /// `200`: the cancelled ticket's reason (`buyer_cancelled`).
    #[serde(default)]
    pub reason: Option<String>,
    /// Sent and answered, ms since the epoch, client clock.
    pub sent_at_ms: i64,
    pub at_ms: i64,
}

/// The lines `load --pay-rate` and `load --cancel-rate` add to a history. [`parse`] skips
/// them, so a reader of [`Line`]s reads such a history as before; [`parse_with_payments`]
/// returns them too.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PaymentLine {
    Pay(PayLine),
    PayEnd(PayEndLine),
    Cancel(CancelLine),
}

/// One join attempt of `load --waiting-room`: a line of kind `wr_join`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrJoinLine {
    pub user_id: u64,
    pub gateway: String,
    /// `None`: no answer came.
    pub status: Option<u16>,
    /// `202`: the entry the gateway answered with.
    #[serde(default)]
    pub queue_id: Option<String>,
    #[serde(default)]
    pub state: Option<String>,
    /// Not `202`: the error code or the transport error.
    #[serde(default)]
    pub error: Option<String>,
    /// Sent and answered, ms since the epoch, client clock.
    pub sent_at_ms: i64,
    pub at_ms: i64,
}

/// A poll (or join) that answered `admitted` with an admission the buyer had not seen yet: a
/// line of kind `wr_admitted`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrAdmittedLine {
    pub user_id: u64,
    pub queue_id: String,
    /// The admission's expiry, ms since the epoch, gateway clock.
    pub admitted_until_ms: i64,
    pub gateway: String,
    pub at_ms: i64,
}

/// One buy of `load --waiting-room`, with the admission it carried: a line of kind `wr_buy`.
/// The same buy has its request line, with the same `sent_at_us`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrBuyLine {
    pub user_id: u64,
    /// The `Seckill-Admission` header sent; `None`: none was.
    #[serde(default)]
    pub admission_token: Option<String>,
    /// The expiry of the admission the token is for, as its poll answered it.
    #[serde(default)]
    pub admitted_until_ms: Option<i64>,
    pub sent_at_us: u64,
    pub gateway: String,
    pub status: Option<u16>,
    #[serde(default)]
    pub ticket: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
}

/// What a buyer of `load --waiting-room` last saw when it stopped: a line of kind `wr_end`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrEndLine {
    pub user_id: u64,
    #[serde(default)]
    pub queue_id: Option<String>,
    /// `bought`, `expired`, `sold_out`, `waiting` or `admitted` (the load's timeout came
    /// first), or `not_joined`.
    pub state: String,
    /// Polls answered, and polls that got no usable answer.
    pub polls: u64,
    pub poll_errors: u64,
    pub at_ms: i64,
}

/// The admin view's waiting room during `load --waiting-room`: a line of kind `wr_sample`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WrSampleLine {
    /// When the answer came, ms since the epoch, client clock.
    pub at_ms: i64,
    /// `waiting_room.admitted`: admitted, not bought.
    pub admitted: u64,
    /// `None` while Redis has lost the product.
    pub stock_redis: Option<i64>,
    pub pending: i64,
    pub max_admitted_factor: f64,
}

/// The lines `load --waiting-room` adds to a history. [`parse`] and [`parse_with_payments`]
/// skip them; [`parse_all`] returns them too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WaitingRoomLine {
    WrJoin(WrJoinLine),
    WrAdmitted(WrAdmittedLine),
    WrBuy(WrBuyLine),
    WrEnd(WrEndLine),
    WrSample(WrSampleLine),
}

/// Every line of a history, by family.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AllLines {
    pub lines: Vec<Line>,
    pub payments: Vec<PaymentLine>,
    pub waiting_room: Vec<WaitingRoomLine>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Line {
    Request(RequestLine),
    Settled(SettledLine),
    Summary(SummaryLine),
}

/// Reads every line of a history file. Blank lines are skipped; anything else that does not
/// parse is an error naming the line.
pub fn read(path: &Path) -> anyhow::Result<Vec<Line>> {
    let file = std::fs::File::open(path)
        .with_context(|| format!("opening history file {}", path.display()))?;
    parse(std::io::BufReader::new(file))
        .with_context(|| format!("reading history file {}", path.display()))
}

pub fn parse(reader: impl BufRead) -> anyhow::Result<Vec<Line>> {
    Ok(parse_with_payments(reader)?.0)
}

/// Every line of a history file, the payment lines of `load --pay-rate` apart.
pub fn read_with_payments(path: &Path) -> anyhow::Result<(Vec<Line>, Vec<PaymentLine>)> {
    let file = std::fs::File::open(path)
        .with_context(|| format!("opening history file {}", path.display()))?;
    parse_with_payments(std::io::BufReader::new(file))
        .with_context(|| format!("reading history file {}", path.display()))
}

/// As [`parse`], and the payment lines apart, in file order.
pub fn parse_with_payments(reader: impl BufRead) -> anyhow::Result<(Vec<Line>, Vec<PaymentLine>)> {
    let all = parse_all(reader)?;
    Ok((all.lines, all.payments))
}

/// Every line of a history file, each family apart.
pub fn read_all(path: &Path) -> anyhow::Result<AllLines> {
    let file = std::fs::File::open(path)
        .with_context(|| format!("opening history file {}", path.display()))?;
    parse_all(std::io::BufReader::new(file))
        .with_context(|| format!("reading history file {}", path.display()))
}

/// As [`parse`], and the payment and waiting-room lines apart, in file order.
pub fn parse_all(reader: impl BufRead) -> anyhow::Result<AllLines> {
    let mut all = AllLines::default();
    for (n, line) in reader.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Line>(&line) {
            Ok(l) => all.lines.push(l),
            Err(e) => {
                if let Ok(p) = serde_json::from_str::<PaymentLine>(&line) {
                    all.payments.push(p);
                } else if let Ok(w) = serde_json::from_str::<WaitingRoomLine>(&line) {
                    all.waiting_room.push(w);
                } else {
                    return Err(e).with_context(|| format!("line {}", n + 1));
                }
            }
        }
    }
    Ok(all)
}

enum Msg {
    Requests(Vec<RequestRecord>),
    Line(String),
}

/// A buffered writer on its own thread. Cheap to clone senders come from [`HistoryWriter::sink`].
pub struct HistoryWriter {
    tx: Option<mpsc::Sender<Msg>>,
    thread: Option<JoinHandle<anyhow::Result<()>>>,
}

/// Where load workers send their batches of request records.
#[derive(Clone)]
pub struct HistorySink {
    tx: Option<mpsc::Sender<Msg>>,
}

impl HistorySink {
    /// Sends a batch; never blocks. A writer that has died is reported by
    /// [`HistoryWriter::finish`].
    pub fn send(&self, batch: Vec<RequestRecord>) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Msg::Requests(batch));
        }
    }

    pub fn enabled(&self) -> bool {
        self.tx.is_some()
    }

    /// Appends one JSON line; never blocks. A writer that has died is reported by
    /// [`HistoryWriter::finish`].
    pub fn line(&self, value: &impl Serialize) {
        if let Some(tx) = &self.tx {
            if let Ok(s) = serde_json::to_string(value) {
                let _ = tx.send(Msg::Line(s));
            }
        }
    }
}

impl HistoryWriter {
    /// Creates (truncates) `path`. `None` gives a writer that drops everything.
    pub fn create(path: Option<&Path>, gateways: Arc<Vec<String>>) -> anyhow::Result<Self> {
        let Some(path) = path else {
            return Ok(Self {
                tx: None,
                thread: None,
            });
        };
        let file = std::fs::File::create(path)
            .with_context(|| format!("creating history file {}", path.display()))?;
        let (tx, rx) = mpsc::channel::<Msg>();
        let thread = std::thread::Builder::new()
            .name("history-writer".into())
            .spawn(move || -> anyhow::Result<()> {
                let mut w = BufWriter::with_capacity(1 << 20, file);
                for msg in rx {
                    match msg {
                        Msg::Requests(batch) => {
                            for r in &batch {
                                write_request(&mut w, r, &gateways)?;
                            }
                        }
                        Msg::Line(s) => {
                            w.write_all(s.as_bytes())?;
                            w.write_all(b"\n")?;
                        }
                    }
                }
                w.flush()?;
                Ok(())
            })
            .context("starting the history writer thread")?;
        Ok(Self {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    pub fn sink(&self) -> HistorySink {
        HistorySink {
            tx: self.tx.clone(),
        }
    }

    /// Appends one JSON line.
    pub fn line(&self, value: &impl Serialize) -> anyhow::Result<()> {
        if let Some(tx) = &self.tx {
            let s = serde_json::to_string(value)?;
            tx.send(Msg::Line(s))
                .map_err(|_| anyhow::anyhow!("the history writer stopped"))?;
        }
        Ok(())
    }

    /// Flushes and closes the file once every sink is dropped.
    pub fn finish(mut self) -> anyhow::Result<()> {
        drop(self.tx.take());
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| anyhow::anyhow!("the history writer panicked"))?
                .context("writing the history file"),
            None => Ok(()),
        }
    }
}

fn write_request(w: &mut impl Write, r: &RequestRecord, gateways: &[String]) -> anyhow::Result<()> {
    let line = RequestLineOut {
        kind: "request",
        sent_at_us: r.sent_at_us,
        recv_at_us: r.recv_at_us,
        gateway: gateways.get(r.gateway as usize).map_or("?", |s| s.as_str()),
        user_id: r.user_id,
        status: r.status,
        ticket: r.ticket.as_deref(),
        error: r.error.as_deref(),
    };
    serde_json::to_writer(&mut *w, &line)?;
    w.write_all(b"\n")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_lines_read_back() {
        let dir = std::env::temp_dir().join(format!("bench-history-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("h.jsonl");
        let gws = Arc::new(vec!["http://a".to_owned(), "http://b".to_owned()]);
        let w = HistoryWriter::create(Some(&path), gws).unwrap();
        let sink = w.sink();
        sink.send(vec![
            RequestRecord {
                sent_at_us: 1,
                recv_at_us: 2,
                gateway: 1,
                user_id: Some(7),
                status: Some(202),
                ticket: Some("3-00000000000000000000000000000001".into()),
                error: None,
            },
            RequestRecord {
                sent_at_us: 3,
                recv_at_us: 4,
                gateway: 0,
                user_id: Some(8),
                status: None,
                ticket: None,
                error: Some("connection refused".into()),
            },
        ]);
        drop(sink);
        w.line(
            &serde_json::json!({"kind": "settled", "ticket": "3-00000000000000000000000000000001",
            "user_id": 7, "status": "confirmed", "order_id": 5, "reason": null}),
        )
        .unwrap();
        w.line(
            &serde_json::json!({"kind": "summary", "product": 3, "until_sold_out": true,
            "sale_end": {"checked_by": "admin_api", "checks": 2}, "extra": [1, 2]}),
        )
        .unwrap();
        w.finish().unwrap();

        let text = std::fs::read_to_string(&path).unwrap();
        let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(first["kind"], "request");
        assert_eq!(first["gateway"], "http://b");
        assert_eq!(first["error"], serde_json::Value::Null);

        let lines = read(&path).unwrap();
        assert_eq!(lines.len(), 4);
        let Line::Request(r) = &lines[1] else {
            panic!("{:?}", lines[1])
        };
        assert_eq!(r.status, None);
        assert_eq!(r.error.as_deref(), Some("connection refused"));
        assert!(matches!(&lines[2], Line::Settled(s) if s.order_id == Some(5)));
        assert_eq!(
            lines[3],
            Line::Summary(SummaryLine {
                product: Some(3),
                until_sold_out: true,
                sold_out_reached: None,
                sale_end: Some(SaleEndLine {
                    checked_by: SaleEndCheck::AdminApi
                }),
                ..Default::default()
            })
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn payment_lines_are_skipped_by_parse_and_read_apart() {
        let pay = PaymentLine::Pay(PayLine {
            ticket: "3-00000000000000000000000000000001".into(),
            user_id: 7,
            attempt: 1,
            idempotency_key: "k1".into(),
            status: Some(202),
            payment_id: Some("pay_00".into()),
            error: None,
            state: None,
            sent_at_ms: 1,
            at_ms: 2,
        });
        let end = PaymentLine::PayEnd(PayEndLine {
            ticket: "3-00000000000000000000000000000001".into(),
            user_id: 7,
            status: "paid".into(),
            reason: None,
            pay_by_ms: Some(10),
            paid_at_ms: Some(3),
            cancelled_at_ms: None,
            attempts: 1,
            accepted: 1,
            at_ms: 4,
        });
        let cancel = PaymentLine::Cancel(CancelLine {
            ticket: "3-00000000000000000000000000000002".into(),
            user_id: 8,
            attempt: 2,
            status: Some(200),
            error: None,
            state: Some("cancelled".into()),
            reason: Some("buyer_cancelled".into()),
            sent_at_ms: 5,
            at_ms: 6,
        });
        let pay_text = serde_json::to_string(&pay).unwrap();
        assert!(pay_text.starts_with(r#"{"kind":"pay","#), "{pay_text}");
        let end_text = serde_json::to_string(&end).unwrap();
        assert!(end_text.starts_with(r#"{"kind":"pay_end","#), "{end_text}");
        let cancel_text = serde_json::to_string(&cancel).unwrap();
        assert!(
            cancel_text.starts_with(r#"{"kind":"cancel","#),
            "{cancel_text}"
        );
        let text = format!(
            "{{\"kind\":\"summary\",\"until_all_paid\":true,\"all_paid_reached\":false}}\n\
             {pay_text}\n{end_text}\n{cancel_text}\n"
        );
        let lines = parse(text.as_bytes()).unwrap();
        assert_eq!(
            lines,
            vec![Line::Summary(SummaryLine {
                until_all_paid: true,
                all_paid_reached: Some(false),
                ..Default::default()
            })]
        );
        let (lines, payments) = parse_with_payments(text.as_bytes()).unwrap();
        assert_eq!(lines.len(), 1);
        assert_eq!(payments, vec![pay, end, cancel]);
        // An unknown kind is still an error, named by the error a line of history gives.
        let err = parse("{\"kind\":\"refund\"}\n".as_bytes()).unwrap_err();
        assert!(format!("{err:#}").contains("line 1"), "{err:#}");
    }

    #[test]
    fn a_bad_line_is_named() {
        let err = parse("{\"kind\":\"summary\"}\n\nnot json\n".as_bytes()).unwrap_err();
        assert!(format!("{err:#}").contains("line 3"), "{err:#}");
    }

    #[test]
    fn waiting_room_lines_are_read_apart_and_skipped_by_the_old_readers() {
        let text = r#"{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":7,"status":202,"ticket":"3-00000000000000000000000000000001","error":null}
{"kind":"wr_join","user_id":7,"gateway":"g","status":202,"queue_id":"q","state":"waiting","error":null,"sent_at_ms":1,"at_ms":2}
{"kind":"wr_admitted","user_id":7,"queue_id":"q","admitted_until_ms":9,"gateway":"g","at_ms":3}
{"kind":"wr_buy","user_id":7,"admission_token":"t","admitted_until_ms":9,"sent_at_us":1,"gateway":"g","status":202,"ticket":"3-00000000000000000000000000000001","error":null}
{"kind":"wr_end","user_id":7,"queue_id":"q","state":"bought","polls":2,"poll_errors":0,"at_ms":4}
{"kind":"wr_sample","at_ms":5,"admitted":1,"stock_redis":4,"pending":0,"max_admitted_factor":1.5}
{"kind":"summary","product":3}
"#;
        let all = parse_all(text.as_bytes()).unwrap();
        assert_eq!(all.lines.len(), 2);
        assert_eq!(all.waiting_room.len(), 5);
        assert!(all.payments.is_empty());
        assert!(
            matches!(&all.waiting_room[2], WaitingRoomLine::WrBuy(b) if b.admission_token.as_deref() == Some("t"))
        );
        assert_eq!(parse(text.as_bytes()).unwrap(), all.lines);
        assert!(parse("{\"kind\":\"wr_nonsense\"}\n".as_bytes()).is_err());
    }
}
