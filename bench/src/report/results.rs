//! What a run folder holds: each figure's result, read from its file, and in [`auth`] what
//! buyer authentication costs.

mod auth;

pub use auth::{read_criterion_us, AuthCpu, AuthRound, RoundDiffs};

use super::inputs::{self, Ceiling, Drain, LoadRun, MarkerCount, RedisCheck, RedisRun, WrkRun};
use anyhow::Context;
use serde::de::DeserializeOwned;
use std::path::Path;

pub(super) fn read_json<T: DeserializeOwned>(path: &Path) -> anyhow::Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Everything a run folder holds; `None` for what is missing or does not parse.
#[derive(Debug, Clone, Default)]
pub struct Results {
    pub f1: Option<LoadRun>,
    /// (1) paced at (2L)'s accept rate: the floor at the accept path's load.
    pub f1r: Option<LoadRun>,
    pub wrk: Option<WrkRun>,
    pub f2: Option<LoadRun>,
    pub f2n: Option<LoadRun>,
    pub f2e: Option<LoadRun>,
    pub f2l: Option<LoadRun>,
    /// (2L) at a concurrency that saturates the machine (`BENCH_SAT_CONCURRENCY`).
    pub f2s: Option<LoadRun>,
    pub f3: Option<LoadRun>,
    pub marker: Option<MarkerCount>,
    pub f4: Option<LoadRun>,
    pub f5: Option<RedisRun>,
    pub f6: Option<Drain>,
    pub f7: Option<Ceiling>,
    pub f8: Option<Drain>,
    pub f9: Option<LoadRun>,
    pub f9l: Option<LoadRun>,
    /// What authentication costs the gateway: (2), (2N), (2E) (see [`AuthCpu::load`]).
    pub auth: AuthCpu,
}

impl Results {
    /// Requests (or rows) of a figure, by its file name (`f2`, `wrk`, …), for the CPU table.
    pub fn requests(&self, name: &str) -> Option<u64> {
        let load = |f: &Option<LoadRun>| f.as_ref().map(|x| x.requests);
        match name {
            "f1" => load(&self.f1),
            "f1r" => load(&self.f1r),
            "wrk" => self.wrk.as_ref().map(|x| x.requests),
            "f2" => load(&self.f2),
            "f2n" => load(&self.f2n),
            "f2e" => load(&self.f2e),
            "f2l" => load(&self.f2l),
            "f2s" => load(&self.f2s),
            "f3" => load(&self.f3),
            "f4" => load(&self.f4),
            "f5" => self.f5.as_ref().map(|x| x.requests),
            "f6" => self.f6.as_ref().map(|x| x.rows),
            "f7" => self.f7.as_ref().map(|x| x.rows),
            "f8" => self.f8.as_ref().map(|x| x.rows),
            "f9" => load(&self.f9),
            "f9l" => load(&self.f9l),
            _ => None,
        }
    }

    pub fn load(dir: &Path) -> Self {
        fn json<T: DeserializeOwned>(dir: &Path, name: &str) -> Option<T> {
            read_json(&dir.join(name)).ok()
        }
        let text = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
        let f5 = (|| {
            let (rps, p99_ms) = inputs::parse_redis_csv(&text("f5.csv")?)?;
            let c: RedisCheck = json(dir, "f5-check.json")?;
            Some(RedisRun {
                rps,
                p99_ms,
                requests: c.requests,
                stock_before: c.stock_before,
                stock_after: c.stock_after,
            })
        })();
        Self {
            f1: json(dir, "f1.json"),
            f1r: json(dir, "f1r.json"),
            wrk: text("wrk.txt").and_then(|t| inputs::parse_wrk(&t)),
            f2: json(dir, "f2.json"),
            f2n: json(dir, "f2n.json"),
            f2e: json(dir, "f2e.json"),
            f2l: json(dir, "f2l.json"),
            f2s: json(dir, "f2s.json"),
            f3: json(dir, "f3.json"),
            marker: json(dir, "f3-marker.json"),
            f4: json(dir, "f4.json"),
            f5,
            f6: json(dir, "f6.json"),
            f7: json(dir, "f7.json"),
            f8: json(dir, "f8.json"),
            f9: json(dir, "f9.json"),
            f9l: json(dir, "f9l.json"),
            auth: AuthCpu::default(),
        }
    }
}
