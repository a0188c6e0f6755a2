//! `seckill-bench report`: the results of `scripts/bench.sh`, from its run folder.
//!
//! - `report table`: one row per figure, each with its value, its ratio to the ceiling it is
//!   measured against, its goal and whether the goal is met. A figure counts only when its run
//!   was valid ([`rules`]): otherwise it is INVALID with the reason, and a ratio that needs it
//!   is not judged. Below the table, the drain details and the CPU time per request by process
//!   ([`cpu`]). With `--doc`, the block between the `bench:begin` and `bench:end` markers of
//!   that file is rewritten. Exits 1 when a figure's run is invalid. With `--plots`, each
//!   figure's time series is linked from the table and shown under it ([`plots`]).
//! - `report outcome`: one number of a `load --json` summary, for the script.

pub mod cpu;
pub mod inputs;
pub mod plots;
pub mod rules;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use inputs::{Ceiling, Drain, LoadRun, MarkerCount, RedisCheck, RedisRun, WrkRun};
use rules::{Goal, Mark, Validity};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    #[command(subcommand)]
    pub command: ReportCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum ReportCommand {
    /// The results table of a `scripts/bench.sh` run folder; exits 1 when a figure's run is
    /// invalid.
    Table(TableArgs),
    /// Print one number of a `load --json` summary (0 when the outcome did not occur).
    Outcome(OutcomeArgs),
}

#[derive(Debug, Clone, Args)]
pub struct TableArgs {
    /// The run folder (`.dev/bench/<run>`).
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,

    /// The figures the run measured, e.g. "1 1w 2 2L 3": rows of these only, and a missing
    /// result is INVALID.
    #[arg(long, value_name = "LIST")]
    pub figures: String,

    /// The settings line of the results block.
    #[arg(long, default_value = "", value_name = "TEXT")]
    pub settings: String,

    #[arg(long, value_enum, default_value_t = RunMode::Full)]
    pub mode: RunMode,

    /// A note printed under the settings (e.g. that the chaos suite was running).
    #[arg(long, default_value = "", value_name = "TEXT")]
    pub note: String,

    /// Rewrite the results block of this Markdown file (appended when it has none).
    #[arg(long, value_name = "FILE")]
    pub doc: Option<PathBuf>,

    /// A folder of the figures' time series (`f2.svg`, `f2n.svg`, … from `seckill-bench plot
    /// load`): the table links each figure's chart, and the results block shows them. Links
    /// are relative to --doc's folder.
    #[arg(long, value_name = "DIR")]
    pub plots: Option<PathBuf>,

    /// Clock ticks per second of /proc/<pid>/stat (`getconf CLK_TCK`).
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub clk_tck: u64,

    /// (2E)'s goal: what one Ed25519 verify costs on this machine, µs (criterion's
    /// `ed25519/verify` of `cargo bench -p seckill-gateway --bench auth`).
    #[arg(long, value_name = "US", conflicts_with = "ed25519_criterion")]
    pub ed25519_verify_us: Option<f64>,

    /// (2E)'s goal: the same, read from criterion's `estimates.json` of `ed25519/verify`
    /// (`target/criterion/ed25519_verify/new/estimates.json`).
    #[arg(long, value_name = "FILE")]
    pub ed25519_criterion: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RunMode {
    Full,
    Quick,
    Profile,
}

impl RunMode {
    fn describe(self) -> &'static str {
        match self {
            Self::Full => "full run",
            Self::Quick => "quick smoke run (--quick)",
            Self::Profile => "profiled run (--profile): figures perturbed by perf",
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct OutcomeArgs {
    /// A `seckill-bench load --json` output.
    #[arg(long, value_name = "FILE")]
    pub file: PathBuf,

    /// The outcome's label: 202, 200, 201, 409, 4xx, 503, other, error.
    #[arg(long, value_name = "LABEL")]
    pub outcome: String,

    #[arg(long, value_enum, default_value_t = OutcomeField::Count)]
    pub field: OutcomeField,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutcomeField {
    Count,
    PerSec,
    /// Latency percentiles of the outcome, in ms.
    P50Ms,
    P99Ms,
}

/// `Ok(false)` when a figure's run was invalid.
pub fn run(args: ReportArgs) -> anyhow::Result<bool> {
    match args.command {
        ReportCommand::Outcome(a) => {
            let r: LoadRun = read_json(&a.file)?;
            let o = r.outcome(&a.outcome);
            match a.field {
                OutcomeField::Count => println!("{}", o.map_or(0, |o| o.count)),
                OutcomeField::PerSec => println!("{}", o.map_or(0.0, |o| o.per_sec)),
                OutcomeField::P50Ms => println!("{}", o.map_or(0.0, |o| o.p50_ms)),
                OutcomeField::P99Ms => println!("{}", o.map_or(0.0, |o| o.p99_ms)),
            }
            Ok(true)
        }
        ReportCommand::Table(a) => table(&a),
    }
}

fn read_json<T: DeserializeOwned>(path: &Path) -> anyhow::Result<T> {
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

/// The gateway's CPU per request of (2) (HS256 tokens), (2N) (authentication off) and (2E)
/// (EdDSA tokens), round by round, and what one Ed25519 verify costs, for the goals:
/// (2) − (2N) ≤ [`rules::HS256_MAX_US`], (2E) − (2N) ≤ one verify + [`rules::EDDSA_MARGIN_US`].
/// Both are smaller than the spread of a gateway's CPU per request between runs, so they are
/// judged from the rounds ([`rules::rounds_goal`]): round 1 is `f2`, `f2n`, `f2e`; round k
/// is `f2-rk`, `f2n-rk`, `f2e-rk` (`scripts/bench.sh`, BENCH_AUTH_ROUNDS).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuthCpu {
    pub rounds: Vec<AuthRound>,
    /// One Ed25519 verify, µs, and where the number comes from.
    pub ed25519_verify: Option<(f64, String)>,
}

/// One round of (2), (2N) and (2E): each figure's gateway CPU per request, µs, or why its run
/// does not count (`None`: not run).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuthRound {
    pub f2: Option<Result<f64, String>>,
    pub f2n: Option<Result<f64, String>>,
    pub f2e: Option<Result<f64, String>>,
}

/// One figure of a round (its name and accessor, for [`AuthCpu::diffs`]).
type FigureOf = fn(&AuthRound) -> Option<&Result<f64, String>>;

/// The difference of two figures over the rounds: the values of the rounds where both count,
/// and why the others do not.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoundDiffs {
    pub values: Vec<f64>,
    pub left_out: Vec<String>,
}

impl RoundDiffs {
    /// `+3.0 µs`, or with two rounds or more the mean and its interval.
    pub fn text(&self) -> String {
        match (rules::Interval::of(&self.values), self.values.first()) {
            (Some(i), _) => i.text(),
            (None, Some(v)) => format!("{v:+.1} µs (1 round)"),
            (None, None) => "n/a".into(),
        }
    }
}

impl AuthCpu {
    pub fn load(
        dir: &Path,
        r: &Results,
        clk_tck: u64,
        ed25519_verify: Option<(f64, String)>,
    ) -> Self {
        let hs256 = |f: &LoadRun| rules::accept(f, Some("HS256"));
        let none = |f: &LoadRun| rules::accept(f, None);
        let eddsa = |f: &LoadRun| rules::accept(f, Some("EdDSA"));
        let one = |name: &str, run: Option<&LoadRun>, rule: &dyn Fn(&LoadRun) -> Validity| {
            let run = run?;
            Some(rule(run).and_then(|()| {
                cpu::gateway_us(dir, name, Some(run.requests), clk_tck)
                    .ok_or_else(|| format!("no gateway CPU snapshots for {name}"))
            }))
        };
        let mut rounds = vec![AuthRound {
            f2: one("f2", r.f2.as_ref(), &hs256),
            f2n: one("f2n", r.f2n.as_ref(), &none),
            f2e: one("f2e", r.f2e.as_ref(), &eddsa),
        }];
        for k in 2.. {
            let names = [format!("f2-r{k}"), format!("f2n-r{k}"), format!("f2e-r{k}")];
            let runs: Vec<Option<LoadRun>> = names
                .iter()
                .map(|n| read_json(&dir.join(format!("{n}.json"))).ok())
                .collect();
            let logged = names.iter().any(|n| dir.join(format!("{n}.log")).exists());
            if !logged && runs.iter().all(Option::is_none) {
                break;
            }
            // A round that ran has all three figures: a missing result is a run that failed.
            let counted = |i: usize, rule: &dyn Fn(&LoadRun) -> Validity| {
                one(&names[i], runs[i].as_ref(), rule)
                    .or_else(|| Some(Err(format!("{} has no result", names[i]))))
            };
            rounds.push(AuthRound {
                f2: counted(0, &hs256),
                f2n: counted(1, &none),
                f2e: counted(2, &eddsa),
            });
        }
        Self {
            rounds,
            ed25519_verify,
        }
    }

