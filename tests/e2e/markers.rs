//! The gateway's local sold-out markers and their metrics: sets, hits, and drops by cause
//! (ZooKeeper `"false"` is in `pipeline.rs`; here the TTL and the loss of the session).

use crate::helpers::*;
use reqwest::StatusCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A TCP proxy to ZooKeeper that the test can cut, as a network failure would.
struct Proxy {
    addr: String,
    accept: JoinHandle<()>,
    links: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Proxy {
    async fn start(target: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let links: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let target = target.to_owned();
        let accept = tokio::spawn({
            let links = links.clone();
            async move {
                while let Ok((mut inbound, _)) = listener.accept().await {
                    let target = target.clone();
                    links.lock().unwrap().push(tokio::spawn(async move {
                        if let Ok(mut outbound) = TcpStream::connect(&target).await {
                            let _ =
                                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        }
                    }));
                }
            }
        });
        Self {
            addr,
            accept,
            links,
        }
    }

    /// Closes every connection and stops listening.
    fn cut(&self) {
        self.accept.abort();
        for link in self.links.lock().unwrap().drain(..) {
            link.abort();
        }
    }
}

async fn drops(gw: &TestGateway, cause: &str) -> f64 {
    gw.metric(&format!(
        "seckill_gateway_sold_out_marker_drops_total{{cause=\"{cause}\"}}"
    ))
    .await
}

/// A marker goes when the ZooKeeper session is lost (it could no longer be dropped in time),
/// and none is set until the session is back.
#[tokio::test]
async fn losing_the_zookeeper_session_drops_every_marker() {
    let env = TestEnv::new().await;
    let zk = Proxy::start(&env.settings.zookeeper.hosts).await;
    let gw = env
        .gateway_with(|s| {
            s.zookeeper.hosts = zk.addr.clone();
            s.gateway.sold_out_ttl_ms = 60_000;
        })
        .await;
    gw.wait_for_zookeeper().await;
    let gone = env.product(&gw, 0).await;

    assert_eq!(gw.buy(gone, 1).await.0, StatusCode::CONFLICT);
    assert_eq!(gw.metric("seckill_gateway_sold_out_markers").await, 1.0);
    assert_eq!(
        gw.metric("seckill_gateway_sold_out_marker_sets_total")
            .await,
        1.0
    );
    assert_eq!(gw.buy(gone, 2).await.0, StatusCode::CONFLICT);
    assert_eq!(
        gw.metric("seckill_gateway_sold_out_marker_hits_total")
            .await,
        1.0
    );

    zk.cut();
    eventually(
        "the marker to drop with the session",
        Duration::from_secs(20),
        || async { (gw.metric("seckill_gateway_sold_out_markers").await == 0.0).then_some(()) },
    )
    .await;
    assert_eq!(drops(&gw, "session_lost").await, 1.0);
    assert_eq!(gw.metric("seckill_gateway_zookeeper_connected").await, 0.0);
    // Still sold out (Redis says so), but no marker without a session.
    assert_eq!(gw.buy(gone, 3).await.0, StatusCode::CONFLICT);
    assert_eq!(gw.metric("seckill_gateway_sold_out_markers").await, 0.0);
    assert_eq!(
        gw.metric("seckill_gateway_sold_out_marker_sets_total")
            .await,
        1.0
    );
}

/// The last resort: a marker expires after `SECKILL_SOLD_OUT_TTL_MS` even if nothing else
/// drops it.
#[tokio::test]
async fn a_marker_expires_after_its_ttl() {
    let env = TestEnv::new().await;
    let gw = env.gateway_with(|s| s.gateway.sold_out_ttl_ms = 200).await;
    gw.wait_for_zookeeper().await;
    let gone = env.product(&gw, 0).await;
    assert_eq!(gw.buy(gone, 1).await.0, StatusCode::CONFLICT);
    assert_eq!(gw.metric("seckill_gateway_sold_out_markers").await, 1.0);

    // Each buy after the TTL finds the marker expired, drops it and asks Redis again.
    let mut user = 1;
    eventually("a TTL drop", Duration::from_secs(10), || {
        user += 1;
        let gw = &gw;
        let user = user;
        async move {
            assert_eq!(gw.buy(gone, user).await.0, StatusCode::CONFLICT);
            (drops(gw, "ttl").await >= 1.0).then_some(())
        }
    })
    .await;
    assert_eq!(drops(&gw, "zk_false").await, 0.0);
    assert_eq!(drops(&gw, "session_lost").await, 0.0);
}

/// A `409` never waits on ZooKeeper (bug 4: the sold-out answer used to await the marker
/// node's creation, with no timeout). With ZooKeeper accepting connections and never
/// answering, buys of a sold-out product are still answered `409` at once.
#[tokio::test]
async fn a_sold_out_answer_never_waits_on_zookeeper() {
    let env = TestEnv::new().await;
    // Accepts connections into its backlog and never answers.
    let blackhole = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let zk_hosts = blackhole.local_addr().unwrap().to_string();
    let gw = env.gateway_with(|s| s.zookeeper.hosts = zk_hosts).await;
    let product = env.product(&gw, 1).await;
    let (status, body) = gw.buy(product, 1).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    for user in 2..=4 {
        let answer = tokio::time::timeout(Duration::from_secs(3), gw.buy(product, user))
            .await
            .unwrap_or_else(|_| panic!("user {user}: no answer within 3 s"));
        assert_eq!(answer.0, StatusCode::CONFLICT, "{}", answer.1);
    }
}
