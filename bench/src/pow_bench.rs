//! `seckill-bench pow`: what the waiting room's proof of work costs a buyer, and what it
//! takes from a bot.
//!
//! 1. **Solve times on this machine**: the median and p90 time to solve a challenge at each
//!    difficulty, with the solver the load tool uses (`waiting_room::pow::solve`, one thread),
//!    and the hashes per second it reached.
//! 2. **A bot against humans**, simulated (event by event, not with real clocks): a bot holding
//!    `--bot-accounts` accounts and `--bot-cores` cores against `--humans` buyers, for
//!    `--units` units, with and without a challenge of the difficulty that costs a human about
//!    1 s at `--human-hashes-per-sec`. The bot hashes at the rate measured in (1) per core.
//!    Two rooms: one that opens at the start (first come, first served: speed wins), and one
//!    that opens `--window-secs` before it (a random draw among the early joiners: the number
//!    of accounts wins). The share of the admissions (the first `--units` places) the bot
//!    holds, averaged over `--rounds` seeds.
//! 3. **The gateway's CPU per verified join** (with `--gateway`): `--joins` joins of a room
//!    without a proof of work, then as many asked for in a room with one (each answered `428`
//!    with a challenge) and as many with the solutions (0 bits, so the client does no work),
//!    in `--cost-rounds` alternated rounds; CPU time per request of the gateway (and of Redis, with
//!    `--redis-pid`) from `/proc/PID/stat`.

use anyhow::Context;
use clap::Args;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use seckill_shared::waiting_room::pow;
use std::time::Instant;

#[derive(Debug, Args)]
pub struct PowArgs {
    /// The least difficulty timed (leading zero bits).
    #[arg(long, default_value_t = 8)]
    pub bits_from: u8,
    /// The greatest difficulty timed.
    #[arg(long, default_value_t = 22)]
    pub bits_to: u8,
    /// The hashes per second of a buyer's device, for the difficulty that costs a human about
    /// 1 s. The default is the buyer's page's solver in headless Chromium on the 2-core
    /// development machine (0.59 to 0.76 million, 22-bit challenges, 2026-12-07).
    #[arg(long, default_value_t = 700_000.0)]
    pub human_hashes_per_sec: f64,
    #[arg(long, default_value_t = 5_000)]
    pub humans: usize,
    #[arg(long, default_value_t = 500)]
    pub bot_accounts: usize,
    /// The bot's cores, one simulation each (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    pub bot_cores: Vec<usize>,
    #[arg(long, default_value_t = 500)]
    pub units: usize,
    /// How long before the start the second room opens.
    #[arg(long, default_value_t = 60.0)]
    pub window_secs: f64,
    /// Humans click within this many seconds of the room opening at the start (uniformly).
    #[arg(long, default_value_t = 3.0)]
    pub rush_secs: f64,
    /// The simulated rooms that adapt the difficulty to demand: `max_bits` is the human's
    /// bits plus this, and `target_joins_per_sec` the next option.
    #[arg(long, default_value_t = 4)]
    pub adaptive_extra_bits: u8,
    #[arg(long, default_value_t = 200.0)]
    pub adaptive_target: f64,
    /// Simulations per case, each with its own seed.
    #[arg(long, default_value_t = 20)]
    pub rounds: u64,
    /// Write the figures as JSON here too.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// A running gateway: measure its CPU per verified join (needs `--gateway-pid`,
    /// `--admin-token` and `--jwt-secret`).
    #[arg(long, value_name = "URL", requires_all = ["gateway_pid", "admin_token", "jwt_secret"])]
    pub gateway: Option<String>,
    #[arg(long, value_name = "PID")]
    pub gateway_pid: Option<u32>,
    #[arg(long, value_name = "PID")]
    pub redis_pid: Option<u32>,
    #[arg(long, env = "SECKILL_ADMIN_TOKEN", hide_env_values = true, value_parser = crate::args::secret)]
    pub admin_token: Option<secrecy::SecretString>,
    #[arg(long, env = "SECKILL_AUTH_HS256_SECRET", hide_env_values = true, value_parser = crate::args::secret)]
    pub jwt_secret: Option<secrecy::SecretString>,
    /// Joins per kind and round.
    #[arg(long, default_value_t = 20_000)]
    pub joins: u64,
    /// Rounds of the three kinds, alternated.
    #[arg(long, default_value_t = 3)]
    pub cost_rounds: u32,
    /// Clock ticks per second of `/proc/PID/stat` (`getconf CLK_TCK`).
    #[arg(long, default_value_t = 100)]
    pub clk_tck: u64,
}

