//! `roceprobe plot --csv-dir DIR --out DIR`: plots of the CSV reports, drawn with plotters.
//!
//! - `latency_cdf_<op>.svg`: per segment, the distribution of the op's latency over the run,
//!   a CDF pooled from every interval's and pair's percentiles (min, p50, p90, p99, p99.9,
//!   max), each interval weighted by its sample count, on a log latency axis whose ticks carry
//!   their unit (1, 2 and 5 times the powers of ten over up to three decades, the powers of
//!   ten alone beyond). The log axis cannot show 0 µs (an in-capsule write's compute time):
//!   such samples are drawn at 1 ns, and the axis label says so.
//! - `segments_<op>.svg` (NVMe ops): per interval, the compute, network and storage time
//!   stacked, so that a change in who dominates shows at a glance. Each is the mean of the
//!   (initiator, target) pairs' medians (p50) weighted by their I/O counts: latency.csv keeps
//!   percentiles, not histograms, so this is not the median of the pooled I/Os, except where
//!   one pair has the interval's I/Os.
//! - `flow_throughput.svg`: the busiest flows' throughput per interval, with the intervals
//!   that had retransmissions (circles) and CNPs (triangles) marked, in bit/s, kbit/s,
//!   Mbit/s or Gbit/s, whichever puts the highest value between 1 and 1000.
//! - `steps.svg`, when steps.csv has rows (a run that saw collective jobs): each job's step
//!   durations over time, a line with a point at each step's start, in ns, µs, ms or s as
//!   the longest step needs; each step whose straggler was held back is marked on its point
//!   by its reason (loss a circle, NAKs a square, congestion a triangle), and the legend
//!   names, per reason, the hosts that were those stragglers and how many steps each held
//!   back. Its time axis runs from the first step's start to the last step's end.
//!
//! The per-interval plots share one time axis: from the run's first interval's start (named
//! in the axis label, in UTC) to its last interval's end, in µs, ms, s, min or h chosen from
//! that span; the steps plot's axis is made the same way from its steps. A bar covers its interval (less a gap at each side); a throughput point sits at
//! its interval's middle. Legends sit below the plot in as many columns as the longest name
//! allows, every name in full.
//!
//! Each plot is written as SVG and as PNG (the SVG rendered with resvg). Text is laid out
//! with the metrics of a system font (DejaVu Sans by preference), the font resvg draws the
//! PNG's text with; without any font on the machine, plotting is a one-line error. plotters
//! gives the elements it writes no names, so each plot is marked while it is drawn and the
//! marks become groups afterwards: every plotted series is a `g.series` carrying its data
//! (`data-name`, `data-x`, `data-y`, in the axes' units), every marker a `g.retx` or `g.cnp`
//! (`data-name`, `data-x`) or a `g.straggler` (`data-name`, the job; `data-x`, `data-y`,
//! `data-host`, the straggler; `data-reason`), the axes `g.x-axis` and `g.y-axis` (each with its `g.axis-label`
//! and its `g.ticks`) and the legend `g.legend`, so tests compare the plots with the CSV
//! files they came from.

use super::time::rfc3339_nanos;
use anyhow::{anyhow, bail, Context, Result};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::FontStyle;
use resvg::usvg::fontdb;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Flows drawn in the throughput plot (the most bytes first).
const TOP_FLOWS: usize = 8;
const SIZE: (u32, u32) = (800, 450);
/// The family every text of the SVG names; plotters measures it with the font registered
/// under that name, resvg draws it with the same font.
const FONT: &str = "sans-serif";
/// The family of the marks that become groups (never drawn: `Marks::apply` removes them).
const MARK_FONT: &str = "roceprobe-mark";
/// Text sizes in plotters' units: the SVG's font-size is this divided by 1.24.
const TITLE_SIZE: f64 = 19.0;
const TEXT_SIZE: f64 = 15.0;
const COLORS: [RGBColor; 8] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
];
/// A latency segment's colour, the same in every plot: the segment split's bars and the
/// CDFs' lines (`index` gives another segment its colour by its place).
fn segment_color(name: &str, index: usize) -> RGBColor {
    match name {
        "compute" => COLORS[2],
        "network" => COLORS[1],
        "storage" => COLORS[0],
        "io@compute" => COLORS[3],
        "io@storage" => COLORS[4],
        _ => COLORS[5 + index % 3],
    }
}

/// The markers' colour in the legend (on the plot each takes its flow's colour).
const MARKER_KEY: RGBColor = RGBColor(0x44, 0x44, 0x44);

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

/// One row of a report, its values found by column name.
struct Row<'r> {
    columns: &'r HashMap<String, usize>,
    values: &'r csv::StringRecord,
    /// Its file and its place there (1: the first row after the header), for an error
    /// about it.
    file: &'r Path,
    row: u64,
}

impl Row<'_> {
    fn get(&self, name: &str) -> Option<&str> {
        self.columns.get(name).and_then(|&i| self.values.get(i))
    }
}

/// Hands each row of a report (its rotated files, compressed or not, oldest first, then the
/// current one) to `take`, one at a time: what the plots keep of a long run is what `take`
/// keeps, not the report's text.
fn each_row(path: &Path, mut take: impl FnMut(&Row) -> Result<()>) -> Result<()> {
    let (dir, stem) =
        (path.parent().unwrap_or(Path::new(".")), path.file_stem().and_then(|s| s.to_str()).unwrap_or(""));
    for file in super::csv::report_files(dir, stem)? {
        let text = match super::csv::open_report(&file) {
            Ok(t) => t,
            // Removed since it was listed (a running probe keeping under --csv-retain).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
        };
        let mut r = csv::Reader::from_reader(text);
        let columns: HashMap<String, usize> = r
            .headers()
            .with_context(|| format!("cannot read {}", file.display()))?
            .iter()
            .enumerate()
            .map(|(i, name)| (name.to_owned(), i))
            .collect();
        // Every report starts with its header row as it is made.
        if columns.keys().all(String::is_empty) {
            bail!("{}: empty, without the header row a report starts with", file.display());
        }
        let mut values = csv::StringRecord::new();
        let mut row = 0;
        while r.read_record(&mut values).with_context(|| format!("{}: a malformed row", file.display()))? {
            row += 1;
            take(&Row { columns: &columns, values: &values, file: &file, row })?;
        }
    }
    Ok(())
}

fn field<'a>(row: &'a Row, name: &str, path: &Path) -> Result<&'a str> {
    row.get(name).with_context(|| format!("{}: no column {name}", path.display()))
}

/// The largest value a report holds: none of its counts, rates or times comes near it, so
/// a value beyond is not one the probe wrote.
const LARGEST: f64 = 1e15;

/// A count, a rate or a time of a report: a number from 0 to [`LARGEST`] (what the probe
/// writes; NaN, an infinity, a negative or a huge one would be drawn as a plot that
/// misleads).
fn number(row: &Row, name: &str, path: &Path) -> Result<f64> {
    let v = field(row, name, path)?;
    match v.parse::<f64>() {
        Ok(x) if (0.0..=LARGEST).contains(&x) => Ok(x),
        _ => bail!(
            "{} row {}: {name} '{v}' is not a number from 0 to 1e15, as the probe writes",
            row.file.display(),
            row.row
        ),
    }
}

