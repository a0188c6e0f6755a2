//! `seckill-bench provider`: a simulated payment provider, for development, tests and demos.
//!
//! `POST /charges` takes a [`Charge`](seckill_shared::payments::Charge) and answers `201
//! pending` at once (idempotent by `payment_id`). After a delay it decides the charge,
//! succeeded or declined, and POSTs the signed
//! [`Callback`](seckill_shared::payments::Callback) to the charge's `callback_url`, retrying
//! while the receiver fails. The odds of a decline, a late callback and a duplicate come from
//! the command line; the `Provider-Decision` and `Provider-Delay-Ms` request headers override
//! them for one charge.
//!
//! Layout:
//! - [`ledger`]: the charges, their decisions and counters, and each charge's random plan.
//! - [`callback`]: deciding after the delay, signing and delivering the callback with backoff.
//! - [`routes`]: the HTTP endpoints and their errors.

pub mod args;
pub mod callback;
pub mod ledger;
pub mod routes;

#[cfg(test)]
mod tests;

use actix_web::{dev::ServerHandle, web, App, HttpServer};
use anyhow::Context;
use args::ProviderArgs;
use callback::{Dispatcher, Retry};
use ledger::{Ledger, Odds};
use std::future::Future;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long one callback attempt may take.
const CALLBACK_TIMEOUT: Duration = Duration::from_secs(5);

/// A provider bound to its address, not yet serving.
pub struct Provider {
    addr: SocketAddr,
    server: actix_web::dev::Server,
    ledger: Arc<Ledger>,
    stop: CancellationToken,
}

impl Provider {
    /// Binds `args.listen` (port 0 picks a free one). Call inside a Tokio runtime: the callbacks
    /// run on it.
    pub fn build(args: &ProviderArgs) -> anyhow::Result<Self> {
        Self::build_with(args, Retry::default())
    }

    /// [`Self::build`], retrying failed callbacks with `retry`.
    pub fn build_with(args: &ProviderArgs, retry: Retry) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Handle::try_current()
            .context("the provider must be started inside a Tokio runtime")?;
        let listener =
            TcpListener::bind(args.listen).with_context(|| format!("binding {}", args.listen))?;
        let addr = listener.local_addr().context("reading the bound address")?;
        let ledger = Arc::new(Ledger::new(
            Odds {
                decline_rate: args.decline_rate,
                delay: Duration::from_millis(args.delay_ms),
                late_rate: args.late_rate,
                late_delay: Duration::from_millis(args.late_delay_ms),
                duplicate_rate: args.duplicate_rate,
            },
            args.seed,
        ));
        let client = reqwest::Client::builder()
            .timeout(CALLBACK_TIMEOUT)
            .build()
            .context("building the callbacks' HTTP client")?;
        let stop = CancellationToken::new();
        let dispatcher = web::Data::new(Dispatcher::new(
            ledger.clone(),
            client,
            args.webhook_secret.clone(),
            retry,
            runtime,
            stop.clone(),
        ));
        let ledger_data = web::Data::from(ledger.clone());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(ledger_data.clone())
                .app_data(dispatcher.clone())
                .app_data(
                    web::JsonConfig::default()
                        .content_type_required(false)
                        .error_handler(routes::json_error),
                )
                .configure(routes::configure)
        })
        .workers(2)
        // `run_until_stopped`'s shutdown future stops it.
        .disable_signals()
        // A request in flight is a short one; idle keep-alive connections need not hold
        // the stop up.
        .shutdown_timeout(1)
        .listen(listener)
        .context("starting the HTTP server")?
        .run();
        Ok(Self {
            addr,
            server,
            ledger,
            stop,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The charges and counters, as `GET /stats` and `GET /charges/{id}` show them.
    pub fn ledger(&self) -> Arc<Ledger> {
        self.ledger.clone()
    }

    /// Serves until `shutdown` completes; then finishes the requests in flight and drops the
    /// callbacks not yet delivered.
    pub async fn run_until_stopped(self, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        let handle: ServerHandle = self.server.handle();
        let mut server = self.server;
        let served = tokio::select! {
            served = &mut server => served,
            () = shutdown => {
                // The server's future handles the stop command: poll both.
                let ((), served) = tokio::join!(handle.stop(true), server);
                served
            }
        };
        self.stop.cancel();
        served.context("running the HTTP server")
    }
}

/// Runs the provider until `shutdown` completes.
pub async fn run(args: ProviderArgs, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    let provider = Provider::build(&args)?;
    eprintln!("payment provider listening on http://{}", provider.addr());
    provider.run_until_stopped(shutdown).await
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
