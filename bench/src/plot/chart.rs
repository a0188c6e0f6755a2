//! A chart as data, then drawn to SVG with plotters: panels stacked on one time axis, each
//! with its lines and its own legend column on the right, and an optional window (a fault)
//! shaded across every panel.
//!
//! The load and chaos charts only build a [`Chart`]; tests check what it holds, and
//! [`render_svg`] is the one place that knows plotters.

use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// Pixels of the legend column of each panel.
const LEGEND_W: u32 = 280;
/// Height of each panel, and of the title band.
const PANEL_H: u32 = 300;
const TITLE_H: u32 = 40;
pub const WIDTH: u32 = 1150;
/// The fault window's colour.
pub const SHADE: RGBColor = RGBColor(220, 50, 47);
const FONT: &str = "sans-serif";

#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    /// The time axis runs from 0 to this.
    pub x_max: f64,
    pub panels: Vec<Panel>,
    pub shade: Option<Shade>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    pub y_label: String,
    pub scale: Scale,
    pub lines: Vec<Line>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    Log,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stroke {
    Solid,
    /// Wide and pale, under the lines drawn after it: a line others often follow closely.
    Wide,
    Dashed,
    /// One cross per point, no line.
    Crosses,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub label: String,
    pub color: RGBColor,
    pub stroke: Stroke,
    /// Runs of points drawn joined; a gap between runs is a gap in the data.
    pub segments: Vec<Vec<(f64, f64)>>,
}

/// A window of the time axis, shaded in every panel and named, with its start and end, in the
/// first legend.
#[derive(Debug, Clone, PartialEq)]
pub struct Shade {
    pub from: f64,
    pub to: f64,
    pub label: String,
}

impl Line {
    /// A line through `points`; a `None` value breaks it.
    pub fn new(
        label: impl Into<String>,
        color: RGBColor,
        stroke: Stroke,
        points: impl IntoIterator<Item = (f64, Option<f64>)>,
    ) -> Self {
        let mut segments: Vec<Vec<(f64, f64)>> = Vec::new();
        let mut open = false;
        for (x, y) in points {
            match y {
                Some(y) if y.is_finite() => {
                    if !open {
                        segments.push(Vec::new());
                        open = true;
                    }
                    segments.last_mut().expect("pushed").push((x, y));
                }
                _ => open = false,
            }
        }
        Self {
            label: label.into(),
            color,
            stroke,
            segments,
        }
    }

    pub fn points(&self) -> impl Iterator<Item = &(f64, f64)> {
        self.segments.iter().flatten()
    }
}

impl Panel {
    /// Every value a whole number (counts): then the axis has no ticks between them.
    fn integers(&self) -> bool {
        self.lines
            .iter()
            .flat_map(Line::points)
            .all(|p| p.1 == p.1.round())
    }

    /// The y range to draw: from 0 (linear) or below the least positive value (log), to a
    /// little above the largest.
    fn y_range(&self) -> (f64, f64) {
        let ys = || self.lines.iter().flat_map(Line::points).map(|p| p.1);
        let max = ys().fold(0.0f64, f64::max);
        match self.scale {
            Scale::Linear => (0.0, if max > 0.0 { max * 1.08 } else { 1.0 }),
            // Whole decades, so that every decade has its labels.
            Scale::Log => {
                let min = ys().filter(|y| *y > 0.0).fold(f64::INFINITY, f64::min);
                if min.is_finite() {
                    let lo = 10f64.powf(min.log10().floor());
                    let hi = 10f64.powf((max * 1.2).log10().ceil());
                    // A hair wider, so that rounding keeps both decades' labels.
                    (lo * 0.999, hi.max(lo * 10.0) * 1.001)
                } else {
                    (0.1, 10.0)
                }
            }
        }
    }
}

/// `12345.6` → `12,346`; `0.25` → `0.25`: axis labels without exponents.
pub fn human(v: f64) -> String {
    if v.abs() >= 1000.0 {
        let n = v.round() as i64;
        let s = n.unsigned_abs().to_string();
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        if n < 0 {
            out.insert(0, '-');
        }
        out
    } else if v.abs() >= 10.0 || v == v.round() {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').to_owned()
    }
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing the chart: {e:?}")
}

