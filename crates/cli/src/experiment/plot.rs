//! Draws a sweep as one SVG: throughput against x on the left, abort rate (or another figure of the
//! rows) on the right, one line per series, and a legend. Text is written as SVG `<text>`, so no
//! font file is needed.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::sweep::Row;

/// How rows map to lines: colour by one parameter, dashed when another has a given value.
pub struct PlotSpec {
    /// The title above both panels.
    pub title: String,
    /// Name of the x axis.
    pub x_label: String,
    /// Parameter that picks a line's colour (e.g. "protocol").
    pub color_by: &'static str,
    /// A value of `color_by` drawn in grey and named a reference (e.g. "nocc").
    pub reference: Option<&'static str>,
    /// Parameter and value drawn dashed, and the legend words for dashed and solid lines.
    pub dashed: Option<Dashes>,
    /// What the right-hand panel shows.
    pub right: RightPanel,
}

/// The figure of the right-hand panel.
pub enum RightPanel {
    /// Aborted attempts over all attempts, in percent.
    AbortRate,
    /// A numeric parameter of every row (one of its CSV columns), e.g. replication bytes per
    /// transaction; a row without it is left out of this panel.
    Param {
        /// The parameter.
        param: &'static str,
        /// The panel's caption.
        caption: &'static str,
        /// Name of the y axis.
        y_label: &'static str,
    },
}

impl RightPanel {
    fn caption(&self) -> &'static str {
        match self {
            RightPanel::AbortRate => "Abort rate",
            RightPanel::Param { caption, .. } => caption,
        }
    }

    fn y_label(&self) -> &'static str {
        match self {
            RightPanel::AbortRate => "aborted attempts (%)",
            RightPanel::Param { y_label, .. } => y_label,
        }
    }

    fn value(&self, r: &Row) -> Option<f64> {
        match self {
            RightPanel::AbortRate => Some(r.metrics.abort_rate * 100.0),
            RightPanel::Param { param, .. } => r.param(param)?.parse().ok(),
        }
    }
}

/// Which lines are dashed, and how the legend names both styles.
pub struct Dashes {
    /// The parameter (e.g. "granularity").
    pub param: &'static str,
    /// Rows whose parameter has this value are dashed (e.g. "coarse").
    pub value: &'static str,
    /// Legend text of solid lines (e.g. "fine").
    pub solid_label: &'static str,
}

const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(64, 64, 64),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

const GREY: RGBColor = RGBColor(150, 150, 150);

const FONT: &str = "sans-serif";

/// One point of a line: x, throughput and the right-hand panel's figure.
struct Dot {
    x: f64,
    throughput: f64,
    right: Option<f64>,
}

/// One line of the plot.
struct Line {
    color: RGBColor,
    dashed: bool,
    points: Vec<Dot>,
}

fn lines(spec: &PlotSpec, rows: &[Row]) -> (Vec<Line>, Vec<(String, RGBColor)>) {
    let mut colors: Vec<(String, String, RGBColor)> = Vec::new();
    let mut series: Vec<(String, Line)> = Vec::new();
    for r in rows.iter().filter(|r| r.ok()) {
        let key = r.param(spec.color_by).unwrap_or("?").to_string();
        let color = match colors.iter().find(|(k, _, _)| *k == key) {
            Some((_, _, c)) => *c,
            None if spec.reference == Some(key.as_str()) => {
                colors.push((key.clone(), format!("{key} (reference)"), GREY));
                GREY
            }
            None => {
                let used = colors.iter().filter(|(_, _, c)| *c != GREY).count();
                let c = PALETTE[used % PALETTE.len()];
                colors.push((key.clone(), key, c));
                c
            }
        };
        let dashed = spec
            .dashed
            .as_ref()
            .is_some_and(|d| r.param(d.param) == Some(d.value));
        let idx = match series.iter().position(|(s, _)| *s == r.series) {
            Some(i) => i,
            None => {
                series.push((
                    r.series.clone(),
                    Line {
                        color,
                        dashed,
                        points: Vec::new(),
                    },
                ));
                series.len() - 1
            }
        };
        series[idx].1.points.push(Dot {
            x: r.x,
            throughput: r.metrics.throughput,
            right: spec.right.value(r),
        });
    }
    let mut out: Vec<Line> = series.into_iter().map(|(_, l)| l).collect();
    for l in &mut out {
        l.points.sort_by(|a, b| a.x.total_cmp(&b.x));
    }
    (
        out,
        colors.into_iter().map(|(_, label, c)| (label, c)).collect(),
    )
}

