//! The document states the limits the server enforces.

use crate::helpers::*;
use crate::openapi::spec::Spec;
use reqwest::StatusCode;
use serde_json::json;

/// The document states the limits the server enforces: an id or a ticket that the document
/// allows is one the server takes, and the other way round.
#[test]
fn the_document_states_what_the_server_enforces() {
    use seckill_shared::domain::MAX_ID;
    use seckill_shared::{ProductId, Ticket};
    let spec = Spec::built();
    let path_id = "/paths/~1v1~1seckill~1{product_id}/post/parameters/0/schema";
    let body = "/components/schemas/BuyRequest";
    for n in [
        json!(0),
        json!(1),
        json!(9),
        json!(10),
        json!(MAX_ID - 1),
        json!(MAX_ID),
        json!(MAX_ID + 1),
        json!(u64::MAX),
        json!(-1),
        json!(1.5),
        json!(244.0),
        json!(1e3),
        json!(1e19),
        json!("1"),
        json!(null),
    ] {
        // What `POST /v1/seckill/{id}` reads `user_id` with.
        let server = seckill_gateway::error::whole::user_id(n.clone()).is_ok();
        assert_eq!(spec.validate(path_id, &n).is_ok(), server, "product id {n}");
        let buy = json!({ "user_id": n });
        assert_eq!(spec.validate(body, &buy).is_ok(), server, "{buy}");
        if let Some(k) = n.as_u64() {
            assert_eq!(ProductId::parse(&k.to_string()).is_ok(), server, "{n}");
        }
    }
    assert!(spec.validate(body, &json!({"user_id": 1, "x": 1})).is_err());
    // `user_id` is optional: the buyer is the token's `sub`.
    assert!(spec.validate(body, &json!({})).is_ok());

    let ticket = "/paths/~1v1~1orders~1{ticket}/get/parameters/0/schema";
    let hex = "0123456789abcdef".repeat(2);
    let mut tickets: Vec<String> = [1, 9, 10, 99, 100, 4242, MAX_ID / 10, MAX_ID - 1, MAX_ID]
        .into_iter()
        .chain([MAX_ID + 1, MAX_ID + 10, u64::MAX])
        .map(|p| format!("{p}-{hex}"))
        .collect();
    // Every 19-digit number just above or below the limit at each digit.
    let max = MAX_ID.to_string();
    for i in 0..max.len() {
        for d in b'0'..=b'9' {
            let mut s = max.clone().into_bytes();
            s[i] = d;
            if s[0] != b'0' {
                tickets.push(format!("{}-{hex}", String::from_utf8(s).unwrap()));
            }
        }
    }
    tickets.extend([
        format!("0-{hex}"),
        format!("-{hex}"),
        format!("1-{}", hex.to_uppercase()),
        format!("1-{}", &hex[1..]),
        format!("1-{hex}0"),
        format!("1-{}g", &hex[1..]),
        format!("1_{hex}"),
        format!("+1-{hex}"),
        format!("1-{hex}\n"),
        "".into(),
    ]);
    for _ in 0..20 {
        let p = ProductId::new(rand::random::<u64>() >> 1).unwrap_or(ProductId::new(1).unwrap());
        tickets.push(Ticket::generate(p).to_string());
    }
    for t in &tickets {
        assert_eq!(
            spec.validate(ticket, &json!(t)).is_ok(),
            Ticket::parse(t).is_ok(),
            "ticket {t:?}"
        );
    }
    // The one difference: the server also reads a product id with leading zeros, which no
    // ticket it hands out has; the document does not promise it.
    let padded = format!("01-{hex}");
    assert!(Ticket::parse(&padded).is_ok() && spec.validate(ticket, &json!(padded)).is_err());

    // A product's name: 1 to 200 characters once trimmed, the way `create_product` checks it.
    let name = "/components/schemas/NewProduct";
    let a200 = "a".repeat(200);
    for n in [
        String::new(),
        " ".into(),
        "\t\n \u{3000}\u{85}".into(),
        "a".into(),
        " a ".into(),
        a200.clone(),
        format!("{a200}a"),
        format!("  {a200}\u{2028}"),
        format!("a{}a", " ".repeat(198)),
        format!("a{}a", " ".repeat(199)),
        "\u{1c}".into(),
        "\u{200b}".into(),
        "\u{feff}".into(),
        "é ü 漢字 🦀".into(),
    ] {
        let trimmed = n.trim();
        let server = !trimmed.is_empty() && trimmed.chars().count() <= 200;
        let product = json!({"name": n, "stock": 1});
        assert_eq!(spec.validate(name, &product).is_ok(), server, "name {n:?}");
    }
    // Stock: what `create_product` reads, then the range it checks.
    for stock in [
        json!(0),
        json!(1_000_000_000),
        json!(1_000_000_001),
        json!(-1),
        json!(67830.0),
        json!(0.5),
        json!(1e10),
        json!("1"),
    ] {
        let server = seckill_gateway::error::whole::i64(stock.clone())
            .is_ok_and(|n| (0..=1_000_000_000).contains(&n));
        let product = json!({"name": "a", "stock": stock});
        assert_eq!(
            spec.validate(name, &product).is_ok(),
            server,
            "stock {stock}"
        );
    }
}

/// A product with a waiting room keeps its stock in one bucket: the document says so itself
/// (`NewProduct.not`), so a client, or schemathesis, needs no hook to know it. For each body,
/// the document allows it exactly when the server creates the product.
#[tokio::test]
async fn the_document_says_a_waiting_room_takes_one_bucket() {
    let spec = Spec::built();
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let room = json!({"admit_per_sec": 10});
    let mut bodies = vec![];
    for buckets in [
        json!(null),
        json!(1),
        json!(1.0),
        json!(2),
        json!(33.0),
        json!(64),
    ] {
        for waiting_room in [None, Some(json!(null)), Some(room.clone())] {
            let mut b = json!({"name": "x", "stock": 5});
            if !buckets.is_null() {
                b["buckets"] = buckets.clone();
            }
            if let Some(w) = &waiting_room {
                b["waiting_room"] = w.clone();
            }
            bodies.push(b);
        }
    }
    let mut refused = 0;
    for body in bodies {
        let (status, answer) = gw.admin_post("/admin/products", body.clone()).await;
        let server = status == StatusCode::CREATED;
        assert!(
            server || status == StatusCode::BAD_REQUEST,
            "{status} {answer}"
        );
        refused += usize::from(!server);
        assert_eq!(
            spec.validate("/components/schemas/NewProduct", &body)
                .is_ok(),
            server,
            "{body}: the server answered {status} {answer}"
        );
    }
    assert_eq!(refused, 3, "a waiting room with 2, 33.0 and 64 buckets");
}