/// The chart as an SVG document.
pub fn render_svg(chart: &Chart) -> anyhow::Result<String> {
    let height = TITLE_H + PANEL_H * chart.panels.len().max(1) as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let body = root
            .titled(&chart.title, (FONT, 26).into_font().color(&BLACK))
            .map_err(err)?;
        let panels = body.split_evenly((chart.panels.len().max(1), 1));
        for (i, (panel, area)) in chart.panels.iter().zip(&panels).enumerate() {
            let (plot, legend) = area.split_horizontally(WIDTH - LEGEND_W);
            let shade = chart.shade.as_ref();
            let (lo, hi) = panel.y_range();
            let mut cb = ChartBuilder::on(&plot);
            cb.margin(10).x_label_area_size(45).y_label_area_size(80);
            let x = 0.0..chart.x_max.max(1e-3);
            match panel.scale {
                Scale::Linear => {
                    let ctx = cb.build_cartesian_2d(x, lo..hi).map_err(err)?;
                    draw_panel(ctx, chart, panel, (lo, hi))?;
                }
                Scale::Log => {
                    let ctx = cb
                        .build_cartesian_2d(x, (lo..hi).log_scale())
                        .map_err(err)?;
                    draw_panel(ctx, chart, panel, (lo, hi))?;
                }
            }
            draw_legend(&legend, panel, shade.filter(|_| i == 0))?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

fn draw_panel<DB, Y>(
    mut ctx: ChartContext<'_, DB, Cartesian2d<RangedCoordf64, Y>>,
    chart: &Chart,
    panel: &Panel,
    (lo, hi): (f64, f64),
) -> anyhow::Result<()>
where
    DB: DrawingBackend,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let fmt = |v: &f64| human(*v);
    let y_labels = if panel.integers() && panel.scale == Scale::Linear {
        (hi.floor() as usize + 1).clamp(2, 10)
    } else {
        10
    };
    ctx.configure_mesh()
        .y_labels(y_labels)
        .x_desc(chart.x_label.as_str())
        .y_desc(panel.y_label.as_str())
        .x_label_formatter(&fmt)
        .y_label_formatter(&fmt)
        .label_style((FONT, 17))
        .axis_desc_style((FONT, 19))
        .max_light_lines(2)
        .light_line_style(RGBColor(240, 240, 240))
        .bold_line_style(RGBColor(205, 205, 205))
        .draw()
        .map_err(err)?;
    if let Some(s) = &chart.shade {
        let fill = SHADE.mix(0.15).filled();
        ctx.draw_series(std::iter::once(Rectangle::new(
            [(s.from, lo), (s.to, hi)],
            fill,
        )))
        .map_err(err)?;
        // The edges, so that a window of a fraction of a second still shows.
        let edge = SHADE.mix(0.8).stroke_width(1);
        ctx.draw_series(
            [s.from, s.to]
                .into_iter()
                .map(|t| PathElement::new(vec![(t, lo), (t, hi)], edge)),
        )
        .map_err(err)?;
    }
    for line in &panel.lines {
        let style = line.color.stroke_width(2);
        for seg in &line.segments {
            match line.stroke {
                Stroke::Wide => {
                    let wide = line.color.mix(0.45).stroke_width(7);
                    ctx.draw_series(LineSeries::new(seg.iter().copied(), wide))
                        .map_err(err)?;
                }
                Stroke::Solid if seg.len() == 1 => {
                    ctx.draw_series(std::iter::once(Circle::new(seg[0], 2, style.filled())))
                        .map_err(err)?;
                }
                Stroke::Solid => {
                    ctx.draw_series(LineSeries::new(seg.iter().copied(), style))
                        .map_err(err)?;
                }
                Stroke::Dashed => {
                    ctx.draw_series(DashedLineSeries::new(seg.iter().copied(), 6, 4, style))
                        .map_err(err)?;
                }
                Stroke::Crosses => {
                    ctx.draw_series(seg.iter().map(|p| Cross::new(*p, 4, style)))
                        .map_err(err)?;
                }
            }
        }
    }
    Ok(())
}

fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
    shade: Option<&Shade>,
) -> anyhow::Result<()> {
    let font = (FONT, 18).into_font().color(&BLACK);
    let mut y = 24;
    for line in &panel.lines {
        let style = line.color.stroke_width(2);
        match line.stroke {
            Stroke::Wide => area
                .draw(&PathElement::new(
                    vec![(4, y), (32, y)],
                    line.color.mix(0.45).stroke_width(7),
                ))
                .map_err(err)?,
            Stroke::Solid => area
                .draw(&PathElement::new(vec![(4, y), (32, y)], style))
                .map_err(err)?,
            Stroke::Dashed => {
                for x in [4, 15, 26] {
                    area.draw(&PathElement::new(vec![(x, y), (x + 6, y)], style))
                        .map_err(err)?;
                }
            }
            Stroke::Crosses => area.draw(&Cross::new((18, y), 4, style)).map_err(err)?,
        }
        for text in wrap(&line.label, LEGEND_CHARS) {
            area.draw(&Text::new(text, (40, y - 8), font.clone()))
                .map_err(err)?;
            y += 22;
        }
    }
    if let Some(s) = shade {
        area.draw(&Rectangle::new(
            [(4, y - 8), (32, y + 8)],
            SHADE.mix(0.25).filled(),
        ))
        .map_err(err)?;
        // A fault that started as the load did reads 0.0, not -0.0.
        let secs = |v: f64| format!("{:.1}", if v.abs() < 0.05 { 0.0 } else { v });
        let when = format!("from {} s to {} s", secs(s.from), secs(s.to));
        for text in wrap(&s.label, LEGEND_CHARS).into_iter().chain([when]) {
            area.draw(&Text::new(text, (40, y - 8), font.clone()))
                .map_err(err)?;
            y += 22;
        }
    }
    Ok(())
}

