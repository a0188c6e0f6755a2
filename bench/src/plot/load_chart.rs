//! The chart of a load run (`load --plot`, `seckill-bench plot load`): answers per second over
//! time per outcome, and each outcome's latency (time to the answer) p50 (dashed) and p99
//! (solid) on a log scale.

use super::chart::{outcome_color, render_svg, Chart, Line, Panel, Scale, Stroke};
use crate::load::stats::Summary;
use crate::load::timeline::Timeline;
use anyhow::Context;
use serde::Deserialize;
use std::path::Path;

/// What an outcome's label means, for the legend.
fn outcome_name(outcome: &str) -> String {
    let what = match outcome {
        "202" => "accepted",
        "200" => "ok",
        "201" => "created (sync)",
        "409" => "sold out",
        "4xx" => "other 4xx",
        "503" => "unavailable",
        "other" => "other status",
        "error" => "no answer",
        _ => "",
    };
    match outcome {
        "4xx" | "other" | "error" => what.to_owned(),
        _ => format!("{outcome} {what}"),
    }
}

/// The two panels of a run's timeline; points at the middle of their buckets.
pub fn chart(title: String, timeline: &Timeline, duration_s: f64) -> Chart {
    let half = timeline.bucket_s / 2.0;
    let mut rate = Vec::new();
    let mut latency = Vec::new();
    for s in &timeline.series {
        let color = outcome_color(&s.outcome);
        let at = |p: &crate::load::timeline::TimelinePoint| p.t_s + half;
        rate.push(Line::new(
            outcome_name(&s.outcome),
            color,
            Stroke::Solid,
            s.points.iter().map(|p| (at(p), Some(p.per_s))),
        ));
        latency.push(Line::new(
            format!("{} p99", s.outcome),
            color,
            Stroke::Solid,
            s.points.iter().map(|p| (at(p), p.p99_ms)),
        ));
        latency.push(Line::new(
            format!("{} p50", s.outcome),
            color,
            Stroke::Dashed,
            s.points.iter().map(|p| (at(p), p.p50_ms)),
        ));
    }
    let end = timeline
        .series
        .iter()
        .filter_map(|s| s.points.last())
        .map(|p| p.t_s + timeline.bucket_s)
        .fold(duration_s, f64::max);
    Chart {
        title,
        x_label: format!(
            "time since the load started (s); buckets of {} s",
            super::chart::human(timeline.bucket_s)
        ),
        x_max: end,
        panels: vec![
            Panel {
                y_label: "answers per second (req/s)".into(),
                scale: Scale::Linear,
                lines: rate,
            },
            Panel {
                y_label: "time to answer (ms, log scale)".into(),
                scale: Scale::Log,
                lines: latency,
            },
        ],
        shade: None,
    }
}

/// The fields of a `load --json` summary that a chart needs.
#[derive(Debug, Deserialize)]
pub struct SavedRun {
    pub product: Option<u64>,
    pub path: Option<String>,
    pub gateways: Vec<String>,
    pub concurrency: usize,
    pub duration_s: f64,
    pub req_per_s: f64,
    pub timeline: Option<Timeline>,
}

impl SavedRun {
    fn of(s: &Summary) -> Self {
        Self {
            product: s.product,
            path: s.path.clone(),
            gateways: s.gateways.clone(),
            concurrency: s.concurrency,
            duration_s: s.duration_s,
            req_per_s: s.req_per_s,
            timeline: s.timeline.clone(),
        }
    }

    /// `what` ("GET /livez" or "buying product 7" by default), the gateways, the concurrency
    /// and the rate.
    pub fn title(&self, what: Option<&str>) -> String {
        let target = match (what, &self.path, self.product) {
            (Some(w), _, _) => w.to_owned(),
            (None, Some(p), _) => format!("GET {p}"),
            (None, None, Some(p)) => format!("buying product {p}"),
            (None, None, None) => "load".into(),
        };
        format!(
            "{target}: {} gateway(s), {} in flight, {} req/s over {:.1} s",
            self.gateways.len(),
            self.concurrency,
            super::chart::human(self.req_per_s),
            self.duration_s
        )
    }

