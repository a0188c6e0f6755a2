//! One Redis server or a Redis Cluster, behind one connection type.
//!
//! `SECKILL_REDIS_URL` names a single server (`redis://host:6379/`) or a cluster: several
//! nodes (`redis+cluster://h1:7001,h2:7002`, or `redis://h1:7001,h2:7002`), or any one node
//! with `SECKILL_REDIS_CLUSTER=true`. The cluster client (redis's `cluster-async`) follows
//! `MOVED` and `ASK` redirects and refreshes its slot map after a failover. Every script and
//! pipeline of ours touches one slot: a product's keys share its hash tag, and so do a
//! namespace's live figures.

use crate::config::Topology;
use anyhow::Context;
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OnceCell;

/// A connection to one server or to a cluster. Cheap to clone: every clone shares one
/// multiplexed connection (per node), opened on first use, that reconnects on its own.
#[derive(Clone)]
pub enum RedisConn {
    Single(ConnectionManager),
    Cluster(LazyCluster),
}

/// The cluster connection, opened by the first command, so a process starts while Redis is
/// down and only the requests that need it fail. While it cannot be opened, commands fail at
/// once for [`RETRY_AFTER_FAILED_CONNECT`] after each failed try (quick `503`s, as with one
/// server), and no try takes longer than the command timeout.
#[derive(Clone)]
pub struct LazyCluster {
    client: Arc<ClusterClient>,
    conn: Arc<OnceCell<ClusterConnection>>,
    timeout: Duration,
    failed_at: Arc<std::sync::Mutex<Option<std::time::Instant>>>,
}

/// After a failed connect, commands fail without trying for this long.
const RETRY_AFTER_FAILED_CONNECT: Duration = Duration::from_millis(500);

impl LazyCluster {
    async fn get(&self) -> redis::RedisResult<ClusterConnection> {
        if let Some(c) = self.conn.get() {
            return Ok(c.clone());
        }
        let recent = self
            .failed_at
            .lock()
            .expect("lock poisoned")
            .is_some_and(|at| at.elapsed() < RETRY_AFTER_FAILED_CONNECT);
        if recent {
            return Err(unreachable_cluster("the last try failed moments ago"));
        }
        let init = self
            .conn
            .get_or_try_init(|| self.client.get_async_connection());
        let result = match tokio::time::timeout(self.timeout, init).await {
            Ok(r) => r.cloned(),
            Err(_) => Err(unreachable_cluster("connecting timed out")),
        };
        if result.is_err() {
            *self.failed_at.lock().expect("lock poisoned") = Some(std::time::Instant::now());
        }
        result
    }
}

fn unreachable_cluster(why: &'static str) -> redis::RedisError {
    redis::RedisError::from((
        redis::ErrorKind::Io,
        "cannot connect to the Redis Cluster",
        why.to_string(),
    ))
}

impl RedisConn {
    /// One server: a script may touch keys of any slot (the per-user limit and the
    /// reservation in one call).
    pub fn is_single_server(&self) -> bool {
        matches!(self, Self::Single(_))
    }

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
                    timeout,
                    failed_at: Arc::default(),
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
    use crate::config::Topology::{self, Cluster};

    fn nodes(v: &[&str]) -> Topology {
        Cluster(v.iter().map(|s| s.to_string()).collect())
    }

    /// A cluster that cannot be reached fails each command within the timeout, and right
    /// after a failed try at once, as one server's connection manager does: quick `503`s, no
    /// queue of buys behind a connect.
    #[tokio::test]
    async fn an_unreachable_cluster_fails_fast() {
        use super::RedisConn;
        use std::time::{Duration, Instant};
        // A node that takes connections and never answers: every try waits for the timeout.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = silent.local_addr().unwrap().port();
        let topology = nodes(&[&format!("redis://127.0.0.1:{port}")]);
        let conn = RedisConn::open(&topology, Duration::from_millis(300)).unwrap();
        let ping = |mut c: RedisConn| async move {
            let started = Instant::now();
            let r: redis::RedisResult<String> = redis::cmd("PING").query_async(&mut c).await;
            (r, started.elapsed())
        };
        let (first, took) = ping(conn.clone()).await;
        assert!(first.is_err());
        assert!(took < Duration::from_secs(3), "first try took {took:?}");
        assert!(
            took >= Duration::from_millis(250),
            "the node was silent: {took:?}"
        );
        let (second, took) = ping(conn.clone()).await;
        assert!(second.is_err());
        assert!(
            took < Duration::from_millis(100),
            "a try right after a failure took {took:?}"
        );
    }
}