/// Characters of legend text that fit on one line of the legend column.
const LEGEND_CHARS: usize = 32;

/// `text` cut into lines of at most `width` characters, at spaces (a longer word stays whole).
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split(' ') {
        match lines.last_mut() {
            Some(l) if l.chars().count() + 1 + word.chars().count() <= width => {
                l.push(' ');
                l.push_str(word);
            }
            _ => lines.push(word.to_owned()),
        }
    }
    lines
}

/// The colour of a load outcome, the same in every chart.
pub fn outcome_color(outcome: &str) -> RGBColor {
    match outcome {
        "202" => RGBColor(27, 158, 119),
        "200" => RGBColor(102, 166, 30),
        "201" => RGBColor(31, 120, 180),
        "409" => RGBColor(217, 95, 2),
        "4xx" => RGBColor(117, 112, 179),
        "503" => RGBColor(231, 41, 138),
        "other" => RGBColor(166, 118, 29),
        _ => RGBColor(80, 80, 80),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shaded(from: f64, to: f64) -> Chart {
        Chart {
            title: "t".into(),
            x_label: "time (s)".into(),
            x_max: 100.0,
            panels: vec![Panel {
                y_label: "n".into(),
                scale: Scale::Linear,
                lines: vec![Line::new(
                    "a",
                    RGBColor(0, 0, 0),
                    Stroke::Solid,
                    (0..=100).map(|i| (i as f64, Some(i as f64))),
                )],
            }],
            shade: Some(Shade {
                from,
                to,
                label: "fault".into(),
            }),
        }
    }

    /// The x and width of the shade's rectangle in the plot (the legend's swatch is further
    /// right, past the plot).
    fn shade_rect(svg: &str) -> (f64, f64) {
        let attr = |tag: &str, name: &str| -> f64 {
            let k = format!(" {name}=\"");
            let i = tag.find(&k).expect(name) + k.len();
            tag[i..i + tag[i..].find('"').unwrap()].parse().unwrap()
        };
        svg.split("<rect")
            .skip(1)
            .map(|t| &t[..t.find("/>").unwrap()])
            .filter(|t| t.contains("fill=\"#DC322F\""))
            .map(|t| (attr(t, "x"), attr(t, "width")))
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .expect("a shaded rectangle")
    }

    #[test]
    fn the_fault_window_is_shaded_where_it_falls_on_the_time_axis() {
        // The whole axis gives the plot's pixel span; a window of 25..50 s must cover the
        // second quarter of it.
        let (x0, w_all) = shade_rect(&render_svg(&shaded(0.0, 100.0)).unwrap());
        let (x, w) = shade_rect(&render_svg(&shaded(25.0, 50.0)).unwrap());
        assert!(w_all > 500.0, "plot width {w_all}");
        assert!(
            (x - (x0 + 0.25 * w_all)).abs() <= 2.0,
            "{x} vs {x0} + {w_all}/4"
        );
        assert!((w - 0.25 * w_all).abs() <= 2.0, "{w} vs {w_all}/4");
    }

    #[test]
    fn a_none_breaks_a_line_into_segments() {
        let l = Line::new(
            "x",
            RGBColor(0, 0, 0),
            Stroke::Solid,
            [
                (0.0, Some(1.0)),
                (1.0, Some(2.0)),
                (2.0, None),
                (3.0, Some(4.0)),
            ],
        );
        assert_eq!(
            l.segments,
            vec![vec![(0.0, 1.0), (1.0, 2.0)], vec![(3.0, 4.0)]]
        );
    }

    /// The texts of an SVG document, trimmed.
    pub fn texts(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .map(|t| {
                let body = &t[t.find('>').unwrap() + 1..t.find("</text>").unwrap()];
                body.trim().to_owned()
            })
            .collect()
    }

    #[test]
    fn axes_legend_and_title_are_in_the_svg() {
        let texts = texts(&render_svg(&shaded(10.0, 20.0)).unwrap());
        for text in ["time (s)", "n", "a", "fault", "t", "100"] {
            assert!(texts.iter().any(|t| t == text), "{text} missing: {texts:?}");
        }
    }

    #[test]
    fn a_count_axis_has_no_ticks_between_whole_numbers() {
        let mut c = shaded(0.0, 0.0);
        c.panels[0].lines = vec![Line::new(
            "pending",
            RGBColor(0, 0, 0),
            Stroke::Solid,
            [(0.0, Some(0.0)), (50.0, Some(3.0)), (100.0, Some(1.0))],
        )];
        let texts = texts(&render_svg(&c).unwrap());
        assert!(texts.iter().any(|t| t == "3"), "{texts:?}");
        assert!(!texts.iter().any(|t| t.contains(".5")), "{texts:?}");
    }

    #[test]
    fn long_legend_labels_wrap_at_spaces() {
        assert_eq!(
            wrap("fault: late, duplicated, reordered callbacks", 30),
            ["fault: late, duplicated,", "reordered callbacks"]
        );
        assert_eq!(wrap("pending (reserved)", 30), ["pending (reserved)"]);
        let mut c = shaded(1.0, 2.0);
        c.shade.as_mut().unwrap().label = "fault: gateway SIGKILL mid-admission".into();
        let texts = texts(&render_svg(&c).unwrap());
        assert!(
            texts.iter().any(|t| t == "fault: gateway SIGKILL"),
            "{texts:?}"
        );
        assert!(texts.iter().any(|t| t == "mid-admission"), "{texts:?}");
        assert!(
            texts.iter().any(|t| t == "from 1.0 s to 2.0 s"),
            "{texts:?}"
        );
    }

    #[test]
    fn numbers_on_axes_have_no_exponents() {
        assert_eq!(human(12345.6), "12,346");
        assert_eq!(human(250.0), "250");
        assert_eq!(human(2.5), "2.5");
        assert_eq!(human(0.25), "0.25");
        assert_eq!(human(0.0), "0");
    }
}
