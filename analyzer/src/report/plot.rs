//! `roceprobe plot --csv-dir DIR --out DIR`: SVG plots from the CSV reports.
//!
//! - `latency_cdf_<op>.svg`: per segment, the distribution of the op's latency over the run,
//!   a log-scale CDF pooled from every interval's and pair's percentiles (min, p50, p90,
//!   p99, p99.9, max), each interval weighted by its sample count.
//! - `segments_<op>.svg` (NVMe ops): per interval, the compute, network and storage time
//!   stacked, so that a change in who dominates shows at a glance. Each is the mean of the
//!   (initiator, target) pairs' medians (p50) weighted by their I/O counts: latency.csv keeps
//!   percentiles, not histograms, so this is not the median of the pooled I/Os, except where
//!   one pair has the interval's I/Os.
//! - `flow_throughput.svg`: the busiest flows' throughput per interval, with the intervals
//!   that had retransmissions (circles) and CNPs (triangles) marked.
//!
//! Each plot is written as SVG and as PNG (rendered with resvg; text needs a system font,
//! DejaVu Sans by preference). Every plotted series carries its data (`data-x`, `data-y`), so tests compare the plots
//! with the CSV files they came from.

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// Flows drawn in the throughput plot (the most bytes first).
const TOP_FLOWS: usize = 8;
const W: f64 = 800.0;
const H: f64 = 450.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 200.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
const COLORS: [&str; 8] =
    ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];

/// Nanoseconds since the epoch of an RFC 3339 UTC time as the CSV files write it
/// (`2026-11-29T08:00:00.000414565Z`).
pub fn parse_rfc3339(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if !s.is_ascii() || b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || !s.ends_with('Z') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let frac = &s[19..s.len() - 1];
    let nanos = match frac.strip_prefix('.') {
        Some(f) if !f.is_empty() && f.len() <= 9 && f.bytes().all(|c| c.is_ascii_digit()) => {
            f.parse::<u64>().ok()? * 10u64.pow(9 - f.len() as u32)
        }
        None if frac.is_empty() => 0,
        _ => return None,
    };
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    // Days from the civil date (proleptic Gregorian).
    let (y, m) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    u64::try_from(secs).ok().map(|s| s * 1_000_000_000 + nanos)
}

/// The rows of a report (its rotated files, oldest first, then the current one) as maps
/// from column name to value.
fn read_csv(path: &Path) -> Result<Vec<BTreeMap<String, String>>> {
    let (dir, stem) =
        (path.parent().unwrap_or(Path::new(".")), path.file_stem().and_then(|s| s.to_str()).unwrap_or(""));
    let mut rows = Vec::new();
    for file in super::csv::report_files(dir, stem)? {
        let mut r =
            csv::Reader::from_path(&file).with_context(|| format!("cannot read {}", file.display()))?;
        let header: Vec<String> = r.headers()?.iter().map(str::to_owned).collect();
        for rec in r.records() {
            let rec = rec.with_context(|| format!("{}: a malformed row", file.display()))?;
            rows.push(header.iter().cloned().zip(rec.iter().map(str::to_owned)).collect());
        }
    }
    Ok(rows)
}

fn field<'a>(row: &'a BTreeMap<String, String>, name: &str, path: &Path) -> Result<&'a str> {
    row.get(name).map(String::as_str).with_context(|| format!("{}: no column {name}", path.display()))
}

fn number(row: &BTreeMap<String, String>, name: &str, path: &Path) -> Result<f64> {
    let v = field(row, name, path)?;
    v.parse().with_context(|| format!("{}: {name} '{v}' is not a number", path.display()))
}

fn time(row: &BTreeMap<String, String>, name: &str, path: &Path) -> Result<u64> {
    let v = field(row, name, path)?;
    parse_rfc3339(v).with_context(|| format!("{}: {name} '{v}' is not an RFC 3339 time", path.display()))
}

/// Percentile points of one latency row: (sample count, [(µs, quantile)]).
type QuantileRow = (f64, Vec<(f64, f64)>);
/// One interval of a flow in the throughput plot: (time, Gbit/s, retransmissions, CNPs).
type FlowPoint = (f64, f64, bool, bool);
/// A flow in the throughput plot: its name, bytes over the run and points.
type FlowLine = (String, (u64, Vec<FlowPoint>));

