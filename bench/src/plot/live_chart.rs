//! Live streams against polling (`scripts/bench.sh` (12)): the time from each ticket's
//! confirmation to its buyer knowing it, by percentile, one line per way of following it.

use super::chart::{Chart, Line, Panel, Scale, Stroke};
use plotters::style::RGBColor;
use std::path::Path;

/// The delays (ms) of the `live-sale` results in `files`.
fn delays(files: &[impl AsRef<Path>]) -> anyhow::Result<Vec<f64>> {
    let mut all = vec![];
    for f in files {
        let f = f.as_ref();
        let v: serde_json::Value = serde_json::from_slice(
            &std::fs::read(f).map_err(|e| anyhow::anyhow!("reading {}: {e}", f.display()))?,
        )?;
        let list = v["knew_after_ms"]
            .as_array()
            .ok_or_else(|| anyhow::anyhow!("{}: no knew_after_ms", f.display()))?;
        all.extend(list.iter().filter_map(|x| x.as_f64()));
    }
    all.sort_by(f64::total_cmp);
    Ok(all)
}

/// The value at each whole percentile 0..=100 of sorted `v`.
fn by_percentile(v: &[f64]) -> Vec<(f64, Option<f64>)> {
    (0..=100)
        .map(|p| {
            let y = (!v.is_empty())
                .then(|| v[((v.len() - 1) as f64 * p as f64 / 100.0).round() as usize]);
            (p as f64, y)
        })
        .collect()
}

/// One way of following a ticket: its label, colour and delays.
pub struct Series<'a> {
    pub label: &'a str,
    pub colour: RGBColor,
    pub delays: &'a [f64],
}

pub fn chart(title: String, series: &[Series]) -> Chart {
    Chart {
        title,
        x_label: "percentile of buyers".into(),
        x_max: 100.0,
        panels: vec![Panel {
            y_label: "confirmation → buyer knows (ms)".into(),
            scale: Scale::Log,
            lines: series
                .iter()
                .map(|s| {
                    Line::new(
                        format!("{} ({} orders)", s.label, s.delays.len()),
                        s.colour,
                        Stroke::Solid,
                        by_percentile(s.delays),
                    )
                })
                .collect(),
        }],
        shade: None,
    }
}

/// Draws the polling results `poll` (as advised), `poll_fixed` (at a fixed interval; may be
/// empty) and the stream results `stream` to `out`.
pub fn write(
    poll: &[impl AsRef<Path>],
    poll_fixed: &[impl AsRef<Path>],
    stream: &[impl AsRef<Path>],
    title: &str,
    out: &Path,
) -> anyhow::Result<()> {
    let (poll, poll_fixed, stream) = (delays(poll)?, delays(poll_fixed)?, delays(stream)?);
    let mut series = vec![Series {
        label: "polling as advised",
        colour: RGBColor(200, 90, 30),
        delays: &poll,
    }];
    if !poll_fixed.is_empty() {
        series.push(Series {
            label: "polling every 300 ms",
            colour: RGBColor(150, 150, 150),
            delays: &poll_fixed,
        });
    }
    series.push(Series {
        label: "live streams",
        colour: RGBColor(30, 110, 200),
        delays: &stream,
    });
    let chart = chart(title.to_owned(), &series);
    let svg = super::chart::render_svg(&chart)?;
    std::fs::write(out, svg).map_err(|e| anyhow::anyhow!("writing {}: {e}", out.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_run_from_the_least_to_the_most() {
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        let p = by_percentile(&v);
        assert_eq!(p[0], (0.0, Some(1.0)));
        assert_eq!(p[50], (50.0, Some(501.0)));
        assert_eq!(p[100], (100.0, Some(1000.0)));
        assert!(by_percentile(&[]).iter().all(|(_, y)| y.is_none()));
        let series = [
            Series {
                label: "polling",
                colour: RGBColor(0, 0, 0),
                delays: &v,
            },
            Series {
                label: "live streams",
                colour: RGBColor(0, 0, 0),
                delays: &v[..10],
            },
        ];
        let svg = super::super::chart::render_svg(&chart("t".into(), &series)).unwrap();
        assert!(svg.contains("polling (1000 orders)"));
        assert!(svg.contains("live streams (10 orders)"));
    }
}
