//! A small SVG chart writer for the examples (std only): line charts with named series, CDFs
//! from raw samples, stacked as small multiples under one title, with a caption naming the
//! machine. The output is one standalone SVG: no fonts, stylesheets or scripts from outside,
//! the Okabe–Ito palette (readable with the common colour-vision deficiencies), and each series
//! also told apart by its dash pattern and marker shape, so that it survives grey print.
//!
//! Included by the examples with `#[path = "chart/mod.rs"] mod chart;`. Cargo does not take this
//! directory for an example: it has no `main.rs`.
#![allow(dead_code)]

use std::fmt::Write as _;

/// Okabe–Ito: blue, vermillion, bluish green, orange, reddish purple, sky blue, black, yellow.
const PALETTE: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#E69F00", "#CC79A7", "#56B4E9", "#000000", "#B8A800",
];
const DASHES: [&str; 8] = ["", "7 3", "2 3", "9 3 2 3", "4 4", "1 2", "12 4", "6 2 2 2"];

/// The style index of each client, so that a client has one colour in every chart.
pub mod style {
    pub const REDLOCK: usize = 0;
    pub const REDSYNC: usize = 1;
    pub const NODE_REDLOCK: usize = 2;
    /// redlock with a Redis Cluster as a node (`bench --cluster`).
    pub const CLUSTER: usize = 3;
    pub const REDSYNC_FAILFAST: usize = 4;
    /// redlock with a Redis Cluster and standalone masters as its nodes.
    pub const CLUSTER_MIXED: usize = 5;
    pub const FLOOR: usize = 6;
}

const WIDTH: f64 = 800.0;
/// Left of the plot area: y tick labels and the y axis label.
const LEFT: f64 = 78.0;
/// Right of the plot area: the legend.
const LEGEND: f64 = 230.0;
const PLOT_W: f64 = WIDTH - LEFT - LEGEND;
const PLOT_H: f64 = 230.0;
/// A panel: its title above the plot area, tick labels and the x axis label below.
const PANEL_TOP: f64 = 30.0;
const PANEL_H: f64 = PANEL_TOP + PLOT_H + 52.0;
const TITLE_H: f64 = 40.0;
const CAPTION_LINE: f64 = 15.0;
/// Characters of caption on one line, at its 11 px.
const CAPTION_CHARS: usize = 125;

/// One named series of (x, y) points, drawn joined in x order with a marker at each point (or
/// without markers when it has many).
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Index into the palette, dash patterns and markers.
    pub style: usize,
    /// One marker only, at the first point with y at or above this (a CDF's median), instead
    /// of one at each point.
    pub marker_at_y: Option<f64>,
}

impl Series {
    pub fn new(name: impl Into<String>, style: usize, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.into(),
            points,
            style,
            marker_at_y: None,
        }
    }
}

/// One plot area with its axes and legend.
#[derive(Clone, Debug, Default)]
pub struct Plot {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    /// Ticks to use on x instead of computed ones (e.g. the thread counts measured).
    pub x_ticks: Option<Vec<f64>>,
    /// Ticks (and so the range) to use on y instead of computed ones (a CDF's 0..1).
    pub y_ticks: Option<Vec<f64>>,
    /// Vertical reference lines: x and a label.
    pub rules: Vec<(f64, String)>,
    pub series: Vec<Series>,
}

/// A standalone SVG: `title`, the plots stacked below it, then `caption` (one line per `\n`).
pub fn figure(title: &str, caption: &str, plots: &[Plot]) -> String {
    let captions: Vec<String> = caption
        .lines()
        .filter(|l| !l.trim().is_empty())
        .flat_map(|l| wrap(l, CAPTION_CHARS))
        .collect();
    let height =
        TITLE_H + PANEL_H * plots.len() as f64 + CAPTION_LINE * captions.len() as f64 + 14.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"12\" role=\"img\">"
    );
    // Named for screen readers and as the tooltip where the SVG is shown on its own.
    let _ = writeln!(s, "<title>{}</title>", escape(title));
    let _ = writeln!(
        s,
        "<rect x=\"0\" y=\"0\" width=\"{WIDTH}\" height=\"{height}\" fill=\"#ffffff\"/>"
    );
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"26\" font-size=\"16\" font-weight=\"bold\" fill=\"#222222\">{}</text>",
        LEFT - 60.0,
        escape(title)
    );
    for (i, plot) in plots.iter().enumerate() {
        let _ = writeln!(
            s,
            "<g class=\"panel\" transform=\"translate(0,{})\">",
            TITLE_H + PANEL_H * i as f64
        );
        panel(&mut s, plot);
        s.push_str("</g>\n");
    }
    let mut y = TITLE_H + PANEL_H * plots.len() as f64 + 4.0;
    for line in captions {
        let _ = writeln!(
            s,
            "<text class=\"caption\" x=\"{}\" y=\"{y}\" font-size=\"11\" fill=\"#555555\">{}</text>",
            LEFT - 60.0,
            escape(&line)
        );
        y += CAPTION_LINE;
    }
    s.push_str("</svg>\n");
    s
}

