//! A namespace owns its MySQL database: no gateway or worker of another one uses or rebuilds
//! from it.

use crate::helpers::*;
use reqwest::StatusCode;
use seckill_shared::{db, now_ms};
use seckill_worker::Worker;
use secrecy::ExposeSecret;

/// A namespace owns its MySQL database: a gateway or worker of another namespace refuses to
/// start against it, and says whose it is. Before, it started, took the other deployment's
/// products for ones its own Redis had lost (`503` "being restored", found by schemathesis
/// run from outside against a shared database), and rebuilt them into its own Redis: the
/// same MySQL stock on sale twice.
#[tokio::test]
async fn a_gateway_or_worker_of_another_namespace_refuses_the_database() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 5).await;
    let other = TestEnv::new().await;
    let mut theirs = other.settings.clone();
    theirs.mysql.url = env.settings.mysql.url.clone();

    let names_both = |e: anyhow::Error| {
        let msg = format!("{e:#}");
        assert!(
            msg.contains(&env.settings.common.namespace) && msg.contains(&theirs.common.namespace),
            "{msg}"
        );
    };
    names_both(
        seckill_gateway::Application::build(theirs.clone())
            .await
            .err()
            .expect("a gateway of another namespace refuses the database"),
    );
    names_both(
        Worker::build(theirs.clone())
            .await
            .err()
            .expect("a worker of another namespace refuses the database"),
    );
    assert_eq!(other.store.stock(product).await.unwrap(), None);
    let (status, body) = gw.buy(product, 1).await;
    assert_eq!(status, StatusCode::ACCEPTED, "the owner sells on: {body}");
}

/// A gateway that could not tell whose its database was when it started (MySQL down, or not
/// migrated yet) checks before it rebuilds a product it finds lost: another namespace's
/// product gets `503` naming both namespaces, and nothing is written to its Redis.
#[tokio::test]
async fn a_gateway_checks_whose_the_database_is_before_it_rebuilds() {
    let owner = TestEnv::new().await;
    let env = TestEnv::new().await;
    let url = format!("{}_late", owner.settings.mysql.url.expose_secret());
    let (server, name) = url.rsplit_once('/').unwrap();
    let root = sqlx::MySqlPool::connect(&format!("{server}/mysql"))
        .await
        .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{name}`")))
        .execute(&root)
        .await
        .unwrap();
    // The database has no tables yet: the gateway starts without knowing whose it is.
    let gw = env.gateway_with(|s| s.mysql.url = url.clone().into()).await;
    let late = db::pool(&url, 2).unwrap();
    db::migrate(&late).await.unwrap();
    assert_eq!(
        db::claim_namespace(&late, &owner.settings.common.namespace)
            .await
            .unwrap(),
        db::Owner::Ours
    );
    let id: u64 = sqlx::query(
        "INSERT INTO products (name, stock, initial_stock, loaded_at_ms) VALUES ('x', 5, 5, ?)",
    )
    .bind(now_ms())
    .execute(&late)
    .await
    .unwrap()
    .last_insert_id();
    let product = seckill_shared::ProductId::new(id).unwrap();

    let (status, body) = gw.buy(product, 1).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(
        body.to_string().contains("belongs to another namespace"),
        "{body}"
    );
    assert_eq!(env.store.stock(product).await.unwrap(), None, "not rebuilt");
}
