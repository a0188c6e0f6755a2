//! The buyers, and what they add up to.

use super::args::{LiveSaleArgs, Mode};
use crate::load::buyer_token::{SigningKey, TokenIssuer};
use anyhow::Context;
use seckill_shared::api::{QueueBody, TicketBody};
use seckill_shared::{now_ms, TicketStatus};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// How one buyer's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum End {
    Confirmed,
    SoldOut,
    /// The admission lapsed before the buy.
    Lapsed,
    Failed,
    TimedOut,
    Error,
}

struct Buyer {
    end: End,
    requests: u64,
    /// From the worker's confirmation (`confirmed_at_ms`) to this buyer reading it.
    knew_after_ms: Option<i64>,
}

/// The result of one process.
#[derive(Debug, Serialize)]
pub struct LiveSaleReport {
    pub mode: Mode,
    /// Polling: the entry was read this often, not as its answers advised.
    pub queue_poll_ms: Option<u64>,
    pub buyers: u64,
    pub confirmed: u64,
    pub sold_out: u64,
    pub lapsed: u64,
    pub failed: u64,
    pub timed_out: u64,
    pub errors: u64,
    /// Every HTTP request sent: joins, polls, buys, stream opens (and reopens).
    pub requests: u64,
    /// Events read from streams (each one's data: comments aside).
    pub events: u64,
    /// Ticket streams whose first event was already the settled ticket: the worker confirmed
    /// it before the buyer opened the stream (after its `202`), so the delay is the buy's
    /// answer, not the push.
    pub settled_at_open: u64,
    /// The confirmed buyers' delays, ms, sorted.
    pub knew_after_ms: Vec<i64>,
    pub elapsed_ms: i64,
}

struct Ctx {
    http: reqwest::Client,
    bases: Vec<String>,
    product: u64,
    mode: Mode,
    queue_poll: Option<Duration>,
    ticket_poll: Duration,
    deadline_ms: i64,
    events: AtomicU64,
    /// Streams whose first event was the ticket already settled.
    settled_first: AtomicU64,
}

pub async fn run(args: LiveSaleArgs) -> anyhow::Result<bool> {
    let bases: Vec<String> = args
        .gateways
        .iter()
        .map(|g| g.trim_end_matches('/').to_owned())
        .collect();
    let issuer = TokenIssuer::new(
        SigningKey::Hs256(&args.jwt_secret),
        None,
        None,
        Duration::from_secs(3600),
    )?;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(usize::MAX)
        .build()
        .context("building the HTTP client")?;
    let started = now_ms();
    let ctx = Arc::new(Ctx {
        http,
        bases,
        product: args.product,
        mode: args.mode,
        queue_poll: args.queue_poll_ms.map(Duration::from_millis),
        ticket_poll: Duration::from_millis(args.ticket_poll_ms),
        deadline_ms: started + (args.timeout * 1000.0) as i64,
        events: AtomicU64::new(0),
        settled_first: AtomicU64::new(0),
    });
    let joins = Arc::new(Semaphore::new(args.join_concurrency.max(1)));
    let mut tasks = Vec::with_capacity(args.buyers as usize);
    for user in args.first_user..args.first_user + args.buyers {
        let token = issuer.sign(user)?;
        let (ctx, joins) = (ctx.clone(), joins.clone());
        tasks.push(tokio::spawn(async move {
            let mut requests = 0;
            match timeout(&ctx, buyer(&ctx, user, &token, &joins, &mut requests)).await {
                Ok(Ok((end, knew_after_ms))) => Buyer {
                    end,
                    requests,
                    knew_after_ms,
                },
                Ok(Err(e)) => {
                    eprintln!("live-sale: buyer {user}: {e:#}");
                    Buyer {
                        end: End::Error,
                        requests,
                        knew_after_ms: None,
                    }
                }
                Err(_) => Buyer {
                    end: End::TimedOut,
                    requests,
                    knew_after_ms: None,
                },
            }
        }));
    }
    let mut report = LiveSaleReport {
        mode: args.mode,
        queue_poll_ms: args.queue_poll_ms,
        buyers: args.buyers,
        confirmed: 0,
        sold_out: 0,
        lapsed: 0,
        failed: 0,
        timed_out: 0,
        errors: 0,
        requests: 0,
        events: 0,
        settled_at_open: 0,
        knew_after_ms: vec![],
        elapsed_ms: 0,
    };
    for t in tasks {
        let b = t.await.context("a buyer's task")?;
        report.requests += b.requests;
        match b.end {
            End::Confirmed => report.confirmed += 1,
            End::SoldOut => report.sold_out += 1,
            End::Lapsed => report.lapsed += 1,
            End::Failed => report.failed += 1,
            End::TimedOut => report.timed_out += 1,
            End::Error => report.errors += 1,
        }
        report.knew_after_ms.extend(b.knew_after_ms);
    }
    report.knew_after_ms.sort_unstable();
    report.events = ctx.events.load(Ordering::Relaxed);
    report.settled_at_open = ctx.settled_first.load(Ordering::Relaxed);
    report.elapsed_ms = now_ms() - started;
    std::fs::write(&args.out, serde_json::to_vec_pretty(&report)?)
        .with_context(|| format!("writing {}", args.out.display()))?;
    let pct = |p: f64| {
        let v = &report.knew_after_ms;
        (!v.is_empty()).then(|| v[((v.len() - 1) as f64 * p).round() as usize])
    };
    println!(
        "live-sale ({:?}{}): {} buyers, {} confirmed, {} sold out, {} admissions lapsed, {} failed, {} timed out, {} errors; {:.2} requests and {:.2} stream events per buyer; confirmation → buyer p50 {:?} ms, p99 {:?} ms ({} settled before their stream opened); {:.1} s",
        report.mode,
        report
            .queue_poll_ms
            .map(|ms| format!(", the entry every {ms} ms"))
            .unwrap_or_default(),
        report.buyers,
        report.confirmed,
        report.sold_out,
        report.lapsed,
        report.failed,
        report.timed_out,
        report.errors,
        report.requests as f64 / report.buyers as f64,
        report.events as f64 / report.buyers as f64,
        pct(0.5),
        pct(0.99),
        report.settled_at_open,
        report.elapsed_ms as f64 / 1000.0
    );
    // A valid run: every buyer came to an end, and some were confirmed.
    Ok(report.timed_out == 0 && report.errors == 0 && report.confirmed > 0)
}

