//! Reads a product's waiting room from Redis (`adm`, `qdone`, `q`, the meta hash's
//! `wr_factor`) for checks 13-15.

use super::checks::RoomRedis;
use anyhow::Context;
use redis::AsyncCommands;
use seckill_shared::store::TicketStore;
use seckill_shared::ProductId;

fn user(s: &str, key: &str) -> anyhow::Result<u64> {
    s.parse()
        .with_context(|| format!("{key} holds {s:?}, not a user id"))
}

/// The product's waiting room in Redis; `None` when its meta hash has no `wr_factor` (no
/// waiting room, or Redis lost the product).
pub async fn read(store: &TicketStore, product: ProductId) -> anyhow::Result<Option<RoomRedis>> {
    let k = store.keys(product);
    let mut c = store.connection();
    let factor: Option<String> = c
        .hget(k.meta(), "wr_factor")
        .await
        .context("reading wr_factor")?;
    let Some(factor) = factor else {
        return Ok(None);
    };
    let mut room = RoomRedis {
        factor: Some(factor),
        ..Default::default()
    };
    let adm = k.admitted();
    let admitted: Vec<(String, f64)> = c
        .zrange_withscores(&adm, 0, -1)
        .await
        .with_context(|| format!("reading {adm}"))?;
    for (u, until) in admitted {
        room.admitted.insert(user(&u, &adm)?, until as i64);
    }
    let done = k.queue_done();
    let states: Vec<(String, String)> = c
        .hgetall(&done)
        .await
        .with_context(|| format!("reading {done}"))?;
    for (u, state) in states {
        room.done.insert(user(&u, &done)?, state);
    }
    let q = k.queue();
    let line: Vec<String> = c
        .zrange(&q, 0, -1)
        .await
        .with_context(|| format!("reading {q}"))?;
    for u in line {
        room.queue.insert(user(&u, &q)?);
    }
    Ok(Some(room))
}