    fn diffs(&self, minuend: (&str, FigureOf), subtrahend: (&str, FigureOf)) -> RoundDiffs {
        let mut d = RoundDiffs::default();
        for (k, round) in self.rounds.iter().enumerate() {
            match (minuend.1(round), subtrahend.1(round)) {
                (Some(Ok(a)), Some(Ok(b))) => d.values.push(a - b),
                (None, _) | (_, None) => {}
                (a, b) => {
                    let why = [(minuend.0, a), (subtrahend.0, b)]
                        .into_iter()
                        .filter_map(|(name, v)| match v {
                            Some(Err(e)) => Some(format!("{name} {e}")),
                            _ => None,
                        })
                        .collect::<Vec<_>>()
                        .join("; ");
                    d.left_out.push(format!("round {}: {why}", k + 1));
                }
            }
        }
        d
    }

    /// (2) − (2N) by round: HS256 verification, µs of gateway CPU per request.
    pub fn hs256(&self) -> RoundDiffs {
        self.diffs(("(2)", |r| r.f2.as_ref()), ("(2N)", |r| r.f2n.as_ref()))
    }

    /// (2E) − (2N) by round: EdDSA verification, µs of gateway CPU per request.
    pub fn eddsa(&self) -> RoundDiffs {
        self.diffs(("(2E)", |r| r.f2e.as_ref()), ("(2N)", |r| r.f2n.as_ref()))
    }

    /// What (2E) − (2N) may be: one Ed25519 verify + [`rules::EDDSA_MARGIN_US`].
    pub fn eddsa_allowed_us(&self) -> Option<f64> {
        self.ed25519_verify
            .as_ref()
            .map(|(v, _)| v + rules::EDDSA_MARGIN_US)
    }
}

/// The cost of one Ed25519 verify, µs, from criterion's `estimates.json` (ns): its slope
/// estimate when it has one, else the mean, as criterion's own summary does.
pub fn read_criterion_us(path: &Path) -> anyhow::Result<f64> {
    #[derive(Deserialize)]
    struct Estimate {
        point_estimate: f64,
    }
    #[derive(Deserialize)]
    struct Estimates {
        mean: Estimate,
        #[serde(default)]
        slope: Option<Estimate>,
    }
    let e: Estimates = read_json(path)?;
    let ns = e.slope.unwrap_or(e.mean).point_estimate;
    anyhow::ensure!(
        ns.is_finite() && ns > 0.0,
        "{}: no positive estimate",
        path.display()
    );
    Ok(ns / 1000.0)
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

/// One row of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub figure: &'static str,
    pub what: String,
    pub value: Option<f64>,
    pub unit: &'static str,
    pub p99_ms: Option<f64>,
    pub ratio: String,
    pub goal: &'static str,
    pub mark: Mark,
}

impl Row {
    pub fn markdown(&self) -> String {
        format!(
            "| {} | {} | {} {} | {} | {} | {} | {} |",
            self.figure,
            self.what,
            fmt(self.value),
            self.unit,
            self.p99_ms.map_or(String::new(), |p| format!("{p:.2} ms")),
            self.ratio,
            self.goal,
            self.mark.cell()
        )
    }
}

/// `1234567.8` → `1,234,568`; below 100, one decimal.
pub fn fmt(x: Option<f64>) -> String {
    let Some(x) = x else {
        return "n/a".into();
    };
    if !x.is_finite() {
        return "n/a".into();
    }
    if x.abs() < 100.0 {
        return format!("{x:.1}");
    }
    thousands(x.round() as i64)
}

pub fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        out.insert(0, '-');
    }
    out
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b != 0.0 => Some(a / b),
        _ => None,
    }
}

fn rt(r: Option<f64>, label: &str) -> String {
    r.map_or("n/a".into(), |r| format!("{r:.2} × {label}"))
}

const NO_RESULT: &str = "no result: see the run's logs";

/// A figure's validity: `None` when it was not run, an error when its result is missing.
fn validity<T>(ran: bool, data: Option<&T>, rule: impl FnOnce(&T) -> Validity) -> Option<Validity> {
    ran.then(|| data.map_or_else(|| Err(NO_RESULT.to_string()), rule))
}