    /// The chart to `out`; `what` names the run in the title.
    pub fn write_svg(&self, what: Option<&str>, out: &Path) -> anyhow::Result<()> {
        let timeline = self
            .timeline
            .as_ref()
            .context("the run has no timeline (a --waiting-room run, or an older load tool)")?;
        let title = self.title(what);
        let svg = render_svg(&chart(title, timeline, self.duration_s))?;
        std::fs::write(out, svg).with_context(|| format!("writing {}", out.display()))
    }
}

/// `load --plot`: the run just made.
pub fn write(summary: &Summary, out: &Path) -> anyhow::Result<()> {
    SavedRun::of(summary).write_svg(None, out)
}

/// `seckill-bench plot load`: a run's `load --json` output; `what` names it in the title.
pub fn write_from_json(summary: &Path, what: Option<&str>, out: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(summary)
        .with_context(|| format!("reading {}", summary.display()))?;
    let run: SavedRun = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a load summary", summary.display()))?;
    run.write_svg(what, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::plan::Outcome;
    use crate::load::timeline::TimelineRecorder;

    #[test]
    fn each_outcome_has_a_rate_line_and_p50_p99_lines_that_break_where_it_had_no_answer() {
        let mut r = TimelineRecorder::default();
        for i in 0..100u64 {
            r.record(Outcome::Accepted, i * 10, 2_000);
        }
        for i in 0..50u64 {
            r.record(Outcome::Unavailable, 2_000 + i * 20, 40_000);
        }
        let t = Timeline::build(&r, 3.0);
        let c = chart("t".into(), &t, 3.0);
        assert_eq!(c.panels.len(), 2);
        let labels = |p: &Panel| p.lines.iter().map(|l| l.label.clone()).collect::<Vec<_>>();
        assert_eq!(labels(&c.panels[0]), ["202 accepted", "503 unavailable"]);
        assert_eq!(
            labels(&c.panels[1]),
            ["202 p99", "202 p50", "503 p99", "503 p50"]
        );
        assert_eq!(c.panels[1].scale, Scale::Log);
        // The rate of 503s is 0 where there were none: one unbroken line over the run.
        let unavailable = &c.panels[0].lines[1];
        assert_eq!(unavailable.segments.len(), 1);
        // 150 answers over 3 s: buckets of 0.5 s, points at their middles.
        assert_eq!(t.bucket_s, 0.5);
        let pts: Vec<_> = unavailable.points().copied().collect();
        assert_eq!(pts.len(), 6);
        assert_eq!((pts[0], pts[5]), ((0.25, 0.0), (2.75, 50.0)));
        // Its latency exists only in the last second: the line starts there.
        let p99 = &c.panels[1].lines[2];
        assert_eq!(p99.segments, vec![vec![(2.25, 40.0), (2.75, 40.0)]]);
        // 202s all took 2 ms.
        assert!(c.panels[1].lines[0].points().all(|p| p.1 == 2.0));
        assert_eq!(c.x_max, 3.0);
        let svg = render_svg(&c).unwrap();
        assert!(svg.contains("answers per second (req/s)") && svg.contains("503 unavailable"));
    }

    #[test]
    fn a_saved_summary_without_a_timeline_says_why_it_cannot_be_drawn() {
        let run: SavedRun = serde_json::from_str(
            r#"{"product":1,"path":null,"gateways":["g"],"concurrency":4,"duration_s":1.0,"req_per_s":5.0}"#,
        )
        .unwrap();
        assert_eq!(
            run.title(None),
            "buying product 1: 1 gateway(s), 4 in flight, 5 req/s over 1.0 s"
        );
        assert!(run
            .title(Some("(2) accept"))
            .starts_with("(2) accept: 1 gateway(s)"));
        let e = run
            .write_svg(None, Path::new("/nonexistent/x.svg"))
            .unwrap_err();
        assert!(e.to_string().contains("no timeline"), "{e}");
    }
}