/// A line chart of one plot.
pub fn line_chart(title: &str, caption: &str, plot: &Plot) -> String {
    figure(title, caption, std::slice::from_ref(plot))
}

/// The empirical CDF of `samples` as at most about 500 (x, fraction) points, x ascending: the
/// body on an even grid of fractions, the tail (p99 up) in finer steps, and the maximum.
/// Non-finite samples are left out; no samples give no points.
pub fn cdf(samples: &[f64]) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return Vec::new();
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let mut fractions: Vec<f64> = (0..=400).map(|k| k as f64 / 400.0).collect();
    fractions.extend((1..100).map(|k| 0.99 + k as f64 / 10_000.0));
    fractions.sort_by(f64::total_cmp);
    let mut points = vec![(v[0], 0.0)];
    let mut last = usize::MAX;
    for q in fractions {
        // The smallest sample with at least a fraction q of the samples at or below it.
        let i = ((q * n as f64).ceil() as usize).clamp(1, n) - 1;
        if i != last {
            points.push((v[i], (i + 1) as f64 / n as f64));
            last = i;
        }
    }
    points
}

/// One panel of a [`cdf_chart`].
#[derive(Clone, Debug, Default)]
pub struct CdfPanel {
    pub title: String,
    /// (series name, style, raw samples).
    pub series: Vec<(String, usize, Vec<f64>)>,
    /// Vertical reference lines: x and a label.
    pub rules: Vec<(f64, String)>,
}

/// A stack of CDF plots, one per panel, x = the samples' unit (`x_label`), log scale when
/// `log_x`.
pub fn cdf_chart(
    title: &str,
    caption: &str,
    x_label: &str,
    log_x: bool,
    panels: &[CdfPanel],
) -> String {
    let plots: Vec<Plot> = panels
        .iter()
        .map(|p| Plot {
            title: p.title.clone(),
            x_label: x_label.to_owned(),
            y_label: "fraction at or below".to_owned(),
            log_x,
            y_ticks: Some(vec![0.0, 0.25, 0.5, 0.75, 0.9, 1.0]),
            rules: p.rules.clone(),
            series: p
                .series
                .iter()
                .map(|(n, style, samples)| Series {
                    marker_at_y: Some(0.5),
                    ..Series::new(n.clone(), *style, cdf(samples))
                })
                .collect(),
            ..Plot::default()
        })
        .collect();
    figure(title, caption, &plots)
}

/// Commands per hand-over against the number of processes, one series per mode:
/// `(mode, processes, commands per hand-over)`, in any order.
pub fn handover_chart(points: &[(&str, u32, f64)], caption: &str) -> String {
    let mut series: Vec<Series> = Vec::new();
    for &(mode, processes, per) in points {
        let at = match series.iter().position(|s| s.name == mode) {
            Some(i) => i,
            None => {
                series.push(Series::new(mode, series.len(), Vec::new()));
                series.len() - 1
            }
        };
        series[at].points.push((processes as f64, per));
    }
    let mut ticks: Vec<f64> = points.iter().map(|p| p.1 as f64).collect();
    ticks.sort_by(f64::total_cmp);
    ticks.dedup();
    let log_x = ticks.first().is_some_and(|&lo| lo > 0.0)
        && ticks.last().is_some_and(|&hi| hi / ticks[0] >= 8.0);
    let plot = Plot {
        title: String::new(),
        x_label: "processes the waiters are spread over".to_owned(),
        y_label: "commands per hand-over".to_owned(),
        log_x,
        x_ticks: (!ticks.is_empty()).then_some(ticks),
        series,
        ..Plot::default()
    };
    line_chart(
        "Waiters on one lock: commands the nodes ran per hand-over",
        caption,
        &plot,
    )
}