/// The rows of the figures in `figures`, in the table's order.
pub fn rows(r: &Results, figures: &[&str]) -> Vec<Row> {
    let ran = |f: &str| figures.contains(&f);
    let v1 = validity(ran("1"), r.f1.as_ref(), rules::fig1);
    let v1w = validity(ran("1w"), r.wrk.as_ref(), rules::fig1w);
    let hs256 = |f: &LoadRun| rules::accept(f, Some("HS256"));
    let v2 = validity(ran("2"), r.f2.as_ref(), hs256);
    let v2n = validity(ran("2N"), r.f2n.as_ref(), |f| rules::accept(f, None));
    let v2e = validity(ran("2E"), r.f2e.as_ref(), |f| {
        rules::accept(f, Some("EdDSA"))
    });
    let v2l = validity(ran("2L"), r.f2l.as_ref(), hs256);
    let v3 = validity(ran("3"), r.f3.as_ref(), |f| {
        rules::fig3(f, r.marker.as_ref())
    });
    let v4 = validity(ran("4"), r.f4.as_ref(), rules::fig4);
    let v5 = validity(ran("5"), r.f5.as_ref(), rules::fig5);
    let v6 = validity(ran("6"), r.f6.as_ref(), rules::drain);
    let v7 = validity(ran("7"), r.f7.as_ref(), rules::ceiling);
    let v8 = validity(ran("8"), r.f8.as_ref(), rules::drain);
    // (9) and (9L) run at a share of (2)'s rate (`scripts/bench.sh`): an INVALID (2) makes
    // them INVALID too. Without a (2), bench.sh took another base (a peak run, or a set rate).
    let v9 = rules::based_on(
        validity(ran("9"), r.f9.as_ref(), rules::e2e),
        "(2)",
        v2.as_ref(),
    );
    let v9l = rules::based_on(
        validity(ran("9L"), r.f9l.as_ref(), rules::e2e),
        "(2)",
        v2.as_ref(),
    );

    let rate = |f: &Option<LoadRun>, label: &str| {
        f.as_ref().map_or((None, None), |f| {
            let (v, p) = f.rate_of(label);
            (Some(v), p)
        })
    };
    let (val1, p1) = rate(&r.f1, "200");
    let (val2, p2) = rate(&r.f2, "202");
    let (val2n, p2n) = rate(&r.f2n, "202");
    let (val2e, p2e) = rate(&r.f2e, "202");
    let (val2l, p2l) = rate(&r.f2l, "202");
    let (val3, p3) = rate(&r.f3, "409");
    let (val4, p4) = rate(&r.f4, "201");
    let val5 = r.f5.as_ref().and_then(rules::fig5_value);
    let val6 = r.f6.as_ref().and_then(Drain::per_s);
    let val7 = r.f7.as_ref().map(|c| c.rows_per_s);
    let val8 = r.f8.as_ref().and_then(Drain::per_s);
    let met = |x: Option<f64>, goal: f64| x.map(|x| x >= goal);
    // A ratio floor is the faster of the bare-HTTP runs that count, ours (1) or wrk's (1w): a
    // slow load tool must not flatter a ratio. Without a valid one, (1), and the goal is not
    // judged.
    let (floor, floor_name, floor_v) = rules::best_floor(
        (val1, v1.as_ref()),
        (r.wrk.as_ref().map(|w| w.rps), v1w.as_ref()),
    );

    let mut out = Vec::new();
    let mut push =
        |figure: &'static str, v: &Option<Validity>, build: &dyn Fn(&Validity) -> Row| {
            if let Some(v) = v {
                let mut row = build(v);
                row.figure = figure;
                out.push(row);
            }
        };
    let blank = |what: String, mark: Mark| Row {
        figure: "",
        what,
        value: None,
        unit: "",
        p99_ms: None,
        ratio: String::new(),
        goal: "",
        mark,
    };

    push("1", &v1, &|v| Row {
        value: val1,
        unit: "req/s",
        p99_ms: p1,
        ratio: "ceiling".into(),
        ..blank(
            "bare HTTP: `GET /livez` (seckill-bench), `200`s".into(),
            rules::verdict(v, None),
        )
    });
    push("1w", &v1w, &|v| Row {
        value: r.wrk.as_ref().map(|w| w.rps),
        unit: "req/s",
        p99_ms: r.wrk.as_ref().and_then(|w| w.p99_ms),
        ratio: rt(ratio(r.wrk.as_ref().map(|w| w.rps), val1), "(1)"),
        ..blank(
            "bare HTTP: `GET /livez` (wrk)".into(),
            rules::verdict(v, None),
        )
    });
    push("2", &v2, &|v| {
        let x = ratio(val2, floor);
        Row {
            value: val2,
            unit: "req/s",
            p99_ms: p2,
            ratio: rt(x, floor_name),
            goal: "≥ 0.5 × the faster of (1), (1w)",
            ..blank(
                "accept path: `202`, unique users, one HS256 token each".into(),
                rules::verdict(
                    v,
                    Some(Goal {
                        needs: vec![(floor_name, floor_v)],
                        met: met(x, 0.5),
                    }),
                ),
            )
        }
    });
    // Both goals are smaller than the spread of the gateway's CPU per request between runs:
    // once the figures they need count, they are judged from the rounds.
    let by_rounds = |mark: Mark, d: &RoundDiffs, limit: Option<f64>| match (mark, limit) {
        (Mark::Met | Mark::NotMet, Some(limit)) => rules::rounds_goal(&d.values, limit),
        (mark, _) => mark,
    };
    let left_out = |d: &RoundDiffs| {
        if d.left_out.is_empty() {
            String::new()
        } else {
            format!(" (left out: {})", d.left_out.join(", "))
        }
    };
    push("2N", &v2n, &|v| {
        let d = r.auth.hs256();
        let mark = rules::verdict(
            v,
            Some(Goal {
                needs: vec![("(2)", v2.as_ref())],
                met: Some(true),
            }),
        );
        Row {
            value: val2n,
            unit: "req/s",
            p99_ms: p2n,
            ratio: format!(
                "(2) = {}; (2) − (2N) = {} gateway CPU/req{}",
                rt(ratio(val2, val2n), "(2N)"),
                d.text(),
                left_out(&d)
            ),
            goal: "(2) − (2N) ≤ 5 µs gateway CPU/req (95 % interval of 5 rounds)",
            ..blank(
                "(2) with authentication off (`gateway --dev`, `SECKILL_AUTH_MODE=none`), \
                 no tokens"
                    .into(),
                by_rounds(mark, &d, Some(rules::HS256_MAX_US)),
            )
        }
    });
    push("2E", &v2e, &|v| {
        let d = r.auth.eddsa();
        let allowed = r.auth.eddsa_allowed_us();
        let mut mark = rules::verdict(
            v,
            Some(Goal {
                needs: vec![("(2N)", v2n.as_ref())],
                met: allowed.map(|_| true),
            }),
        );
        if allowed.is_none() && mark == Mark::NotJudged("no value".into()) {
            mark = Mark::NotJudged(
                "one Ed25519 verify's cost is unknown (`cargo bench -p seckill-gateway \
                 --bench auth`, or BENCH_ED25519_VERIFY_US)"
                    .into(),
            );
        }
        Row {
            value: val2e,
            unit: "req/s",
            p99_ms: p2e,
            ratio: format!(
                "{}; (2E) − (2N) = {} gateway CPU/req{}{}",
                rt(ratio(val2e, val2n), "(2N)"),
                d.text(),
                allowed.map_or(String::new(), |a| format!(", allowed {a:.1} µs")),
                left_out(&d)
            ),
            goal: "(2E) − (2N) ≤ one Ed25519 verify + 5 µs gateway CPU/req (95 % interval of 5 \
                   rounds)",
            ..blank(
                "(2) with EdDSA tokens (Ed25519 key `ed-1` of a JWKS file)".into(),
                by_rounds(mark, &d, allowed),
            )
        }
    });
    push("2L", &v2l, &|v| Row {
        value: val2l,
        unit: "req/s",
        p99_ms: p2l,
        ratio: rt(ratio(val2l, val2), "(2)"),
        ..blank(
            "(2) with the per-user limit on (5/s)".into(),
            rules::verdict(v, None),
        )
    });
    push("3", &v3, &|v| {
        let x = ratio(val3, floor);
        let share =
            r.f3.as_ref()
                .and_then(|f| rules::marker_share(f, r.marker.as_ref()));
        Row {
            value: val3,
            unit: "req/s",
            p99_ms: p3,
            ratio: rt(x, floor_name),
            goal: "≥ 0.9 × the faster of (1), (1w)",
            ..blank(
                format!(
                    "sold-out path: `409` from the marker ({} marker hits; ≥ 99 % needed)",
                    share.map_or("n/a".into(), |s| format!("{:.1} %", s * 100.0))
                ),
                rules::verdict(
                    v,
                    Some(Goal {
                        needs: vec![(floor_name, floor_v)],
                        met: met(x, 0.9),
                    }),
                ),
            )
        }
    });
    push("4", &v4, &|v| {
        let x = ratio(val2, val4);
        Row {
            value: val4,
            unit: "req/s",
            p99_ms: p4,
            ratio: format!("(2) = {}", rt(x, "(4)")),
            goal: "(2) ≥ 10 × (4)",
            ..blank(
                "sync mode: `201` after the MySQL write".into(),
                rules::verdict(
                    v,
                    Some(Goal {
                        needs: vec![("(2)", v2.as_ref())],
                        met: met(x, 10.0),
                    }),
                ),
            )
        }
    });
    push("5", &v5, &|v| {
        let share = r.f5.as_ref().and_then(rules::reserved_share);
        Row {
            value: val5,
            unit: "reservations/s",
            p99_ms: r.f5.as_ref().and_then(|f| f.p99_ms),
            ratio: format!("(2) = {}", rt(ratio(val2, val5), "(5)")),
            goal: "report",
            ..blank(
                format!(
                    "Redis ceiling: `redis-benchmark` EVALSHA reserve.lua ({} of the calls \
                     reserved a unit; error replies left out)",
                    share.map_or("n/a".into(), |s| format!("{:.1} %", s * 100.0))
                ),
                rules::verdict(v, None),
            )
        }
    });
    let from_start = |d: &Option<Drain>| {
        d.as_ref()
            .and_then(Drain::from_start_per_s)
            .map_or(String::new(), |x| {
                format!("; {}/s counting from the worker's start", fmt(Some(x)))
            })
    };
    let orders = |d: &Option<Drain>| d.as_ref().map_or("?".into(), |d| d.orders.to_string());
    push("6", &v6, &|v| {
        let (r67, r68) = (ratio(val6, val7), ratio(val6, val8));
        Row {
            value: val6,
            unit: "orders/s",
            ratio: format!("{}; {}", rt(r67, "(7)"), rt(r68, "(8)")),
            goal: "≥ 0.5 × (7), ≥ 20 × (8)",
            ..blank(
                format!(
                    "worker drain, batched ({} orders, steady rate{})",
                    orders(&r.f6),
                    from_start(&r.f6)
                ),
                rules::verdict(
                    v,
                    Some(Goal {
                        needs: vec![("(7)", v7.as_ref()), ("(8)", v8.as_ref())],
                        met: r67.zip(r68).map(|(a, b)| a >= 0.5 && b >= 20.0),
                    }),
                ),
            )
        }
    });
    push("7", &v7, &|v| Row {
        value: val7,
        unit: "rows/s",
        p99_ms: r.f7.as_ref().and_then(|c| c.batch_p99_ms),
        ratio: "ceiling".into(),
        ..blank(
            "raw MySQL ceiling: multi-row INSERT loop".into(),
            rules::verdict(v, None),
        )
    });
    push("8", &v8, &|v| Row {
        value: val8,
        unit: "orders/s",
        ratio: "baseline".into(),
        ..blank(
            format!(
                "row-at-a-time worker ({} orders, steady rate{})",
                orders(&r.f8),
                from_start(&r.f8)
            ),
            rules::verdict(v, None),
        )
    });
    let e2e_what = |f: &Option<LoadRun>| {
        let Some(f) = f else {
            return String::new();
        };
        // Leads with ", ": the row reads "end to end: `202` → confirmed, open loop: …".
        let e = f.e2e.clone().unwrap_or_default();
        let rate = match &f.arrival {
            Some(a) => format!(
                "{}: {} req/s offered, {} achieved, at most {} of {} in flight",
                a.model.describe(),
                fmt(a.offered_per_s),
                fmt(Some(a.achieved_per_s)),
                a.max_in_flight,
                a.in_flight_cap
            ),
            None => format!("{} req/s", fmt(Some(f.req_per_s))),
        };
        format!(
            ", {rate}; p50 {:.1} ms ({}/{} tickets confirmed)",
            e.p50_ms, f.tickets.confirmed, f.tickets.issued
        )
    };
    let p99_of = |f: &Option<LoadRun>| {
        f.as_ref()
            .and_then(|f| f.e2e.as_ref())
            .filter(|e| e.count > 0)
            .map(|e| e.p99_ms)
    };
    push("9", &v9, &|v| {
        let p99 = p99_of(&r.f9);
        Row {
            value: p99,
            unit: "ms p99",
            goal: "p99 ≤ 50 ms",
            ..blank(
                format!("end to end: `202` → confirmed{}", e2e_what(&r.f9)),
                rules::verdict(
                    v,
                    Some(Goal {
                        needs: vec![],
                        met: p99.map(|p| p <= 50.0),
                    }),
                ),
            )
        }
    });
    push("9L", &v9l, &|v| Row {
        value: p99_of(&r.f9l),
        unit: "ms p99",
        goal: "(for reference)",
        ..blank(
            format!("(9) at a lower rate{}", e2e_what(&r.f9l)),
            rules::verdict(v, None),
        )
    });
    out
}

