//! The timeline of one chaos run (`seckill-bench plot chaos --run-dir DIR`), from the files
//! `scripts/chaos.sh` leaves in the run's folder:
//! - `load.json`: the load's summary, with `admin_samples` (`load --sample-admin-ms`);
//! - `history.jsonl`: when each `202` came (the load tool's clock);
//! - `fault.json`, when the scenario has a fault: its name, `start_us` and `end_us`.
//!
//! Top panel: tickets accepted (202s), confirmed and compensated (failed, unit given back)
//! so far, and paid and cancelled when the sale had any. Bottom panel: reservations pending,
//! and a cross at 0 for each look at the admin view that got no answer. The fault's window is
//! shaded in both.

use super::chart::{outcome_color, Chart, Line, Panel, Scale, Shade, Stroke};
use crate::load::admin_samples::{AdminSample, SampledView};
use anyhow::Context;
use plotters::style::RGBColor;
use serde::Deserialize;
use std::io::BufRead;
use std::path::Path;

/// The fault as `scripts/chaos.sh` writes it (µs since the epoch).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Fault {
    pub name: String,
    pub start_us: Option<u64>,
    pub end_us: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct LoadSummary {
    started_at_us: u64,
    #[serde(default)]
    admin_samples: Option<Vec<AdminSample>>,
}

#[derive(Debug, Deserialize)]
struct RequestLine {
    kind: String,
    status: Option<u16>,
    recv_at_us: u64,
}

/// What the chart is drawn from.
#[derive(Debug)]
pub struct ChaosRun {
    started_at_us: u64,
    /// When each 202 came, sorted.
    accepts_us: Vec<u64>,
    samples: Vec<AdminSample>,
    fault: Option<Fault>,
}

impl ChaosRun {
    pub fn read(dir: &Path) -> anyhow::Result<Self> {
        let read = |name: &str| {
            std::fs::read_to_string(dir.join(name))
                .with_context(|| format!("reading {}", dir.join(name).display()))
        };
        let history = std::fs::File::open(dir.join("history.jsonl"))
            .with_context(|| format!("opening {}/history.jsonl", dir.display()))?;
        let fault = read("fault.json").ok();
        Self::parse(
            &read("load.json")?,
            std::io::BufReader::new(history),
            fault.as_deref(),
        )
    }

    pub fn parse(
        load_json: &str,
        history: impl BufRead,
        fault_json: Option<&str>,
    ) -> anyhow::Result<Self> {
        let load: LoadSummary =
            serde_json::from_str(load_json.trim()).context("load.json: not a load summary")?;
        let mut samples = load
            .admin_samples
            .context("load.json has no admin_samples: run the load with --sample-admin-ms")?;
        Self::ordered(&mut samples);
        let mut accepts_us = Vec::new();
        for line in history.lines() {
            let line = line.context("reading the history")?;
            // Most lines are not 202 answers: skip them before parsing.
            if !line.contains("\"status\":202") {
                continue;
            }
            if let Ok(r) = serde_json::from_str::<RequestLine>(&line) {
                if r.kind == "request" && r.status == Some(202) {
                    accepts_us.push(r.recv_at_us);
                }
            }
        }
        accepts_us.sort_unstable();
        let fault = fault_json
            .map(|f| serde_json::from_str::<Fault>(f).context("fault.json"))
            .transpose()?;
        Ok(Self {
            started_at_us: load.started_at_us,
            accepts_us,
            samples,
            fault,
        })
    }

    /// The samples in the order of their place on the time axis.
    fn ordered(samples: &mut [AdminSample]) {
        let key = |s: &AdminSample| {
            s.answered_ms
                .filter(|_| s.view.is_some())
                .unwrap_or(s.at_ms)
        };
        samples.sort_by_key(key);
    }

    /// Seconds after the load started.
    fn secs(&self, us: u64) -> f64 {
        (us as f64 - self.started_at_us as f64) / 1e6
    }