/// CPU time per request (µs) of one kind of join, summed over the rounds.
#[derive(Debug, Default, serde::Serialize)]
pub struct JoinCost {
    pub kind: &'static str,
    pub requests: u64,
    pub gateway_us: f64,
    pub redis_us: Option<f64>,
    /// The gateway's µs per request in each round, to see the noise.
    pub gateway_us_by_round: Vec<f64>,
}

/// The solve times at one difficulty.
#[derive(Debug, serde::Serialize)]
pub struct SolveTimes {
    pub bits: u8,
    pub samples: usize,
    pub median_ms: f64,
    pub p90_ms: f64,
}

/// One simulated case: the bot's share of the admissions with and without a challenge.
#[derive(Debug, serde::Serialize)]
pub struct BotCase {
    pub room: &'static str,
    pub bot_cores: usize,
    pub share_without: f64,
    pub share_with: f64,
    /// Whether the difficulty followed the joins asked for per second (else fixed at the
    /// human's bits).
    pub adaptive: bool,
    /// The bot's places among the admitted, with a challenge (mean).
    pub bot_admitted_with: f64,
}

#[derive(Debug, serde::Serialize)]
pub struct Figures {
    pub solve: Vec<SolveTimes>,
    pub native_hashes_per_sec: f64,
    pub human_hashes_per_sec: f64,
    /// The difficulty that costs a human about 1 s.
    pub human_bits: u8,
    pub human_median_ms: f64,
    pub cases: Vec<BotCase>,
    /// With `--gateway`: a join without a proof of work, the one that asks for a challenge,
    /// and the one that brings the solution.
    pub join_costs: Vec<JoinCost>,
}

pub async fn run(args: PowArgs) -> anyhow::Result<bool> {
    anyhow::ensure!(
        args.bits_from <= args.bits_to && args.bits_to <= pow::MAX_BITS,
        "--bits-from must not be above --bits-to, nor that above {}",
        pow::MAX_BITS
    );
    anyhow::ensure!(
        args.human_hashes_per_sec > 0.0 && args.units > 0 && args.rounds > 0,
        "--human-hashes-per-sec, --units and --rounds must be above 0"
    );
    let (solve, native) = tokio::task::spawn_blocking({
        let (from, to) = (args.bits_from, args.bits_to);
        move || time_solves(from, to)
    })
    .await?;
    println!("solve times, one thread of this machine ({native:.0} hashes/s):");
    for s in &solve {
        println!(
            "  {:>2} bits: median {:>9.2} ms, p90 {:>9.2} ms ({} challenges)",
            s.bits, s.median_ms, s.p90_ms, s.samples
        );
    }
    // The bits whose expected work is closest to one second of the human's device.
    let human_bits = (0..=pow::MAX_BITS)
        .min_by_key(|b| {
            let secs = 2f64.powi(i32::from(*b)) / args.human_hashes_per_sec;
            (secs.ln().abs() * 1e6) as u64
        })
        .unwrap_or(0);
    // The median of a geometric number of tries: ln 2 / p.
    let human_median_ms = std::f64::consts::LN_2 * 2f64.powi(i32::from(human_bits))
        / args.human_hashes_per_sec
        * 1000.0;
    println!(
        "a human's device at {:.0} hashes/s: {human_bits} bits, median {human_median_ms:.0} ms",
        args.human_hashes_per_sec
    );
    let mut cases = Vec::new();
    let fixed = Work {
        min: human_bits,
        max: human_bits,
        target: f64::INFINITY,
    };
    let adaptive = Work {
        min: human_bits,
        max: human_bits
            .saturating_add(args.adaptive_extra_bits)
            .min(pow::MAX_BITS),
        target: args.adaptive_target,
    };
    println!(
        "{} humans, a bot with {} accounts, {} units; adaptive: {} to {} bits, one more per doubling past {} joins/s:",
        args.humans, args.bot_accounts, args.units, adaptive.min, adaptive.max, adaptive.target
    );
    for (room, work) in [
        (Room::OpensAtStart, fixed),
        (Room::OpensAtStart, adaptive),
        (Room::OpensBefore, fixed),
        (Room::OpensBefore, adaptive),
    ] {
        for &cores in &args.bot_cores {
            let case = simulate(&args, room, cores.max(1), work, native);
            println!(
                "  {:<28} {:<8} bot with {:>2} cores: {:>5.1} % of the admissions without a challenge, {:>5.1} % with ({:.0} places); {}",
                room.name(),
                if case.adaptive { "adaptive" } else { "fixed" },
                case.bot_cores,
                case.share_without * 100.0,
                case.share_with * 100.0,
                case.bot_admitted_with,
                fall(case.share_without, case.share_with),
            );
            cases.push(case);
        }
    }
    let join_costs = match &args.gateway {
        Some(gw) => gateway_costs(&args, gw).await?,
        None => Vec::new(),
    };
    let figures = Figures {
        join_costs,
        solve,
        native_hashes_per_sec: native,
        human_hashes_per_sec: args.human_hashes_per_sec,
        human_bits,
        human_median_ms,
        cases,
    };
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&figures)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(true)
}