/// The drain details under the table.
fn drain_notes(r: &Results) -> Vec<String> {
    let mut notes = Vec::new();
    for (name, d) in [("6", &r.f6), ("8", &r.f8)] {
        let Some(d) = d else { continue };
        notes.push(format!(
            "({name}): {} rows of {} orders ({} answered 202) in {} transactions ({:.2} s \
             settling); steady rate after the first transaction: {} orders/s over {}; from \
             worker start {:.2} s ({} orders/s, incl. {} start-up and group join)",
            d.rows,
            d.orders,
            d.accepted,
            d.batches,
            d.settle_s,
            fmt(d.per_s()),
            d.drain_s().map_or("n/a".into(), |s| format!("{s:.2} s")),
            d.from_start_s(),
            fmt(d.from_start_per_s()),
            d.first
                .map_or("n/a".into(), |f| format!("{:.2} s", f - d.t0)),
        ));
    }
    notes
}

/// The line under the CPU table on what buyer authentication costs the gateway, when (2),
/// (2N) or (2E) ran. `invalid`: the figures whose runs do not count.
fn auth_note(r: &Results, figures: &[&str], invalid: &[&str]) -> Option<String> {
    if !["2", "2N", "2E"].iter().any(|f| figures.contains(f)) {
        return None;
    }
    let a = &r.auth;
    let caveat = |figs: &[&str]| {
        let bad: Vec<String> = figs
            .iter()
            .filter(|f| invalid.contains(f))
            .map(|f| format!("({f})"))
            .collect();
        if bad.is_empty() {
            String::new()
        } else {
            format!(", not judged: {} INVALID", bad.join(" and "))
        }
    };
    let verify = match &a.ed25519_verify {
        Some((v, source)) => format!(
            "{:.1} µs: one verify {v:.2} µs ({source}) + {} µs",
            v + rules::EDDSA_MARGIN_US,
            rules::EDDSA_MARGIN_US
        ),
        None => format!(
            "one Ed25519 verify + {} µs; the verify's cost is unknown: run `cargo bench -p \
             seckill-gateway --bench auth`, then `seckill-bench report table` again with \
             --ed25519-criterion target/criterion/ed25519_verify/new/estimates.json",
            rules::EDDSA_MARGIN_US
        ),
    };
    Some(format!(
        "Buyer authentication, gateway CPU per request, measured in this run in alternated \
         rounds: HS256 (2) − (2N) = {} (goal ≤ {} µs{}); EdDSA (2E) − (2N) = {} (goal ≤ \
         {verify}{}).",
        a.hs256().text(),
        rules::HS256_MAX_US,
        caveat(&["2", "2N"]),
        a.eddsa().text(),
        caveat(&["2E", "2N"]),
    ))
}