/// [`handover_chart`] from the JSON lines of `examples/waiters.rs`: each line's `mode`,
/// `processes` and `commands_per_handover`; lines without them are left out.
pub fn handover_chart_from_json(lines: &[String], caption: &str) -> String {
    let points: Vec<(&str, u32, f64)> = lines
        .iter()
        .filter_map(|l| {
            Some((
                json_field(l, "mode")?,
                json_number(l, "processes")? as u32,
                json_number(l, "commands_per_handover")?,
            ))
        })
        .collect();
    handover_chart(&points, caption)
}

/// The machine, for captions: CPU model, cores, kernel and today's date (UTC).
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| format!("Linux {}", s.trim()))
        .unwrap_or_else(|_| std::env::consts::OS.to_owned());
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400);
    let (y, m, d) = civil(days as i64);
    format!("{cpu} · {cores} cores · {kernel} · {y:04}-{m:02}-{d:02}")
}

/// The (year, month, day) of a count of days since 1970-01-01 (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The raw value of `"key":` in a flat JSON line (a string without its quotes), if present.
pub fn json_field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let pattern = format!("\"{key}\":");
    let rest = line[line.find(&pattern)? + pattern.len()..].trim_start();
    if let Some(s) = rest.strip_prefix('"') {
        return s.split('"').next();
    }
    rest.split([',', '}']).next().map(str::trim)
}

/// A numeric field of a flat JSON line.
pub fn json_number(line: &str, key: &str) -> Option<f64> {
    json_field(line, key)?.parse().ok()
}

/// Maps data to pixels along one axis.
#[derive(Clone, Copy, Debug)]
struct Scale {
    lo: f64,
    hi: f64,
    log: bool,
    /// Pixel of `lo` and of `hi`.
    from: f64,
    to: f64,
}

impl Scale {
    fn at(&self, v: f64) -> f64 {
        let (a, b, v) = if self.log {
            (self.lo.ln(), self.hi.ln(), v.max(f64::MIN_POSITIVE).ln())
        } else {
            (self.lo, self.hi, v)
        };
        let t = if b > a { (v - a) / (b - a) } else { 0.5 };
        self.from + t * (self.to - self.from)
    }
}

/// Nice ticks covering [lo, hi] on a linear axis (steps of 1, 2 or 5 × 10^k, about `count`),
/// the first at or below lo and the last at or above hi.
fn linear_ticks(lo: f64, hi: f64, count: usize) -> Vec<f64> {
    let span = (hi - lo).max(f64::EPSILON * hi.abs().max(1.0));
    let raw = span / count.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).floor();
    let last = (hi / step).ceil();
    (0..=((last - first) as usize).min(50))
        .map(|k| {
            let v = (first + k as f64) * step;
            // No -0 and no 0.30000000000000004.
            (v / step).round() * step + 0.0
        })
        .collect()
}

/// The range and ticks of a log axis holding [lo, hi] (both > 0): the range widened to the
/// nearest tick on each side when one is close, else by a little; ticks at 1-2-3-5 steps within
/// about a decade and a half, 1-2-5 up to three decades, powers of ten past that, and linear
/// ticks when that gives fewer than three.
fn log_axis(lo: f64, hi: f64) -> (f64, f64, Vec<f64>) {
    let decades = (hi / lo).log10();
    let mults: &[f64] = if decades > 3.0 {
        &[1.0]
    } else if decades > 1.5 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0, 2.0, 3.0, 5.0]
    };
    let (d0, d1) = (lo.log10().floor() as i32 - 1, hi.log10().ceil() as i32 + 1);
    let candidates: Vec<f64> = (d0..=d1)
        .flat_map(|d| mults.iter().map(move |m| m * 10f64.powi(d)))
        .collect();
    let from = candidates
        .iter()
        .rev()
        .copied()
        .find(|t| *t <= lo / 1.02)
        .filter(|t| lo / t <= 1.6)
        .unwrap_or(lo / 1.08);
    let to = candidates
        .iter()
        .copied()
        .find(|t| *t >= hi * 1.02)
        .filter(|t| t / hi <= 1.6)
        .unwrap_or(hi * 1.08);
    let mut ticks: Vec<f64> = candidates
        .into_iter()
        .filter(|t| *t >= from * 0.999 && *t <= to * 1.001)
        .collect();
    if ticks.len() < 3 {
        ticks = linear_ticks(from, to, 5)
            .into_iter()
            .filter(|t| *t >= from * 0.999 && *t <= to * 1.001 && *t > 0.0)
            .collect();
    }
    (from, to, ticks)
}