/// Utime + stime of `pid`, in clock ticks.
fn ticks(pid: u32) -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    crate::queue_bench::report::cpu_ticks_of_stat(&stat).context("no CPU times in /proc/PID/stat")
}

/// Part 3: the gateway's CPU per join of each kind.
async fn gateway_costs(args: &PowArgs, gw: &str) -> anyhow::Result<Vec<JoinCost>> {
    use crate::load::buyer_token::{SigningKey, TokenIssuer};
    use futures::StreamExt;
    let base = gw.trim_end_matches('/');
    let (Some(gw_pid), Some(admin), Some(secret)) =
        (args.gateway_pid, &args.admin_token, &args.jwt_secret)
    else {
        anyhow::bail!("--gateway needs --gateway-pid, --admin-token and --jwt-secret");
    };
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(usize::MAX)
        .build()?;
    let admin = crate::admin::Admin {
        http: &http,
        base,
        token: admin,
    };
    let later = chrono::Utc::now() + chrono::Duration::hours(1);
    let room = |pow: Option<serde_json::Value>| {
        let mut w = serde_json::json!({"admit_per_sec": 1});
        if let Some(p) = pow {
            w["pow"] = p;
        }
        serde_json::json!({"name": "pow bench", "stock": 1, "starts_at": later.to_rfc3339(), "waiting_room": w})
    };
    let issuer = TokenIssuer::new(
        SigningKey::Hs256(secret),
        None,
        None,
        std::time::Duration::from_secs(3600),
    )?;
    let mut costs = vec![
        JoinCost {
            kind: "join, no proof of work",
            ..Default::default()
        },
        JoinCost {
            kind: "join asking for a challenge (428)",
            ..Default::default()
        },
        JoinCost {
            kind: "join with its solution (202)",
            ..Default::default()
        },
    ];
    let mut redis_ticks = [0u64; 3];
    let mut next_user = 1_000_000u64;
    let hz = args.clk_tck.max(1) as f64;
    for _round in 0..args.cost_rounds.max(1) {
        let free = admin.product(room(None)).await?;
        let guarded = admin
            .product(room(Some(
                serde_json::json!({"min_bits": 0, "max_bits": 0}),
            )))
            .await?;
        // (user, token) of this round's buyers: one set for the free room, one for the other.
        let mut buyers = |n: u64| -> anyhow::Result<Vec<(u64, String)>> {
            let users: Vec<u64> = (next_user..next_user + n).collect();
            next_user += n;
            users
                .into_iter()
                .map(|u| Ok((u, issuer.sign(u)?)))
                .collect()
        };
        let free_buyers = buyers(args.joins)?;
        let guarded_buyers = buyers(args.joins)?;
        // Sends one join per buyer, 64 at a time; the answers' (status, body).
        let joins = |product: u64, reqs: Vec<(String, Option<String>)>| {
            let http = http.clone();
            let url = format!("{base}/v1/seckill/{product}/queue");
            async move {
                futures::stream::iter(reqs)
                    .map(|(token, solution)| {
                        let mut req = http.post(&url).bearer_auth(token);
                        if let Some(s) = solution {
                            req = req.header(pow::HEADER, s);
                        }
                        async move {
                            let res = req.send().await?;
                            let status = res.status().as_u16();
                            Ok::<_, anyhow::Error>((status, res.bytes().await?))
                        }
                    })
                    .buffered(64)
                    .collect::<Vec<_>>()
                    .await
                    .into_iter()
                    .collect::<anyhow::Result<Vec<_>>>()
            }
        };
        let measure = |i: usize,
                       before: (u64, Option<u64>),
                       costs: &mut Vec<JoinCost>,
                       redis_ticks: &mut [u64; 3]|
         -> anyhow::Result<()> {
            let g = ticks(gw_pid)? - before.0;
            let us = g as f64 / hz * 1e6 / args.joins as f64;
            costs[i].requests += args.joins;
            costs[i].gateway_us += g as f64;
            costs[i].gateway_us_by_round.push(us);
            if let (Some(pid), Some(r)) = (args.redis_pid, before.1) {
                redis_ticks[i] += ticks(pid)? - r;
            }
            Ok(())
        };
        let snap = || -> anyhow::Result<(u64, Option<u64>)> {
            Ok((ticks(gw_pid)?, args.redis_pid.map(ticks).transpose()?))
        };

        let before = snap()?;
        let answers = joins(
            free,
            free_buyers.iter().map(|(_, t)| (t.clone(), None)).collect(),
        )
        .await?;
        measure(0, before, &mut costs, &mut redis_ticks)?;
        anyhow::ensure!(
            answers.iter().all(|(s, _)| *s == 202),
            "a free join was not 202"
        );

        let before = snap()?;
        let answers = joins(
            guarded,
            guarded_buyers
                .iter()
                .map(|(_, t)| (t.clone(), None))
                .collect(),
        )
        .await?;
        measure(1, before, &mut costs, &mut redis_ticks)?;
        let mut solved = Vec::with_capacity(answers.len());
        for ((_, token), (status, body)) in guarded_buyers.iter().zip(&answers) {
            anyhow::ensure!(*status == 428, "asking for a challenge: {status}");
            let c = serde_json::from_slice::<seckill_shared::api::ErrorBody>(body)?
                .challenge
                .context("a 428 without a challenge")?;
            solved.push((token.clone(), Some(pow::solve(&c.token, c.bits))));
        }
        let before = snap()?;
        let answers = joins(guarded, solved).await?;
        measure(2, before, &mut costs, &mut redis_ticks)?;
        anyhow::ensure!(
            answers.iter().all(|(s, _)| *s == 202),
            "a solved join was not 202"
        );
    }
    println!(
        "the gateway's CPU per request ({} joins of each kind, in {} alternated rounds):",
        costs[0].requests, args.cost_rounds
    );
    for (c, r) in costs.iter_mut().zip(redis_ticks) {
        c.gateway_us = c.gateway_us / hz * 1e6 / c.requests as f64;
        c.redis_us = args
            .redis_pid
            .map(|_| r as f64 / hz * 1e6 / c.requests as f64);
        println!(
            "  {:<36} gateway {:>6.1} µs (rounds {:?}){}",
            c.kind,
            c.gateway_us,
            c.gateway_us_by_round
                .iter()
                .map(|u| (u * 10.0).round() / 10.0)
                .collect::<Vec<_>>(),
            c.redis_us
                .map_or(String::new(), |r| format!(", Redis {r:.1} µs"))
        );
    }
    println!(
        "  a solved join ÷ a join without proof of work: gateway {:.2} x, {:+.1} µs",
        costs[2].gateway_us / costs[0].gateway_us,
        costs[2].gateway_us - costs[0].gateway_us
    );
    Ok(costs)
}

