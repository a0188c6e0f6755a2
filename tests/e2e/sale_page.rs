//! The buyer's page (`GET /sale/{product_id}`) in headless Chromium through a whole sale: the
//! countdown, the queue with the buyer's live place, the admission, the buy, the confirmation
//! and the payment. Screenshots of each step go to `target/screenshots/`.

use crate::dashboard::{attr, text, Driver};
use crate::helpers::*;
use crate::payments::sale::Sale;
use crate::waiting_room::rfc3339;
use fantoccini::{Client, Locator};
use reqwest::StatusCode;
use seckill_shared::{now_ms, ProductId};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

async fn click(c: &Client, id: &str) {
    c.find(Locator::Id(id))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

/// Waits until `selector`'s `name` attribute is `value`.
async fn until_attr(c: &Client, what: &str, selector: &str, name: &str, value: &str) {
    eventually(what, WAIT, || async {
        (attr(c, selector, name).await.as_deref() == Some(value)).then_some(())
    })
    .await;
}

async fn screenshot(c: &Client, name: &str) {
    let png = c.screenshot().await.unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("sale-{name}.png")), png).unwrap();
}

#[tokio::test]
async fn a_buyer_goes_through_a_whole_sale_on_the_page() {
    let sale = Sale::new().await;
    let gw = &sale.gw;
    let (status, body) = gw
        .admin_post(
            "/admin/products",
            json!({"name": "Phone X", "stock": 1, "price": 49900, "currency": "EUR",
                   "payment_window_secs": 600, "starts_at": rfc3339(now_ms() + 10_000),
                   "waiting_room": {"admit_per_sec": 10}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let product = ProductId::new(body["id"].as_u64().unwrap()).unwrap();
    let (status, body) = gw
        .admin_post(&format!("/admin/products/{product}/preload"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let driver = Driver::start().await;
    let c = driver.browser().await;
    // The shop's redirect: the token in the fragment.
    c.goto(&format!("{}/sale/{product}#token={}", gw.base, token(61)))
        .await
        .unwrap();
    until_attr(&c, "the countdown", "#countdown", "data-state", "waiting").await;
    assert_eq!(text(&c, "#name").await.as_deref(), Some("Phone X"));
    assert_eq!(text(&c, "#price").await.as_deref(), Some("499.00 EUR"));
    let countdown = text(&c, "#countdown").await.unwrap();
    assert!(countdown.starts_with("Starts in 00:00:"), "{countdown}");
    let url = c.current_url().await.unwrap();
    assert!(
        !url.as_str().contains("token"),
        "the token left the address bar: {url}"
    );
    assert_eq!(
        attr(&c, "#buy", "disabled").await.as_deref(),
        Some("true"),
        "no buy before the start, nor before admission"
    );

    click(&c, "join").await;
    until_attr(&c, "in the queue", "#queue", "data-state", "waiting").await;
    screenshot(&c, "1-queue").await;
    // A reload finds the place again, without joining anew.
    c.refresh().await.unwrap();
    until_attr(
        &c,
        "the place after a reload",
        "#queue",
        "data-state",
        "waiting",
    )
    .await;
    assert!(
        attr(&c, "#join", "hidden").await.is_some(),
        "no second join"
    );

    // Nobody polls: the page's stream, through the gateway, admits the buyer at the start.
    until_attr(&c, "the admission", "#queue", "data-state", "admitted").await;
    until_attr(&c, "the start", "#countdown", "data-state", "on_sale").await;
    eventually("the buy button", WAIT, || async {
        attr(&c, "#buy", "disabled").await.is_none().then_some(())
    })
    .await;
    screenshot(&c, "2-admitted").await;
    click(&c, "buy").await;
    until_attr(&c, "the confirmation", "#ticket", "data-state", "confirmed").await;
    assert_eq!(
        attr(&c, "#pay", "hidden").await,
        None,
        "the pay button shows"
    );
    let pay_by = text(&c, "#pay-by").await.unwrap();
    assert!(pay_by.starts_with("Pay by "), "{pay_by}");
    screenshot(&c, "3-confirmed").await;

    // The first payment is declined: the page says so (no stream does: the ticket stays
    // confirmed) and the next click is a new payment.
    click(&c, "pay").await;
    let charge = |n: usize| {
        let sale = &sale;
        eventually("the provider's charge", WAIT, move || async move {
            let charges = sale.provider.charges.lock().unwrap();
            charges.get(n).map(|c| c.payment_id.clone())
        })
    };
    let declined = charge(0).await;
    let (status, body) = sale.callback(&declined, "declined").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    eventually("the decline on the page", WAIT, || async {
        let said = text(&c, "#message").await.unwrap_or_default();
        (said.contains("declined") && attr(&c, "#pay", "disabled").await.is_none()).then_some(())
    })
    .await;
    assert_eq!(
        attr(&c, "#ticket", "data-state").await.as_deref(),
        Some("confirmed")
    );
    screenshot(&c, "3b-declined").await;
    click(&c, "pay").await;
    let payment_id = charge(1).await;
    assert_ne!(payment_id, declined, "a new payment, under a new key");
    let (status, body) = sale.callback(&payment_id, "succeeded").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    until_attr(&c, "the payment", "#ticket", "data-state", "paid").await;
    assert_eq!(text(&c, "#ticket-state").await.as_deref(), Some("paid"));
    screenshot(&c, "4-paid").await;
    // Streams all the way: the page never fell back to polling.
    assert_eq!(attr(&c, "body", "data-live").await, None);
    c.close().await.unwrap();
}

/// Without a token the page asks the buyer to sign in at the shop, and buys nothing; in
/// development mode it takes one typed in.
#[tokio::test]
async fn the_page_needs_the_shops_token_or_a_typed_one_in_development() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 3).await;
    let driver = Driver::start().await;
    let c = driver.browser().await;
    c.goto(&format!("{}/sale/{product}", gw.base))
        .await
        .unwrap();
    until_attr(&c, "on sale", "#countdown", "data-state", "on_sale").await;
    assert_eq!(attr(&c, "#need-token", "hidden").await, None);
    assert_eq!(attr(&c, "#buy", "disabled").await.as_deref(), Some("true"));

    c.goto(&format!("{}/sale/{product}?dev", gw.base))
        .await
        .unwrap();
    let field = c
        .wait()
        .for_element(Locator::Id("token-input"))
        .await
        .unwrap();
    field.send_keys(&token(62)).await.unwrap();
    click(&c, "use-token").await;
    eventually("the buy button", WAIT, || async {
        attr(&c, "#buy", "disabled").await.is_none().then_some(())
    })
    .await;
    click(&c, "buy").await;
    until_attr(&c, "the ticket", "#ticket", "data-state", "pending").await;
    c.close().await.unwrap();
}

/// A buyer who cancels on the page holds nothing: the Buy button comes back, and buys again
/// (a product without a waiting room).
#[tokio::test]
async fn after_a_cancel_the_page_lets_the_buyer_buy_again() {
    let sale = Sale::new().await;
    let gw = &sale.gw;
    let (status, body) = gw
        .admin_post(
            "/admin/products",
            json!({"name": "Lamp", "stock": 2, "price": 1500, "currency": "EUR",
                   "payment_window_secs": 600, "starts_at": rfc3339(now_ms() - 1000)}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let product = ProductId::new(body["id"].as_u64().unwrap()).unwrap();
    let (status, body) = gw
        .admin_post(&format!("/admin/products/{product}/preload"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let driver = Driver::start().await;
    let c = driver.browser().await;
    c.goto(&format!("{}/sale/{product}#token={}", gw.base, token(63)))
        .await
        .unwrap();
    until_attr(&c, "on sale", "#countdown", "data-state", "on_sale").await;
    click(&c, "buy").await;
    until_attr(&c, "the confirmation", "#ticket", "data-state", "confirmed").await;
    assert!(
        attr(&c, "#buy", "hidden").await.is_some(),
        "no Buy while held"
    );
    click(&c, "cancel").await;
    until_attr(&c, "the cancel", "#ticket", "data-state", "cancelled").await;
    eventually("the Buy button again", WAIT, || async {
        let shown = attr(&c, "#buy", "hidden").await.is_none();
        let enabled = attr(&c, "#buy", "disabled").await.is_none();
        (shown && enabled).then_some(())
    })
    .await;
    click(&c, "buy").await;
    until_attr(&c, "the second order", "#ticket", "data-state", "confirmed").await;
    c.close().await.unwrap();
}

/// A waiting room with a proof of work: the page solves the challenge in a Web Worker and
/// joins with the solution, which the gateway takes (the buyer gets a place).
#[tokio::test]
async fn the_page_does_the_proof_of_work_and_joins() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = crate::waiting_room::room(
        &gw,
        1,
        now_ms() + 60_000,
        json!({"admit_per_sec": 10, "pow": {"min_bits": 16, "max_bits": 16}}),
    )
    .await;
    let driver = Driver::start().await;
    let c = driver.browser().await;
    c.goto(&format!("{}/sale/{product}#token={}", gw.base, token(64)))
        .await
        .unwrap();
    until_attr(&c, "the countdown", "#countdown", "data-state", "waiting").await;
    click(&c, "join").await;
    until_attr(&c, "in the queue", "#queue", "data-state", "waiting").await;
    screenshot(&c, "4-pow-joined").await;
    assert_eq!(
        attr(&c, "#queue", "data-pow-bits").await.as_deref(),
        Some("16")
    );
    let ms: f64 = attr(&c, "#queue", "data-pow-ms")
        .await
        .unwrap()
        .parse()
        .unwrap();
    let hashes: f64 = attr(&c, "#queue", "data-pow-hashes")
        .await
        .unwrap()
        .parse()
        .unwrap();
    assert!(hashes >= 1.0, "{hashes}");
    eprintln!(
        "the page solved a 16-bit challenge: {hashes} hashes in {ms} ms ({:.0} hashes/s, the \
         worker's start included)",
        hashes * 1000.0 / ms.max(1.0)
    );
    let (status, view) = gw.admin_get(&format!("/admin/products/{product}")).await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view["waiting_room"]["waiting"], 1, "{view}");
}

/// A product sold up to 3 per buyer: the page offers 1 to 3 units, buys the 3 chosen, and
/// shows the order's units; the charge is for all of them.
#[tokio::test]
async fn the_page_buys_the_units_chosen() {
    let sale = Sale::new().await;
    let gw = &sale.gw;
    let (status, body) = gw
        .admin_post(
            "/admin/products",
            json!({"name": "Socks", "stock": 5, "price": 700, "currency": "EUR",
                   "payment_window_secs": 600, "max_per_buyer": 3}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let product = ProductId::new(body["id"].as_u64().unwrap()).unwrap();
    let (status, body) = gw
        .admin_post(&format!("/admin/products/{product}/preload"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let driver = Driver::start().await;
    let c = driver.browser().await;
    c.goto(&format!("{}/sale/{product}#token={}", gw.base, token(64)))
        .await
        .unwrap();
    until_attr(&c, "on sale", "#countdown", "data-state", "on_sale").await;
    assert!(
        attr(&c, "#quantity-row", "hidden").await.is_none(),
        "the page offers a quantity"
    );
    let choices: Vec<String> = {
        let mut v = vec![];
        for o in c.find_all(Locator::Css("#quantity option")).await.unwrap() {
            v.push(o.text().await.unwrap());
        }
        v
    };
    assert_eq!(choices, ["1", "2", "3"]);
    c.find(Locator::Id("quantity"))
        .await
        .unwrap()
        .select_by_value("3")
        .await
        .unwrap();
    screenshot(&c, "quantity-chosen").await;
    click(&c, "buy").await;
    until_attr(&c, "the confirmation", "#ticket", "data-state", "confirmed").await;
    let state = text(&c, "#ticket-state").await;
    assert_eq!(state.as_deref(), Some("3 units, confirmed"));
    assert!(
        attr(&c, "#quantity-row", "hidden").await.is_some(),
        "no quantity while an order is held"
    );
    screenshot(&c, "quantity-confirmed").await;
    assert_eq!(sale.stocks(product).await, (2, 2));
    click(&c, "pay").await;
    eventually("the charge", WAIT, || async {
        sale.provider.charges().last().map(|ch| ch.amount)
    })
    .await;
    assert_eq!(sale.provider.charges().last().unwrap().amount, 3 * 700);
    c.close().await.unwrap();
}