/// The x range and ticks of a plot.
fn x_axis(plot: &Plot) -> (f64, f64, Vec<f64>) {
    let mut xs: Vec<f64> = plot
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .chain(plot.rules.iter().map(|r| r.0))
        .filter(|x| x.is_finite() && (!plot.log_x || *x > 0.0))
        .collect();
    if let Some(t) = &plot.x_ticks {
        xs.extend(
            t.iter()
                .filter(|x| x.is_finite() && (!plot.log_x || **x > 0.0)),
        );
    }
    let (mut lo, mut hi) = xs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    if lo > hi {
        (lo, hi) = if plot.log_x { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    if plot.log_x {
        if hi / lo < 1.5 {
            (lo, hi) = (lo / 1.25, hi * 1.25);
        }
        if let Some(t) = &plot.x_ticks {
            let ticks = t.iter().copied().filter(|x| *x > 0.0).collect();
            return (lo / 1.3, hi * 1.3, ticks);
        }
        return log_axis(lo, hi);
    }
    if hi - lo < f64::EPSILON * hi.abs().max(1.0) {
        (lo, hi) = (lo - 0.5 * lo.abs().max(1.0), hi + 0.5 * hi.abs().max(1.0));
    }
    if let Some(t) = &plot.x_ticks {
        let pad = (hi - lo) * 0.06;
        return (lo - pad, hi + pad, t.clone());
    }
    let ticks = linear_ticks(lo, hi, 6);
    (ticks[0], *ticks.last().unwrap(), ticks)
}

/// The y range and ticks of a plot: from 0 (or below, for negative data) up.
fn y_axis(plot: &Plot) -> (f64, f64, Vec<f64>) {
    if let Some(t) = plot.y_ticks.as_ref().filter(|t| t.len() >= 2) {
        let lo = t.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = t.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        return (lo, hi, t.clone());
    }
    let (lo, hi) = plot
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|y| y.is_finite())
        .fold((0.0f64, 0.0f64), |(a, b), y| (a.min(y), b.max(y)));
    let hi = if (hi - lo).abs() < f64::EPSILON {
        lo + 1.0
    } else {
        hi
    };
    let ticks = linear_ticks(lo, hi, 5);
    (ticks[0], *ticks.last().unwrap(), ticks)
}

/// One plot into `s`, its top left at (0, 0).
fn panel(s: &mut String, plot: &Plot) {
    let (x_lo, x_hi, x_ticks) = x_axis(plot);
    let (y_lo, y_hi, y_ticks) = y_axis(plot);
    let (top, bottom) = (PANEL_TOP, PANEL_TOP + PLOT_H);
    let x = Scale {
        lo: x_lo,
        hi: x_hi,
        log: plot.log_x,
        from: LEFT,
        to: LEFT + PLOT_W,
    };
    let y = Scale {
        lo: y_lo,
        hi: y_hi,
        log: false,
        from: bottom,
        to: top,
    };
    if !plot.title.is_empty() {
        let _ = writeln!(
            s,
            "<text x=\"{LEFT}\" y=\"{}\" font-size=\"13\" font-weight=\"bold\" fill=\"#222222\">{}</text>",
            top - 10.0,
            escape(&plot.title)
        );
    }
    let _ = writeln!(
        s,
        "<rect x=\"{LEFT}\" y=\"{top}\" width=\"{PLOT_W}\" height=\"{PLOT_H}\" fill=\"#fafafa\" stroke=\"#999999\"/>"
    );
    // Grid and ticks.
    for &t in &y_ticks {
        let py = px(y.at(t));
        let _ = writeln!(
            s,
            "<line x1=\"{LEFT}\" y1=\"{py}\" x2=\"{}\" y2=\"{py}\" stroke=\"#e3e3e3\"/>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"#333333\">{}</text>",
            LEFT + PLOT_W,
            LEFT - 6.0,
            py + 4.0,
            number(t)
        );
    }
    for &t in x_ticks.iter().filter(|t| **t >= x_lo && **t <= x_hi) {
        let pxx = px(x.at(t));
        let _ = writeln!(
            s,
            "<line x1=\"{pxx}\" y1=\"{top}\" x2=\"{pxx}\" y2=\"{bottom}\" stroke=\"#e3e3e3\"/>\
             <text x=\"{pxx}\" y=\"{}\" text-anchor=\"middle\" fill=\"#333333\">{}</text>",
            bottom + 16.0,
            number(t)
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#222222\">{}{}</text>",
        LEFT + PLOT_W / 2.0,
        bottom + 36.0,
        escape(&plot.x_label),
        if plot.log_x { " (log scale)" } else { "" }
    );
    let _ = writeln!(
        s,
        "<text transform=\"translate(16,{}) rotate(-90)\" text-anchor=\"middle\" fill=\"#222222\">{}</text>",
        top + PLOT_H / 2.0,
        escape(&plot.y_label)
    );
    // Reference lines, labelled at the top.
    for (at, label) in &plot.rules {
        if !at.is_finite() || (plot.log_x && *at <= 0.0) {
            continue;
        }
        let pxx = px(x.at(*at));
        let _ = writeln!(
            s,
            "<g class=\"rule\"><title>{}</title><line x1=\"{pxx}\" y1=\"{top}\" x2=\"{pxx}\" y2=\"{bottom}\" stroke=\"#666666\" stroke-width=\"1.5\" stroke-dasharray=\"3 3\"/></g>",
            escape(label)
        );
    }
    // The series, clipped to the plot area by clamping (no clipPath ids to collide).
    for series in &plot.series {
        let colour = PALETTE[series.style % PALETTE.len()];
        let dash = DASHES[series.style % DASHES.len()];
        let mut points: Vec<(f64, f64)> = series
            .points
            .iter()
            .copied()
            .filter(|(a, b)| a.is_finite() && b.is_finite() && (!plot.log_x || *a > 0.0))
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        let _ = writeln!(
            s,
            "<g class=\"series\" stroke=\"{colour}\" fill=\"{colour}\"><title>{}</title>",
            escape(&series.name)
        );
        let pixels: Vec<(f64, f64)> = points
            .iter()
            .map(|&(a, b)| {
                (
                    px(x.at(a).clamp(LEFT, LEFT + PLOT_W)),
                    px(y.at(b).clamp(top, bottom)),
                )
            })
            .collect();
        if pixels.len() > 1 {
            let path: Vec<String> = pixels.iter().map(|(a, b)| format!("{a},{b}")).collect();
            let _ = writeln!(
                s,
                "<polyline fill=\"none\" stroke-width=\"2\" stroke-linejoin=\"round\"{} points=\"{}\"/>",
                if dash.is_empty() {
                    String::new()
                } else {
                    format!(" stroke-dasharray=\"{dash}\"")
                },
                path.join(" ")
            );
        }
        if let Some(at) = series.marker_at_y {
            if let Some(i) = points.iter().position(|p| p.1 >= at) {
                s.push_str(&marker(series.style, pixels[i].0, pixels[i].1));
            }
        } else if pixels.len() <= 40 {
            for &(a, b) in &pixels {
                s.push_str(&marker(series.style, a, b));
            }
        }
        s.push_str("</g>\n");
    }
    // Legend, right of the plot area: the series, then the reference lines.
    let lx = LEFT + PLOT_W + 14.0;
    let mut ly = top + 10.0;
    let text = |s: &mut String, ly: f64, lines: &[String], fill: &str| {
        for (k, line) in lines.iter().enumerate() {
            let _ = write!(
                s,
                "<text x=\"{}\" y=\"{}\" stroke=\"none\" fill=\"{fill}\">{}</text>",
                lx + 34.0,
                ly + 4.0 + 14.0 * k as f64,
                escape(line)
            );
        }
    };
    for series in &plot.series {
        let colour = PALETTE[series.style % PALETTE.len()];
        let dash = DASHES[series.style % DASHES.len()];
        let empty = series.points.is_empty();
        let lines = wrap(
            &format!("{}{}", series.name, if empty { " (no data)" } else { "" }),
            LEGEND_CHARS,
        );
        let _ = write!(
            s,
            "<g class=\"legend\" stroke=\"{colour}\" fill=\"{colour}\"><line x1=\"{lx}\" y1=\"{ly}\" x2=\"{}\" y2=\"{ly}\" stroke-width=\"2\"{}/>{}",
            lx + 28.0,
            if dash.is_empty() {
                String::new()
            } else {
                format!(" stroke-dasharray=\"{dash}\"")
            },
            marker(series.style, lx + 14.0, ly),
        );
        text(s, ly, &lines, if empty { "#888888" } else { "#222222" });
        s.push_str("</g>\n");
        ly += 6.0 + 14.0 * lines.len() as f64;
    }
    for (_, label) in &plot.rules {
        let lines = wrap(label, LEGEND_CHARS);
        let _ = write!(
            s,
            "<g class=\"legend\"><line x1=\"{lx}\" y1=\"{ly}\" x2=\"{}\" y2=\"{ly}\" stroke=\"#666666\" stroke-width=\"1.5\" stroke-dasharray=\"3 3\"/>",
            lx + 28.0
        );
        text(s, ly, &lines, "#444444");
        s.push_str("</g>\n");
        ly += 6.0 + 14.0 * lines.len() as f64;
    }
}

/// Characters of legend text on one line.
const LEGEND_CHARS: usize = 26;

/// `text` broken at spaces into lines of at most `width` characters (longer words stay whole).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_owned()),
        }
    }
    if lines.is_empty() {
        lines.push(String::new());
    }
    lines
}