fn fall(without: f64, with: f64) -> String {
    if with > 0.0 {
        format!("{:.1} x less", without / with)
    } else {
        "none won".into()
    }
}

/// Times the load tool's solver at each difficulty: (times, hashes per second overall).
fn time_solves(from: u8, to: u8) -> (Vec<SolveTimes>, f64) {
    let key = b"bench";
    let (mut hashes, mut secs) = (0u64, 0f64);
    let mut out = Vec::new();
    for bits in from..=to {
        // About 2^24 hashes per difficulty, at least 32 challenges and at most 200.
        let samples = (1usize << 24 >> bits).clamp(32, 200);
        let mut times: Vec<f64> = (0..samples)
            .map(|i| {
                let token = pow::Challenge {
                    product: seckill_shared::ProductId::new(1).expect("1 is an id"),
                    user: seckill_shared::UserId::new(i as u64 + 1).expect("an id"),
                    expires_at_ms: i64::MAX,
                    bits,
                    nonce: rand::random(),
                }
                .token(key);
                let started = Instant::now();
                let solved = pow::solve(&token, bits);
                let took = started.elapsed().as_secs_f64();
                let n: u64 = solved
                    .rsplit_once(':')
                    .and_then(|(_, n)| n.parse().ok())
                    .unwrap_or(0);
                hashes += n + 1;
                secs += took;
                took * 1000.0
            })
            .collect();
        times.sort_by(f64::total_cmp);
        out.push(SolveTimes {
            bits,
            samples,
            median_ms: times[samples / 2],
            p90_ms: times[samples * 9 / 10],
        });
    }
    (out, hashes as f64 / secs.max(1e-9))
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Room {
    /// Opens at the start: places in arrival order.
    OpensAtStart,
    /// Opens `--window-secs` before the start: those who join before it get random places.
    OpensBefore,
}

impl Room {
    fn name(self) -> &'static str {
        match self {
            Room::OpensAtStart => "room opens at the start:",
            Room::OpensBefore => "room opens before the start:",
        }
    }
}

