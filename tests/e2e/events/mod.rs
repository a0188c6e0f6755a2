//! Live streams (server-sent events): a ticket's states pushed to its owner.

mod queue;
mod tickets;

use crate::helpers::*;
use reqwest::StatusCode;
use serde_json::Value;
use std::time::Duration;

/// A client of one stream: its response, and what was read but not yet parsed.
pub struct Events {
    res: reqwest::Response,
    buf: String,
}

/// Opens `GET {base}{path}` as `user`, with `Last-Event-ID` if given.
pub async fn open(base: &str, path: &str, user: u64, last: Option<&str>) -> reqwest::Response {
    let mut req = reqwest::Client::new()
        .get(format!("{base}{path}"))
        .bearer_auth(token(user))
        .header("Accept", "text/event-stream");
    if let Some(last) = last {
        req = req.header("Last-Event-ID", last);
    }
    req.send().await.expect("opening a stream")
}

impl Events {
    /// The stream of a `200` response (asserting its content type).
    pub fn of(res: reqwest::Response) -> Self {
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(
            res.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        Self {
            res,
            buf: String::new(),
        }
    }

    /// The next event, as (id, data); `None` once the server ended the stream. Comments and
    /// `retry:` lines are skipped. Fails after `timeout` without one.
    pub async fn next(&mut self, timeout: Duration) -> Option<(String, Value)> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            while let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let mut id = None;
                let mut data = None;
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id: ") {
                        id = Some(v.to_owned());
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data = Some(serde_json::from_str(v).expect("an event's data is JSON"));
                    }
                }
                if let Some(data) = data {
                    return Some((id.expect("every event has an id"), data));
                }
            }
            let chunk = tokio::time::timeout_at(deadline, self.res.chunk())
                .await
                .unwrap_or_else(|_| panic!("no event in time; read {:?}", self.buf));
            match chunk {
                Ok(Some(bytes)) => self.buf.push_str(std::str::from_utf8(&bytes).unwrap()),
                // Ended by the server, or the connection broke (its gateway died).
                Ok(None) | Err(_) => return None,
            }
        }
    }

    /// Reads until the stream holds `text`, or fails after `timeout`.
    pub async fn read_until(&mut self, text: &str, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        while !self.buf.contains(text) {
            let chunk = tokio::time::timeout_at(deadline, self.res.chunk())
                .await
                .unwrap_or_else(|_| panic!("no {text:?} in time; read {:?}", self.buf))
                .expect("reading the stream")
                .expect("the stream ended");
            self.buf.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }
}