/// One Ed25519 verify's cost and where it comes from, from `--ed25519-verify-us` or
/// `--ed25519-criterion`; a criterion file that cannot be read is a warning, not an error.
fn ed25519_verify(a: &TableArgs) -> anyhow::Result<Option<(f64, String)>> {
    if let Some(us) = a.ed25519_verify_us {
        anyhow::ensure!(
            us.is_finite() && us > 0.0,
            "--ed25519-verify-us must be above 0"
        );
        return Ok(Some((us, "as given".into())));
    }
    let Some(path) = &a.ed25519_criterion else {
        return Ok(None);
    };
    match read_criterion_us(path) {
        Ok(us) => {
            let when = std::fs::metadata(path)
                .and_then(|m| m.modified())
                .map_or("?".into(), |t| format!("{} UTC", utc_minutes(t)));
            Ok(Some((
                us,
                format!(
                    "criterion `ed25519/verify`, `{}` of {when}",
                    relative(path).display()
                ),
            )))
        }
        Err(e) => {
            eprintln!("warning: --ed25519-criterion: {e:#}; (2E) is not judged");
            Ok(None)
        }
    }
}

pub const HEADER: &str =
    "| # | figure | value | p99 | ratio | goal | met |\n|---|---|---|---|---|---|---|";

fn table(a: &TableArgs) -> anyhow::Result<bool> {
    anyhow::ensure!(a.dir.is_dir(), "{} is not a run folder", a.dir.display());
    let figures: Vec<&str> = a.figures.split_whitespace().collect();
    let mut results = Results::load(&a.dir);
    results.auth = AuthCpu::load(&a.dir, &results, a.clk_tck, ed25519_verify(a)?);
    let rows = rows(&results, &figures);
    let invalid: Vec<&str> = rows
        .iter()
        .filter(|r| matches!(r.mark, Mark::Invalid(_)))
        .map(|r| r.figure)
        .collect();
    let links = a
        .plots
        .as_deref()
        .map_or_else(Vec::new, |dir| plots::links(dir, a.doc.as_deref(), &rows));
    let table = plots::table(&rows, &links);
    let gallery = plots::gallery(&links);
    let notes = drain_notes(&results);
    let machine = cpu::Machine::read();
    let cpu_table = cpu::table(&a.dir, &results, a.clk_tck, machine.nproc);
    let auth = auth_note(&results, &figures, &invalid);

    println!();
    println!("{table}");
    for n in &notes {
        println!("{n}");
    }
    println!();
    println!("{cpu_table}");
    if let Some(n) = &auth {
        println!();
        println!("{n}");
    }
    if !invalid.is_empty() {
        eprintln!(
            "INVALID: the run of figure(s) {} does not count; see the table",
            invalid.join(", ")
        );
    }

    if let Some(doc) = &a.doc {
        let block = format!(
            "<!-- bench:begin (generated by scripts/bench.sh; edit outside this block) -->\n\
             ## Latest results\n\n\
             {} UTC, {}, on {}: `nproc` = {}, {}, {}.\n\
             Settings: {}.\n\
             {}\n\n\
             {table}\n\n\
             {}\n\n\
             CPU time per request (µs), by process, over each figure's run (`/proc/<pid>/stat`; \
             the load tool\nfrom `time`; \"other\" is everything else that ran, the kernel's \
             softirq work on loopback traffic\nincluded; \"whole machine\" is all of it):\n\n\
             {cpu_table}\n\n\
             {}\
             - Raw results: `{}` (removed by `scripts/dev-down.sh --purge`).\n\n\
             {gallery}\
             <!-- bench:end -->\n",
            utc_minutes(std::time::SystemTime::now()),
            a.mode.describe(),
            machine.host,
            machine.nproc,
            machine.cpu,
            machine.os,
            a.settings,
            a.note,
            notes
                .iter()
                .map(|n| format!("- {n}"))
                .collect::<Vec<_>>()
                .join("\n"),
            auth.as_ref().map_or(String::new(), |n| format!("- {n}\n")),
            relative(&a.dir).display(),
        );
        let text = std::fs::read_to_string(doc).unwrap_or_else(|_| "# Benchmarks\n\n".into());
        std::fs::write(doc, replace_block(&text, &block))
            .with_context(|| format!("writing {}", doc.display()))?;
        eprintln!("wrote {}", doc.display());
    }
    Ok(invalid.is_empty())
}

