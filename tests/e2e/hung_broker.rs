//! A broker that stops answering while a worker leaves. The blocking librdkafka calls of
//! leaving (the final synchronous commit, unsubscribing, closing the consumer) must run off the
//! runtime's threads: on the test's single-threaded runtime, one of them run inline would
//! stall every task, the worker's own included, until librdkafka gave up.

use crate::helpers::*;
use reqwest::StatusCode;
use seckill_shared::kafka;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A tansu broker of this test's own, so pausing it (SIGSTOP) hangs no other test. The binary
/// is the one the dev stack runs (`scripts/dev-up.sh`).
struct PrivateBroker {
    child: Child,
    port: u16,
}

impl PrivateBroker {
    async fn start() -> Self {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let pid = std::fs::read_to_string(root.join(".dev/tansu/tansu.pid"))
            .expect("the dev stack's broker (scripts/dev-up.sh)");
        let bin = std::fs::read_link(format!("/proc/{}/exe", pid.trim()))
            .expect("the dev stack's broker binary");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("tcp://127.0.0.1:{port}");
        let child = Command::new(bin)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args([
                "--storage-engine",
                "memory://tansu/",
                "--cluster-id",
                "hung",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting a private tansu broker");
        let broker = Self { child, port };
        eventually(
            "the private broker to listen",
            Duration::from_secs(20),
            || async {
                tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .ok()
                    .map(drop)
            },
        )
        .await;
        broker
    }

    fn signal(&self, signal: &str) {
        let ok = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {signal}");
    }
}

impl Drop for PrivateBroker {
    fn drop(&mut self) {
        self.signal("-CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// On one runtime thread, as `#[tokio::test]` has, so that a call that blocks it stops the
/// ticker. The runtime is built here, not by the attribute: once the broker answers again, the
/// commit the hang left waiting (off the runtime) finishes, and the runtime's shutdown waits
/// for it before the broker goes.
#[test]
fn a_hung_broker_never_blocks_the_runtime_while_a_worker_leaves() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let broker = rt.block_on(PrivateBroker::start());
    rt.block_on(leave_while_the_broker_hangs(&broker));
    rt.shutdown_timeout(Duration::from_secs(30));
    drop(broker);
}

async fn leave_while_the_broker_hangs(broker: &PrivateBroker) {
    let mut env = TestEnv::new().await;
    env.settings.kafka.brokers = format!("127.0.0.1:{}", broker.port);
    kafka::ensure_topic(&env.settings.kafka.brokers, &env.settings.kafka.topic, 4)
        .await
        .expect("creating the topic on the private broker");
    let gw = env.gateway().await;
    let worker = env.worker().await;
    let product = env.product(&gw, 3).await;
    let (status, body) = gw.buy(product, 1).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let settled = gw
        .settled(body["ticket"].as_str().unwrap(), Duration::from_secs(30))
        .await;
    assert_eq!(settled["status"], "confirmed", "{settled}");

    // The broker hangs: connections stay open, nothing answers. A watchdog thread (not a task:
    // the runtime may be the thing that is stuck) wakes it after 8 s, so that a blocked runtime
    // shows as a long stall below instead of a test that never ends.
    broker.signal("-STOP");
    let pid = broker.child.id().to_string();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(8));
        let _ = Command::new("kill").args(["-CONT", &pid]).status();
    });
    let ticks = Arc::new(Mutex::new(vec![Instant::now()]));
    let ticker = tokio::spawn({
        let ticks = ticks.clone();
        async move {
            loop {
                tokio::time::sleep(Duration::from_millis(20)).await;
                ticks.lock().unwrap().push(Instant::now());
            }
        }
    });
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(30), worker.shutdown())
        .await
        .expect("the worker stops within its bounds despite the hung broker");
    let took = started.elapsed();
    ticker.abort();
    broker.signal("-CONT");
    let mut ticks = ticks.lock().unwrap().clone();
    ticks.push(Instant::now());
    let longest = ticks.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    // The hang mattered: leaving had to wait for the broker (else this proves nothing).
    assert!(
        took > Duration::from_secs(1),
        "the worker left in {took:?}: the broker's hang never held it"
    );
    assert!(
        longest < Duration::from_millis(500),
        "the runtime stood still for {longest:?} while the worker left ({took:?} in all)"
    );
}
