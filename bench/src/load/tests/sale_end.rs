//! `--until-sold-out`: fresh buyers until the sale is really over.

use super::buy_run;
use crate::load::admin_api;
use crate::load::sale_end::Ended;
use crate::load::{fake_gateway, run};
use std::time::{Duration, Instant};

const UNTIL_SOLD_OUT: &[&str] = &[
    "--users",
    "5",
    "-c",
    "4",
    "--until-sold-out",
    "--max-users",
    "100000",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn until_sold_out_sells_the_units_that_failed_orders_hand_back() {
    // 20 units; the first 4 orders fail 400 ms after their buy, long after every gateway
    // first answered 409.
    let cfg = fake_gateway::Config {
        stock: 20,
        fail_first: 4,
        fail_after: Duration::from_millis(400),
        ..Default::default()
    };
    let (addr, sale) = fake_gateway::start(cfg.clone()).await;
    let mut extra = UNTIL_SOLD_OUT.to_vec();
    extra.extend(["--sold-out-wait", "20"]);
    let s = buy_run(addr, &extra, Some("admin"), None).await;
    assert_eq!(s.sold_out_reached, Some(true), "{s:?}");
    let e = s.sale_end.as_ref().unwrap();
    assert_eq!(e.checked_by, crate::history::SaleEndCheck::AdminApi);
    assert_eq!(e.ended, Ended::SoldOut);
    assert!(e.resumed >= 1, "{e:?}");
    assert!(e.sold_after_first_409 >= 4, "{e:?}");
    assert_eq!(
        e.last_seen,
        Some(admin_api::StockView {
            stock_redis: Some(0),
            stock_db: 0,
            pending: 0,
            closed_at: None,
        })
    );
    assert_eq!((s.tickets.confirmed, s.tickets.failed), (20, 4), "{s:?}");
    {
        let f = sale.lock().unwrap();
        assert_eq!((f.stock, f.stock_db, f.pending), (0, 0, 0));
    }

    // Without the admin API, fresh users probe until none has bought for a second.
    let (addr, sale) = fake_gateway::start(cfg).await;
    let mut extra = UNTIL_SOLD_OUT.to_vec();
    extra.extend(["--sold-out-quiet", "1"]);
    let s = buy_run(addr, &extra, None, None).await;
    assert_eq!(s.sold_out_reached, Some(true), "{s:?}");
    let e = s.sale_end.as_ref().unwrap();
    assert_eq!(e.checked_by, crate::history::SaleEndCheck::Probes);
    assert!(e.ended_s >= 1.0, "{e:?}");
    assert_eq!((s.tickets.confirmed, s.tickets.failed), (20, 4), "{s:?}");
    assert_eq!(sale.lock().unwrap().stock, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn units_no_buyer_can_get_make_a_sale_that_did_not_sell_out() {
    // Two units come back, but the gateway keeps answering 409.
    let cfg = fake_gateway::Config {
        stock: 10,
        fail_first: 2,
        fail_after: Duration::from_millis(100),
        stale_marker: true,
        ..Default::default()
    };
    let (addr, _) = fake_gateway::start(cfg).await;
    let mut extra = UNTIL_SOLD_OUT.to_vec();
    extra.extend(["--sold-out-timeout", "0.3", "--sold-out-wait", "1.5"]);
    let started = Instant::now();
    let s = buy_run(addr, &extra, Some("admin"), None).await;
    assert_eq!(s.sold_out_reached, Some(false), "{s:?}");
    let e = s.sale_end.as_ref().unwrap();
    assert_eq!(e.ended, Ended::TimedOut);
    assert_eq!(e.last_seen.unwrap().stock_redis, Some(2), "{e:?}");
    assert!(e.resumed >= 1, "{e:?}");
    // Checks are paced: a few rounds of fresh users, not a flood.
    assert!(s.users_used < 5 + 4 * 10, "{s:?}");
    assert!(started.elapsed() < Duration::from_secs(8));
    assert!(
        s.table().contains("NOT sold out (timed out)"),
        "{}",
        s.table()
    );

    // A wrong admin token fails at once, not at the end of the sale.
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
        "--until-sold-out",
    ])
    .unwrap();
    let crate::cli::Command::Load(mut args) = cli.command else {
        panic!("not load")
    };
    args.admin_token = Some("wrong".into());
    let err = run(args).await.unwrap_err();
    assert!(format!("{err:#}").contains("HTTP 401"), "{err:#}");
}
