//! The live dashboard: `GET /admin/overview` and `GET /admin/products` against a real sale,
//! and the page itself in headless Chromium (Debian's `chromium` and `chromium-driver`,
//! installed by `scripts/dev-up.sh`), driven over WebDriver with fantoccini.

use crate::helpers::*;
use fantoccini::{Client, ClientBuilder, Locator};
use reqwest::StatusCode;
use seckill_shared::ProductId;
use serde_json::{json, Value};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A small sale, sold out and settled: `stock` units, `stock + extra` buyers.
async fn sell_out(env: &TestEnv, gw: &TestGateway, stock: i64, extra: u64) -> ProductId {
    let product = env.product(gw, stock).await;
    let mut tickets = Vec::new();
    for user in 1..=stock as u64 + extra {
        let (status, body) = gw.buy(product, user).await;
        match status {
            StatusCode::ACCEPTED => tickets.push(body["ticket"].as_str().unwrap().to_owned()),
            StatusCode::CONFLICT => assert_eq!(body["error"], "sold_out", "{body}"),
            other => panic!("buy answered {other}: {body}"),
        }
    }
    assert_eq!(tickets.len() as i64, stock);
    for t in &tickets {
        let body = gw.settled(t, Duration::from_secs(30)).await;
        assert_eq!(body["status"], "confirmed", "{body}");
    }
    product
}

fn sum(series: &Value, field: &str) -> u64 {
    series[field]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum()
}