/// The tries a challenge of `bits` takes: geometric, with success 2^-bits per try.
fn tries(rng: &mut StdRng, bits: u8) -> f64 {
    let p = 2f64.powi(-i32::from(bits));
    if p >= 1.0 {
        return 1.0;
    }
    let u: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
    (u.ln() / (1.0 - p).ln()).ceil().max(1.0)
}

/// A room's proof of work: its bits follow the joins asked for over the last second.
#[derive(Debug, Clone, Copy)]
struct Work {
    min: u8,
    max: u8,
    target: f64,
}

/// The bot's share of the admissions, with and without a challenge.
fn simulate(args: &PowArgs, room: Room, cores: usize, work: Work, bot_rate: f64) -> BotCase {
    let (mut without, mut with, mut in_time) = (0.0, 0.0, 0.0);
    for round in 0..args.rounds {
        let mut rng = StdRng::seed_from_u64(round * 1_000 + cores as u64);
        let (share, _) = sale(args, room, &mut rng, cores, None, bot_rate);
        without += share;
        let (share, bot_in) = sale(args, room, &mut rng, cores, Some(work), bot_rate);
        with += share;
        in_time += bot_in as f64;
    }
    let n = args.rounds as f64;
    BotCase {
        room: room.name(),
        bot_cores: cores,
        share_without: without / n,
        share_with: with / n,
        adaptive: work.min != work.max,
        bot_admitted_with: in_time / n,
    }
}

