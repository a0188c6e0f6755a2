//! The figures' time series beside the results table (`report table --plots DIR`): a column
//! that links each figure's chart, and the charts themselves under the table. `scripts/bench.sh`
//! draws them with `seckill-bench plot load`, one `f<figure>.svg` per load-style figure
//! (`f2n.svg` for (2N)); a figure without one (the drains, redis-benchmark, wrk) gets no link.

use super::{Row, HEADER};
use std::path::{Path, PathBuf};

/// One figure's chart, as the doc links it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlotLink {
    pub figure: &'static str,
    pub what: String,
    pub href: String,
}

/// The chart file of a figure: `2N` → `f2n.svg`.
pub fn file_name(figure: &str) -> String {
    format!("f{}.svg", figure.to_lowercase())
}

/// `path` as a link from a document in `from_dir`: relative when it is under it.
fn href(path: &Path, from_dir: Option<&Path>) -> String {
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let target = abs(path);
    let rel: Option<PathBuf> =
        from_dir.and_then(|d| target.strip_prefix(abs(d)).ok().map(Path::to_path_buf));
    rel.unwrap_or(target).display().to_string()
}

/// The rows whose chart is in `dir`, linked from `doc` (or by path without one).
pub fn links(dir: &Path, doc: Option<&Path>, rows: &[Row]) -> Vec<PlotLink> {
    let doc_dir = doc.map(|d| match d.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    });
    rows.iter()
        .filter_map(|r| {
            let file = dir.join(file_name(r.figure));
            file.is_file().then(|| PlotLink {
                figure: r.figure,
                what: r.what.clone(),
                href: href(&file, doc_dir.as_deref()),
            })
        })
        .collect()
}

/// The results table, with a "time series" column when there are charts.
pub fn table(rows: &[Row], links: &[PlotLink]) -> String {
    if links.is_empty() {
        return std::iter::once(HEADER.to_string())
            .chain(rows.iter().map(Row::markdown))
            .collect::<Vec<_>>()
            .join("\n");
    }
    let (head, rule) = HEADER.split_once('\n').expect("two header lines");
    let mut out = vec![format!("{head} time series |"), format!("{rule}---|")];
    for r in rows {
        let cell = links
            .iter()
            .find(|l| l.figure == r.figure)
            .map_or(String::new(), |l| format!("[chart]({})", l.href));
        out.push(format!("{} {cell} |", r.markdown()));
    }
    out.join("\n")
}

/// The charts, one after the other, for the results block.
pub fn gallery(links: &[PlotLink]) -> String {
    if links.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "### Time series\n\nEach load-style figure over its run (`seckill-bench plot load` of its \
         summary): answers per second by outcome, and latency p50 (dashed) and p99 (solid) by \
         outcome on a log scale, in time buckets of at least 20 answers on average.\n\n",
    );
    for l in links {
        s.push_str(&format!(
            "**({})** {}\n\n![({}) over time]({})\n\n",
            l.figure, l.what, l.figure, l.href
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::rules::Mark;

    fn row(figure: &'static str) -> Row {
        Row {
            figure,
            what: format!("figure {figure}"),
            value: Some(1.0),
            unit: "req/s",
            p99_ms: None,
            ratio: String::new(),
            goal: "",
            mark: Mark::NoGoal,
        }
    }

    #[test]
    fn figures_with_a_chart_get_a_link_relative_to_the_doc_and_others_an_empty_cell() {
        let base = std::env::temp_dir().join(format!("plots-{}", std::process::id()));
        let img = base.join("img/bench");
        std::fs::create_dir_all(&img).unwrap();
        std::fs::write(img.join("f2n.svg"), "<svg/>").unwrap();
        let rows = [row("2N"), row("5")];
        let links = links(&img, Some(&base.join("BENCHMARKS.md")), &rows);
        assert_eq!(links.len(), 1);
        assert_eq!(links[0].href, "img/bench/f2n.svg");
        let t = table(&rows, &links);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].ends_with("| met | time series |"), "{}", lines[0]);
        assert!(
            lines[2].ends_with("[chart](img/bench/f2n.svg) |"),
            "{}",
            lines[2]
        );
        assert!(lines[3].ends_with("|  |"), "{}", lines[3]);
        assert!(gallery(&links).contains("![(2N) over time](img/bench/f2n.svg)"));
        // Without charts, the table is as before.
        assert!(!table(&rows, &[]).contains("time series"));
        assert_eq!(gallery(&[]), "");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