/// One plotted line: its name, its points, and how it is drawn.
struct Series {
    name: String,
    points: Vec<(f64, f64)>,
}

/// A linear or log axis over [lo, hi].
#[derive(Clone, Copy)]
struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
}

impl Axis {
    fn fit(values: impl Iterator<Item = f64>, log: bool, zero: bool) -> Self {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if !lo.is_finite() {
            (lo, hi) = if log { (1.0, 10.0) } else { (0.0, 1.0) };
        }
        if zero && !log {
            lo = lo.min(0.0);
        }
        if hi <= lo {
            hi = if log { lo * 10.0 } else { lo + 1.0 };
        }
        if !log {
            // Round ends on a round step.
            let step = nice_step((hi - lo) / 5.0);
            (lo, hi) = ((lo / step).floor() * step, (hi / step).ceil() * step);
        }
        Self { lo, hi, log }
    }
    /// Position in [0, 1].
    fn at(&self, v: f64) -> f64 {
        if self.log {
            (v.max(self.lo).ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }
    fn ticks(&self) -> Vec<f64> {
        if self.log {
            // 1, 2 and 5 times the powers of ten in range.
            let mut t = Vec::new();
            let mut p = 10f64.powf(self.lo.log10().floor());
            while p <= self.hi * 1.0001 {
                for m in [1.0, 2.0, 5.0] {
                    if (self.lo * 0.9999..=self.hi * 1.0001).contains(&(m * p)) {
                        t.push(m * p);
                    }
                }
                p *= 10.0;
            }
            if t.len() < 2 {
                t = vec![self.lo, self.hi];
            }
            t
        } else {
            let step = nice_step((self.hi - self.lo) / 5.0);
            let n = ((self.hi - self.lo) / step).round() as usize;
            (0..=n).map(|i| self.lo + step * i as f64).collect()
        }
    }
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * p).find(|s| *s >= raw * 0.999).unwrap_or(10.0 * p)
}

/// A unit for a time axis spanning `span_s` seconds: (multiplier from seconds, name).
fn time_unit(span_s: f64) -> (f64, &'static str) {
    if span_s < 2e-3 {
        (1e6, "µs")
    } else if span_s < 2.0 {
        (1e3, "ms")
    } else {
        (1.0, "s")
    }
}

fn label(v: f64) -> String {
    let a = v.abs();
    if a < 1e-12 {
        "0".into()
    } else if !(0.001..1e6).contains(&a) {
        format!("{v:.1e}")
    } else {
        format!("{}", (v * 1000.0).round() / 1000.0)
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn values(v: impl Iterator<Item = f64>) -> String {
    v.map(|x| format!("{x}")).collect::<Vec<_>>().join(" ")
}

/// The frame of a plot: title, axes with ticks and labels; returns the SVG so far and a
/// mapping from data to page coordinates.
fn frame(
    title: &str,
    x: Axis,
    y: Axis,
    x_label: &str,
    y_label: &str,
) -> (String, impl Fn(f64, f64) -> (f64, f64)) {
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" font-family=\"DejaVu Sans, sans-serif\" font-size=\"12\">\n\
         <rect width=\"{W}\" height=\"{H}\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">{}</text>\n\
         <rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"#444\"/>\n",
        W / 2.0,
        esc(title)
    );
    for t in x.ticks() {
        let px = LEFT + x.at(t) * pw;
        let _ = writeln!(
            s,
            "<line x1=\"{px:.1}\" y1=\"{TOP}\" x2=\"{px:.1}\" y2=\"{}\" stroke=\"#ddd\"/><text x=\"{px:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            TOP + ph,
            TOP + ph + 16.0,
            label(t)
        );
    }
    for t in y.ticks() {
        let py = TOP + ph - y.at(t) * ph;
        let _ = writeln!(
            s,
            "<line x1=\"{LEFT}\" y1=\"{py:.1}\" x2=\"{}\" y2=\"{py:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LEFT + pw,
            LEFT - 6.0,
            py + 4.0,
            label(t)
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n<text x=\"16\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {})\">{}</text>",
        LEFT + pw / 2.0,
        H - 12.0,
        esc(x_label),
        TOP + ph / 2.0,
        TOP + ph / 2.0,
        esc(y_label)
    );
    let map = move |vx: f64, vy: f64| (LEFT + x.at(vx) * pw, TOP + ph - y.at(vy) * ph);
    (s, map)
}

fn legend(s: &mut String, i: usize, name: &str, color: &str) {
    let y = TOP + 10.0 + 18.0 * i as f64;
    let x = W - RIGHT + 12.0;
    let _ = writeln!(
        s,
        "<rect x=\"{x}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{color}\"/><text x=\"{}\" y=\"{}\">{}</text>",
        y - 10.0,
        x + 18.0,
        y,
        esc(name)
    );
}

/// Lines, one per series, with their data attached.
fn line_plot(title: &str, series: &[Series], log_x: bool, x_label: &str, y_label: &str) -> String {
    let x = Axis::fit(series.iter().flat_map(|s| s.points.iter().map(|p| p.0)), log_x, false);
    let y = Axis::fit(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)), false, true);
    let (mut s, map) = frame(title, x, y, x_label, y_label);
    for (i, se) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<String> = se
            .points
            .iter()
            .map(|&(a, b)| {
                let (px, py) = map(a, b);
                format!("{px:.2},{py:.2}")
            })
            .collect();
        let _ = writeln!(
            s,
            "<g class=\"series\" data-name=\"{}\" data-x=\"{}\" data-y=\"{}\"><polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/></g>",
            esc(&se.name),
            values(se.points.iter().map(|p| p.0)),
            values(se.points.iter().map(|p| p.1)),
            pts.join(" ")
        );
        legend(&mut s, i, &se.name, color);
    }
    s.push_str("</svg>\n");
    s
}