/// One sale: (the bot's share of the first `units` places, the bot's places among them).
/// Times are seconds from the start.
fn sale(
    args: &PowArgs,
    room: Room,
    rng: &mut StdRng,
    cores: usize,
    work: Option<Work>,
    bot_rate: f64,
) -> (f64, usize) {
    let opens = match room {
        Room::OpensAtStart => 0.0,
        Room::OpensBefore => -args.window_secs,
    };
    // (sort key, is the bot): before the start a uniformly random place, after it arrival
    // order behind every early joiner.
    let place = |rng: &mut StdRng, joined_at: f64| {
        if joined_at < 0.0 {
            rng.random::<f64>()
        } else {
            2.0 + joined_at
        }
    };
    let mut line: Vec<(f64, bool)> = Vec::with_capacity(args.humans + args.bot_accounts);
    let mut clicks: Vec<f64> = (0..args.humans)
        .map(|_| match room {
            Room::OpensAtStart => rng.random_range(0.0..args.rush_secs),
            Room::OpensBefore => rng.random_range(opens..0.0),
        })
        .collect();
    clicks.sort_by(f64::total_cmp);
    // Every challenge asked for: the humans' clicks, and the bot's asks as they come.
    let mut bot_asks: Vec<f64> = Vec::new();
    // The bits of a challenge asked for at `t`: from the asks over the last second.
    let bits_at = |t: f64, bot_asks: &[f64], w: Work| {
        let humans =
            clicks.partition_point(|&c| c <= t) - clicks.partition_point(|&c| c <= t - 1.0);
        let bots = bot_asks.iter().filter(|&&a| a > t - 1.0 && a <= t).count();
        pow::difficulty((humans + bots) as f64, w.min, w.max, w.target)
    };
    for &click in &clicks {
        let at = match work {
            None => click,
            Some(w) => click + tries(rng, bits_at(click, &bot_asks, w)) / args.human_hashes_per_sec,
        };
        let p = place(rng, at);
        line.push((p, false));
    }
    // The bot's cores solve one challenge after another from the opening; without a
    // challenge every account joins at the opening (plus 10 ms to send them all).
    let mut free_at = vec![opens; cores];
    for _ in 0..args.bot_accounts {
        let at = match work {
            None => opens + 0.01,
            Some(w) => {
                let core = (0..cores)
                    .min_by(|a, b| free_at[*a].total_cmp(&free_at[*b]))
                    .unwrap_or(0);
                let asked = free_at[core];
                let bits = bits_at(asked, &bot_asks, w);
                bot_asks.push(asked);
                free_at[core] += tries(rng, bits) / bot_rate;
                free_at[core]
            }
        };
        let p = place(rng, at);
        line.push((p, true));
    }
    line.sort_by(|a, b| a.0.total_cmp(&b.0));
    let admitted = &line[..args.units.min(line.len())];
    let bot = admitted.iter().filter(|(_, b)| *b).count();
    (bot as f64 / admitted.len().max(1) as f64, bot)
}

/// The `Seckill-Pow` value that answers a `428 challenge_required` body, solved off the async
/// threads; `None` when the body holds no challenge.
pub async fn answer_challenge(body: &[u8]) -> Option<String> {
    let c = serde_json::from_slice::<seckill_shared::api::ErrorBody>(body)
        .ok()?
        .challenge?;
    tokio::task::spawn_blocking(move || pow::solve(&c.token, c.bits))
        .await
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> PowArgs {
        PowArgs {
            bits_from: 8,
            bits_to: 8,
            human_hashes_per_sec: 1_000_000.0,
            humans: 1_000,
            bot_accounts: 100,
            bot_cores: vec![1],
            units: 100,
            window_secs: 60.0,
            rush_secs: 3.0,
            rounds: 4,
            adaptive_extra_bits: 4,
            adaptive_target: 200.0,
            json: None,
            gateway: None,
            gateway_pid: None,
            redis_pid: None,
            admin_token: None,
            jwt_secret: None,
            joins: 1,
            cost_rounds: 1,
            clk_tck: 100,
        }
    }

    #[test]
    fn without_a_challenge_the_fast_bot_wins_a_rush_and_its_share_of_a_draw() {
        let a = args();
        let w = Work {
            min: 20,
            max: 20,
            target: f64::INFINITY,
        };
        let rush = simulate(&a, Room::OpensAtStart, 1, w, 4_000_000.0);
        assert!(rush.share_without > 0.9, "{rush:?}");
        // A challenge of about 1 s for a human: one core gets a handful of accounts in.
        assert!(rush.share_with < rush.share_without / 10.0, "{rush:?}");
        let draw = simulate(&a, Room::OpensBefore, 1, w, 4_000_000.0);
        // 100 of 1,100 places drawn at random.
        assert!(
            (draw.share_without - 100.0 / 1_100.0).abs() < 0.04,
            "{draw:?}"
        );
    }

    #[test]
    fn tries_follow_the_difficulty() {
        let mut rng = StdRng::seed_from_u64(1);
        let mean = (0..20_000).map(|_| tries(&mut rng, 10)).sum::<f64>() / 20_000.0;
        assert!((mean / 1024.0 - 1.0).abs() < 0.05, "{mean}");
        assert_eq!(tries(&mut rng, 0), 1.0);
    }
}
