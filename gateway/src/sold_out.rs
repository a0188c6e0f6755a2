//! Local sold-out markers, kept honest by ZooKeeper.
//!
//! A marker lets the gateway answer `409` without touching Redis. It must never outlive the
//! truth, or units would go unsold:
//! - a worker that gives a unit back sets the product's node to `"false"`; one persistent
//!   recursive watch on the products folder sees it and drops the marker;
//! - after setting a marker, the gateway reads the Redis stock again and drops the marker if a
//!   unit came back meanwhile (the watch was already in place, so nothing slips between);
//! - markers are only set while the ZooKeeper session and watch are up, and all are dropped
//!   when the session is lost;
//! - as a last resort every marker expires after a TTL.

use crate::metrics::Metrics;
use backon::{BackoffBuilder, ExponentialBuilder};
use dashmap::DashMap;
use seckill_shared::store::TicketStore;
use seckill_shared::{sold_out, ProductId};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use zookeeper_client as zkc;

/// Why a marker went away. The label of the drops counter.
#[derive(Debug, Clone, Copy)]
pub enum DropCause {
    ZkFalse,
    SessionLost,
    Ttl,
    StockBack,
}

impl DropCause {
    fn label(self) -> &'static str {
        match self {
            DropCause::ZkFalse => "zk_false",
            DropCause::SessionLost => "session_lost",
            DropCause::Ttl => "ttl",
            DropCause::StockBack => "stock_back",
        }
    }
}

/// How often one gateway publishes `"false"` for units given back by orders it could not fill
/// ([`SoldOutMarkers::publish_units_back`]).
pub const UNITS_BACK_EVERY: Duration = Duration::from_millis(200);

pub struct SoldOutMarkers {
    markers: DashMap<ProductId, Instant>,
    ttl: Duration,
    namespace: String,
    metrics: Metrics,
    /// True while the session is connected and the watch is in place.
    watching: AtomicBool,
    /// Bumped on every session change, so a marker set across a change is dropped.
    epoch: AtomicU64,
    client: RwLock<Option<zkc::Client>>,
    /// When this gateway last published `"false"` for units an order of several held while it
    /// gathered them across buckets ([`Self::publish_units_back`]).
    units_back: DashMap<ProductId, Instant>,
}

impl SoldOutMarkers {
    pub fn new(ttl: Duration, namespace: &str, metrics: Metrics) -> Self {
        // Every cause shows from the start, at 0: a dashboard (or a test) then tells "none
        // dropped" from "no such metric".
        for cause in [
            DropCause::ZkFalse,
            DropCause::SessionLost,
            DropCause::Ttl,
            DropCause::StockBack,
        ] {
            metrics.marker_drops.with_label_values(&[cause.label()]);
        }
        Self {
            markers: DashMap::new(),
            units_back: DashMap::new(),
            ttl,
            namespace: namespace.to_owned(),
            metrics,
            watching: AtomicBool::new(false),
            epoch: AtomicU64::new(0),
            client: RwLock::new(None),
        }
    }

    /// The fast path: is the product marked sold out here?
    pub fn is_sold_out(&self, product: ProductId) -> bool {
        let Some(set_at) = self.markers.get(&product).map(|e| *e) else {
            return false;
        };
        if set_at.elapsed() < self.ttl {
            self.metrics.marker_hits.inc();
            return true;
        }
        self.remove(product, set_at, DropCause::Ttl);
        false
    }

    pub fn count(&self) -> usize {
        self.markers.len()
    }

    /// The products marked sold out now (markers past their TTL left out), in order.
    pub fn marked(&self) -> Vec<ProductId> {
        let mut out: Vec<ProductId> = self
            .markers
            .iter()
            .filter(|e| e.value().elapsed() < self.ttl)
            .map(|e| *e.key())
            .collect();
        out.sort();
        out
    }

    pub fn is_watching(&self) -> bool {
        self.watching.load(Ordering::SeqCst)
    }

    /// Redis said sold out. Set the marker unless that could leave it stale, then check that no
    /// unit came back meanwhile. (No node is created here: `"false"` is always published as
    /// a data change, creating the node first when needed; see `sold_out::publish_not_sold_out`.)
    pub async fn on_sold_out(&self, product: ProductId, store: &TicketStore) {
        let epoch = self.epoch.load(Ordering::SeqCst);
        if !self.is_watching() {
            return;
        }
        let set_at = Instant::now();
        if self.markers.insert(product, set_at).is_none() {
            self.metrics.markers.inc();
        }
        self.metrics.marker_sets.inc();

        let stock_back = match store.stock(product).await {
            Ok(Some(n)) => n > 0,
            Ok(None) => true,
            Err(_) => true, // cannot tell: do not keep a marker we cannot vouch for
        };
        if stock_back || self.epoch.load(Ordering::SeqCst) != epoch || !self.is_watching() {
            self.remove(product, set_at, DropCause::StockBack);
        }
    }