/// The pooled CDF of rows of (count, [(latency µs, quantile)]): piecewise linear per row
/// between its percentile points, averaged with the rows' counts as weights.
fn pooled_cdf(rows: &[QuantileRow]) -> Vec<(f64, f64)> {
    let total: f64 = rows.iter().map(|r| r.0).sum();
    if total <= 0.0 {
        return Vec::new();
    }
    let mut xs: Vec<f64> = rows.iter().flat_map(|r| r.1.iter().map(|p| p.0)).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    // Right-continuous: at a point's latency, its quantile has been reached (a row whose
    // percentiles are all one value steps from 0 to 1 there).
    let cdf_row = |pts: &[(f64, f64)], x: f64| -> f64 {
        let mut q = 0.0;
        for (i, &(px, pq)) in pts.iter().enumerate() {
            if px <= x {
                q = pq;
            } else {
                if i > 0 {
                    let (x0, q0) = pts[i - 1];
                    q = q0 + (pq - q0) * (x - x0) / (px - x0);
                }
                break;
            }
        }
        q
    };
    xs.into_iter()
        .map(|x| (x, rows.iter().map(|(n, pts)| n * cdf_row(pts, x)).sum::<f64>() / total))
        .collect()
}

/// Writes every plot the CSV files in `csv_dir` allow into `out`; returns the files written.
pub fn plot(csv_dir: &Path, out: &Path) -> Result<Vec<std::path::PathBuf>> {
    let (latency_path, flows_path) = report_paths(csv_dir)?;
    let latency = read_csv(&latency_path)?;
    let flows = read_csv(&flows_path)?;
    std::fs::create_dir_all(out).with_context(|| format!("--out: cannot create {}", out.display()))?;
    let mut plots = Plots::new(out);
    let (by_op, split) = read_latency(&latency, &latency_path)?;
    for (op, segs) in &by_op {
        plots.save(format!("latency_cdf_{op}.svg"), latency_cdf(op, segs))?;
    }
    for (op, intervals) in &split {
        if let Some(svg) = segment_split(op, intervals) {
            plots.save(format!("segments_{op}.svg"), svg)?;
        }
    }
    let (busiest, unit) = busiest_flows(&flows, &flows_path)?;
    plots.save("flow_throughput.svg".into(), throughput_plot(&busiest, unit))?;
    Ok(plots.written)
}

