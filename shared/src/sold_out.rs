//! ZooKeeper sold-out nodes.
//!
//! Each product has a node `/seckill/<namespace>/products/<id>`. A gateway that finds a product
//! sold out makes sure the node exists (data `"true"`); a worker that gives a unit back sets it
//! to `"false"`. Gateways watch the whole `products` folder with one persistent recursive watch
//! and drop their local marker on any change.

use crate::domain::ProductId;
use anyhow::Context;
use std::time::Duration;
use zookeeper_client as zk;

pub fn root(namespace: &str) -> String {
    format!("/seckill/{namespace}/products")
}

pub fn product_path(namespace: &str, product: ProductId) -> String {
    format!("{}/{product}", root(namespace))
}

/// Parses the product id out of a node path under [`root`].
pub fn product_of(namespace: &str, path: &str) -> Option<ProductId> {
    let rest = path.strip_prefix(&root(namespace))?.strip_prefix('/')?;
    ProductId::parse(rest).ok()
}

/// Connects with settings that suit ZooKeeper 3.8, and makes sure the root exists.
pub async fn connect(
    hosts: &str,
    namespace: &str,
    timeout: Duration,
) -> anyhow::Result<zk::Client> {
    let client = tokio::time::timeout(
        timeout,
        zk::Client::connector()
            .with_server_version(3, 8, 0)
            .with_session_timeout(Duration::from_secs(6))
            .with_connection_timeout(timeout)
            .with_fail_eagerly()
            .connect(hosts),
    )
    .await
    .context("connecting to ZooKeeper timed out")?
    .context("connecting to ZooKeeper")?;
    let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    client
        .mkdir(&root(namespace), &options)
        .await
        .context("creating the ZooKeeper root")?;
    Ok(client)
}

/// Publishes `"false"`: a unit of this product is for sale again, so every gateway must drop
/// its sold-out marker. Always ends in a data change, the event gateways react to (a node
/// created by a gateway with `"true"` must not drop the marker it was created for).
pub async fn publish_not_sold_out(
    client: &zk::Client,
    namespace: &str,
    product: ProductId,
) -> anyhow::Result<()> {
    let path = product_path(namespace, product);
    match client.set_data(&path, b"false", None).await {
        Ok(_) => return Ok(()),
        Err(zk::Error::NoNode) => {}
        Err(e) => return Err(e).context("publishing \"false\""),
    }
    let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    match client.create(&path, b"false", &options).await {
        Ok(_) | Err(zk::Error::NodeExists) => {}
        Err(e) => return Err(e).context("creating a product node"),
    }
    client
        .set_data(&path, b"false", None)
        .await
        .map(drop)
        .context("publishing \"false\"")
}

/// A lazily (re)connecting ZooKeeper client for processes that only publish (the worker and
/// the gateway's admin and give-back paths).
pub struct Publisher {
    hosts: String,
    namespace: String,
    client: tokio::sync::Mutex<Option<zk::Client>>,
}

impl Publisher {
    pub fn new(hosts: &str, namespace: &str) -> Self {
        Self {
            hosts: hosts.to_owned(),
            namespace: namespace.to_owned(),
            client: tokio::sync::Mutex::new(None),
        }
    }

    /// Publishes `"false"` for a product, connecting first when needed. Bounded by `timeout`.
    pub async fn not_sold_out(&self, product: ProductId, timeout: Duration) -> anyhow::Result<()> {
        let mut guard = self.client.lock().await;
        let usable = guard.as_ref().is_some_and(|c| !c.state().is_terminated());
        if !usable {
            *guard = Some(connect(&self.hosts, &self.namespace, timeout).await?);
        }
        let client = guard.as_ref().expect("connected above");
        let res = tokio::time::timeout(
            timeout,
            publish_not_sold_out(client, &self.namespace, product),
        )
        .await
        .context("publishing \"false\" timed out")
        .and_then(|r| r);
        if res.is_err() {
            // Start afresh next time.
            *guard = None;
        }
        res
    }

    pub async fn is_connected(&self) -> bool {
        let guard = self.client.lock().await;
        guard
            .as_ref()
            .is_some_and(|c| c.state() == zk::SessionState::SyncConnected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn product_paths_round_trip() {
        let p = ProductId::new(17).unwrap();
        let path = product_path("ns", p);
        assert_eq!(path, "/seckill/ns/products/17");
        assert_eq!(product_of("ns", &path), Some(p));
        assert_eq!(product_of("other", &path), None);
        assert_eq!(product_of("ns", "/seckill/ns/products"), None);
    }
}
