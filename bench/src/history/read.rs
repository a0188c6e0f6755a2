//! Reads a history back: its lines, and apart from them the payment and waiting-room lines.

use super::{AllLines, Line, PaymentLine, WaitingRoomLine};
use anyhow::Context;
use std::io::BufRead;
use std::path::Path;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{CancelLine, PayEndLine, PayLine, SummaryLine};

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
