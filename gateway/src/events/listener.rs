//! The gateway's one subscription to its namespace's ticket changes (`notify.lua`).

use super::Streams;
use futures::StreamExt;
use seckill_shared::store::events_pattern;
use std::sync::Arc;
use std::time::Duration;

/// Subscribes to every bucket's `events` channel of `namespace` and wakes the streams of each
/// ticket named, until `streams.shutdown`. On Redis Cluster a message published on any node
/// reaches every node, so one node's subscription hears them all; after a lost connection
/// the next node of `urls` is tried. Each (re)subscription wakes every stream: a change may
/// have been missed meanwhile.
pub async fn listen(urls: Vec<String>, namespace: String, streams: Arc<Streams>) {
    let pattern = events_pattern(&namespace);
    let mut backoff = Duration::from_millis(100);
    for url in urls.iter().cycle() {
        let attempt = async {
            let client = redis::Client::open(url.as_str())?;
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.psubscribe(&pattern).await?;
            streams.changed_all();
            tracing::info!(%pattern, "listening for ticket changes");
            let mut messages = pubsub.into_on_message();
            while let Some(msg) = messages.next().await {
                if let Ok(payload) = msg.get_payload::<String>() {
                    // The ticket, then its state (notify.lua); an older script's message is
                    // the ticket alone.
                    let (ticket, fields) = payload.split_once(' ').unwrap_or((&payload, ""));
                    streams.changed(ticket, fields);
                }
            }
            anyhow::Ok(())
        };
        tokio::select! {
            _ = streams.shutdown.cancelled() => return,
            ended = attempt => match ended {
                Ok(()) => tracing::warn!("the ticket-change subscription closed; subscribing again"),
                Err(e) => tracing::warn!(error = format!("{e:#}"), "could not subscribe to ticket changes; trying again"),
            },
        }
        tokio::select! {
            _ = streams.shutdown.cancelled() => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}
