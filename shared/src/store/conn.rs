//! One Redis server or a Redis Cluster, behind one connection type.
//!
//! `SECKILL_REDIS_URL` names a single server (`redis://host:6379/`) or a cluster: several
//! nodes (`redis+cluster://h1:7001,h2:7002`, or `redis://h1:7001,h2:7002`), or any one node
//! with `SECKILL_REDIS_CLUSTER=true`. The cluster client (redis's `cluster-async`) follows
//! `MOVED` and `ASK` redirects and refreshes its slot map after a failover. Every script and
//! pipeline of ours touches one slot: a product's keys share its hash tag, and so do a
//! namespace's live figures.

use anyhow::Context;
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OnceCell;

/// Where Redis is: one server, or the seed nodes of a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topology {
    Single(String),
    Cluster(Vec<String>),
}

impl Topology {
    /// Reads `SECKILL_REDIS_URL` (and `SECKILL_REDIS_CLUSTER`). The user and password of a
    /// multi-node URL apply to every node.
    pub fn parse(url: &str, cluster: bool) -> anyhow::Result<Self> {
        let (scheme, rest, forced) = if let Some(rest) = url.strip_prefix("redis+cluster://") {
            ("redis", rest, true)
        } else if let Some(rest) = url.strip_prefix("rediss+cluster://") {
            ("rediss", rest, true)
        } else if let Some(rest) = url.strip_prefix("redis://") {
            ("redis", rest, false)
        } else if let Some(rest) = url.strip_prefix("rediss://") {
            ("rediss", rest, false)
        } else {
            anyhow::bail!(
                "must start with redis://, rediss://, redis+cluster:// or rediss+cluster://"
            );
        };
        let (userinfo, hosts) = match rest.rsplit_once('@') {
            Some((u, h)) => (format!("{u}@"), h),
            None => (String::new(), rest),
        };
        // A path (the database number) is a single server's; a cluster has database 0 only.
        let (hosts, path) = match hosts.split_once('/') {
            Some((h, p)) => (h, p),
            None => (hosts, ""),
        };
        let nodes: Vec<String> = hosts
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(|h| format!("{scheme}://{userinfo}{h}"))
            .collect();
        anyhow::ensure!(!nodes.is_empty(), "names no host");
        if nodes.len() == 1 && !forced && !cluster {
            return Ok(Self::Single(url.to_owned()));
        }
        anyhow::ensure!(
            path.is_empty() || path == "0",
            "a Redis Cluster has database 0 only, not /{path}"
        );
        Ok(Self::Cluster(nodes))
    }
}

/// A connection to one server or to a cluster. Cheap to clone: every clone shares one
/// multiplexed connection (per node), opened on first use, that reconnects on its own.
#[derive(Clone)]
pub enum RedisConn {
    Single(ConnectionManager),
    Cluster(LazyCluster),
}

/// The cluster connection, opened by the first command, so a process starts while Redis is
/// down and only the requests that need it fail.
#[derive(Clone)]
pub struct LazyCluster {
    client: Arc<ClusterClient>,
    conn: Arc<OnceCell<ClusterConnection>>,
}

impl LazyCluster {
    async fn get(&self) -> redis::RedisResult<ClusterConnection> {
        self.conn
            .get_or_try_init(|| self.client.get_async_connection())
            .await
            .cloned()
    }
}

impl RedisConn {
    /// Connects lazily to `topology`; each command fails after `timeout`.
    pub fn open(topology: &Topology, timeout: Duration) -> anyhow::Result<Self> {
        match topology {
            Topology::Single(url) => {
                let client = redis::Client::open(url.as_str()).context("parsing the Redis URL")?;
                let config = redis::aio::ConnectionManagerConfig::new()
                    .set_response_timeout(Some(timeout))
                    .set_connection_timeout(Some(timeout))
                    .set_number_of_retries(1)
                    .set_max_delay(Duration::from_millis(500));
                let conn = ConnectionManager::new_lazy_with_config(client, config)
                    .context("creating the Redis connection manager")?;
                Ok(Self::Single(conn))
            }
            Topology::Cluster(nodes) => {
                let client = ClusterClient::builder(nodes.iter().map(String::as_str))
                    .connection_timeout(timeout)
                    .response_timeout(timeout)
                    .retries(3)
                    .build()
                    .context("creating the Redis Cluster client")?;
                Ok(Self::Cluster(LazyCluster {
                    client: Arc::new(client),
                    conn: Arc::default(),
                }))
            }
        }
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster(_))
    }
}

impl ConnectionLike for RedisConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(c) => c.req_packed_command(cmd),
            Self::Cluster(lazy) => Box::pin(async move {
                let mut c = lazy.get().await?;
                c.req_packed_command(cmd).await
            }),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Cluster(lazy) => Box::pin(async move {
                let mut c = lazy.get().await?;
                c.req_packed_commands(pipeline, offset, count).await
            }),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(c) => c.get_db(),
            Self::Cluster(_) => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Topology::{self, *};

    fn nodes(v: &[&str]) -> Topology {
        Cluster(v.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn one_url_is_one_server_unless_told_otherwise() {
        let url = "redis://127.0.0.1:6379/";
        assert_eq!(Topology::parse(url, false).unwrap(), Single(url.into()));
        assert_eq!(
            Topology::parse(url, true).unwrap(),
            nodes(&["redis://127.0.0.1:6379"])
        );
        let db = "redis://:pw@h:6379/2";
        assert_eq!(Topology::parse(db, false).unwrap(), Single(db.into()));
        assert!(
            Topology::parse(db, true).is_err(),
            "a cluster has db 0 only"
        );
    }

    #[test]
    fn several_nodes_make_a_cluster_and_share_the_credentials() {
        assert_eq!(
            Topology::parse("redis+cluster://h1:7001,h2:7002", false).unwrap(),
            nodes(&["redis://h1:7001", "redis://h2:7002"])
        );
        assert_eq!(
            Topology::parse("redis://:s3cret@h1:7001, h2:7002/", false).unwrap(),
            nodes(&["redis://:s3cret@h1:7001", "redis://:s3cret@h2:7002"])
        );
        assert_eq!(
            Topology::parse("rediss+cluster://u:p@h1:7001", false).unwrap(),
            nodes(&["rediss://u:p@h1:7001"])
        );
        assert!(Topology::parse("http://h1:7001", false).is_err());
        assert!(Topology::parse("redis+cluster://", false).is_err());
    }
}
