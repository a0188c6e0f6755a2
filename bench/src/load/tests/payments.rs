//! `--pay-rate`, `--cancel-rate`, `--double-pay` and `--until-all-paid`.

use super::buy_run;
use crate::load::{all_paid, cancel, fake_gateway, payment, run};
use std::collections::HashSet;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paying_buyers_retry_a_503_with_the_same_key_and_a_decline_with_a_new_one() {
    let (addr, sale) = fake_gateway::start(fake_gateway::Config {
        stock: 5,
        pay_window: Some(Duration::from_secs(10)),
        decline_first: 1,
        unavailable_first: 1,
        ..Default::default()
    })
    .await;
    let dir = std::env::temp_dir().join(format!("bench-pay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let history = dir.join("h.jsonl");
    let url = format!("http://{addr}");
    let argv = [
        "b",
        "load",
        "--gateway",
        &url,
        "--product",
        "7",
        "--users",
        "5",
        "-c",
        "2",
        "--quiet",
        "--json",
        "--settle-timeout",
        "5",
        "--pay-rate",
        "1",
        "--seed",
        "9",
        "--pay-retry-after-ms",
        "100",
        "--history",
        history.to_str().unwrap(),
    ];
    let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
    let crate::cli::Command::Load(mut args) = cli.command else {
        panic!("not load")
    };
    (args.admin_token, args.jwt_secret) = (None, None);
    let s = run(args).await.unwrap();
    let p = s.payments.as_ref().expect("a payments summary");
    assert_eq!((p.buyers_paying, p.buyers_not_paying, p.seed), (5, 0, 9));
    // One decline: six payments for five buyers; the 503 was retried with its key.
    assert_eq!((p.attempts, p.accepted, p.unavailable), (6, 6, 1), "{p:?}");
    assert_eq!(p.requests, 7, "{p:?}");
    assert_eq!(p.ended.paid, 5, "{p:?}");
    let (keys, paid) = {
        let f = sale.lock().unwrap();
        (f.pays.clone(), f.paid)
    };
    assert_eq!(paid, 5);
    assert_eq!(keys[0].1, 503);
    assert!(keys[1..].contains(&(keys[0].0.clone(), 202)), "{keys:?}");
    let distinct: HashSet<&str> = keys.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(distinct.len(), 6);
    assert!(s.table().contains("5 paid, 0 cancelled"), "{}", s.table());

    // The history: one `pay` line per request, one `pay_end` per paying buyer; the other
    // lines read as before.
    let (lines, payments) = crate::history::read_with_payments(&history).unwrap();
    assert_eq!(crate::history::read(&history).unwrap(), lines);
    assert!(matches!(
        lines.last(),
        Some(crate::history::Line::Summary(_))
    ));
    let (mut pays, mut ends) = (vec![], vec![]);
    for l in payments {
        match l {
            crate::history::PaymentLine::Pay(p) => pays.push(p),
            crate::history::PaymentLine::PayEnd(e) => ends.push(e),
            crate::history::PaymentLine::Cancel(c) => panic!("nobody cancels: {c:?}"),
        }
    }
    assert_eq!(pays.len(), 7);
    assert_eq!(pays.iter().filter(|p| p.status == Some(202)).count(), 6);
    assert!(pays.iter().filter(|p| p.status == Some(202)).all(|p| p
        .payment_id
        .as_deref()
        .is_some_and(|id| id.starts_with("pay_"))));
    // The declined buyer's second key is its attempt 2.
    assert_eq!(pays.iter().filter(|p| p.attempt == 2).count(), 1);
    assert_eq!(ends.len(), 5);
    assert!(ends
        .iter()
        .all(|e| e.status == "paid" && e.paid_at_ms.is_some()));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn until_all_paid_brings_fresh_buyers_until_cancelled_units_are_paid() {
    let seed = 3;
    // Some of the first buyers do not pay: their units must come back and sell again.
    assert!((1..=4).any(|u| !payment::pays(seed, u, 0.5)));
    let (addr, sale) = fake_gateway::start(fake_gateway::Config {
        stock: 4,
        pay_window: Some(Duration::from_millis(300)),
        ..Default::default()
    })
    .await;
    let seed_text = seed.to_string();
    let s = buy_run(
        addr,
        &[
            "--users",
            "4",
            "-c",
            "4",
            "--rate",
            "100",
            "--until-all-paid",
            "--all-paid-wait-secs",
            "20",
            "--pay-rate",
            "0.5",
            "--seed",
            &seed_text,
            "--pay-grace-secs",
            "2",
        ],
        Some("admin"),
        None,
    )
    .await;
    assert_eq!(s.all_paid_reached, Some(true), "{s:?}");
    let a = s.all_paid.as_ref().unwrap();
    assert_eq!(a.stopped, all_paid::Stopped::AllPaid);
    assert!(a.reached_s.is_some_and(|t| t <= a.stopped_s + 1.0), "{a:?}");
    let p = s.payments.as_ref().unwrap();
    assert!(p.buyers_not_paying >= 1, "{p:?}");
    assert!(s.users_used > 4, "{s:?}");
    {
        let f = sale.lock().unwrap();
        assert_eq!(f.paid, 4);
        assert!(f.cancelled >= 1);
    }
    assert!(s.table().contains("every unit paid at"), "{}", s.table());

    // Without an admin token it cannot tell: refused up front.
    let (addr, _) = fake_gateway::start(Default::default()).await;
    let url = format!("http://{addr}");
    let cli = <crate::cli::Cli as clap::Parser>::try_parse_from([
        "b",
        "load",
        "--gateway",
        &url,
        "--product",
        "7",
        "--no-history",
        "--quiet",
        "--rate",
        "10",
        "--until-all-paid",
        "--pay-rate",
        "1",
    ])
    .unwrap();
    let crate::cli::Command::Load(mut args) = cli.command else {
        panic!("not load")
    };
    args.admin_token = None;
    let err = run(args).await.unwrap_err();
    assert!(format!("{err:#}").contains("--admin-token"), "{err:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_buyers_cancel_from_their_202_until_the_order_is_confirmed_and_cancelled() {
    let seed = 11;
    // Some of the first buyers cancel, some pay.
    assert!((1..=6).any(|u| cancel::cancels(seed, u, 0.5)));
    assert!((1..=6).any(|u| !cancel::cancels(seed, u, 0.5)));
    let (addr, sale) = fake_gateway::start(fake_gateway::Config {
        stock: 6,
        // Cancels from the 202 on are refused as pending a few times first.
        confirm_after: Duration::from_millis(100),
        pay_window: Some(Duration::from_secs(5)),
        ..Default::default()
    })
    .await;
    let dir = std::env::temp_dir().join(format!("bench-cancel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let history = dir.join("h.jsonl");
    let url = format!("http://{addr}");
    let seed_text = seed.to_string();
    let argv = [
        "b",
        "load",
        "--gateway",
        &url,
        "--product",
        "7",
        "--users",
        "6",
        "-c",
        "4",
        "--rate",
        "100",
        "--quiet",
        "--json",
        "--settle-timeout",
        "5",
        "--until-all-paid",
        "--all-paid-wait-secs",
        "20",
        "--pay-rate",
        "1",
        "--cancel-rate",
        "0.5",
        "--seed",
        &seed_text,
        "--history",
        history.to_str().unwrap(),
    ];
    let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
    let crate::cli::Command::Load(mut args) = cli.command else {
        panic!("not load")
    };
    (args.admin_token, args.jwt_secret) = (Some("admin".into()), None);
    let s = run(args).await.unwrap();
    assert_eq!(s.all_paid_reached, Some(true), "{s:?}");
    let p = s.payments.as_ref().unwrap();
    let c = p.cancels.as_ref().expect("a cancels summary");
    let (buyer_cancelled, paid, cancels) = {
        let f = sale.lock().unwrap();
        (f.buyer_cancelled, f.paid, f.cancels.clone())
    };
    assert_eq!(paid, 6);
    // Every cancelling buyer cancelled, each after a refusal as pending; none paid.
    assert!(c.buyers_cancelling >= 1, "{c:?}");
    assert_eq!(c.cancelled, c.buyers_cancelling, "{c:?}");
    assert_eq!(c.ended.cancelled, c.buyers_cancelling, "{c:?}");
    assert_eq!(c.ended.cancelled_after_pending, c.ended.cancelled, "{c:?}");
    assert!(
        c.refused.get("pending").is_some_and(|n| *n >= c.cancelled),
        "{c:?}"
    );
    assert_eq!(c.cancelled, buyer_cancelled);
    assert_eq!(c.requests, cancels.len() as u64);
    assert_eq!(p.ended.paid, p.buyers_paying, "{p:?}");
    assert!(
        s.table().contains("cancels: cancel rate 0.5"),
        "{}",
        s.table()
    );

    // The history: one `cancel` line per request; each order cancelled by its buyer has
    // the 200 that cancelled it, and each cancelling buyer tried until then.
    let (_, lines) = crate::history::read_with_payments(&history).unwrap();
    let cancel_lines: Vec<_> = lines
        .into_iter()
        .filter_map(|l| match l {
            crate::history::PaymentLine::Cancel(c) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(cancel_lines.len(), cancels.len());
    let ok: Vec<_> = cancel_lines
        .iter()
        .filter(|l| l.status == Some(200))
        .collect();
    assert_eq!(ok.len() as u64, buyer_cancelled);
    for l in &ok {
        assert_eq!(l.reason.as_deref(), Some("buyer_cancelled"), "{l:?}");
        assert_eq!(l.state.as_deref(), Some("cancelled"), "{l:?}");
        assert!(l.attempt >= 2, "{l:?}");
        assert!(cancels.contains(&(l.ticket.clone(), 200)));
    }
    for l in cancel_lines.iter().filter(|l| l.status == Some(409)) {
        assert_eq!(
            (l.error.as_deref(), l.state.as_deref()),
            (Some("not_cancellable"), Some("pending")),
            "{l:?}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn double_paying_buyers_send_two_keys_at_once_and_one_is_refused_in_progress() {
    let (addr, sale) = fake_gateway::start(fake_gateway::Config {
        stock: 4,
        pay_window: Some(Duration::from_secs(10)),
        pay_delay: Duration::from_millis(200),
        ..Default::default()
    })
    .await;
    let s = buy_run(
        addr,
        &["--users", "4", "--pay-rate", "1", "--double-pay"],
        None,
        None,
    )
    .await;
    let p = s.payments.as_ref().unwrap();
    let d = p.double_pay.as_ref().expect("a double_pay summary");
    assert_eq!(
        (d.pairs, d.one_in_progress, d.both_accepted),
        (4, 4, 0),
        "{p:?}"
    );
    assert_eq!((p.attempts, p.requests, p.accepted), (8, 8, 4), "{p:?}");
    assert_eq!(p.refused.get("payment_in_progress"), Some(&4), "{p:?}");
    assert_eq!(p.ended.paid, 4, "{p:?}");
    {
        let f = sale.lock().unwrap();
        assert_eq!((f.payments, f.paid), (4, 4));
        let keys: HashSet<&str> = f.pays.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys.len(), 8);
    }
    assert!(s.table().contains("double pay: 4 pairs"), "{}", s.table());

    // --double-pay alone pays nothing: refused up front.
    let (addr, _) = fake_gateway::start(Default::default()).await;
    let url = format!("http://{addr}");
    let cli = <crate::cli::Cli as clap::Parser>::try_parse_from([
        "b",
        "load",
        "--gateway",
        &url,
        "--product",
        "7",
        "--no-history",
        "--quiet",
        "--double-pay",
    ])
    .unwrap();
    let crate::cli::Command::Load(args) = cli.command else {
        panic!("not load")
    };
    let err = run(args).await.unwrap_err();
    assert!(format!("{err:#}").contains("--double-pay"), "{err:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_pay_rate_nobody_pays_and_the_summary_is_as_before() {
    let (addr, sale) = fake_gateway::start(fake_gateway::Config {
        pay_window: Some(Duration::from_secs(10)),
        ..Default::default()
    })
    .await;
    let s = buy_run(addr, &["--users", "3"], None, None).await;
    assert_eq!(s.tickets.confirmed, 3);
    assert!(s.payments.is_none() && s.all_paid.is_none());
    let json = serde_json::to_value(&s).unwrap();
    for key in ["payments", "all_paid", "all_paid_reached", "until_all_paid"] {
        assert!(json.get(key).is_none(), "{key} in {json}");
    }
    assert!(!s.table().contains("pay"), "{}", s.table());
    assert!(sale.lock().unwrap().pays.is_empty());
}