    fn shade(&self) -> Option<Shade> {
        let f = self.fault.as_ref()?;
        let from = self.secs(f.start_us?);
        let to = f.end_us.map_or(from, |e| self.secs(e));
        Some(Shade {
            from,
            to,
            label: format!("fault: {}", f.name),
        })
    }

    pub fn chart(&self, title: String) -> Chart {
        // A view where its answer came (the gateway read it then), a look with no answer
        // where it was sent.
        let at = |s: &AdminSample| {
            let ms = s
                .answered_ms
                .filter(|_| s.view.is_some())
                .unwrap_or(s.at_ms);
            self.secs(ms * 1000)
        };
        let shade = self.shade();
        let x_max = self
            .samples
            .iter()
            .map(at)
            .chain(self.accepts_us.last().map(|u| self.secs(*u)))
            .chain(shade.as_ref().map(|s| s.to))
            .fold(1.0, f64::max);
        // Accepts so far, on a grid of 500 steps.
        let step = x_max / 500.0;
        let accepted = (0..=500).map(|i| {
            let t = i as f64 * step;
            let until = self.started_at_us as f64 + t * 1e6;
            let n = self.accepts_us.partition_point(|u| (*u as f64) <= until);
            (t, Some(n as f64))
        });
        let counter = |label: &str, color: RGBColor, f: fn(&SampledView) -> i64| {
            Line::new(
                label,
                color,
                Stroke::Solid,
                self.samples
                    .iter()
                    .map(|s| (at(s), s.view.as_ref().map(|v| f(v) as f64))),
            )
        };
        let mut counts = vec![
            Line::new(
                "accepted (202s)",
                outcome_color("202"),
                Stroke::Wide,
                accepted,
            ),
            counter("confirmed", RGBColor(31, 120, 180), |v| v.confirmed),
            counter(
                "compensated (failed, unit back)",
                RGBColor(117, 112, 179),
                |v| v.failed,
            ),
        ];
        let any = |f: fn(&SampledView) -> i64| {
            self.samples
                .iter()
                .any(|s| s.view.as_ref().is_some_and(|v| f(v) > 0))
        };
        if any(|v| v.paid) {
            counts.push(counter("paid", RGBColor(102, 166, 30), |v| v.paid));
        }
        if any(|v| v.cancelled) {
            counts.push(counter("cancelled", RGBColor(166, 118, 29), |v| {
                v.cancelled
            }));
        }
        let mut pending = vec![counter("pending (reserved)", RGBColor(231, 41, 138), |v| {
            v.pending
        })];
        if self.samples.iter().any(|s| s.view.is_none()) {
            pending.push(Line::new(
                "admin view: no answer",
                RGBColor(80, 80, 80),
                Stroke::Crosses,
                self.samples
                    .iter()
                    .map(|s| (at(s), s.view.is_none().then_some(0.0))),
            ));
        }
        Chart {
            title,
            x_label: "time since the load started (s)".into(),
            x_max,
            panels: vec![
                Panel {
                    y_label: "tickets so far (count)".into(),
                    scale: Scale::Linear,
                    lines: counts,
                },
                Panel {
                    y_label: "pending now (count)".into(),
                    scale: Scale::Linear,
                    lines: pending,
                },
            ],
            shade,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_700_000_000_000_000;

    /// A look sent `ms_after` the start and answered `took` ms later (older load tools wrote
    /// no `answered_ms`: `None`).
    fn sample(ms_after: u64, took: Option<u64>, view: Option<(i64, i64, i64)>) -> String {
        let at = T0 / 1000 + ms_after;
        let answered = took.map_or("null".to_string(), |t| (at + t).to_string());
        match view {
            None => format!(r#"{{"at_ms":{at},"view":null}}"#),
            Some((pending, confirmed, failed)) => format!(
                r#"{{"at_ms":{at},"answered_ms":{answered},"view":{{"stock_redis":5,"stock_db":9,"pending":{pending},"confirmed":{confirmed},"failed":{failed}}}}}"#
            ),
        }
    }

    fn run(fault: Option<&str>) -> ChaosRun {
        // The look sent at 1.9 s waited 1.1 s (for MySQL): its view is of 3.0 s, after the
        // look sent at 2.5 s that got no answer.
        let samples = [
            sample(0, None, Some((0, 0, 0))),
            sample(1000, Some(0), Some((3, 2, 0))),
            sample(1900, Some(1100), Some((0, 5, 1))),
            sample(2500, None, None),
        ];
        let load = format!(
            r#"{{"kind":"summary","started_at_us":{T0},"admin_samples":[{}]}}"#,
            samples.join(",")
        );
        let mut history = String::new();
        for (ms, status) in [
            (500, 202),
            (900, 202),
            (1500, 409),
            (2500, 202),
            (2600, 503),
        ] {
            history.push_str(&format!(
                r#"{{"kind":"request","sent_at_us":{},"recv_at_us":{},"gateway":"g","user_id":1,"status":{status},"ticket":null,"error":null}}"#,
                T0 + ms * 1000 - 100,
                T0 + ms * 1000
            ));
            history.push('\n');
        }
        history.push_str(r#"{"kind":"settled","ticket":"t","user_id":1,"status":"confirmed","order_id":1,"reason":null}"#);
        ChaosRun::parse(&load, history.as_bytes(), fault).unwrap()
    }

    #[test]
    fn the_fault_window_is_shaded_from_its_start_to_its_end_in_run_seconds() {
        let fault = format!(
            r#"{{"scenario":5,"name":"MySQL down 10 s","start_us":{},"end_us":{},"verified":true,"evidence":[]}}"#,
            T0 + 1_200_000,
            T0 + 2_700_000
        );
        let c = run(Some(&fault)).chart("t".into());
        let s = c.shade.expect("shaded");
        assert!(
            (s.from - 1.2).abs() < 1e-9 && (s.to - 2.7).abs() < 1e-9,
            "{s:?}"
        );
        assert_eq!(s.label, "fault: MySQL down 10 s");
        // No fault file (scenario 1): nothing shaded.
        assert!(run(None).chart("t".into()).shade.is_none());
    }

    #[test]
    fn accepts_come_from_the_history_and_counters_from_the_admin_samples() {
        let c = run(None).chart("t".into());
        assert_eq!(c.x_max, 3.0);
        let top = &c.panels[0];
        let labels: Vec<_> = top.lines.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "accepted (202s)",
                "confirmed",
                "compensated (failed, unit back)"
            ]
        );
        // Three 202s (the 409 and 503 do not count), cumulative.
        let accepted: Vec<_> = top.lines[0].points().copied().collect();
        let at = |t: f64| accepted.iter().rev().find(|p| p.0 <= t + 1e-9).unwrap().1;
        assert_eq!((at(0.4), at(1.0), at(2.4), at(3.0)), (0.0, 2.0, 2.0, 3.0));
        // The look nobody answered breaks the counters' lines; the late answer is placed
        // when it came.
        let confirmed = &top.lines[1];
        assert_eq!(
            confirmed.segments,
            vec![vec![(0.0, 0.0), (1.0, 2.0)], vec![(3.0, 5.0)]]
        );
        let bottom = &c.panels[1];
        assert_eq!(bottom.lines[0].label, "pending (reserved)");
        assert_eq!(
            bottom.lines[0].points().copied().collect::<Vec<_>>(),
            [(0.0, 0.0), (1.0, 3.0), (3.0, 0.0)]
        );
        // ... and shows as a cross at 0 where it was.
        assert_eq!(bottom.lines[1].stroke, Stroke::Crosses);
        assert_eq!(
            bottom.lines[1].points().copied().collect::<Vec<_>>(),
            [(2.5, 0.0)]
        );
    }

    #[test]
    fn a_load_without_admin_samples_is_refused_with_the_flag_to_use() {
        let e = ChaosRun::parse(r#"{"started_at_us":1}"#, "".as_bytes(), None).unwrap_err();
        assert!(e.to_string().contains("--sample-admin-ms"), "{e}");
    }
}
