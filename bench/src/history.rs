//! The history file: JSON lines of three kinds.
//!
//! ```text
//! {"kind":"request","sent_at_us":…,"recv_at_us":…,"gateway":"http://…","user_id":7,"status":202,"ticket":"…","error":null}
//! {"kind":"settled","ticket":"…","user_id":7,"status":"confirmed","order_id":12,"reason":null,"answered_at_us":…,"reserved_at_ms":…,"confirmed_at_ms":…}
//! {"kind":"summary", …}
//! ```
//!
//! `load` writes it through [`HistoryWriter`], a thread fed by a channel, so file I/O stays off
//! the request path. `audit` reads it back with [`read`].

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
    let mut out = Vec::new();
    for (n, line) in reader.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        out.push(serde_json::from_str(&line).with_context(|| format!("line {}", n + 1))?);
    }
    Ok(out)
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
            })
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_bad_line_is_named() {
        let err = parse("{\"kind\":\"summary\"}\n\nnot json\n".as_bytes()).unwrap_err();
        assert!(format!("{err:#}").contains("line 3"), "{err:#}");
    }
}