/// The latency and flows reports in `csv_dir`; both must be there.
fn report_paths(csv_dir: &Path) -> Result<(std::path::PathBuf, std::path::PathBuf)> {
    let latency_path = csv_dir.join("latency.csv");
    let flows_path = csv_dir.join("flows.csv");
    if !latency_path.is_file() || !flows_path.is_file() {
        bail!(
            "--csv-dir {}: no latency.csv and flows.csv there (written by --csv-dir of a run)",
            csv_dir.display()
        );
    }
    Ok((latency_path, flows_path))
}

/// Where the plots go, and the files written so far.
struct Plots<'a> {
    out: &'a Path,
    options: resvg::usvg::Options<'static>,
    written: Vec<std::path::PathBuf>,
}

impl<'a> Plots<'a> {
    fn new(out: &'a Path) -> Self {
        let mut options = resvg::usvg::Options::default();
        options.fontdb_mut().load_system_fonts();
        Self { out, options, written: Vec::new() }
    }

    /// Writes a plot as SVG and, rendered, as PNG (for places that show no SVG).
    fn save(&mut self, name: String, svg: String) -> Result<()> {
        let p = self.out.join(&name);
        std::fs::write(&p, &svg).with_context(|| format!("--out: cannot write {}", p.display()))?;
        self.written.push(p);
        let png = self.out.join(name.replace(".svg", ".png"));
        std::fs::write(&png, to_png(&svg, &self.options)?)
            .with_context(|| format!("--out: cannot write {}", png.display()))?;
        self.written.push(png);
        Ok(())
    }
}

/// Per op, per segment: its latency rows.
type LatencyByOp = BTreeMap<String, BTreeMap<String, Vec<QuantileRow>>>;
/// Per interval: per segment, (Σ count × p50, Σ count).
type Split = BTreeMap<u64, BTreeMap<String, (f64, f64)>>;

/// The latency report's rows per op and segment (for the CDFs), and per op the
/// count-weighted p50 of each segment per interval (for the segment split).
fn read_latency(
    latency: &[BTreeMap<String, String>],
    p: &Path,
) -> Result<(LatencyByOp, BTreeMap<String, Split>)> {
    let mut by_op = LatencyByOp::new();
    let mut split: BTreeMap<String, Split> = BTreeMap::new();
    for row in latency {
        let (op, seg) = (field(row, "op", p)?.to_owned(), field(row, "segment", p)?.to_owned());
        let n = number(row, "count", p)?;
        let pts = quantile_points(row, p)?;
        let start = time(row, "interval_start", p)?;
        let p50 = pts[1].0;
        by_op.entry(op.clone()).or_default().entry(seg.clone()).or_default().push((n, pts));
        let e = split.entry(op).or_default().entry(start).or_default().entry(seg).or_default();
        e.0 += n * p50;
        e.1 += n;
    }
    Ok((by_op, split))
}

/// A latency row's percentiles as (µs, quantile), from min (0) to max (1).
fn quantile_points(row: &BTreeMap<String, String>, p: &Path) -> Result<Vec<(f64, f64)>> {
    let mut pts = vec![(number(row, "min_us", p)?, 0.0)];
    for (col, q) in [("p50_us", 0.5), ("p90_us", 0.9), ("p99_us", 0.99), ("p999_us", 0.999), ("max_us", 1.0)]
    {
        pts.push((number(row, col, p)?, q));
    }
    Ok(pts)
}

/// An op's latency CDF, one line per segment.
fn latency_cdf(op: &str, segs: &BTreeMap<String, Vec<QuantileRow>>) -> String {
    let series: Vec<Series> = segs
        .iter()
        .map(|(seg, rows)| Series {
            name: seg.clone(),
            // The log axis cannot show 0 µs (an in-capsule write's compute time).
            points: pooled_cdf(rows).into_iter().map(|(x, q)| (x.max(0.001), q)).collect(),
        })
        .collect();
    line_plot(&format!("{op} latency CDF by segment"), &series, true, "latency (µs, log)", "fraction of I/Os")
}