/// A marker of style `style` centred at (x, y): circle, square, triangle, diamond, triangle
/// down, cross.
fn marker(style: usize, x: f64, y: f64) -> String {
    let r = 4.0;
    match style % 6 {
        0 => format!("<circle cx=\"{x}\" cy=\"{y}\" r=\"{r}\"/>"),
        1 => format!(
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>",
            px(x - r),
            px(y - r),
            2.0 * r,
            2.0 * r
        ),
        2 => polygon(&[(x, y - r - 1.0), (x + r + 1.0, y + r), (x - r - 1.0, y + r)]),
        3 => polygon(&[
            (x, y - r - 1.0),
            (x + r + 1.0, y),
            (x, y + r + 1.0),
            (x - r - 1.0, y),
        ]),
        4 => polygon(&[(x, y + r + 1.0), (x + r + 1.0, y - r), (x - r - 1.0, y - r)]),
        _ => format!(
            "<path d=\"M{},{} L{},{} M{},{} L{},{}\" stroke-width=\"2.5\" fill=\"none\"/>",
            px(x - r),
            px(y - r),
            px(x + r),
            px(y + r),
            px(x - r),
            px(y + r),
            px(x + r),
            px(y - r)
        ),
    }
}

fn polygon(points: &[(f64, f64)]) -> String {
    let p: Vec<String> = points
        .iter()
        .map(|(a, b)| format!("{},{}", px(*a), px(*b)))
        .collect();
    format!("<polygon points=\"{}\"/>", p.join(" "))
}

