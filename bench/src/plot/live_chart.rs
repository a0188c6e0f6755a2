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

pub fn chart(title: String, poll: &[f64], stream: &[f64]) -> Chart {
    Chart {
        title,
        x_label: "percentile of buyers".into(),
        x_max: 100.0,
        panels: vec![Panel {
            y_label: "confirmation → buyer knows (ms)".into(),
            scale: Scale::Log,
            lines: vec![
                Line::new(
                    format!("polling ({} orders)", poll.len()),
                    RGBColor(200, 90, 30),
                    Stroke::Solid,
                    by_percentile(poll),
                ),
                Line::new(
                    format!("live streams ({} orders)", stream.len()),
                    RGBColor(30, 110, 200),
                    Stroke::Solid,
                    by_percentile(stream),
                ),
            ],
        }],
        shade: None,
    }
}

pub fn write(
    poll: &[impl AsRef<Path>],
    stream: &[impl AsRef<Path>],
    title: &str,
    out: &Path,
) -> anyhow::Result<()> {
    let chart = chart(title.to_owned(), &delays(poll)?, &delays(stream)?);
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
        let svg = super::super::chart::render_svg(&chart("t".into(), &v, &v[..10])).unwrap();
        assert!(svg.contains("live streams (10 orders)"));
    }
}