/// An op's segment split over time (NVMe: compute, network, storage); none for an op
/// without those segments.
fn segment_split(op: &str, intervals: &Split) -> Option<String> {
    let segs = ["compute", "network", "storage"];
    if !intervals.values().any(|m| segs.iter().any(|s| m.contains_key(*s))) {
        return None;
    }
    let t0 = *intervals.keys().next().expect("an interval");
    let span = (*intervals.keys().last().expect("an interval") - t0) as f64 / 1e9;
    let unit = time_unit(span);
    let xs: Vec<f64> = intervals.keys().map(|&t| (t - t0) as f64 / 1e9 * unit.0).collect();
    let stacks: Vec<[f64; 3]> = intervals
        .values()
        .map(|m| segs.map(|s| m.get(s).map_or(0.0, |(sum, n)| if *n > 0.0 { sum / n } else { 0.0 })))
        .collect();
    Some(stacked_bars(op, &xs, &stacks, &segs, unit.1))
}

/// Per flow: bytes, and per interval start: (Gbit/s, retransmissions, CNPs).
type FlowIntervals = BTreeMap<String, (u64, BTreeMap<u64, (f64, bool, bool)>)>;

/// The busiest flows' points over every interval, and the unit of the time axis.
fn busiest_flows(flows: &[BTreeMap<String, String>], p: &Path) -> Result<(Vec<FlowLine>, &'static str)> {
    let (per_flow, starts) = read_flows(flows, p)?;
    // A flow without a row in an interval carried nothing then.
    let t0 = starts.first().copied().unwrap_or(0);
    let span = (starts.last().copied().unwrap_or(0) - t0) as f64 / 1e9;
    let unit = time_unit(span);
    let mut busiest: Vec<FlowLine> = per_flow
        .into_iter()
        .map(|(name, (bytes, at))| {
            let pts = starts
                .iter()
                .map(|t| {
                    let (g, retx, cnp) = at.get(t).copied().unwrap_or_default();
                    ((t - t0) as f64 / 1e9 * unit.0, g, retx, cnp)
                })
                .collect();
            (name, (bytes, pts))
        })
        .collect();
    busiest.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(&b.0)));
    busiest.truncate(TOP_FLOWS);
    Ok((busiest, unit.1))
}

/// The flows report per flow and interval, and every interval start seen.
fn read_flows(
    flows: &[BTreeMap<String, String>],
    p: &Path,
) -> Result<(FlowIntervals, std::collections::BTreeSet<u64>)> {
    let mut per_flow = FlowIntervals::new();
    let mut starts = std::collections::BTreeSet::new();
    for row in flows {
        let name = format!(
            "{} {}>{} qp {}",
            field(row, "vantage", p)?.chars().next().unwrap_or('?'),
            field(row, "src_ip", p)?,
            field(row, "dst_ip", p)?,
            field(row, "dst_qpn", p)?
        );
        let t = time(row, "interval_start", p)?;
        starts.insert(t);
        let e = per_flow.entry(name).or_default();
        e.0 += number(row, "bytes", p)? as u64;
        let at = e.1.entry(t).or_default();
        at.0 += number(row, "throughput_gbps", p)?;
        at.1 |= number(row, "retx_packets", p)? > 0.0;
        at.2 |= number(row, "cnp", p)? > 0.0;
    }
    Ok((per_flow, starts))
}

