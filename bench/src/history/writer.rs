//! Writes the history: a buffered writer on its own thread, fed by the load workers.

use anyhow::Context;
use serde::Serialize;
use std::io::{BufWriter, Write};
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
    /// Units the buy asked for.
    pub quantity: u16,
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
    #[serde(skip_serializing_if = "is_one")]
    quantity: u16,
    status: Option<u16>,
    ticket: Option<&'a str>,
    error: Option<&'a str>,
}

fn is_one(q: &u16) -> bool {
    *q == 1
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
        quantity: r.quantity,
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
    use crate::history::{read, Line, SaleEndCheck, SaleEndLine, SummaryLine};

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
                quantity: 1,
                status: Some(202),
                ticket: Some("3-00000000000000000000000000000001".into()),
                error: None,
            },
            RequestRecord {
                sent_at_us: 3,
                recv_at_us: 4,
                gateway: 0,
                user_id: Some(8),
                quantity: 1,
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
}