    /// Drops one product's marker.
    pub fn drop_marker(&self, product: ProductId, cause: DropCause) {
        if self.markers.remove(&product).is_some() {
            self.metrics.markers.dec();
            self.metrics
                .marker_drops
                .with_label_values(&[cause.label()])
                .inc();
        }
    }

    /// Drops a marker only if it is the one set at `set_at`.
    fn remove(&self, product: ProductId, set_at: Instant, cause: DropCause) {
        if self
            .markers
            .remove_if(&product, |_, v| *v == set_at)
            .is_some()
        {
            self.metrics.markers.dec();
            self.metrics
                .marker_drops
                .with_label_values(&[cause.label()])
                .inc();
        }
    }

    pub fn drop_all(&self, cause: DropCause) {
        let products: Vec<ProductId> = self.markers.iter().map(|e| *e.key()).collect();
        for p in products {
            self.drop_marker(p, cause);
        }
    }

    pub fn client(&self) -> Option<zkc::Client> {
        self.client.read().expect("lock poisoned").clone()
    }

    fn session_up(&self, client: Option<zkc::Client>) {
        if let Some(c) = client {
            *self.client.write().expect("lock poisoned") = Some(c);
        }
        self.epoch.fetch_add(1, Ordering::SeqCst);
        self.watching.store(true, Ordering::SeqCst);
        self.metrics.zk_connected.set(1);
    }

    fn session_down(&self, forget_client: bool) {
        self.watching.store(false, Ordering::SeqCst);
        self.epoch.fetch_add(1, Ordering::SeqCst);
        self.metrics.zk_connected.set(0);
        if forget_client {
            *self.client.write().expect("lock poisoned") = None;
        }
        self.drop_all(DropCause::SessionLost);
    }

    /// Publishes `"false"` for a product through this gateway's session, if it has one.
    /// An order of several units gathered some across the buckets and gave them back (the
    /// buckets had fewer than it asked for): another buyer may have been told sold out
    /// meanwhile. `"false"` at most once per [`UNITS_BACK_EVERY`] per product from this
    /// gateway, since the end of a sale of such orders may answer many of them; a marker set in
    /// between drops after its TTL at the latest.
    pub async fn publish_units_back(&self, product: ProductId) {
        let now = Instant::now();
        let mut due = true;
        self.units_back
            .entry(product)
            .and_modify(|last| {
                if now.duration_since(*last) < UNITS_BACK_EVERY {
                    due = false;
                } else {
                    *last = now;
                }
            })
            .or_insert(now);
        if due {
            self.publish_not_sold_out(product).await;
        }
    }

    pub async fn publish_not_sold_out(&self, product: ProductId) -> bool {
        let Some(client) = self.client() else {
            return false;
        };
        match tokio::time::timeout(
            Duration::from_secs(2),
            sold_out::publish_not_sold_out(&client, &self.namespace, product),
        )
        .await
        {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                tracing::warn!(error = format!("{e:#}"), %product, "could not publish \"false\"");
                false
            }
            Err(_) => {
                tracing::warn!(%product, "publishing \"false\" timed out");
                false
            }
        }
    }
}

/// Keeps a ZooKeeper session and the watch on the products folder, reconnecting for as long as
/// the gateway runs. The gateway serves throughout; without a session it sets no markers.
pub async fn watch_zookeeper(
    markers: Arc<SoldOutMarkers>,
    hosts: String,
    shutdown: CancellationToken,
) {
    keep_session(|| one_session(&markers, &hosts, &shutdown), &shutdown).await;
    markers.session_down(true);
}

/// How one session ended.
#[derive(Debug, PartialEq)]
enum Session {
    /// Connecting or watching failed: wait longer before each try.
    Failed,
    /// The session was up, then ended: try again at once.
    Ended,
}