#[tokio::test]
async fn the_overview_sums_every_gateway_and_worker() {
    let env = TestEnv::new().await;
    let (a, b) = (env.gateway().await, env.gateway().await);
    let _worker = env.worker().await;
    let product = env.product(&a, 4).await;
    // Buys through both gateways: 4 accepted, then 409s from each.
    let mut tickets = Vec::new();
    for user in 1..=8u64 {
        let gw = if user % 2 == 0 { &a } else { &b };
        let (status, body) = gw.buy(product, user).await;
        if status == StatusCode::ACCEPTED {
            tickets.push((gw, body["ticket"].as_str().unwrap().to_owned()));
        } else {
            assert_eq!(status, StatusCode::CONFLICT, "{body}");
        }
    }
    assert_eq!(tickets.len(), 4);
    for (gw, t) in &tickets {
        gw.settled(t, Duration::from_secs(30)).await;
    }

    // Either gateway answers for the whole fleet, once each process has published.
    let overview = eventually(
        "the overview to count the sale",
        Duration::from_secs(15),
        || async {
            let (status, body) = b.admin_get("/admin/overview").await;
            assert_eq!(status, StatusCode::OK, "{body}");
            let s = &body["series"];
            (sum(s, "reservations") == 4 && sum(s, "sold_out") == 4 && sum(s, "confirmations") == 4)
                .then_some(body)
        },
    )
    .await;
    let s = &overview["series"];
    assert_eq!(sum(s, "compensations"), 0);
    assert!(sum(s, "batches") >= 1);
    let n = s["t_ms"].as_array().unwrap().len();
    assert_eq!(n, 300);
    for field in ["reservations", "confirmations", "confirm_p99_ms"] {
        assert_eq!(s[field].as_array().unwrap().len(), n, "{field}");
    }
    let p99s: Vec<f64> = s["confirm_p99_ms"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    assert!(
        !p99s.is_empty() && p99s.iter().all(|p| *p > 0.0 && *p < 30_000.0),
        "{p99s:?}"
    );

    let gateways = overview["gateways"].as_array().unwrap();
    assert_eq!(gateways.len(), 2, "{overview}");
    for g in gateways {
        assert_eq!(g["dependencies"]["redis"], true, "{g}");
        assert_eq!(g["dependencies"]["mysql"], true, "{g}");
        assert!(g["seen_ms_ago"].as_i64().unwrap() < 5_000);
    }
    let workers = overview["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 1, "{overview}");
    assert_eq!(workers[0]["dependencies"]["redis"], true);

    let p = &overview["products"][0];
    assert_eq!(p["id"], product.get());
    assert_eq!(p["state"], "sold_out");
    assert_eq!(p["stock_redis"], 0);
    assert_eq!(p["confirmed"], 4);
    assert_eq!(overview["products_total"], 1);

    // The same numbers in the other gateway's overview, and the markers of who saw sold out.
    let (_, other) = a.admin_get("/admin/overview").await;
    assert_eq!(sum(&other["series"], "reservations"), 4);

    // Behind the admin token, like every admin route.
    let (status, body) = a.get_as("/admin/overview", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let (status, body) = a.admin_get("/admin/overview?limit=0").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

#[tokio::test]
async fn products_are_listed_newest_first_a_page_at_a_time() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let (status, body) = gw
            .admin_post(
                "/admin/products",
                json!({"name": format!("p{i}"), "stock": 10 + i}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        ids.push(body["id"].as_u64().unwrap());
    }
    ids.reverse();
    let mut seen = Vec::new();
    let mut path = "/admin/products?limit=2".to_owned();
    loop {
        let (status, page) = gw.admin_get(&path).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        assert_eq!(page["total"], 5);
        for p in page["products"].as_array().unwrap() {
            assert_eq!(p["state"], "not_started", "not preloaded: {p}");
            assert_eq!(p["stock_redis"], Value::Null);
            seen.push(p["id"].as_u64().unwrap());
        }
        match page["next_before"].as_u64() {
            Some(before) => path = format!("/admin/products?limit=2&before={before}"),
            None => break,
        }
    }
    assert_eq!(seen, ids);
    for bad in ["limit=0", "limit=101", "before=0", "limit=x", "sort=name"] {
        let (status, body) = gw.admin_get(&format!("/admin/products?{bad}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert_eq!(body["error"], "bad_request");
    }
}

/// chromedriver on a free port, stopped when dropped.
pub(crate) struct Driver {
    child: Child,
    port: u16,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Driver {
    pub(crate) async fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting chromedriver: install chromium and chromium-driver (scripts/dev-up.sh does)");
        let driver = Driver { child, port };
        let status = format!("http://127.0.0.1:{port}/status");
        eventually(
            "chromedriver to answer",
            Duration::from_secs(20),
            || async {
                let res = reqwest::get(&status).await.ok()?;
                let body: Value = res.json().await.ok()?;
                (body["value"]["ready"] == true).then_some(())
            },
        )
        .await;
        driver
    }

    pub(crate) async fn browser(&self) -> Client {
        let mut caps = serde_json::Map::new();
        let mut options = json!({
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1280,900"],
        });
        if std::path::Path::new("/usr/bin/chromium").exists() {
            options["binary"] = json!("/usr/bin/chromium");
        }
        caps.insert("goog:chromeOptions".into(), options);
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{}", self.port))
            .await
            .expect("a headless Chromium session")
    }
}

async fn sign_in(c: &Client, base: &str, token: &str) {
    c.goto(&format!("{base}/admin/dashboard")).await.unwrap();
    let field = c.wait().for_element(Locator::Id("token")).await.unwrap();
    field.send_keys(token).await.unwrap();
    c.find(Locator::Id("sign-in-button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

/// The text of `selector` on the page, or `None` while it is not there.
pub(crate) async fn text(c: &Client, selector: &str) -> Option<String> {
    let e = c.find(Locator::Css(selector)).await.ok()?;
    Some(e.text().await.ok()?.trim().to_owned())
}

pub(crate) async fn attr(c: &Client, selector: &str, name: &str) -> Option<String> {
    let e = c.find(Locator::Css(selector)).await.ok()?;
    e.attr(name).await.ok()?
}

#[tokio::test]
async fn the_dashboard_in_a_real_browser_shows_what_the_admin_api_says() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let _worker = env.worker().await;
    let product = sell_out(&env, &gw, 5, 3).await;
    let driver = Driver::start().await;
    let c = driver.browser().await;

    // A wrong token: an error, and no data.
    sign_in(&c, &gw.base, "not-the-admin-token").await;
    let error = eventually(
        "the wrong token's error",
        Duration::from_secs(10),
        || async { text(&c, "#error").await.filter(|t| !t.is_empty()) },
    )
    .await;
    assert!(error.to_lowercase().contains("token"), "{error}");
    assert_eq!(attr(&c, "#data", "hidden").await.as_deref(), Some("true"));
    assert!(c
        .find_all(Locator::Css("tr[data-product]"))
        .await
        .unwrap()
        .is_empty());

    // The right one: the product's row matches the admin API, and the charts have points.
    sign_in(&c, &gw.base, ADMIN_TOKEN).await;
    let row = format!("tr[data-product=\"{product}\"]");
    let (_, api) = gw.admin_get(&format!("/admin/products/{product}")).await;
    let want_confirmed = api["confirmed"].to_string();
    eventually(
        "the page to show the settled sale",
        Duration::from_secs(15),
        || async {
            let confirmed = text(&c, &format!("{row} td[data-field=\"confirmed\"]")).await?;
            (confirmed == want_confirmed).then_some(())
        },
    )
    .await;
    for field in [
        "stock_redis",
        "stock_db",
        "pending",
        "confirmed",
        "paid",
        "cancelled",
        "failed",
    ] {
        let shown = text(&c, &format!("{row} td[data-field=\"{field}\"]")).await;
        assert_eq!(shown, Some(api[field].to_string()), "{field}");
    }
    let state = text(&c, &format!("{row} td[data-field=\"state\"]")).await;
    assert_eq!(state.as_deref(), api["state"].as_str());
    assert_eq!(api["state"], "sold_out");
    // The p99 chart has a point only for seconds with confirmations: real data reached it.
    let points = eventually(
        "points on the p99 chart",
        Duration::from_secs(10),
        || async {
            let n: u64 = attr(&c, "svg[data-chart=\"confirm_p99_ms\"]", "data-points")
                .await?
                .parse()
                .ok()?;
            (n > 0).then_some(n)
        },
    )
    .await;
    assert!(points >= 1);
    assert_eq!(text(&c, "#error").await.as_deref(), Some(""));
    // A product in one piece shows no buckets.
    assert!(c
        .find(Locator::Css(&format!("{row} [data-field=\"buckets\"]")))
        .await
        .is_err());

    // A product in stock buckets: each bucket's Redis stock, as the admin API lists them.
    let hot = super::buckets::bucketed_product(&env, &gw, 8, 4).await;
    for user in 100..103 {
        assert_eq!(gw.buy(hot, user).await.0, StatusCode::ACCEPTED);
    }
    let shown = format!("tr[data-product=\"{hot}\"] [data-field=\"buckets\"]");
    let shown_text = eventually(
        "the page to show the buckets as the admin API does",
        Duration::from_secs(15),
        || async {
            let (_, api) = gw.admin_get(&format!("/admin/products/{hot}")).await;
            let stocks: Vec<String> = api["buckets"]
                .as_array()?
                .iter()
                .map(|b| b["stock"].to_string())
                .collect();
            let want = format!("{} buckets: {}", stocks.len(), stocks.join(" · "));
            let got = text(&c, &shown).await?;
            (got == want).then_some(got)
        },
    )
    .await;
    // Four buckets of 2 units, 3 of them bought.
    let stocks = shown_text
        .strip_prefix("4 buckets: ")
        .unwrap_or_else(|| panic!("{shown_text}"));
    let left: i64 = stocks.split(" · ").map(|n| n.parse::<i64>().unwrap()).sum();
    assert_eq!(left, 5, "{shown_text}");

    let png = c.screenshot().await.unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.dev/artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("dashboard.png"), png).unwrap();
    c.close().await.unwrap();
}
