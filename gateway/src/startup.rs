//! Building and running the gateway.

use crate::admission::Admission;
use crate::auth::admin::Admins;
use crate::auth::{self, AddressLimiter, Authenticator};
use crate::counting::count_requests;
use crate::error::{json_error, path_error, query_error};
use crate::events::room::Rooms;
use crate::events::Streams;
use crate::metrics::Metrics;
use crate::publish::OrderPublisher;
use crate::recovery::Recovery;
use crate::routes;
use crate::sold_out::{watch_zookeeper, SoldOutMarkers};
use crate::state::{AppState, ThreadRedis};
use crate::waiting_room::Admissions;
use actix_web::dev::{Server, ServerHandle};
use actix_web::middleware::from_fn;
use actix_web::{web, App, HttpServer};
use anyhow::Context;
use seckill_shared::config::Topology;
use seckill_shared::live::LivePublisher;
use seckill_shared::payments::attempts::{self as payments, Payments};
use seckill_shared::payments::ChargeOutcome;
use seckill_shared::settle::{Chaos, Settler};
use seckill_shared::store::TicketStore;
use seckill_shared::{db, GatewayMode, Settings};
use secrecy::ExposeSecret;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Largest JSON body the API accepts.
pub const MAX_BODY_BYTES: usize = 4096;

pub struct Application {
    port: u16,
    server: Server,
    state: web::Data<AppState>,
    shutdown: CancellationToken,
    zk_task: tokio::task::JoinHandle<()>,
}

impl Application {
    /// Binds the listener (port 0 picks a free one) and wires everything. Connections to the
    /// dependencies are made lazily, so the gateway starts and serves even while one is down.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        let listener = TcpListener::bind(&settings.gateway.http_addr)
            .with_context(|| format!("binding SECKILL_HTTP_ADDR={}", settings.gateway.http_addr))?;
        let port = listener.local_addr()?.port();

        let metrics = Metrics::new();
        metrics
            .max_in_flight
            .set(settings.gateway.max_in_flight as i64);
        let batch = metrics.reserve_batch.clone();
        let store = TicketStore::from_settings(&settings.redis, &settings.common.namespace)?
            .with_batch_observer(Arc::new(move |n| batch.observe(n as f64)));
        let pool = db::pool(settings.mysql.url.expose_secret(), 16)?;
        let publisher = OrderPublisher::new(&settings.kafka)?;
        let sold_out = Arc::new(SoldOutMarkers::new(
            settings.gateway.sold_out_ttl(),
            &settings.common.namespace,
            metrics.clone(),
        ));
        let shutdown = CancellationToken::new();
        let zk_task = tokio::spawn(watch_zookeeper(
            sold_out.clone(),
            settings.zookeeper.hosts.clone(),
            shutdown.clone(),
        ));