/// Compact numbers for axis labels: 1.2M, 35k, 0.5, 3.
fn short(v: f64) -> String {
    let a = v.abs();
    let (scaled, unit) = if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let digits = format!("{scaled:.2}");
    let digits = digits.trim_end_matches('0').trim_end_matches('.');
    format!("{digits}{unit}")
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

fn err(e: impl std::fmt::Display) -> String {
    format!("cannot draw the plot: {e}")
}

fn panel(
    area: &Area<'_>,
    lines: &[Line],
    caption: &str,
    (x_label, y_label): (&str, &str),
    y_of: fn(&Dot) -> Option<f64>,
) -> Result<(), String> {
    let xs = || lines.iter().flat_map(|l| l.points.iter().map(|p| p.x));
    let (x_min, x_max) = xs().fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let (x_min, x_max) = if x_min > x_max {
        (0.0, 1.0)
    } else {
        (x_min - 0.5, x_max + 0.5)
    };
    let integral = xs().all(|x| x == x.trunc());
    let y_max = lines
        .iter()
        .flat_map(|l| l.points.iter().filter_map(y_of))
        .fold(0.0f64, f64::max);
    let y_max = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, 18))
        .margin(10)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(x_min..x_max, 0.0..y_max)
        .map_err(err)?;
    let x_fmt = |x: &f64| {
        if !integral || (x - x.round()).abs() < 1e-9 {
            short(*x)
        } else {
            String::new()
        }
    };
    let y_fmt = |y: &f64| short(*y);
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .x_max_light_lines(2)
        .y_max_light_lines(2)
        .axis_desc_style((FONT, 15))
        .label_style((FONT, 12))
        .draw()
        .map_err(err)?;
    for l in lines {
        let pts: Vec<(f64, f64)> = l
            .points
            .iter()
            .filter_map(|p| Some((p.x, y_of(p)?)))
            .collect();
        let style = l.color.stroke_width(2);
        if l.dashed {
            chart
                .draw_series(DashedLineSeries::new(pts.clone(), 8, 5, style))
                .map_err(err)?;
        } else {
            chart
                .draw_series(LineSeries::new(pts.clone(), style))
                .map_err(err)?;
        }
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, l.color.filled())))
            .map_err(err)?;
    }
    Ok(())
}

fn legend(area: &Area<'_>, spec: &PlotSpec, colors: &[(String, RGBColor)]) -> Result<(), String> {
    let text = (FONT, 14).into_font().color(&BLACK);
    let mut y = 60;
    area.draw(&Text::new(
        spec.color_by.to_string(),
        (10, y - 25),
        text.clone(),
    ))
    .map_err(err)?;
    for (name, color) in colors {
        area.draw(&PathElement::new(
            vec![(10, y), (40, y)],
            color.stroke_width(3),
        ))
        .map_err(err)?;
        area.draw(&Text::new(name.clone(), (48, y - 8), text.clone()))
            .map_err(err)?;
        y += 22;
    }
    if let Some(d) = &spec.dashed {
        y += 20;
        area.draw(&Text::new(d.param.to_string(), (10, y - 25), text.clone()))
            .map_err(err)?;
        area.draw(&PathElement::new(
            vec![(10, y), (40, y)],
            BLACK.stroke_width(2),
        ))
        .map_err(err)?;
        area.draw(&Text::new(
            d.solid_label.to_string(),
            (48, y - 8),
            text.clone(),
        ))
        .map_err(err)?;
        y += 22;
        for (a, b) in [(10, 18), (22, 30), (34, 40)] {
            area.draw(&PathElement::new(
                vec![(a, y), (b, y)],
                BLACK.stroke_width(2),
            ))
            .map_err(err)?;
        }
        area.draw(&Text::new(d.value.to_string(), (48, y - 8), text))
            .map_err(err)?;
    }
    Ok(())
}

/// The SVG text of the plot of `rows` (points that did not count are left out).
pub fn to_svg(spec: &PlotSpec, rows: &[Row]) -> Result<String, String> {
    let (lines, colors) = lines(spec, rows);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1280, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let root = root.titled(&spec.title, (FONT, 22)).map_err(err)?;
        let (panels, key) = root.split_horizontally(1100);
        let halves = panels.split_evenly((1, 2));
        panel(
            &halves[0],
            &lines,
            "Throughput",
            (&spec.x_label, "committed transactions / s"),
            |p| Some(p.throughput),
        )?;
        panel(
            &halves[1],
            &lines,
            spec.right.caption(),
            (&spec.x_label, spec.right.y_label()),
            |p| p.right,
        )?;
        legend(&key, spec, &colors)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}