/// `path` relative to the current directory when it is under it.
fn relative(path: &Path) -> PathBuf {
    let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    std::env::current_dir()
        .ok()
        .and_then(|cwd| abs.strip_prefix(cwd).ok().map(Path::to_path_buf))
        .unwrap_or(abs)
}

/// `text` with its results block replaced by `block`, or `block` appended.
pub fn replace_block(text: &str, block: &str) -> String {
    const BEGIN: &str = "<!-- bench:begin";
    const END: &str = "<!-- bench:end -->";
    match (text.find(BEGIN), text.find(END)) {
        (Some(b), Some(e)) if e > b => {
            let mut tail = &text[e + END.len()..];
            tail = tail.strip_prefix('\n').unwrap_or(tail);
            format!("{}{block}{tail}", &text[..b])
        }
        _ => format!("{}\n\n{block}", text.trim_end()),
    }
}

/// `YYYY-MM-DD HH:MM` in UTC.
pub fn utc_minutes(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::stats::{ArrivalModel, ArrivalStats, E2eLatency, OutcomeStats, TicketTotals};

    fn stats(outcome: &str, count: u64, per_sec: f64) -> OutcomeStats {
        OutcomeStats {
            outcome: outcome.into(),
            count,
            per_sec,
            p50_ms: 1.0,
            p90_ms: 2.0,
            p99_ms: 3.0,
            p999_ms: 4.0,
            max_ms: 5.0,
        }
    }

    fn load(outcomes: &[(&str, u64, f64)]) -> LoadRun {
        let n = outcomes.iter().map(|o| o.1).sum();
        LoadRun {
            requests: n,
            req_per_s: outcomes.iter().map(|o| o.2).sum(),
            outcomes: outcomes.iter().map(|o| stats(o.0, o.1, o.2)).collect(),
            all: stats("all", n, 0.0),
            tickets: TicketTotals::default(),
            e2e: None,
            arrival: None,
            jwt: true,
            jwt_alg: Some("HS256".into()),
        }
    }

    fn mark_of<'a>(rows: &'a [Row], figure: &str) -> &'a Mark {
        &rows.iter().find(|r| r.figure == figure).unwrap().mark
    }

    #[test]
    fn a_ratio_goal_is_met_only_when_both_runs_are_valid() {
        let mut r = Results {
            f1: Some(load(&[("200", 1000, 50_000.0)])),
            f2: Some(load(&[("202", 1000, 30_000.0)])),
            ..Default::default()
        };
        let rows = rows(&r, &["1", "2"]);
        assert_eq!(mark_of(&rows, "2"), &Mark::Met);
        assert_eq!(mark_of(&rows, "1"), &Mark::NoGoal);
        // The ceiling had errors: its 200 rate is the value, and (2) is not judged.
        r.f1 = Some(load(&[("200", 1000, 50_000.0), ("error", 3, 0.1)]));
        let rows = super::rows(&r, &["1", "2"]);
        assert!(matches!(mark_of(&rows, "1"), Mark::Invalid(_)));
        assert_eq!(rows[0].value, Some(50_000.0));
        assert!(matches!(mark_of(&rows, "2"), Mark::NotJudged(_)));
        // (1) not run at all.
        let rows = super::rows(&r, &["2"]);
        assert_eq!(rows.len(), 1);
        assert_eq!(
            mark_of(&rows, "2"),
            &Mark::NotJudged("(1) was not run".into())
        );
    }

    #[test]
    fn sync_mode_with_503s_is_invalid_not_easier_to_beat() {
        let r = Results {
            f2: Some(load(&[("202", 1000, 6000.0)])),
            f4: Some(load(&[("201", 10, 100.0), ("503", 5000, 5000.0)])),
            ..Default::default()
        };
        let rows = rows(&r, &["2", "4"]);
        assert_eq!(rows[1].value, Some(100.0));
        let Mark::Invalid(reason) = mark_of(&rows, "4") else {
            panic!("{rows:?}")
        };
        assert!(reason.contains("503 × 5000"), "{reason}");
        assert!(rows[1]
            .markdown()
            .contains("**INVALID**: answers other than 201"));
    }

    /// An open-loop arrival at the 100/s it offered, never near its in-flight cap.
    fn open_arrival_at_100() -> ArrivalStats {
        ArrivalStats {
            model: ArrivalModel::Open,
            offered_per_s: Some(100.0),
            achieved_per_s: 100.0,
            in_flight_cap: 64,
            max_in_flight: 3,
            lag_p50_ms: None,
            lag_p99_ms: None,
            lag_max_ms: None,
        }
    }

    #[test]
    fn e2e_with_nothing_confirmed_is_invalid_not_met() {
        let mut f9 = load(&[("202", 1000, 100.0)]);
        f9.tickets = TicketTotals {
            issued: 1000,
            confirmed: 0,
            failed: 0,
            unsettled: 1000,
        };
        f9.e2e = Some(E2eLatency::default());
        f9.arrival = Some(open_arrival_at_100());
        let r = Results {
            f9: Some(f9.clone()),
            ..Default::default()
        };
        let rows = rows(&r, &["9"]);
        assert!(matches!(mark_of(&rows, "9"), Mark::Invalid(_)), "{rows:?}");
        assert_eq!(rows[0].value, None);
        // Every ticket confirmed, p99 30 ms: met.
        f9.tickets.confirmed = 1000;
        f9.tickets.unsettled = 0;
        f9.e2e = Some(E2eLatency {
            count: 1000,
            p99_ms: 30.0,
            ..Default::default()
        });
        let r = Results {
            f9: Some(f9),
            ..Default::default()
        };
        assert_eq!(mark_of(&super::rows(&r, &["9"]), "9"), &Mark::Met);
    }

    #[test]
    fn a_ratio_floor_is_the_faster_load_tool() {
        let wrk = |rps: f64, socket_errors: u64| WrkRun {
            requests: 100_000,
            rps,
            p99_ms: Some(2.0),
            non_2xx: 0,
            socket_errors,
        };
        let mut r = Results {
            f1: Some(load(&[("200", 1000, 50_000.0)])),
            wrk: Some(wrk(70_000.0, 0)),
            f2: Some(load(&[("202", 1000, 30_000.0)])),
            ..Default::default()
        };
        // wrk found 70,000/s: (2) is 0.43 of that, not the 0.6 of our tool's 50,000.
        let rows = rows(&r, &["1", "1w", "2"]);
        assert_eq!(mark_of(&rows, "2"), &Mark::NotMet, "{rows:?}");
        assert_eq!(rows[2].ratio, "0.43 × (1w)");
        // wrk's run did not count: our tool's is the floor.
        r.wrk = Some(wrk(70_000.0, 5));
        let rows = super::rows(&r, &["1", "1w", "2"]);
        assert_eq!(mark_of(&rows, "2"), &Mark::Met, "{rows:?}");
        assert_eq!(rows[2].ratio, "0.60 × (1)");
        // wrk slower than ours: ours.
        r.wrk = Some(wrk(40_000.0, 0));
        assert_eq!(super::rows(&r, &["1", "1w", "2"])[2].ratio, "0.60 × (1)");
    }

    #[test]
    fn an_end_to_end_figure_on_an_invalid_base_is_invalid() {
        let mut f9 = load(&[("202", 1000, 100.0)]);
        f9.tickets = TicketTotals {
            issued: 1000,
            confirmed: 1000,
            failed: 0,
            unsettled: 0,
        };
        f9.e2e = Some(E2eLatency {
            count: 1000,
            p99_ms: 30.0,
            ..Default::default()
        });
        f9.arrival = Some(open_arrival_at_100());
        let mut r = Results {
            f2: Some(load(&[("202", 1000, 30_000.0)])),
            f9: Some(f9),
            ..Default::default()
        };
        assert_eq!(mark_of(&rows(&r, &["2", "9"]), "9"), &Mark::Met);
        // (2) had 503s: its rate is no base for (9).
        r.f2 = Some(load(&[("202", 1000, 30_000.0), ("503", 5, 1.0)]));
        let rows = rows(&r, &["2", "9"]);
        assert!(matches!(mark_of(&rows, "2"), Mark::Invalid(_)), "{rows:?}");
        match mark_of(&rows, "9") {
            Mark::Invalid(why) => assert!(why.contains("base (2) is INVALID"), "{why}"),
            m => panic!("{m:?}"),
        }
    }

    #[test]
    fn a_figure_that_ran_without_a_result_is_invalid() {
        let rows = rows(&Results::default(), &["7", "9L"]);
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| matches!(r.mark, Mark::Invalid(_))));
    }

    /// Rounds of (2), (2N) and (2E), µs of gateway CPU per request.
    fn auth_rounds(rounds: &[(f64, f64, f64)]) -> Vec<AuthRound> {
        rounds
            .iter()
            .map(|&(a, n, e)| AuthRound {
                f2: Some(Ok(a)),
                f2n: Some(Ok(n)),
                f2e: Some(Ok(e)),
            })
            .collect()
    }

    #[test]
    fn authentication_costs_are_judged_against_the_run_without_it() {
        let mut f2n = load(&[("202", 1000, 10_000.0)]);
        f2n.jwt = false;
        f2n.jwt_alg = None;
        let mut f2e = load(&[("202", 1000, 8_000.0)]);
        f2e.jwt_alg = Some("EdDSA".into());
        // HS256 +3 µs and EdDSA +40 µs in each of 5 rounds, give or take 0.5 µs.
        let five = [
            (73.0, 70.0, 110.0),
            (72.5, 70.0, 110.0),
            (74.0, 70.5, 110.5),
            (73.0, 70.5, 110.5),
            (73.5, 70.0, 110.0),
        ];
        let mut r = Results {
            f2: Some(load(&[("202", 1000, 9_500.0)])),
            f2n: Some(f2n.clone()),
            f2e: Some(f2e),
            auth: AuthCpu {
                rounds: auth_rounds(&five),
                ed25519_verify: None,
            },
            ..Default::default()
        };
        let figures = ["2", "2N", "2E"];
        let rows = rows(&r, &figures);
        let row = |f: &str| rows.iter().find(|x| x.figure == f).unwrap().clone();
        assert_eq!(
            rows.iter().map(|x| x.figure).collect::<Vec<_>>(),
            ["2", "2N", "2E"]
        );
        // HS256: +3 µs, the whole interval ≤ 5 µs.
        assert_eq!(row("2N").mark, Mark::Met);
        assert!(
            row("2N").ratio.contains("(2) = 0.95 × (2N)"),
            "{:?}",
            row("2N")
        );
        assert!(
            row("2N").ratio.contains("+3.0 µs (95 % interval"),
            "{:?}",
            row("2N")
        );
        // EdDSA: +40 µs, and no verify cost to judge it by.
        let Mark::NotJudged(why) = row("2E").mark else {
            panic!("{:?}", row("2E"))
        };
        assert!(why.contains("Ed25519 verify"), "{why}");
        assert!(row("2E").ratio.contains("+40.0 µs"), "{:?}", row("2E"));
        r.auth.ed25519_verify = Some((36.0, "as given".into()));
        assert_eq!(mark_of(&super::rows(&r, &figures), "2E"), &Mark::Met);
        r.auth.ed25519_verify = Some((30.0, "as given".into()));
        assert_eq!(mark_of(&super::rows(&r, &figures), "2E"), &Mark::NotMet);

        // One round, as before this rule: +3 µs was met; now it is not judged.
        r.auth.rounds.truncate(1);
        let one = super::rows(&r, &figures);
        assert!(
            matches!(mark_of(&one, "2N"), Mark::NotJudged(w) if w.contains("at least 5")),
            "{one:?}"
        );
        // Five rounds whose mean (+3.4 µs) is under the goal but whose spread holds it.
        r.auth.rounds = auth_rounds(&[
            (80.0, 70.0, 110.0),
            (66.0, 70.0, 110.0),
            (75.0, 70.0, 110.0),
            (79.0, 70.0, 110.0),
            (67.0, 70.0, 110.0),
        ]);
        let wide = super::rows(&r, &figures);
        assert!(
            matches!(mark_of(&wide, "2N"), Mark::NotJudged(w) if w.contains("interval")),
            "{wide:?}"
        );
        // +6 µs in every round: not met.
        r.auth.rounds = auth_rounds(&five.map(|(a, n, e)| (a + 3.0, n, e)));
        assert_eq!(mark_of(&super::rows(&r, &figures), "2N"), &Mark::NotMet);
        // A round whose (2N) did not count is left out, and said so: four rounds are too few.
        r.auth.rounds[2].f2n = Some(Err("3 errors".into()));
        let short = super::rows(&r, &figures);
        assert!(
            matches!(mark_of(&short, "2N"), Mark::NotJudged(w) if w.contains("4 counted")),
            "{short:?}"
        );
        let r2n = short.iter().find(|x| x.figure == "2N").unwrap();
        assert!(
            r2n.ratio.contains("left out: round 3: (2N) 3 errors"),
            "{r2n:?}"
        );

        r.auth.rounds = auth_rounds(&five.map(|(a, n, e)| (a + 3.0, n, e)));
        let note = auth_note(&r, &figures, &[]).unwrap();
        assert!(
            note.contains("HS256 (2) − (2N) = +6.0 µs (95 % interval"),
            "{note}"
        );
        assert!(note.contains("EdDSA (2E) − (2N) = +40.0 µs"), "{note}");
        assert!(
            note.contains("goal ≤ 35.0 µs: one verify 30.00 µs"),
            "{note}"
        );
        assert!(auth_note(&r, &["1", "3"], &[]).is_none());

        // (2N) with tokens, or (2E) with HS256 ones, does not count; nor do the goals.
        let mut with_tokens = f2n;
        with_tokens.jwt = true;
        r.f2n = Some(with_tokens);
        r.f2e.as_mut().unwrap().jwt_alg = Some("HS256".into());
        let rows = super::rows(&r, &figures);
        assert!(matches!(mark_of(&rows, "2N"), Mark::Invalid(_)), "{rows:?}");
        assert!(matches!(mark_of(&rows, "2E"), Mark::Invalid(_)), "{rows:?}");
        let note = auth_note(&r, &figures, &["2N", "2E"]).unwrap();
        assert!(note.contains("not judged: (2E) and (2N) INVALID"), "{note}");
    }

    #[test]
    fn the_rounds_of_the_authentication_figures_are_read_from_the_run_folder() {
        let dir = std::env::temp_dir().join(format!("bench-rounds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let row = |o: &str, n: u64| {
            format!(
                r#"{{"outcome": "{o}", "count": {n}, "per_sec": 1.0, "p50_ms": 1.0, "p90_ms": 1.0,
                "p99_ms": 1.0, "p999_ms": 1.0, "max_ms": 1.0}}"#
            )
        };
        // Every figure: 1,000 requests; its gateway ticks (100/s) set its µs per request.
        let write = |name: &str, alg: Option<&str>, ticks: u64, outcome: &str| {
            let json = format!(
                r#"{{"requests": 1000, "outcomes": [{}], "all": {}, "jwt": {}, "jwt_alg": {}}}"#,
                row(outcome, 1000),
                row("all", 1000),
                alg.is_some(),
                alg.map_or("null".into(), |a| format!("\"{a}\""))
            );
            std::fs::write(dir.join(format!("{name}.json")), json).unwrap();
            std::fs::write(dir.join(format!("{name}.cpu0")), "g0 10 0\n").unwrap();
            std::fs::write(dir.join(format!("{name}.cpu1")), format!("g0 10 {ticks}\n")).unwrap();
        };
        // Round 1 (f2, f2n, f2e) and round 2 (-r2) count: a tick (10 ms) over 1,000 requests
        // is 10 µs per request.
        for (suffix, extra) in [("", 0), ("-r2", 1)] {
            write(&format!("f2{suffix}"), Some("HS256"), 8 + extra, "202");
            write(&format!("f2n{suffix}"), None, 7, "202");
            write(&format!("f2e{suffix}"), Some("EdDSA"), 11, "202");
        }
        // Round 3: (2N) answered 503s, and (2E) left no result (its log only).
        write("f2-r3", Some("HS256"), 8, "202");
        write("f2n-r3", None, 7, "503");
        std::fs::write(dir.join("f2e-r3.log"), "error").unwrap();
        let json = |name: &str| read_json::<LoadRun>(&dir.join(format!("{name}.json"))).ok();
        let r = Results {
            f2: json("f2"),
            f2n: json("f2n"),
            f2e: json("f2e"),
            ..Default::default()
        };
        let a = AuthCpu::load(&dir, &r, 100, None);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(a.rounds.len(), 3, "{a:?}");
        let close = |xs: &[f64], want: &[f64]| {
            xs.len() == want.len() && xs.iter().zip(want).all(|(x, w)| (x - w).abs() < 1e-6)
        };
        let hs = a.hs256();
        assert!(close(&hs.values, &[10.0, 20.0]), "{hs:?}");
        assert_eq!(hs.left_out.len(), 1, "{hs:?}");
        assert!(hs.left_out[0].starts_with("round 3: (2N) "), "{hs:?}");
        let ed = a.eddsa();
        assert!(close(&ed.values, &[40.0, 40.0]), "{ed:?}");
        assert!(
            ed.left_out[0].contains("(2E) f2e-r3 has no result"),
            "{ed:?}"
        );
    }

    #[test]
    fn the_gateway_cpu_per_request_and_criterion_estimates_are_read() {
        let dir = std::env::temp_dir().join(format!("bench-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("f2n.cpu0"),
            "g0 10 100\nredis 5 7\nmachine 0 1000\nclock 0 0\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("f2n.cpu1"),
            "g0 10 300\nredis 5 9\nmachine 0 1500\nclock 0 3000000000\n",
        )
        .unwrap();
        // 200 ticks at 100/s over 40,000 requests: 50 µs each.
        assert_eq!(cpu::gateway_us(&dir, "f2n", Some(40_000), 100), Some(50.0));
        assert_eq!(cpu::gateway_us(&dir, "f2n", Some(0), 100), None);
        assert_eq!(cpu::gateway_us(&dir, "f2e", Some(40_000), 100), None);
        let r = Results {
            f2n: Some(load(&[("202", 40_000, 10_000.0)])),
            ..Default::default()
        };
        let t = cpu::table(&dir, &r, 100, 2);
        assert!(
            t.contains("| (2N) accept, authentication off | 40,000 | 50.0 | 0 |"),
            "{t}"
        );

        // criterion: the slope when it has one, else the mean; ns to µs.
        let est = dir.join("estimates.json");
        let e = |slope: &str| {
            format!(
                r#"{{"mean": {{"confidence_interval": {{"confidence_level": 0.95,
                "lower_bound": 1.0, "upper_bound": 2.0}}, "point_estimate": 41000.0,
                "standard_error": 1.0}}, "slope": {slope}}}"#
            )
        };
        std::fs::write(
            &est,
            e(r#"{"point_estimate": 40250.0, "standard_error": 1.0}"#),
        )
        .unwrap();
        assert_eq!(read_criterion_us(&est).unwrap(), 40.25);
        std::fs::write(&est, e("null")).unwrap();
        assert_eq!(read_criterion_us(&est).unwrap(), 41.0);
        std::fs::write(&est, "{}").unwrap();
        assert!(read_criterion_us(&est).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn numbers_and_dates_are_formatted() {
        assert_eq!(fmt(Some(1_234_567.6)), "1,234,568");
        assert_eq!(fmt(Some(99.94)), "99.9");
        assert_eq!(fmt(None), "n/a");
        assert_eq!(thousands(-1000), "-1,000");
        assert_eq!(thousands(999), "999");
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_764_446_940);
        assert_eq!(utc_minutes(t), "2025-11-29 20:09");
        assert_eq!(utc_minutes(std::time::UNIX_EPOCH), "1970-01-01 00:00");
    }

    #[test]
    fn the_results_block_is_replaced_in_place() {
        let doc = "# B\n\nintro\n<!-- bench:begin x -->\nold\n<!-- bench:end -->\nafter\n";
        let block = "<!-- bench:begin y -->\nnew\n<!-- bench:end -->\n";
        assert_eq!(
            replace_block(doc, block),
            "# B\n\nintro\n<!-- bench:begin y -->\nnew\n<!-- bench:end -->\nafter\n"
        );
        assert_eq!(replace_block("# B\n", block), format!("# B\n\n{block}"));
    }
}