        let auth = Authenticator::from_settings(
            &settings.auth,
            AddressLimiter::from_settings(&settings.gateway)?,
        )?;
        if let Some(jwks) = auth.jwks() {
            tokio::spawn(jwks.watch(shutdown.clone()));
        }
        let store_conn = store.connection();
        // The live streams end as soon as the gateway is told to stop, not after its graceful
        // shutdown (which would wait for them): their clients reconnect elsewhere.
        let streams_stop = shutdown.child_token();
        tokio::spawn(end_streams_on_signal(streams_stop.clone()));
        let admissions = Arc::new(Admissions::new(
            settings.waiting_room.admission_secret.clone(),
            settings.waiting_room.admission_ttl_secs * 1000,
        )?);
        let rooms = Arc::new(Rooms::new(
            store.clone(),
            admissions.clone(),
            shutdown.clone(),
        ));
        let state = web::Data::new(AppState {
            auth: web::Data::new(auth),
            admission: Admission::new(settings.gateway.max_in_flight),
            settler: Settler {
                store: store.clone(),
                db: pool.clone(),
                // Fault injection applies where orders settle: here in sync mode.
                chaos: if settings.gateway.mode == GatewayMode::Sync {
                    Chaos::from_settings(&settings.chaos)
                } else {
                    Chaos::default()
                },
                ids: Default::default(),
            },
            store,
            db: pool,
            publisher,
            sold_out,
            metrics,
            namespace: settings.common.namespace.clone(),
            sync_mode: settings.gateway.mode == GatewayMode::Sync,
            recovery: Recovery::new(
                &settings.kafka,
                &settings.worker.group,
                &settings.common.namespace,
            )?,
            payments: Payments::from_settings(&settings.payment)?,
            default_payment_window_secs: settings.payment.window_secs,
            admissions: admissions.clone(),
            rooms,
            admins: web::Data::new(Admins::new(
                settings.admin.token.clone(),
                settings.admin.auth_failures_per_min,
            )),
            health: Default::default(),
            streams: Arc::new(Streams::new(
                settings.gateway.sse_max_streams,
                settings.gateway.sse_max_per_buyer,
                streams_stop.clone(),
            )),
            sse_heartbeat: Duration::from_secs(settings.gateway.sse_heartbeat_secs),
            sale_views: Default::default(),
            // A publish waits up to the delivery timeout for room in the producer's queue,
            // then as long again (and 0.5 s) for its report; 1 s more for clocks that differ.
            // But never past 1 s before the sweeper fails a ticket with no location (the
            // pending timeout): a second message of one order changes nothing, while a buy
            // again that waited that long answered `200` with a ticket the sweeper had failed
            // (chaos scenario 13, herd: delivery 2 s, pending timeout 5 s).
            republish_after_ms: (2 * settings.kafka.delivery_timeout_ms as i64
                + 1500
                + seckill_shared::locations::HOLD_LOCATED_MS as i64)
                .min(settings.worker.pending_timeout_ms as i64 - 1000)
                .max(0),
        });
        // Whose database is this? Another namespace's stops the gateway here. With MySQL down
        // (or not migrated yet), every rebuild and preload checks it first instead.
        match tokio::time::timeout(Duration::from_secs(5), state.recovery.claim(&state.db)).await {
            Ok(Ok(owner)) => {
                if let Err(e) =
                    owner.ensure_ours(&settings.common.namespace, "the gateway cannot start")
                {
                    shutdown.cancel();
                    return Err(e);
                }
            }
            Ok(Err(e)) => tracing::warn!(
                error = format!("{e:#}"),
                "could not check yet that the MySQL database is this namespace's; every rebuild \
                 and preload checks it first"
            ),
            Err(_) => tracing::warn!(
                "MySQL did not say within 5 s whose database it is; every rebuild and preload \
                 checks it first"
            ),
        }
        tokio::spawn(forget_idle_addresses(state.clone(), shutdown.clone()));
        if settings.payment.reconcile_after_ms > 0 && !settings.payment.provider_url.is_empty() {
            tokio::spawn(reconcile_payments(
                state.clone(),
                Duration::from_millis(settings.payment.reconcile_after_ms),
                shutdown.clone(),
            ));
        }
        // One subscription to the namespace's ticket changes, for the live streams.
        let nodes = match settings.redis.topology()? {
            Topology::Single(url) => vec![url],
            Topology::Cluster(nodes) => nodes,
        };
        tokio::spawn(crate::events::listener::listen(
            nodes,
            settings.common.namespace.clone(),
            state.streams.clone(),
        ));
        tokio::spawn(crate::live::run(
            state.clone(),
            LivePublisher::new(store_conn, &settings.common.namespace),
            shutdown.clone(),
        ));
        let data = state.clone();
        let app_settings = settings.clone();
        let mut server = HttpServer::new(move || {
            // Called once on each worker thread.
            let thread_redis = web::Data::new(ThreadRedis::open(&data, &app_settings));
            App::new()
                .wrap(from_fn(count_requests))
                .app_data(data.clone())
                .app_data(data.auth.clone())
                .app_data(data.admins.clone())
                .app_data(thread_redis)
                .app_data(
                    web::JsonConfig::default()
                        .limit(MAX_BODY_BYTES)
                        .error_handler(json_error),
                )
                .app_data(web::PathConfig::default().error_handler(path_error))
                .app_data(web::QueryConfig::default().error_handler(query_error))
                .configure(routes::configure)
        })
        // Limits on clients: the time to send a request head (slow or silent clients get 408
        // and are disconnected) and the open connections of each worker thread. actix also
        // answers 431 to a request head over 128 KiB or with more than 96 headers.
        .client_request_timeout(settings.gateway.http_client_request_timeout())
        .shutdown_timeout(10)
        // Each write goes out at once: without it Nagle's algorithm holds a live stream's
        // event until the client acknowledges the one before (up to its delayed-ACK timer,
        // tens of ms).
        .tcp_nodelay(true)
        .max_connections(settings.gateway.http_max_connections);
        if settings.gateway.http_workers > 0 {
            server = server.workers(settings.gateway.http_workers);
        }
        let server = server
            .listen(listener)
            .context("starting the HTTP server")?
            .run();
        Ok(Self {
            port,
            server,
            state,
            shutdown,
            zk_task,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn state(&self) -> web::Data<AppState> {
        self.state.clone()
    }

    /// Stops the server the way SIGTERM does: no new connections, in-flight requests finish.
    pub fn handle(&self) -> ServerHandle {
        self.server.handle()
    }

    /// Serves until stopped (SIGTERM, SIGINT or [`Self::handle`]), then flushes the producer.
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        let served = self.server.await;
        self.shutdown.cancel();
        let _ = self.zk_task.await;
        // The HTTP workers' runtimes drove the reservation lanes: the Kafka locations they
        // had not sent yet go now, so no answered order waits for the sweeper's long timeout.
        let recorded = self.state.store.record_waiting_locations().await;
        if recorded > 0 {
            tracing::info!(
                orders = recorded,
                "recorded the Kafka locations left at shutdown"
            );
        }
        let state = self.state.clone();
        tokio::task::spawn_blocking(move || state.publisher.flush(Duration::from_secs(10)))
            .await
            .context("joining the producer flush")??;
        tracing::info!("gateway stopped");
        served.context("running the HTTP server")
    }
}

/// Keeps the per-address limiters' maps (buyers', and wrong admin tokens') to recent clients.
/// A callback the provider never sends (lost, or the provider crashed before it) would leave
/// its payment `processing` and its order unpaid until the window closes. Each gateway asks
/// the provider about payments sent longer than `after` ago, and settles each as its
/// callback would have: decided, as decided; unknown to the provider, declined (no money
/// moved, and the buyer may pay again). Settling is idempotent, so gateways and a late
/// callback may meet on one payment.
async fn reconcile_payments(state: web::Data<AppState>, after: Duration, stop: CancellationToken) {
    let mut tick = tokio::time::interval(
        (after / 4).clamp(Duration::from_millis(100), Duration::from_secs(5)),
    );
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        // Another namespace's payments are not this provider's to ask about.
        if state.recovery.ensure_owned(&state.db).await.is_err() {
            continue;
        }
        let now = seckill_shared::now_ms();
        let waiting =
            match payments::waiting_for_callback(&state.db, now - after.as_millis() as i64, 100)
                .await
            {
                Ok(w) => w,
                Err(e) => {
                    tracing::warn!(
                        error = format!("{e:#}"),
                        "could not read the payments waiting for the provider"
                    );
                    continue;
                }
            };
        for payment_id in waiting {
            let outcome = match state.payments.charge_state(&payment_id).await {
                Ok(payments::ChargeState::Decided(o)) => o,
                Ok(payments::ChargeState::Unknown) => ChargeOutcome::Declined,
                Ok(payments::ChargeState::Undecided) => continue,
                Err(e) => {
                    tracing::warn!(error = format!("{e:#}"), %payment_id, "could not ask the provider about a payment");
                    continue;
                }
            };
            let now = seckill_shared::now_ms();
            match payments::settle(&state.db, &payment_id, outcome, now).await {
                Ok(Some(settled)) => {
                    if settled.changed {
                        tracing::warn!(%payment_id, status = settled.payment.status.as_str(), "settled a payment whose callback never came, from the provider's answer");
                    }
                    crate::routes::payments::follow(&state, &settled, now).await;
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = format!("{e:#}"), %payment_id, "could not settle a payment")
                }
            }
        }
    }
}

async fn forget_idle_addresses(state: web::Data<AppState>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(auth::address::FORGET_EVERY);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {
                state.auth.addresses.forget_idle();
                state.admins.forget_idle();
            }
        }
    }
}

/// Ends the live streams on SIGTERM or SIGINT, while the server finishes its other requests.
async fn end_streams_on_signal(stop: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
        _ = stop.cancelled() => return,
    }
    stop.cancel();
}
