//! Where Redis is: `SECKILL_REDIS_URL` (and `SECKILL_REDIS_CLUSTER`) read as one server or
//! the seed nodes of a cluster.

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