/// A pixel coordinate to one decimal.
fn px(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// A tick label: 12k, 2.5k, 1.5M, 0.25, 140.
fn number(v: f64) -> String {
    let a = v.abs();
    let (v, suffix) = if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let mut s = format!("{:.3}", v);
    if s.contains('.') {
        s = s.trim_end_matches('0').trim_end_matches('.').to_owned();
    }
    if s == "-0" {
        s = "0".to_owned();
    }
    s + suffix
}

/// Text made safe inside an element or attribute.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks that tags nest and close (`<a>`, `</a>`, `<a/>`), skipping attribute values;
    /// returns the names of the elements opened, in order.
    fn elements(svg: &str) -> Vec<String> {
        let mut stack: Vec<String> = Vec::new();
        let mut seen = Vec::new();
        let mut rest = svg;
        while let Some(open) = rest.find('<') {
            let after = &rest[open + 1..];
            let mut end = None;
            let mut quoted = false;
            for (i, c) in after.char_indices() {
                match c {
                    '"' => quoted = !quoted,
                    '>' if !quoted => {
                        end = Some(i);
                        break;
                    }
                    '<' if !quoted => panic!("a '<' inside a tag"),
                    _ => {}
                }
            }
            let end = end.expect("an unterminated tag");
            let tag = &after[..end];
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(
                    stack.pop().as_deref(),
                    Some(name.trim()),
                    "mismatched close"
                );
            } else {
                let name: String = tag
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric())
                    .collect();
                assert!(!name.is_empty(), "a tag without a name: {tag}");
                seen.push(name.clone());
                if !tag.ends_with('/') {
                    stack.push(name);
                }
            }
            // Text between tags must carry no raw '&' but entities.
            let text_end = after[end..].find('<').map_or(after.len(), |i| end + i);
            let text = &after[end + 1..text_end.max(end + 1)];
            for (i, _) in text.match_indices('&') {
                let entity = &text[i..];
                assert!(
                    ["&amp;", "&lt;", "&gt;", "&quot;"]
                        .iter()
                        .any(|e| entity.starts_with(e)),
                    "a raw '&' in text"
                );
            }
            rest = &after[end + 1..];
        }
        assert!(stack.is_empty(), "unclosed: {stack:?}");
        seen
    }

    fn well_formed(svg: &str) -> Vec<String> {
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        for bad in ["NaN", "inf", "undefined"] {
            assert!(!svg.contains(bad), "{bad} in the SVG");
        }
        let seen = elements(svg);
        assert_eq!(seen.iter().filter(|e| *e == "svg").count(), 1);
        seen
    }

    fn plot(series: Vec<Series>, log_x: bool) -> Plot {
        Plot {
            title: "t".into(),
            x_label: "threads".into(),
            y_label: "cycles/s".into(),
            log_x,
            series,
            ..Plot::default()
        }
    }

    #[test]
    fn a_line_chart_is_well_formed_with_one_group_per_series() {
        let p = plot(
            vec![
                Series::new(
                    "redlock",
                    style::REDLOCK,
                    vec![(1.0, 11_000.0), (4.0, 9_000.0)],
                ),
                Series::new("floor", style::FLOOR, vec![(1.0, 5_000.0)]),
                Series::new("node-redlock", style::NODE_REDLOCK, vec![]),
            ],
            true,
        );
        let svg = line_chart("Cycles & <threads>", "AMD EPYC · 2 cores", &p);
        well_formed(&svg);
        assert_eq!(svg.matches("class=\"series\"").count(), 3);
        assert_eq!(svg.matches("class=\"legend\"").count(), 3);
        assert!(svg.contains("<title>Cycles &amp; &lt;threads&gt;</title>"));
        assert!(svg.contains("(no data)"));
        assert!(svg.contains("AMD EPYC"));
    }

    #[test]
    fn empty_and_single_point_charts_have_no_nan() {
        for log_x in [false, true] {
            well_formed(&line_chart("empty", "", &plot(vec![], log_x)));
            well_formed(&line_chart(
                "one empty series",
                "",
                &plot(vec![Series::new("a", 0, vec![])], log_x),
            ));
            well_formed(&line_chart(
                "one point",
                "",
                &plot(vec![Series::new("a", 0, vec![(3.0, 7.0)])], log_x),
            ));
            well_formed(&line_chart(
                "zeros and junk",
                "",
                &plot(
                    vec![Series::new(
                        "a",
                        0,
                        vec![(0.0, 0.0), (f64::NAN, 1.0), (2.0, f64::INFINITY)],
                    )],
                    log_x,
                ),
            ));
        }
        well_formed(&cdf_chart("none", "", "ms", true, &[]));
        well_formed(&cdf_chart(
            "empty",
            "",
            "ms",
            true,
            &[CdfPanel {
                title: "p".into(),
                series: vec![("a".into(), 0, vec![])],
                rules: vec![],
            }],
        ));
        well_formed(&cdf_chart(
            "one sample",
            "",
            "ms",
            true,
            &[CdfPanel {
                title: "p".into(),
                series: vec![("a".into(), 0, vec![1.5])],
                rules: vec![(3.0, "limit".into())],
            }],
        ));
        well_formed(&handover_chart(&[], ""));
    }

    #[test]
    fn scales_are_monotone() {
        for log in [false, true] {
            let s = Scale {
                lo: 0.5,
                hi: 300.0,
                log,
                from: 100.0,
                to: 600.0,
            };
            let xs = [0.5, 0.7, 1.0, 2.0, 25.0, 281.0, 300.0];
            let px: Vec<f64> = xs.iter().map(|&v| s.at(v)).collect();
            assert!(px.windows(2).all(|w| w[0] < w[1]), "{px:?}");
            assert!((px[0] - 100.0).abs() < 1e-9 && (px[6] - 600.0).abs() < 1e-9);
            // y runs up the page: larger values, smaller pixels.
            let y = Scale {
                from: 300.0,
                to: 30.0,
                ..s
            };
            assert!(y.at(1.0) > y.at(2.0));
        }
    }

    #[test]
    fn ticks_are_increasing_and_cover_the_data() {
        for (lo, hi) in [(0.0, 22_500.0), (3.0, 3.7), (0.0, 1.0), (-5.0, 12.0)] {
            let t = linear_ticks(lo, hi, 5);
            assert!(t.windows(2).all(|w| w[0] < w[1]), "{t:?}");
            assert!(t[0] <= lo && *t.last().unwrap() >= hi, "{t:?}");
            assert!(t.len() <= 12, "{t:?}");
        }
        for (lo, hi) in [
            (1.5, 5.0),
            (20.0, 300.0),
            (0.8, 300.0),
            (0.01, 1000.0),
            (1.6, 1.7),
        ] {
            let (from, to, t) = log_axis(lo, hi);
            assert!(from < lo && to > hi, "{lo} {hi}: {from} {to}");
            assert!(t.len() >= 2, "{lo} {hi} {t:?}");
            assert!(t.windows(2).all(|w| w[0] < w[1]), "{t:?}");
            assert!(t.iter().all(|&v| v >= from * 0.999 && v <= to * 1.001));
        }
        assert_eq!(
            log_axis(24.0, 282.0).2,
            [20.0, 30.0, 50.0, 100.0, 200.0, 300.0]
        );
        assert_eq!(number(22_500.0), "22.5k");
        assert_eq!(number(0.25), "0.25");
        assert_eq!(number(140.0), "140");
        assert_eq!(number(2_000_000.0), "2M");
    }

    #[test]
    fn a_cdf_rises_from_0_to_1() {
        assert!(cdf(&[]).is_empty());
        assert_eq!(cdf(&[2.0]), vec![(2.0, 0.0), (2.0, 1.0)]);
        let samples: Vec<f64> = (0..100_000).rev().map(|i| i as f64 / 7.0).collect();
        let c = cdf(&samples);
        assert!(c.len() <= 520, "{}", c.len());
        assert!(c.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1));
        assert_eq!(c.first().unwrap().1, 0.0);
        assert_eq!(c.last().unwrap(), &(99_999.0 / 7.0, 1.0));
        // The median is where half the samples are.
        let half = c.iter().find(|p| p.1 >= 0.5).unwrap();
        assert!((half.0 - 50_000.0 / 7.0).abs() < 1.0);
    }

    #[test]
    fn a_cdf_chart_stacks_one_panel_per_placement() {
        let panels: Vec<_> = ["one-zone", "regions", "one-slow-node"]
            .iter()
            .map(|p| CdfPanel {
                title: p.to_string(),
                series: vec![
                    ("redlock".to_string(), style::REDLOCK, vec![1.8, 1.9, 2.5]),
                    ("floor".to_string(), style::FLOOR, vec![1.9, 2.0, 3.0]),
                ],
                rules: vec![(1.0, "quorum".to_string())],
            })
            .collect();
        let svg = cdf_chart("Latency", "machine", "ms", true, &panels);
        well_formed(&svg);
        assert_eq!(svg.matches("class=\"panel\"").count(), 3);
        assert_eq!(svg.matches("class=\"series\"").count(), 6);
        assert_eq!(svg.matches("class=\"rule\"").count(), 3);
    }

    #[test]
    fn the_handover_chart_has_one_series_per_mode() {
        let svg = handover_chart(
            &[
                ("notify", 1, 14.0),
                ("poll", 1, 263.0),
                ("notify", 5, 61.0),
                ("notify", 25, 549.0),
            ],
            "machine",
        );
        well_formed(&svg);
        assert_eq!(svg.matches("class=\"series\"").count(), 2);
        assert!(svg.contains(">notify<") && svg.contains(">poll<"));
        assert!(svg.contains("(log scale)"));
        let lines = [
            r#"{"mode":"poll","nodes":5,"processes":1,"commands_per_handover":263.0}"#.to_owned(),
            r#"{"mode":"notify","nodes":5,"processes":5,"commands_per_handover":61.2}"#.to_owned(),
            "not json".to_owned(),
        ];
        let svg = handover_chart_from_json(&lines, "");
        well_formed(&svg);
        assert_eq!(svg.matches("class=\"series\"").count(), 2);
    }

    #[test]
    fn json_fields_are_found_by_exact_key() {
        let line = r#"{"config":"latency-regions-redlock","nodes":5,"p50_us":25012.3,"floor_p50_us":1.0,"x":"a b"}"#;
        assert_eq!(json_field(line, "config"), Some("latency-regions-redlock"));
        assert_eq!(json_number(line, "p50_us"), Some(25012.3));
        assert_eq!(json_number(line, "nodes"), Some(5.0));
        assert_eq!(json_field(line, "x"), Some("a b"));
        assert_eq!(json_field(line, "missing"), None);
    }

    #[test]
    fn long_text_wraps_at_spaces() {
        assert_eq!(wrap("a bb ccc", 4), ["a bb", "ccc"]);
        assert_eq!(
            wrap("averyveryverylongword x", 4),
            ["averyveryverylongword", "x"]
        );
        assert_eq!(wrap("", 4), [""]);
    }

    #[test]
    fn dates_come_out_right() {
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(civil(11_017), (2000, 3, 1));
        assert_eq!(civil(11_016), (2000, 2, 29));
        assert_eq!(civil(20_416), (2025, 11, 24));
        assert!(machine().contains(" cores · "));
    }
}