fn time(row: &Row, name: &str, path: &Path) -> Result<u64> {
    let v = field(row, name, path)?;
    parse_rfc3339(v).with_context(|| format!("{}: {name} '{v}' is not an RFC 3339 time", path.display()))
}

/// Percentile points of one latency row: (sample count, [(µs, quantile)]).
type QuantileRow = (f64, Vec<(f64, f64)>);
/// Per op, per segment: its latency rows.
type LatencyByOp = BTreeMap<String, BTreeMap<String, Vec<QuantileRow>>>;
/// Per interval start: per segment, (Σ count × p50, Σ count).
type Split = BTreeMap<u64, BTreeMap<String, (f64, f64)>>;
/// Intervals of a report: start → end, in nanoseconds since the epoch.
type Intervals = BTreeMap<u64, u64>;
/// A flow per interval start: (Gbit/s, retransmissions, CNPs).
type FlowAt = BTreeMap<u64, (f64, bool, bool)>;
/// Per flow: bytes, and the flow per interval.
type FlowIntervals = BTreeMap<String, (u64, FlowAt)>;
/// A flow in the throughput plot: its name and, per interval of the flows report, (Gbit/s,
/// retransmissions, CNPs), 0 where the flow had no row.
type FlowLine = (String, Vec<(f64, bool, bool)>);

/// An axis over [lo, hi], linear or log, with the values that get a tick, a label and a grid
/// line, and those that get a light grid line only. plotters draws it through `Ranged`.
#[derive(Clone, Debug)]
struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
    ticks: Vec<f64>,
    light: Vec<f64>,
}

impl Axis {
    /// The axis that shows `values` (the finite ones; on a log axis the positive ones),
    /// from 0 if `zero` (linear only).
    fn fit(values: impl Iterator<Item = f64>, log: bool, zero: bool) -> Self {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if !lo.is_finite() {
            (lo, hi) = if log { (1.0, 10.0) } else { (0.0, 1.0) };
        }
        if log {
            Self::log(lo, hi)
        } else {
            Self::linear(if zero { lo.min(0.0) } else { lo }, hi)
        }
    }

    /// A linear axis over [lo, hi] widened to whole steps of 1, 2 or 5 times a power of
    /// ten, about five of them, with a tick at each.
    fn linear(lo: f64, hi: f64) -> Self {
        let hi = if hi > lo { hi } else { lo + 1.0 };
        let step = nice_step((hi - lo) / 5.0);
        // The tolerance keeps a bound that is a whole step from gaining one more.
        let (a, b) = (((lo / step) + 1e-9).floor() as i64, ((hi / step) - 1e-9).ceil() as i64);
        let ticks: Vec<f64> = (a..=b).map(|k| k as f64 * step).collect();
        Self { lo: a as f64 * step, hi: b as f64 * step, log: false, ticks, light: Vec::new() }
    }

    /// A log axis over [lo, hi] (both above 0) widened to 1, 2 or 5 times a power of ten:
    /// ticks at each of those over up to three decades, at the powers of ten alone beyond;
    /// light lines at the other whole multiples of the powers of ten.
    fn log(lo: f64, hi: f64) -> Self {
        let lo = steps_125(lo / 10.0, lo).into_iter().last().unwrap_or(lo);
        let hi = steps_125(hi, hi * 10.0).into_iter().find(|v| *v > lo).unwrap_or(lo * 10.0);
        let all = steps_125(lo, hi);
        let ticks: Vec<f64> = if hi / lo <= 1000.0 * (1.0 + 1e-9) {
            all
        } else {
            all.into_iter().filter(|v| is_power_of_ten(*v)).collect()
        };
        let mut light = Vec::new();
        let mut p = 10f64.powi(lo.log10().floor() as i32);
        while p <= hi {
            for m in 1..10 {
                let v = p * f64::from(m);
                if v >= lo && v <= hi && !ticks.iter().any(|t| (t / v - 1.0).abs() < 1e-9) {
                    light.push(v);
                }
            }
            p *= 10.0;
        }
        Self { lo, hi, log: true, ticks, light }
    }

    /// Where `v` is between the ends: 0 at lo, 1 at hi.
    fn fraction(&self, v: f64) -> f64 {
        let f = if self.log {
            (v.max(self.lo / 1e3).ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        if f.is_finite() {
            f.clamp(-1.0, 2.0)
        } else {
            0.0
        }
    }
}

impl Ranged for Axis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, (from, to): (i32, i32)) -> i32 {
        from + (self.fraction(*v) * f64::from(to - from)).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.light.clone()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * p).find(|s| *s >= raw * 0.999).unwrap_or(10.0 * p)
}

/// 1, 2 and 5 times the powers of ten in [lo, hi] (lo above 0), ascending.
fn steps_125(lo: f64, hi: f64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut k = lo.log10().floor() as i32 - 1;
    while k <= 300 {
        let p = 10f64.powi(k);
        if p > hi * 1.000_001 {
            break;
        }
        for m in [1.0, 2.0, 5.0] {
            let v = m * p;
            if v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9) {
                out.push(v);
            }
        }
        k += 1;
    }
    out
}

fn is_power_of_ten(v: f64) -> bool {
    (v.log10() - v.log10().round()).abs() < 1e-9
}

/// A tick value as text: six significant digits at most and no floating-point noise (0.3,
/// not 0.30000000000000004).
fn tick_text(v: f64) -> String {
    let r: f64 = format!("{v:.5e}").parse().unwrap_or(v);
    if r == 0.0 {
        "0".into()
    } else {
        format!("{r}")
    }
}

/// A latency in µs as text with its unit: ns below 1 µs, ms from 1 ms, s from 1 s.
fn latency_text(us: f64) -> String {
    let (v, unit) = if us >= 1e6 {
        (us / 1e6, "s")
    } else if us >= 1e3 {
        (us / 1e3, "ms")
    } else if us >= 1.0 {
        (us, "µs")
    } else {
        (us * 1e3, "ns")
    };
    format!("{} {unit}", tick_text(v))
}