/// Sends the request `build` makes, as a client would: again after a second when the
/// connection broke or the gateway answered `503`, `429` or `408` (each try counts).
async fn send(
    build: impl Fn() -> reqwest::RequestBuilder,
    requests: &mut u64,
) -> anyhow::Result<reqwest::Response> {
    loop {
        *requests += 1;
        match build().send().await {
            Ok(res) if matches!(res.status().as_u16(), 408 | 429 | 503) => {}
            Ok(res) => return Ok(res),
            Err(e) if e.is_connect() || e.is_request() => {}
            Err(e) => return Err(e.into()),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn timeout<T>(ctx: &Ctx, f: impl std::future::Future<Output = T>) -> Result<T, ()> {
    let left = (ctx.deadline_ms - now_ms()).max(0) as u64;
    tokio::time::timeout(Duration::from_millis(left), f)
        .await
        .map_err(|_| ())
}

/// One buyer: join, follow the place, buy, follow the ticket.
async fn buyer(
    ctx: &Ctx,
    user: u64,
    token: &str,
    joins: &Semaphore,
    requests: &mut u64,
) -> anyhow::Result<(End, Option<i64>)> {
    let base = &ctx.bases[(user as usize) % ctx.bases.len()];
    let p = ctx.product;
    let entry: QueueBody = {
        let _slot = joins.acquire().await?;
        let url = format!("{base}/v1/seckill/{p}/queue");
        let mut res = send(|| ctx.http.post(&url).bearer_auth(token), requests).await?;
        if res.status() == 428 {
            // A room with a proof of work: solve its challenge, and join with the solution.
            let body = res.bytes().await?;
            let solved = crate::pow_bench::answer_challenge(&body)
                .await
                .context("a 428 without a challenge")?;
            let post = || {
                ctx.http
                    .post(&url)
                    .bearer_auth(token)
                    .header(seckill_shared::waiting_room::pow::HEADER, &solved)
            };
            res = send(post, requests).await?;
        }
        anyhow::ensure!(res.status() == 202, "join: {}", res.status());
        res.json().await?
    };
    let entry_path = format!("{base}/v1/seckill/{p}/queue/{}", entry.queue_id);
    let admitted = match ctx.mode {
        Mode::Poll => {
            let mut e = entry;
            loop {
                match e.state.as_str() {
                    "admitted" => break e,
                    "waiting" => {}
                    _ => return Ok((End::SoldOut, None)),
                }
                let advised = Duration::from_millis(e.refresh_after_ms.clamp(250, 2000));
                tokio::time::sleep(ctx.queue_poll.unwrap_or(advised)).await;
                let res = send(|| ctx.http.get(&entry_path).bearer_auth(token), requests).await?;
                anyhow::ensure!(res.status() == 200, "poll: {}", res.status());
                e = res.json().await?;
            }
        }
        Mode::Stream => {
            let path = format!("{entry_path}/events");
            let (last, _) = follow(ctx, &path, token, requests, |e: &QueueBody| {
                e.state != "waiting"
            })
            .await?;
            if last.state != "admitted" {
                return Ok((End::SoldOut, None));
            }
            last
        }
    };
    let buy_url = format!("{base}/v1/seckill/{p}");
    let admission = admitted.admission_token.clone().unwrap_or_default();
    let res = send(
        || {
            ctx.http
                .post(&buy_url)
                .bearer_auth(token)
                .header("Seckill-Admission", admission.as_str())
                .json(&serde_json::json!({}))
        },
        requests,
    )
    .await?;
    match res.status().as_u16() {
        202 | 200 => {}
        409 => return Ok((End::SoldOut, None)),
        // The admission lapsed before the buy (the buyer was too slow): its place is gone.
        403 => return Ok((End::Lapsed, None)),
        s => anyhow::bail!("buy: {s}: {}", res.text().await.unwrap_or_default()),
    }
    let ticket: TicketBody = res.json().await?;
    let order_path = format!("{base}/v1/orders/{}", ticket.ticket);
    let settled = |t: &TicketBody| t.status != TicketStatus::Pending;
    let last = match ctx.mode {
        Mode::Poll => loop {
            tokio::time::sleep(ctx.ticket_poll).await;
            let res = send(|| ctx.http.get(&order_path).bearer_auth(token), requests).await?;
            anyhow::ensure!(res.status() == 200, "ticket poll: {}", res.status());
            let t: TicketBody = res.json().await?;
            if settled(&t) {
                break t;
            }
        },
        Mode::Stream => {
            let (last, read) = follow(
                ctx,
                &format!("{order_path}/events"),
                token,
                requests,
                settled,
            )
            .await?;
            if read == 1 {
                ctx.settled_first.fetch_add(1, Ordering::Relaxed);
            }
            last
        }
    };
    let knew = now_ms();
    Ok(match last.status {
        TicketStatus::Confirmed | TicketStatus::Paid => {
            (End::Confirmed, last.confirmed_at_ms.map(|c| knew - c))
        }
        _ => (End::Failed, None),
    })
}

/// Reads the stream at `path` until an event whose data is `done`; reopens a stream that
/// breaks (with `Last-Event-ID`).
async fn follow<T: serde::de::DeserializeOwned>(
    ctx: &Ctx,
    path: &str,
    token: &str,
    requests: &mut u64,
    done: impl Fn(&T) -> bool,
) -> anyhow::Result<(T, u64)> {
    let mut last_id: Option<String> = None;
    let mut read = 0;
    loop {
        let mut res = send(
            || {
                let req = ctx.http.get(path).bearer_auth(token);
                match &last_id {
                    Some(id) => req.header("Last-Event-ID", id.as_str()),
                    None => req,
                }
            },
            requests,
        )
        .await?;
        anyhow::ensure!(res.status() == 200, "stream {path}: {}", res.status());
        let mut buf = String::new();
        while let Some(chunk) = res.chunk().await.unwrap_or(None) {
            buf.push_str(std::str::from_utf8(&chunk)?);
            while let Some(end) = buf.find("\n\n") {
                let block: String = buf.drain(..end + 2).collect();
                let mut data = None;
                for line in block.lines() {
                    if let Some(id) = line.strip_prefix("id: ") {
                        last_id = Some(id.to_owned());
                    } else if let Some(d) = line.strip_prefix("data: ") {
                        data = Some(d.to_owned());
                    }
                }
                if let Some(d) = data {
                    ctx.events.fetch_add(1, Ordering::Relaxed);
                    read += 1;
                    let value: T = serde_json::from_str(&d)?;
                    if done(&value) {
                        return Ok((value, read));
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
