//! The history file's lines, reduced to the facts the checks need.

use super::checks::{HistoryFacts, HistoryTicket};
use crate::history::{Line, SettledLine};
use seckill_shared::{ProductId, Ticket};
use std::collections::BTreeMap;

/// Reduces the history's lines to the facts the checks need. Only tickets of `product` count;
/// the number of others is returned so the caller can warn.
pub fn history_facts(lines: &[Line], product: ProductId) -> anyhow::Result<(HistoryFacts, usize)> {
    let mut facts = HistoryFacts::default();
    let mut foreign = 0;
    let mut settled: Vec<&SettledLine> = vec![];
    // Each user's last request: when it was sent, and whether it went unanswered.
    let mut last_request: BTreeMap<u64, (u64, bool)> = BTreeMap::new();
    for line in lines {
        match line {
            Line::Request(r) => {
                facts.requests += 1;
                facts.last_answer_us = facts.last_answer_us.max(Some(r.recv_at_us));
                if let Some(user) = r.user_id {
                    // Unanswered: no answer, or a 2xx whose body could not be read.
                    let unanswered = r.status.is_none()
                        || (r.error.is_some() && r.status.is_some_and(|s| (200..300).contains(&s)));
                    let last = last_request
                        .entry(user)
                        .or_insert((r.sent_at_us, unanswered));
                    if r.sent_at_us >= last.0 {
                        *last = (r.sent_at_us, unanswered);
                    }
                }
                if r.status.is_none() {
                    // No answer at all (the connection broke): the buy may have gone through.
                    if let Some(user) = r.user_id {
                        facts.unanswered_users.insert(user);
                    }
                }
                let Some(status @ 200..=202) = r.status else {
                    continue;
                };
                if r.error.is_some() {
                    // A 2xx whose body could not be read: the buyer never learned their
                    // ticket, which may be held all the same. Unanswered, never dropped.
                    if let Some(user) = r.user_id {
                        facts.unanswered_users.insert(user);
                    }
                    continue;
                }
                let n = facts.requests;
                let to = r.user_id.map_or("no user".into(), |u| format!("user {u}"));
                let what = |why: String| format!("request {n}: {status} to {to} {why}");
                let Some(user) = r.user_id else {
                    facts.malformed.push(what("names no user".into()));
                    continue;
                };
                let Some(text) = &r.ticket else {
                    facts.malformed.push(what("carries no ticket".into()));
                    continue;
                };
                let Ok(ticket) = Ticket::parse(text) else {
                    facts.malformed.push(what(format!(
                        "carries ticket {text:?}, which does not parse"
                    )));
                    continue;
                };
                if ticket.product() != product {
                    foreign += 1;
                    continue;
                }
                facts
                    .tickets
                    .entry(text.clone())
                    .and_modify(|t| {
                        if t.user != user {
                            t.other_users.insert(user);
                        }
                    })
                    .or_insert_with(|| HistoryTicket {
                        user,
                        other_users: Default::default(),
                        settled: None,
                        quantity: r.quantity,
                    });
            }
            Line::Settled(s) => settled.push(s),
            Line::Summary(s) => {
                if let Some(p) = s.product {
                    anyhow::ensure!(
                        p == product.get(),
                        "the history is of a run on product {p}, not {product}"
                    );
                }
                facts.has_summary = true;
                facts.until_sold_out = s.until_sold_out;
                facts.sold_out_reached = s.sold_out_reached;
                facts.sale_end_checked_by = s.sale_end.as_ref().map(|e| e.checked_by);
            }
        }
    }
    facts.last_unanswered_users = last_request
        .into_iter()
        .filter_map(|(user, (_, unanswered))| unanswered.then_some(user))
        .collect();
    // Settled lines follow the requests; match them up once every request is read.
    for s in settled {
        match facts.tickets.get_mut(&s.ticket) {
            Some(t) => t.settled = Some(s.clone()),
            None if Ticket::parse(&s.ticket).is_ok_and(|t| t.product() != product) => {}
            None => facts.stray_settled.push(s.ticket.clone()),
        }
    }
    Ok((facts, foreign))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::history;

    pub(in crate::audit) const T1: &str = "5-00000000000000000000000000000001";
    pub(in crate::audit) const T2: &str = "5-00000000000000000000000000000002";

    #[test]
    fn only_a_buyer_whose_last_request_went_unanswered_may_hold_an_untold_ticket() {
        let text = r#"{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":3,"status":null,"ticket":null,"error":"reset"}
{"kind":"request","sent_at_us":5,"recv_at_us":6,"gateway":"g","user_id":3,"status":409,"ticket":null,"error":null}
{"kind":"request","sent_at_us":5,"recv_at_us":6,"gateway":"g","user_id":4,"status":409,"ticket":null,"error":null}
{"kind":"request","sent_at_us":7,"recv_at_us":9,"gateway":"g","user_id":4,"status":null,"ticket":null,"error":"reset"}
"#;
        let lines = history::parse(text.as_bytes()).unwrap();
        let (f, _) = history_facts(&lines, ProductId::new(5).unwrap()).unwrap();
        assert_eq!(
            f.unanswered_users.iter().copied().collect::<Vec<_>>(),
            vec![3, 4]
        );
        // User 3 was answered after its unanswered request; user 4's last one went unanswered.
        assert_eq!(
            f.last_unanswered_users.iter().copied().collect::<Vec<_>>(),
            vec![4]
        );
    }

    #[test]
    fn history_lines_become_facts() {
        let text = r#"{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":1,"status":202,"ticket":"5-00000000000000000000000000000001","error":null}
{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":1,"status":200,"ticket":"5-00000000000000000000000000000001","error":null}
{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":8,"status":200,"ticket":"5-00000000000000000000000000000002","error":null}
{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":9,"status":202,"ticket":"5-00000000000000000000000000000002","error":null}
{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":2,"status":409,"ticket":null,"error":null}
{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":3,"status":null,"ticket":null,"error":"refused"}
{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":4,"status":202,"ticket":"6-00000000000000000000000000000001","error":null}
{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":5,"status":202,"ticket":null,"error":null}
{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":6,"status":201,"ticket":"5-zz","error":null}
{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":10,"status":202,"ticket":null,"error":"reading the body: connection reset"}
{"kind":"settled","ticket":"5-00000000000000000000000000000001","user_id":1,"status":"failed","order_id":null,"reason":"chaos","answered_at_us":2}
{"kind":"settled","ticket":"6-00000000000000000000000000000001","user_id":4,"status":"confirmed","order_id":3,"reason":null}
{"kind":"settled","ticket":"5-00000000000000000000000000000003","user_id":7,"status":"confirmed","order_id":4,"reason":null}
{"kind":"summary","product":5,"until_sold_out":true,"sold_out_reached":true,"sale_end":{"checked_by":"probes","ended":"sold_out"},"outcomes":[]}
"#;
        let lines = history::parse(text.as_bytes()).unwrap();
        let p = ProductId::new(5).unwrap();
        let (f, foreign) = history_facts(&lines, p).unwrap();
        assert_eq!(foreign, 1);
        assert_eq!(f.requests, 10);
        // No answer, and a 202 whose body was cut off: both unanswered.
        assert_eq!(
            f.unanswered_users.iter().copied().collect::<Vec<_>>(),
            vec![3, 10]
        );

        assert_eq!(f.last_unanswered_users, f.unanswered_users);
        assert_eq!(f.last_answer_us, Some(2));
        assert_eq!(f.tickets.len(), 2);
        let t1 = &f.tickets[T1];
        assert_eq!(t1.user, 1);
        assert!(t1.other_users.is_empty());
        let s = t1.settled.as_ref().unwrap();
        assert_eq!(
            (s.status.as_str(), s.reason.as_deref()),
            ("failed", Some("chaos"))
        );
        assert_eq!(s.answered_at_us, Some(2));
        let t2 = &f.tickets[T2];
        assert_eq!(
            (t2.user, t2.other_users.iter().copied().collect::<Vec<_>>()),
            (8, vec![9])
        );
        assert_eq!(t2.settled, None);
        assert_eq!(f.malformed.len(), 2, "{:?}", f.malformed);
        assert!(
            f.malformed[0].contains("carries no ticket"),
            "{:?}",
            f.malformed
        );
        assert!(
            f.malformed[1].contains("\"5-zz\", which does not parse"),
            "{:?}",
            f.malformed
        );
        assert_eq!(
            f.stray_settled,
            vec!["5-00000000000000000000000000000003".to_owned()]
        );
        assert!(f.has_summary && f.until_sold_out);
        assert_eq!(f.sold_out_reached, Some(true));
        assert_eq!(f.sale_end_checked_by, Some(history::SaleEndCheck::Probes));
        assert!(history_facts(&lines, ProductId::new(6).unwrap()).is_err());
    }
}