/// Of four units a thousand apart (`names`, largest first, the first the one `max` is in),
/// the one that puts `max` between 1 and 1000, the smallest below that: (multiplier, name).
fn thousands_unit(max: f64, names: [&'static str; 4]) -> (f64, &'static str) {
    let k = [1.0, 1e-3, 1e-6].iter().position(|&low| max >= low).unwrap_or(3);
    (1e3f64.powi(k as i32), names[k])
}

/// A unit for throughputs up to `max_gbps`: (multiplier from Gbit/s, name).
fn rate_unit(max_gbps: f64) -> (f64, &'static str) {
    thousands_unit(max_gbps, ["Gbit/s", "Mbit/s", "kbit/s", "bit/s"])
}

/// A unit for durations up to `max_s` seconds (ns below 1 µs, s from 1 s): (multiplier
/// from seconds, name).
fn duration_unit(max_s: f64) -> (f64, &'static str) {
    thousands_unit(max_s, ["s", "ms", "µs", "ns"])
}

/// The time axis of the per-interval plots: from the run's first interval's start to its
/// last interval's end, in a unit chosen from that span.
struct Timeline {
    t0: u64,
    empty: bool,
    span: f64,
    unit_ns: f64,
    unit: &'static str,
    /// What the spans are ("interval", "step"), for the label.
    what: &'static str,
}

impl Timeline {
    /// The axis over `intervals` (start → end, each an interval or a step: `what`).
    fn new(intervals: &Intervals, what: &'static str) -> Self {
        let t0 = intervals.keys().next().copied().unwrap_or(0);
        let end = intervals.iter().map(|(s, e)| *s.max(e)).max().unwrap_or(t0);
        let span_ns = end - t0;
        let (unit_ns, unit) = if span_ns < 1_000_000 {
            (1e3, "µs")
        } else if span_ns < 1_000_000_000 {
            (1e6, "ms")
        } else if span_ns < 180_000_000_000 {
            (1e9, "s")
        } else if span_ns < 3 * 3_600_000_000_000 {
            (60e9, "min")
        } else {
            (3600e9, "h")
        };
        Self { t0, empty: intervals.is_empty(), span: span_ns as f64 / unit_ns, unit_ns, unit, what }
    }

    /// A time of the run on the axis.
    fn at(&self, t: u64) -> f64 {
        t.saturating_sub(self.t0) as f64 / self.unit_ns
    }

    fn axis(&self) -> Axis {
        Axis::linear(0.0, self.span)
    }

    fn label(&self) -> String {
        if self.empty {
            return format!("{} (the reports have no {})", self.unit, self.what);
        }
        format!("{} since the first {} ({})", self.unit, self.what, rfc3339_nanos(self.t0))
    }
}

/// The family of the font the plots' text is laid out with: DejaVu Sans if the machine has
/// it, else its sans-serif font, else any. It is registered with plotters once per process
/// (plotters keeps fonts for the life of the process, hence the copy that is never freed).
fn font_family(db: &fontdb::Database) -> Result<String> {
    static FAMILY: OnceLock<Option<String>> = OnceLock::new();
    FAMILY
        .get_or_init(|| {
            let families = [fontdb::Family::Name("DejaVu Sans"), fontdb::Family::SansSerif];
            let query = fontdb::Query { families: &families, ..fontdb::Query::default() };
            let id = db.query(&query).or_else(|| db.faces().next().map(|f| f.id))?;
            let family = db.face(id)?.families.first()?.0.clone();
            let data = db.with_face_data(id, |data, _| data.to_vec())?;
            let data: &'static [u8] = Box::leak(data.into_boxed_slice());
            plotters::style::register_font(FONT, FontStyle::Normal, data).ok()?;
            plotters::style::register_font(MARK_FONT, FontStyle::Normal, data).ok()?;
            Some(family)
        })
        .clone()
        .context("no font on this machine to write the plots' text with (Debian: fonts-dejavu-core)")
}

/// A plotters error as one line.
fn drawing(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("drawing a plot: {e}")
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn values(v: impl Iterator<Item = f64>) -> String {
    v.map(|x| format!("{x}")).collect::<Vec<_>>().join(" ")
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Chart<'a, 'b> = ChartContext<'b, SVGBackend<'a>, Cartesian2d<Axis, Axis>>;

/// Groups to put into the SVG that plotters writes. plotters gives the elements it writes no
/// class or data, so each group's opening or closing tag is drawn in its place as a text in
/// the mark family, and `apply` replaces those texts by the tags: what is drawn between an
/// opening and its closing tag becomes the group's content.
struct Marks<'a> {
    root: Area<'a>,
    tags: Vec<String>,
}

impl Marks<'_> {
    /// Opens a group of `class` with `data` as its `data-*` attributes.
    fn open(&mut self, class: &str, data: &[(&str, String)]) -> Result<()> {
        let mut tag = format!("<g class=\"{class}\"");
        for (k, v) in data {
            let _ = write!(tag, " data-{k}=\"{}\"", esc(v));
        }
        tag.push('>');
        self.put(tag)
    }

    fn close(&mut self) -> Result<()> {
        self.put("</g>".into())
    }

    fn put(&mut self, tag: String) -> Result<()> {
        self.root.draw(&Text::new("mark", (0, 0), (MARK_FONT, 1.0))).map_err(drawing)?;
        self.tags.push(tag);
        Ok(())
    }

    /// `svg` with its marks, in order, replaced by `tags`. A text of the plot cannot be taken
    /// for a mark: plotters escapes the quotes of a text's content.
    fn apply(svg: &str, tags: &[String]) -> Result<String> {
        let needle = format!("font-family=\"{MARK_FONT}\"");
        let mut out = String::with_capacity(svg.len());
        let mut rest = svg;
        for tag in tags {
            let at = rest.find(&needle).context("drawing a plot: a mark is missing")?;
            let start = rest[..at].rfind("<text").context("drawing a plot: a mark is not a text")?;
            let end = at + rest[at..].find("</text>\n").context("drawing a plot: a mark is not closed")?;
            out.push_str(&rest[..start]);
            out.push_str(tag);
            out.push('\n');
            rest = &rest[end + "</text>\n".len()..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

/// What a legend entry shows beside its name.
#[derive(Clone, Copy)]
enum Key {
    Line,
    Bar,
    Circle,
    Triangle,
    Square,
}

struct Entry {
    name: String,
    color: RGBColor,
    key: Key,
}

/// Where a legend's entries go: in columns as wide as the widest entry, as many as fit the
/// width; the text shrinks only if one name is wider than the page.
struct Legend {
    column: i32,
    columns: usize,
    rows: usize,
    size: f64,
}

impl Legend {
    const ROW: i32 = 19;
    const KEY: i32 = 18;
    const GAP: i32 = 6;
    const SPACE: i32 = 22;
    const MARGIN: i32 = 12;

    fn fit(area: &Area, entries: &[Entry]) -> Result<Self> {
        let width = area.dim_in_pixel().0 as i32 - 2 * Self::MARGIN;
        let style: TextStyle = (FONT, TEXT_SIZE).into();
        let mut widest = 0;
        for e in entries {
            widest = widest.max(area.estimate_text_size(&e.name, &style).map_err(drawing)?.0 as i32);
        }
        let (mut column, mut size) = (Self::KEY + Self::GAP + widest + Self::SPACE, TEXT_SIZE);
        if column - Self::SPACE > width {
            size *= f64::from(width - Self::KEY - Self::GAP) / f64::from(widest.max(1));
            column = width + Self::SPACE;
        }
        let columns = ((width + Self::SPACE) / column.max(1)).max(1) as usize;
        let columns = columns.min(entries.len().max(1));
        Ok(Self { column, columns, rows: entries.len().div_ceil(columns), size })
    }

    fn height(&self) -> u32 {
        (self.rows as i32 * Self::ROW + 10) as u32
    }

    /// Draws the entries in `area`, centred, as one marked group.
    fn draw(&self, area: &Area, entries: &[Entry], marks: &mut Marks) -> Result<()> {
        let total = self.columns as i32 * self.column - Self::SPACE;
        let x0 = ((area.dim_in_pixel().0 as i32 - total) / 2).max(Self::MARGIN);
        let text = (FONT, self.size).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
        marks.open("legend", &[])?;
        for (i, e) in entries.iter().enumerate() {
            let x = x0 + (i % self.columns) as i32 * self.column;
            let y = 4 + (i / self.columns) as i32 * Self::ROW + Self::ROW / 2;
            let stroke = e.color.stroke_width(2);
            let k = Self::KEY;
            match e.key {
                Key::Line => area.draw(&PathElement::new(vec![(x, y), (x + k, y)], stroke)),
                Key::Bar => {
                    area.draw(&Rectangle::new([(x + 2, y - 6), (x + k - 2, y + 6)], e.color.filled()))
                }
                Key::Circle => area.draw(&Circle::new((x + k / 2, y), 5, stroke)),
                Key::Triangle => area.draw(&triangle((x + k / 2, y + 4), stroke)),
                Key::Square => {
                    area.draw(&Rectangle::new([(x + k / 2 - 5, y - 5), (x + k / 2 + 5, y + 5)], stroke))
                }
            }
            .map_err(drawing)?;
            area.draw(&Text::new(e.name.as_str(), (x + k + Self::GAP, y), text.clone())).map_err(drawing)?;
        }
        marks.close()
    }
}

/// An open triangle with its base's middle at `at` (pixels).
fn triangle(at: (i32, i32), style: ShapeStyle) -> PathElement<(i32, i32)> {
    let (x, y) = at;
    PathElement::new(vec![(x, y - 10), (x + 6, y), (x - 6, y), (x, y - 10)], style)
}

/// Draws a plot: a white page with `title`, the chart that `body` draws in the area left,
/// and `legend` below it; returns the SVG with its marks turned into groups.
fn page<F>(title: &str, legend: &[Entry], body: F) -> Result<String>
where
    F: for<'a> FnOnce(&Area<'a>, &mut Marks<'a>) -> Result<()>,
{
    let mut svg = String::new();
    let tags = {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(drawing)?;
        let rest = root.titled(title, (FONT, TITLE_SIZE)).map_err(drawing)?;
        let layout = Legend::fit(&rest, legend)?;
        let height = rest.dim_in_pixel().1;
        let (plot, below) = rest.split_vertically(height.saturating_sub(layout.height()));
        let mut marks = Marks { root: root.clone(), tags: Vec::new() };
        body(&plot, &mut marks)?;
        layout.draw(&below, legend, &mut marks)?;
        root.present().map_err(drawing)?;
        marks.tags
    };
    Marks::apply(&svg, &tags)
}

/// The chart's frame in `area`: room for the tick labels and the axis labels.
fn chart<'a, 'b>(area: &'b Area<'a>, x: Axis, y: Axis) -> Result<Chart<'a, 'b>> {
    ChartBuilder::on(area)
        .margin_top(4)
        .margin_left(8)
        .margin_right(30)
        .x_label_area_size(46)
        .y_label_area_size(72)
        .build_cartesian_2d(x, y)
        .map_err(drawing)
}

/// The grid at the axes' ticks, under the data.
fn grid(chart: &mut Chart) -> Result<()> {
    chart
        .configure_mesh()
        .disable_axes()
        .bold_line_style(BLACK.mix(0.15))
        .light_line_style(BLACK.mix(0.05))
        .draw()
        .map_err(drawing)
}

/// An axis's label and the text of its tick values.
struct AxisText<'f> {
    label: &'f str,
    tick: &'f dyn Fn(&f64) -> String,
}

/// The axes over the data, each a marked group holding its label (`g.axis-label`) and its
/// line, ticks and tick labels (`g.ticks`).
fn axes(chart: &mut Chart, marks: &mut Marks, x: AxisText, y: AxisText) -> Result<()> {
    axis(chart, marks, true, x)?;
    axis(chart, marks, false, y)
}

fn axis(chart: &mut Chart, marks: &mut Marks, is_x: bool, text: AxisText) -> Result<()> {
    let style = || (FONT, TEXT_SIZE).into_font();
    marks.open(if is_x { "x-axis" } else { "y-axis" }, &[])?;
    marks.open("axis-label", &[])?;
    let mut mesh = chart.configure_mesh();
    mesh.disable_mesh().disable_axes().axis_desc_style(style());
    if is_x {
        mesh.x_desc(text.label);
    } else {
        mesh.y_desc(text.label);
    }
    mesh.draw().map_err(drawing)?;
    marks.close()?;
    marks.open("ticks", &[])?;
    let mut mesh = chart.configure_mesh();
    mesh.disable_mesh().label_style(style());
    if is_x {
        mesh.disable_y_axis().x_label_formatter(text.tick);
    } else {
        mesh.disable_x_axis().y_label_formatter(text.tick);
    }
    mesh.draw().map_err(drawing)?;
    marks.close()?;
    marks.close()
}

/// Opens the group of a plotted series: its name and points.
fn open_series(marks: &mut Marks, name: &str, points: &[(f64, f64)]) -> Result<()> {
    marks.open(
        "series",
        &[
            ("name", name.to_owned()),
            ("x", values(points.iter().map(|p| p.0))),
            ("y", values(points.iter().map(|p| p.1))),
        ],
    )
}

/// One series as a line in the `index`-th colour, with a dot per point when there are at
/// most `dots_up_to`, marked for the tests; returns its style for the markers drawn on it.
fn line_series(
    c: &mut Chart<'_, '_>,
    marks: &mut Marks<'_>,
    name: &str,
    pts: &[(f64, f64)],
    index: usize,
    dots_up_to: usize,
) -> Result<ShapeStyle> {
    let style = COLORS[index % COLORS.len()].stroke_width(2);
    open_series(marks, name, pts)?;
    c.draw_series(std::iter::once(PathElement::new(pts.to_vec(), style))).map_err(drawing)?;
    if pts.len() <= dots_up_to {
        c.draw_series(pts.iter().map(|p| Circle::new(*p, 2, style.filled()))).map_err(drawing)?;
    }
    marks.close()?;
    Ok(style)
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
pub fn plot(csv_dir: &Path, out: &Path) -> Result<Vec<PathBuf>> {
    let (latency_path, flows_path) = report_paths(csv_dir)?;
    // Every report read before anything is written, so that a broken one leaves no
    // half-written folder (steps.csv is there only for runs that saw collective jobs).
    let read = read_latency(&latency_path)?;
    let (per_flow, flow_intervals) = read_flows(&flows_path)?;
    let steps = read_steps(&csv_dir.join("steps.csv"))?;
    let mut intervals = read.intervals.clone();
    for (s, e) in &flow_intervals {
        let end = intervals.entry(*s).or_insert(*e);
        *end = (*end).max(*e);
    }
    let timeline = Timeline::new(&intervals, "interval");
    // Every plot drawn (with the fonts loaded), and every name it takes checked, before
    // the first is written.
    let mut plots = Plots::new(out)?;
    let mut svgs: Vec<(String, String)> = Vec::new();
    for (op, segs) in &read.by_op {
        svgs.push((format!("latency_cdf_{op}.svg"), latency_cdf(op, segs)?));
    }
    for (op, split) in &read.split {
        if let Some(svg) = segment_split(op, split, &read.intervals, &timeline)? {
            svgs.push((format!("segments_{op}.svg"), svg));
        }
    }
    let busiest = busiest_flows(per_flow, &flow_intervals);
    svgs.push(("flow_throughput.svg".into(), throughput_plot(&busiest, &flow_intervals, &timeline)?));
    if !steps.is_empty() {
        let mut steps = steps;
        let more = keep_busiest_jobs(&mut steps);
        svgs.push(("steps.svg".into(), steps_plot(&steps, more)?));
    }
    // Rendered too (the PNGs), before anything is written.
    let rendered = svgs
        .into_iter()
        .map(|(name, svg)| {
            let png = to_png(&svg, &plots.options)?;
            Ok((name, svg, png))
        })
        .collect::<Result<Vec<_>>>()?;
    if super::dangling_link(out) {
        bail!("--out {}: a symbolic link to nothing", out.display());
    }
    std::fs::create_dir_all(out).with_context(|| format!("--out: cannot create {}", out.display()))?;
    for (name, _, _) in &rendered {
        for p in [out.join(name), out.join(name.replace(".svg", ".png"))] {
            super::refuse_irregular(&p).with_context(|| format!("--out: will not write {}", p.display()))?;
        }
    }
    for (name, svg, png) in rendered {
        plots.save(name, &svg, &png)?;
    }
    // Plots of an earlier run that this one did not draw (an op or a job it did not see)
    // are left alone, and named, so that none is taken for this run's.
    let mut earlier: Vec<String> = std::fs::read_dir(out)
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    earlier.retain(|n| {
        is_plot_name(n) && !plots.written.iter().any(|p| p.file_name().is_some_and(|f| f == n.as_str()))
    });
    if !earlier.is_empty() {
        earlier.sort();
        crate::note!(
            "roceprobe: note: --out {} also holds plots this run did not draw (an earlier run's): {}",
            out.display(),
            earlier.join(", ")
        );
    }
    Ok(plots.written)
}

/// The latency and flows reports in `csv_dir`; both must be there.
fn report_paths(csv_dir: &Path) -> Result<(PathBuf, PathBuf)> {
    let latency_path = csv_dir.join("latency.csv");
    let flows_path = csv_dir.join("flows.csv");
    if !csv_dir.is_dir() {
        let what = if csv_dir.exists() { "not a directory" } else { "no such directory" };
        bail!("--csv-dir {}: {what}", csv_dir.display());
    }
    if !latency_path.is_file() || !flows_path.is_file() {
        bail!(
            "--csv-dir {}: no latency.csv and flows.csv there (written by --csv-dir of a run)",
            csv_dir.display()
        );
    }
    Ok((latency_path, flows_path))
}

/// Whether `name` is one `plot` writes.
fn is_plot_name(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".svg").or_else(|| name.strip_suffix(".png")) else { return false };
    stem.starts_with("latency_cdf_")
        || stem.starts_with("segments_")
        || stem == "flow_throughput"
        || stem == "steps"
}

/// Where the plots go, and the files written so far.
struct Plots<'a> {
    out: &'a Path,
    options: resvg::usvg::Options<'static>,
    written: Vec<PathBuf>,
}

impl<'a> Plots<'a> {
    /// Loads the system fonts, registers the one the text is laid out with and makes it
    /// resvg's sans-serif, so that the PNG's text is the text the layout measured.
    fn new(out: &'a Path) -> Result<Self> {
        let mut options = resvg::usvg::Options::default();
        let db = options.fontdb_mut();
        db.load_system_fonts();
        let family = font_family(db)?;
        db.set_sans_serif_family(family);
        Ok(Self { out, options, written: Vec::new() })
    }

    /// Writes a plot as SVG and, rendered, as PNG (for places that show no SVG).
    fn save(&mut self, name: String, svg: &str, png: &[u8]) -> Result<()> {
        let p = self.out.join(&name);
        write_whole(&p, svg.as_bytes())?;
        self.written.push(p);
        let p = self.out.join(name.replace(".svg", ".png"));
        write_whole(&p, png)?;
        self.written.push(p);
        Ok(())
    }
}

/// Writes a plot's file whole beside its place, then puts it there: a file of its own, not
/// written through a link (symbolic or hard) or into a FIFO; one that could not be written
/// whole (a full disk) is removed, not left cut short to be taken for a plot.
fn write_whole(path: &Path, bytes: &[u8]) -> Result<()> {
    let cannot = || format!("--out: cannot write {}", path.display());
    let part = super::part_path(path);
    let written = super::create_regular(&part, false)
        .and_then(|mut f| std::io::Write::write_all(&mut f, bytes))
        .and_then(|()| std::fs::rename(&part, path));
    written.or_else(|e| {
        // Only what this run began writing is removed.
        let _ = std::fs::remove_file(&part);
        Err(e).with_context(cannot)
    })
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

/// What the plots take from the latency report.
struct Latency {
    /// Per op and segment, the rows (for the CDFs).
    by_op: LatencyByOp,
    /// Per op, the count-weighted p50 of each segment per interval (for the segment split).
    split: BTreeMap<String, Split>,
    /// The report's intervals.
    intervals: Intervals,
}

fn read_latency(p: &Path) -> Result<Latency> {
    let mut read = Latency { by_op: LatencyByOp::new(), split: BTreeMap::new(), intervals: Intervals::new() };
    each_row(p, |row| {
        let (op, seg) = (field(row, "op", p)?.to_owned(), field(row, "segment", p)?.to_owned());
        let n = number(row, "count", p)?;
        let pts = quantile_points(row, p)?;
        let (start, end) = (time(row, "interval_start", p)?, time(row, "interval_end", p)?);
        let p50 = pts[1].0;
        read.by_op.entry(op.clone()).or_default().entry(seg.clone()).or_default().push((n, pts));
        let e = read.split.entry(op).or_default().entry(start).or_default().entry(seg).or_default();
        e.0 += n * p50;
        e.1 += n;
        let last = read.intervals.entry(start).or_insert(end);
        *last = (*last).max(end);
        Ok(())
    })?;
    Ok(read)
}

/// A latency row's percentiles as (µs, quantile), from min (0) to max (1).
fn quantile_points(row: &Row, p: &Path) -> Result<Vec<(f64, f64)>> {
    let mut pts = vec![(number(row, "min_us", p)?, 0.0)];
    for (col, q) in [("p50_us", 0.5), ("p90_us", 0.9), ("p99_us", 0.99), ("p999_us", 0.999), ("max_us", 1.0)]
    {
        pts.push((number(row, col, p)?, q));
    }
    Ok(pts)
}

/// The lowest latency the log axis shows, in µs: 0 µs is drawn there.
const LOG_FLOOR_US: f64 = 0.001;

/// An op's latency CDF, one line per segment.
fn latency_cdf(op: &str, segs: &BTreeMap<String, Vec<QuantileRow>>) -> Result<String> {
    let cdfs: Vec<(String, Vec<(f64, f64)>)> =
        segs.iter().map(|(seg, rows)| (seg.clone(), pooled_cdf(rows))).collect();
    let floored = cdfs.iter().any(|(_, pts)| pts.iter().any(|p| p.0 < LOG_FLOOR_US));
    let series: Vec<(String, Vec<(f64, f64)>)> = cdfs
        .into_iter()
        .map(|(seg, pts)| (seg, pts.into_iter().map(|(x, q)| (x.max(LOG_FLOOR_US), q)).collect()))
        .collect();
    let legend: Vec<Entry> = series
        .iter()
        .enumerate()
        .map(|(i, (name, _))| Entry { name: name.clone(), color: segment_color(name, i), key: Key::Line })
        .collect();
    let x_label = if floored { "latency (log scale; 0 µs drawn at 1 ns)" } else { "latency (log scale)" };
    page(&format!("{op} latency CDF by segment"), &legend, |area, marks| {
        let x = Axis::fit(series.iter().flat_map(|s| s.1.iter().map(|p| p.0)), true, false);
        let mut c = chart(area, x, Axis::linear(0.0, 1.0))?;
        grid(&mut c)?;
        for (i, (name, pts)) in series.iter().enumerate() {
            let style = segment_color(name, i).stroke_width(2);
            open_series(marks, name, pts)?;
            c.draw_series(std::iter::once(PathElement::new(pts.clone(), style))).map_err(drawing)?;
            if pts.len() == 1 {
                // One latency: a step from 0 to 1 there, shown as a dot.
                c.draw_series(pts.iter().map(|p| Circle::new(*p, 3, style.filled()))).map_err(drawing)?;
            }
            marks.close()?;
        }
        axes(
            &mut c,
            marks,
            AxisText { label: x_label, tick: &|v| latency_text(*v) },
            AxisText { label: "fraction of samples at or below", tick: &|v| tick_text(*v) },
        )
    })
}

/// An op's segment split over time (NVMe: compute, network, storage); none for an op
/// without those segments.
fn segment_split(
    op: &str,
    intervals: &Split,
    ends: &Intervals,
    timeline: &Timeline,
) -> Result<Option<String>> {
    let segs = ["compute", "network", "storage"];
    if !intervals.values().any(|m| segs.iter().any(|s| m.contains_key(*s))) {
        return Ok(None);
    }
    // Per interval: where its bar starts and ends on the time axis, and its stack.
    let bars: Vec<(f64, f64, [f64; 3])> = intervals
        .iter()
        .map(|(start, m)| {
            let end = ends.get(start).copied().unwrap_or(*start);
            let stack = segs.map(|s| m.get(s).map_or(0.0, |(sum, n)| if *n > 0.0 { sum / n } else { 0.0 }));
            (timeline.at(*start), timeline.at(end), stack)
        })
        .collect();
    let colors = segs.map(|s| segment_color(s, 0));
    let legend: Vec<Entry> = segs
        .iter()
        .zip(colors)
        .map(|(s, color)| Entry { name: (*s).to_owned(), color, key: Key::Bar })
        .collect();
    let title = format!("{op}: time per segment, per interval (pairs' medians, weighted by count)");
    let svg = page(&title, &legend, |area, marks| {
        let y = Axis::fit(bars.iter().map(|b| b.2.iter().sum::<f64>()), false, true);
        let mut c = chart(area, timeline.axis(), y)?;
        grid(&mut c)?;
        for (k, seg) in segs.iter().enumerate() {
            let points: Vec<(f64, f64)> = bars.iter().map(|b| (b.0, b.2[k])).collect();
            open_series(marks, seg, &points)?;
            c.draw_series(bars.iter().map(|(x0, x1, stack)| {
                let below: f64 = stack[..k].iter().sum();
                let gap = (x1 - x0) * 0.08;
                Rectangle::new([(x0 + gap, below), (x1 - gap, below + stack[k])], colors[k].filled())
            }))
            .map_err(drawing)?;
            marks.close()?;
        }
        axes(
            &mut c,
            marks,
            AxisText { label: &timeline.label(), tick: &|v| tick_text(*v) },
            AxisText { label: "µs (count-weighted mean of p50s)", tick: &|v| tick_text(*v) },
        )
    })?;
    Ok(Some(svg))
}

/// The busiest flows (the most bytes first) with their throughput in every interval of the
/// flows report.
fn busiest_flows(per_flow: FlowIntervals, intervals: &Intervals) -> Vec<FlowLine> {
    let mut busiest: Vec<(String, (u64, FlowAt))> = per_flow.into_iter().collect();
    busiest.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(&b.0)));
    busiest.truncate(TOP_FLOWS);
    // A flow without a row in an interval carried nothing then.
    busiest
        .into_iter()
        .map(|(name, (_, at))| {
            (name, intervals.keys().map(|t| at.get(t).copied().unwrap_or_default()).collect())
        })
        .collect()
}

/// The flows report per flow and interval, and the report's intervals.
fn read_flows(p: &Path) -> Result<(FlowIntervals, Intervals)> {
    let mut per_flow = FlowIntervals::new();
    let mut intervals = Intervals::new();
    each_row(p, |row| {
        // The QPN in hex, as the exit report and the dashboard write it.
        let qpn = field(row, "dst_qpn", p)?;
        let name = format!(
            "{} {}>{} qp {}",
            field(row, "vantage", p)?.chars().next().unwrap_or('?'),
            field(row, "src_ip", p)?,
            field(row, "dst_ip", p)?,
            qpn.parse::<u32>().map_or_else(|_| qpn.to_owned(), |q| format!("{q:#08x}"))
        );
        let (t, end) = (time(row, "interval_start", p)?, time(row, "interval_end", p)?);
        let last = intervals.entry(t).or_insert(end);
        *last = (*last).max(end);
        let e = per_flow.entry(name).or_default();
        e.0 += number(row, "bytes", p)? as u64;
        let at = e.1.entry(t).or_default();
        at.0 += number(row, "throughput_gbps", p)?;
        at.1 |= number(row, "retx_packets", p)? > 0.0;
        at.2 |= number(row, "cnp", p)? > 0.0;
        Ok(())
    })?;
    Ok((per_flow, intervals))
}

/// The busiest flows' throughput per interval, a point at each interval's middle, with the
/// intervals that had retransmissions (circles) or CNPs (triangles) marked.
fn throughput_plot(flows: &[FlowLine], intervals: &Intervals, timeline: &Timeline) -> Result<String> {
    let max =
        flows.iter().flat_map(|f| f.1.iter().map(|p| p.0)).filter(|v| v.is_finite()).fold(0.0, f64::max);
    let (scale, unit) = rate_unit(max);
    let mids: Vec<f64> =
        intervals.iter().map(|(s, e)| (timeline.at(*s) + timeline.at(*e.max(s))) / 2.0).collect();
    let lines: Vec<Vec<(f64, f64)>> =
        flows.iter().map(|f| mids.iter().zip(&f.1).map(|(x, p)| (*x, p.0 * scale)).collect()).collect();
    let mut legend: Vec<Entry> = flows
        .iter()
        .enumerate()
        .map(|(i, f)| Entry { name: f.0.clone(), color: COLORS[i % COLORS.len()], key: Key::Line })
        .collect();
    legend.push(Entry { name: "retransmissions".into(), color: MARKER_KEY, key: Key::Circle });
    legend.push(Entry { name: "CNPs".into(), color: MARKER_KEY, key: Key::Triangle });
    let title = "Busiest flows: throughput per interval, retransmissions and CNPs marked";
    page(title, &legend, |area, marks| {
        let y = Axis::fit(lines.iter().flat_map(|l| l.iter().map(|p| p.1)), false, true);
        let mut c = chart(area, timeline.axis(), y)?;
        grid(&mut c)?;
        for (i, ((name, at), pts)) in flows.iter().zip(&lines).enumerate() {
            let style = line_series(&mut c, marks, name, pts, i, 60)?;
            for (&(x, y), &(_, retx, cnp)) in pts.iter().zip(at) {
                if retx {
                    marks.open("retx", &[("name", name.clone()), ("x", format!("{x}"))])?;
                    c.draw_series(std::iter::once(Circle::new((x, y), 6, style))).map_err(drawing)?;
                    marks.close()?;
                }
                if cnp {
                    marks.open("cnp", &[("name", name.clone()), ("x", format!("{x}"))])?;
                    let mark = EmptyElement::at((x, y)) + triangle((0, -3), style);
                    c.draw_series(std::iter::once(mark)).map_err(drawing)?;
                    marks.close()?;
                }
            }
        }
        axes(
            &mut c,
            marks,
            AxisText { label: &timeline.label(), tick: &|v| tick_text(*v) },
            AxisText { label: &format!("throughput ({unit})"), tick: &|v| tick_text(*v) },
        )
    })
}

/// What held a step's straggler back, as steps.csv names it, with the marker it gets
/// (`none` gets no marker).
const REASONS: [(&str, Key); 3] =
    [("loss", Key::Circle), ("nak", Key::Square), ("congestion", Key::Triangle)];

/// A step of a collective job, from steps.csv.
struct StepRow {
    start: u64,
    end: u64,
    duration_s: f64,
    /// The host that finished last.
    host: String,
    /// Index into `REASONS`, none if nothing held the straggler back.
    reason: Option<usize>,
}

/// Per job, its steps in order of start.
type JobSteps = BTreeMap<String, Vec<StepRow>>;

fn read_steps(p: &Path) -> Result<JobSteps> {
    let mut jobs = JobSteps::new();
    each_row(p, |row| {
        let reason = match field(row, "reason", p)? {
            "none" => None,
            r => Some(REASONS.iter().position(|(name, _)| *name == r).with_context(|| {
                format!("{}: reason '{r}' is not loss, nak, congestion or none", p.display())
            })?),
        };
        let step = StepRow {
            start: time(row, "start", p)?,
            end: time(row, "end", p)?,
            duration_s: number(row, "duration_s", p)?,
            host: field(row, "straggler_host", p)?.to_owned(),
            reason,
        };
        jobs.entry(field(row, "job", p)?.to_owned()).or_default().push(step);
        Ok(())
    })?;
    for steps in jobs.values_mut() {
        steps.sort_by_key(|s| s.start);
    }
    Ok(jobs)
}

/// A legend name for the steps held back for `reason`: the reason and the hosts that were
/// the stragglers, the most steps first, with their step counts.
fn reason_entry(reason: usize, jobs: &JobSteps) -> String {
    let mut hosts: BTreeMap<&str, usize> = BTreeMap::new();
    for s in jobs.values().flatten().filter(|s| s.reason == Some(reason)) {
        *hosts.entry(&s.host).or_default() += 1;
    }
    let mut hosts: Vec<(&str, usize)> = hosts.into_iter().collect();
    hosts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    // Up to four hosts by name; beyond, three and how many more.
    let shown = if hosts.len() <= 4 { hosts.len() } else { 3 };
    let mut text = format!("held back by {}: ", REASONS[reason].0);
    let named: Vec<String> = hosts.iter().take(shown).map(|(h, n)| format!("{h} ×{n}")).collect();
    text.push_str(&named.join(", "));
    if hosts.len() > shown {
        let _ = write!(text, " and {} more hosts", hosts.len() - shown);
    }
    text
}

/// Keeps the jobs of the most steps (then the first names), as many as there are colours,
/// so that each line has its own and the legend leaves the chart its room (60 jobs drew a
/// strip); returns how many were left out.
fn keep_busiest_jobs(jobs: &mut JobSteps) -> usize {
    if jobs.len() <= COLORS.len() {
        return 0;
    }
    let mut by_steps: Vec<(usize, String)> = jobs.iter().map(|(name, s)| (s.len(), name.clone())).collect();
    by_steps.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let more = by_steps.len() - COLORS.len();
    for (_, name) in &by_steps[COLORS.len()..] {
        jobs.remove(name);
    }
    more
}

/// Step durations over time, a line per collective job (`more` jobs of fewer steps left
/// out), each step whose straggler was held back (by loss, NAKs or congestion) marked on
/// its point with its reason's shape.
fn steps_plot(jobs: &JobSteps, more: usize) -> Result<String> {
    let spans: Intervals = jobs.values().flatten().fold(Intervals::new(), |mut m, s| {
        let end = m.entry(s.start).or_insert(s.end);
        *end = (*end).max(s.end);
        m
    });
    let timeline = Timeline::new(&spans, "step");
    let max = jobs.values().flatten().map(|s| s.duration_s).filter(|v| v.is_finite()).fold(0.0, f64::max);
    let (scale, unit) = duration_unit(max);
    let lines: Vec<Vec<(f64, f64)>> = jobs
        .values()
        .map(|steps| steps.iter().map(|s| (timeline.at(s.start), s.duration_s * scale)).collect())
        .collect();
    let mut legend: Vec<Entry> = jobs
        .keys()
        .enumerate()
        .map(|(i, job)| Entry { name: job.clone(), color: COLORS[i % COLORS.len()], key: Key::Line })
        .collect();
    for (k, (_, key)) in REASONS.iter().enumerate() {
        if jobs.values().flatten().any(|s| s.reason == Some(k)) {
            legend.push(Entry { name: reason_entry(k, jobs), color: MARKER_KEY, key: *key });
        }
    }
    let title = match more {
        0 => "Collective steps: duration per job, held-back stragglers marked".to_owned(),
        n => format!(
            "Collective steps of the {} busiest jobs ({n} more in steps.csv), held-back stragglers marked",
            jobs.len()
        ),
    };
    page(&title, &legend, |area, marks| {
        let y = Axis::fit(lines.iter().flat_map(|l| l.iter().map(|p| p.1)), false, true);
        let mut c = chart(area, timeline.axis(), y)?;
        grid(&mut c)?;
        for (i, ((job, steps), pts)) in jobs.iter().zip(&lines).enumerate() {
            let style = line_series(&mut c, marks, job, pts, i, 200)?;
            for (&(x, y), step) in pts.iter().zip(steps) {
                let Some(k) = step.reason else { continue };
                let (reason, key) = REASONS[k];
                let data = [
                    ("name", job.clone()),
                    ("x", format!("{x}")),
                    ("y", format!("{y}")),
                    ("host", step.host.clone()),
                    ("reason", reason.to_owned()),
                ];
                marks.open("straggler", &data)?;
                let at = EmptyElement::at((x, y));
                match key {
                    Key::Triangle => c.draw_series(std::iter::once(at + triangle((0, 5), style))),
                    Key::Square => {
                        c.draw_series(std::iter::once(at + Rectangle::new([(-5, -5), (5, 5)], style)))
                    }
                    _ => c.draw_series(std::iter::once(at + Circle::new((0, 0), 6, style))),
                }
                .map_err(drawing)?;
                marks.close()?;
            }
        }
        axes(
            &mut c,
            marks,
            AxisText { label: &timeline.label(), tick: &|v| tick_text(*v) },
            AxisText { label: &format!("step duration ({unit})"), tick: &|v| tick_text(*v) },
        )
    })
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

    fn texts(ticks: &[f64], text: impl Fn(f64) -> String) -> Vec<String> {
        ticks.iter().map(|t| text(*t)).collect()
    }

    #[test]
    fn linear_axes_end_on_round_steps() {
        let a = Axis::linear(0.0, 0.8);
        assert_eq!((a.lo, a.hi), (0.0, 0.8));
        assert_eq!(texts(&a.ticks, tick_text), ["0", "0.2", "0.4", "0.6", "0.8"]);
        let a = Axis::linear(0.0, 10.0);
        assert_eq!(texts(&a.ticks, tick_text), ["0", "2", "4", "6", "8", "10"]);
        let a = Axis::fit([0.3, 0.7].into_iter(), false, false);
        assert_eq!(texts(&a.ticks, tick_text), ["0.3", "0.4", "0.5", "0.6", "0.7"]);
        // One value: an axis of one unit around it.
        let a = Axis::fit([3.0].into_iter(), false, true);
        assert_eq!((a.lo, a.hi), (0.0, 3.0));
        let a = Axis::fit(std::iter::empty(), false, true);
        assert_eq!((a.lo, a.hi), (0.0, 1.0));
    }

    #[test]
    fn log_axes_tick_at_1_2_5_or_at_powers_of_ten() {
        let a = Axis::fit([2.3, 180.0].into_iter(), true, false);
        assert_eq!((a.lo, a.hi), (2.0, 200.0));
        assert_eq!(
            texts(&a.ticks, latency_text),
            ["2 µs", "5 µs", "10 µs", "20 µs", "50 µs", "100 µs", "200 µs"]
        );
        assert!(a.light.iter().all(|v| *v > 2.0 && *v < 200.0) && a.light.contains(&30.0));
        // Over more than three decades, the powers of ten alone.
        let a = Axis::fit([0.001, 0.4, 7000.0].into_iter(), true, false);
        assert_eq!(
            texts(&a.ticks, latency_text),
            ["1 ns", "10 ns", "100 ns", "1 µs", "10 µs", "100 µs", "1 ms", "10 ms"]
        );
        // One value: from the 1-2-5 step at or below to the next.
        let a = Axis::fit([5.0].into_iter(), true, false);
        assert_eq!((a.lo, a.hi), (5.0, 10.0));
    }

    #[test]
    fn the_time_unit_follows_the_span() {
        let unit = |span_ns: u64| {
            let t = Timeline::new(&Intervals::from([(1_000, 1_000 + span_ns)]), "interval");
            (t.unit, t.span)
        };
        assert_eq!(unit(20_000), ("µs", 20.0));
        assert_eq!(unit(1_000_000), ("ms", 1.0));
        assert_eq!(unit(10_000_000_000), ("s", 10.0));
        assert_eq!(unit(600_000_000_000), ("min", 10.0));
        assert_eq!(unit(86_400_000_000_000), ("h", 24.0));
        let t = Timeline::new(
            &Intervals::from([(1_795_939_200_000_000_000, 1_795_939_200_001_000_000)]),
            "interval",
        );
        assert_eq!(t.label(), "ms since the first interval (2026-11-29T08:00:00.000000000Z)");
        assert_eq!(Timeline::new(&Intervals::new(), "interval").label(), "µs (the reports have no interval)");
    }

    #[test]
    fn rates_take_the_unit_that_fits() {
        assert_eq!(rate_unit(25.0), (1.0, "Gbit/s"));
        assert_eq!(rate_unit(0.004), (1e3, "Mbit/s"));
        assert_eq!(rate_unit(0.0004), (1e6, "kbit/s"));
        assert_eq!(rate_unit(2e-5), (1e6, "kbit/s"));
        assert_eq!(rate_unit(0.0), (1e9, "bit/s"));
    }

    #[test]
    fn durations_take_the_unit_that_fits() {
        assert_eq!(duration_unit(2.5), (1.0, "s"));
        assert_eq!(duration_unit(0.052), (1e3, "ms"));
        assert_eq!(duration_unit(52.766e-6), (1e6, "µs"));
        assert_eq!(duration_unit(0.0), (1e9, "ns"));
    }

    #[test]
    fn the_reason_legend_names_the_stragglers_most_steps_first() {
        let step =
            |host: &str, reason| StepRow { start: 0, end: 1, duration_s: 1e-5, host: host.into(), reason };
        let mut jobs = JobSteps::new();
        jobs.insert(
            "a".into(),
            vec![
                step("10.0.0.2", Some(0)),
                step("10.0.0.1", Some(0)),
                step("10.0.0.2", Some(0)),
                step("10.0.0.3", None),
            ],
        );
        jobs.insert("b".into(), (1..=5).map(|h| step(&format!("10.0.1.{h}"), Some(2))).collect());
        jobs.insert("c".into(), (1..=4).map(|h| step(&format!("10.0.2.{h}"), Some(1))).collect());
        assert_eq!(
            reason_entry(1, &jobs),
            "held back by nak: 10.0.2.1 ×1, 10.0.2.2 ×1, 10.0.2.3 ×1, 10.0.2.4 ×1"
        );
        assert_eq!(reason_entry(0, &jobs), "held back by loss: 10.0.0.2 ×2, 10.0.0.1 ×1");
        assert_eq!(
            reason_entry(2, &jobs),
            "held back by congestion: 10.0.1.1 ×1, 10.0.1.2 ×1, 10.0.1.3 ×1 and 2 more hosts"
        );
    }

    #[test]
    fn marks_become_groups() {
        let tags = ["<g class=\"a\">".to_owned(), "</g>".to_owned()];
        let mark = "<text x=\"0\" font-family=\"roceprobe-mark\">\nmark</text>\n";
        let svg = format!("<svg>\n{mark}<rect/>\n{mark}</svg>\n");
        assert_eq!(Marks::apply(&svg, &tags).unwrap(), "<svg>\n<g class=\"a\">\n<rect/>\n</g>\n</svg>\n");
        assert!(Marks::apply("<svg/>", &tags).is_err());
    }
}