/// Runs `session` until `shutdown`. Between failed tries it waits 100 ms doubling to 2 s, with
/// jitter, so a ZooKeeper that refuses the watch is never hammered; a session that came up
/// resets the wait.
async fn keep_session<F, Fut>(mut session: F, shutdown: &CancellationToken)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Session>,
{
    let policy = ExponentialBuilder::new()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(2))
        .with_jitter()
        .without_max_times();
    let mut delays = policy.build();
    while !shutdown.is_cancelled() {
        match session().await {
            Session::Ended => delays = policy.build(),
            Session::Failed => {
                let wait = delays.next().unwrap_or(Duration::from_secs(2));
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {},
                    _ = shutdown.cancelled() => break,
                }
            }
        }
    }
}

/// Connects, watches the products folder and follows its events until the session ends.
async fn one_session(
    markers: &SoldOutMarkers,
    hosts: &str,
    shutdown: &CancellationToken,
) -> Session {
    let root = sold_out::root(&markers.namespace);
    let connected = tokio::select! {
        r = sold_out::connect(hosts, &markers.namespace, Duration::from_secs(3)) => r,
        _ = shutdown.cancelled() => return Session::Ended,
    };
    let client = match connected {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = format!("{e:#}"), "ZooKeeper unavailable; retrying");
            return Session::Failed;
        }
    };
    let mut watcher = match client
        .watch(&root, zkc::AddWatchMode::PersistentRecursive)
        .await
    {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!(error = %e, "could not watch the sold-out nodes; reconnecting");
            return Session::Failed;
        }
    };
    markers.session_up(Some(client.clone()));
    tracing::info!("ZooKeeper session up; watching {root}");
    loop {
        let event = tokio::select! {
            ev = watcher.changed() => ev,
            _ = shutdown.cancelled() => return Session::Ended,
        };
        match event.event_type {
            zkc::EventType::Session => match event.session_state {
                zkc::SessionState::SyncConnected => {
                    // The session is back, on this server or another. zookeeper-client 0.11.2
                    // does not send persistent watches again on a reconnect (its
                    // `resend_watches` keeps the index of the first watch kind, so it sends
                    // `SetWatches` without them): without a watch of ours again no `"false"`
                    // would reach this gateway, and each marker set from now on would live out
                    // its TTL while units were back (chaos scenario 15, herd: 2 of 5 runs).
                    match client
                        .watch(&root, zkc::AddWatchMode::PersistentRecursive)
                        .await
                    {
                        Ok(w) => {
                            watcher = w;
                            markers.session_up(None);
                            tracing::info!("ZooKeeper session resumed; watching {root} again");
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "could not watch the sold-out nodes again; reconnecting");
                            markers.session_down(true);
                            return Session::Failed;
                        }
                    }
                }
                state if state.is_terminated() => {
                    tracing::warn!(?state, "ZooKeeper session ended; dropping all markers");
                    markers.session_down(true);
                    return Session::Ended;
                }
                state => {
                    tracing::warn!(?state, "ZooKeeper disconnected; dropping all markers");
                    markers.session_down(false);
                }
            },
            zkc::EventType::NodeDataChanged => {
                if let Some(product) = sold_out::product_of(&markers.namespace, &event.path) {
                    markers.drop_marker(product, DropCause::ZkFalse);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// Bug 4: a watch that fails at once used to be retried at once, spinning hot.
    #[tokio::test(start_paused = true)]
    async fn failed_sessions_back_off_up_to_two_seconds() {
        let shutdown = CancellationToken::new();
        let tries = Cell::new(0u32);
        let started = tokio::time::Instant::now();
        keep_session(
            || {
                tries.set(tries.get() + 1);
                if tries.get() == 20 {
                    shutdown.cancel();
                }
                std::future::ready(Session::Failed)
            },
            &shutdown,
        )
        .await;
        let waited = started.elapsed();
        // 19 waits: 100 ms doubling to 2 s, jitter adding up to one more delay each.
        assert!(
            waited >= Duration::from_millis(100 + 200 + 400 + 800 + 1600 + 14 * 2000),
            "{waited:?}"
        );
        assert!(
            waited <= Duration::from_millis(2 * (100 + 200 + 400 + 800 + 1600 + 14 * 2000)),
            "{waited:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_session_that_came_up_is_retried_at_once() {
        let shutdown = CancellationToken::new();
        let tries = Cell::new(0u32);
        let started = tokio::time::Instant::now();
        keep_session(
            || {
                tries.set(tries.get() + 1);
                if tries.get() == 5 {
                    shutdown.cancel();
                }
                std::future::ready(Session::Ended)
            },
            &shutdown,
        )
        .await;
        assert_eq!(tries.get(), 5);
        assert_eq!(started.elapsed(), Duration::ZERO);
    }
}