/// Renders an SVG of ours to PNG at its own size.
fn to_png(svg: &str, options: &resvg::usvg::Options<'_>) -> Result<Vec<u8>> {
    let tree = resvg::usvg::Tree::from_str(svg, options).context("rendering a plot")?;
    let size = tree.size().to_int_size();
    let mut pixmap =
        resvg::tiny_skia::Pixmap::new(size.width(), size.height()).context("a plot with no size")?;
    resvg::render(&tree, resvg::tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap.encode_png().context("encoding a plot as PNG")
}

fn stacked_bars(op: &str, xs: &[f64], stacks: &[[f64; 3]], segs: &[&str; 3], unit: &str) -> String {
    let x = Axis::fit(xs.iter().copied().chain(xs.last().map(|l| l + bar_step(xs))), false, false);
    let y = Axis::fit(stacks.iter().map(|s| s.iter().sum::<f64>()), false, true);
    let (mut s, map) = frame(
        &format!("{op}: time per segment, per interval (pairs' medians, weighted by count)"),
        x,
        y,
        &format!("{unit} since the first interval"),
        "µs (count-weighted mean of p50s)",
    );
    let step = bar_step(xs);
    for (k, seg) in segs.iter().enumerate() {
        let color = COLORS[[2, 1, 0][k]];
        let _ = write!(
            s,
            "<g class=\"series\" data-name=\"{seg}\" data-x=\"{}\" data-y=\"{}\">",
            values(xs.iter().copied()),
            values(stacks.iter().map(|st| st[k]))
        );
        for (xi, st) in xs.iter().zip(stacks) {
            let below: f64 = st[..k].iter().sum();
            let (x0, y0) = map(*xi, below + st[k]);
            let (x1, y1) = map(xi + step * 0.8, below);
            let _ = write!(
                s,
                "<rect x=\"{x0:.2}\" y=\"{y0:.2}\" width=\"{:.2}\" height=\"{:.2}\" fill=\"{color}\"/>",
                x1 - x0,
                (y1 - y0).max(0.0)
            );
        }
        s.push_str("</g>\n");
        legend(&mut s, k, seg, color);
    }
    s.push_str("</svg>\n");
    s
}

/// The width of an interval on the time axis: the smallest step between intervals.
fn bar_step(xs: &[f64]) -> f64 {
    let min = xs.windows(2).map(|w| w[1] - w[0]).filter(|d| *d > 0.0).fold(f64::INFINITY, f64::min);
    if min.is_finite() {
        min
    } else {
        1.0
    }
}

fn throughput_plot(flows: &[FlowLine], unit: &str) -> String {
    let series: Vec<Series> = flows
        .iter()
        .map(|(name, (_, pts))| Series {
            name: name.clone(),
            points: pts.iter().map(|p| (p.0, p.1)).collect(),
        })
        .collect();
    let mut s = line_plot(
        "Busiest flows: throughput per interval (○ retransmissions, △ CNPs)",
        &series,
        false,
        &format!("{unit} since the first interval"),
        "Gbit/s",
    );
    s.truncate(s.len() - "</svg>\n".len());
    let x = Axis::fit(series.iter().flat_map(|s| s.points.iter().map(|p| p.0)), false, false);
    let y = Axis::fit(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)), false, true);
    let (_, map) = frame("", x, y, "", "");
    for (i, (name, (_, pts))) in flows.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        for &(t, g, retx, cnp) in pts {
            let (px, py) = map(t, g);
            if retx {
                let _ = writeln!(s, "<circle class=\"retx\" data-name=\"{}\" data-x=\"{t}\" cx=\"{px:.2}\" cy=\"{py:.2}\" r=\"5\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"/>", esc(name));
            }
            if cnp {
                let _ = writeln!(s, "<path class=\"cnp\" data-name=\"{}\" data-x=\"{t}\" d=\"M{px:.2},{:.2} l5,9 h-10 z\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"/>", esc(name), py - 6.0);
            }
        }
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::time::rfc3339_nanos;

    #[test]
    fn times_read_back_as_written() {
        for ns in [0u64, 1_795_939_200_000_414_565, 951_782_400_123_456_789, 4_102_444_799_999_999_999] {
            assert_eq!(parse_rfc3339(&rfc3339_nanos(ns)), Some(ns));
        }
        assert_eq!(parse_rfc3339("1970-01-02T00:00:01Z"), Some(86_401_000_000_000));
        for bad in [
            "",
            "2026-11-29T08:00:00.00000000éZ",
            "2026-13-01T00:00:00Z",
            "2026-11-29 08:00:00Z",
            "2026-11-29T08:00:00.Z",
            "2026-11-29T08:00:00.1234567890Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_pooled_cdf_weighs_rows_by_their_counts() {
        // Three samples all at 10 µs and one at 20 µs.
        let rows = vec![
            (3.0, vec![(10.0, 0.0), (10.0, 0.5), (10.0, 1.0)]),
            (1.0, vec![(20.0, 0.0), (20.0, 0.5), (20.0, 1.0)]),
        ];
        assert_eq!(pooled_cdf(&rows), [(10.0, 0.75), (20.0, 1.0)]);
    }
}
