//! The live terminal dashboard (`--dashboard`): every interval the stats side builds a
//! [`View`] (the run's summary so far, plus rates over the last interval) and the UI thread
//! draws it with ratatui: totals and receive drops, the time source of each vantage, NVMe
//! I/O latency per (initiator, target, op) with a bar of where the time goes, and the top
//! flows. Keys: `s` cycles the flow order, `p` pauses the view, `q` (or Ctrl-C) stops the
//! run, which then flushes everything as SIGTERM does.
//!
//! Drawing ([`draw`]) is a pure function of the view and the UI state, so tests render it
//! on ratatui's test backend.

use super::summary::{FlowSummary, LatencySummary, RunEnd, Summary};
use anyhow::Result;
use crossbeam_channel::{Receiver, TryRecvError, TrySendError};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table};
use ratatui::Frame;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A flow as the summary names it: (vantage, src, dst, dst QPN).
type FlowId = (String, String, String, u32);
/// An I/O series: (initiator, target, op).
type IoId = (String, String, String);

/// What the dashboard shows at one moment.
#[derive(Debug, Clone)]
pub struct View {
    pub summary: Summary,
    /// Per flow, Gbit/s over the last interval (packet time).
    pub flow_gbps: HashMap<FlowId, f64>,
    /// Per (initiator, target, op), I/Os completed per second over the last interval.
    pub io_rate: HashMap<IoId, f64>,
    /// Per (initiator, target, op), MB/s the completed I/Os moved over the last interval.
    pub io_mbps: HashMap<IoId, f64>,
    /// The run has ended: this is the final summary.
    pub finished: bool,
}

/// The dashboard's subscription: a view of every interval for the UI thread, never waiting
/// (a view the UI has not taken yet is replaced by the new one).
pub struct Feed {
    tx: crossbeam_channel::Sender<View>,
    /// The screen's end of the channel, to take back a view it has not shown yet.
    unshown: Receiver<View>,
    views: ViewBuilder,
}

impl Feed {
    /// Views sent on `tx`, whose receiving end `rx` is the screen's.
    pub fn new(tx: crossbeam_channel::Sender<View>, rx: Receiver<View>) -> Self {
        Self { tx, unshown: rx, views: ViewBuilder::default() }
    }
}

impl super::Subscriber for Feed {
    /// Rates over the intervals since the view before (the first view: over its own
    /// interval), as flows.csv has them. A view the screen has not taken yet is replaced by
    /// this newer one: the screen shows the latest, never waits, and never falls behind.
    fn update(&mut self, summary: Summary, (start_ns, end_ns): (u64, u64)) {
        self.views.prev_ns.get_or_insert(start_ns);
        let mut view = self.views.build(summary, Some(end_ns), false);
        while let Err(TrySendError::Full(v)) = self.tx.try_send(view) {
            let _ = self.unshown.try_recv();
            view = v;
        }
    }
}

/// Turns successive summaries into views, with rates from the difference between each and
/// the one before.
#[derive(Debug, Default)]
pub struct ViewBuilder {
    prev_ns: Option<u64>,
    prev_bytes: HashMap<FlowId, u64>,
    prev_ios: HashMap<IoId, u64>,
    prev_io_bytes: HashMap<IoId, u64>,
}

fn flow_id(f: &FlowSummary) -> FlowId {
    (f.vantage.clone(), f.src_ip.clone(), f.dst_ip.clone(), f.dst_qpn)
}

/// Completed I/Os of each (initiator, target, op): the samples of its end-to-end latency at
/// the vantage that saw more of them.
fn io_counts(latency: &[LatencySummary]) -> HashMap<IoId, u64> {
    let mut out: HashMap<IoId, u64> = HashMap::new();
    for l in latency.iter().filter(|l| l.segment.starts_with("io@")) {
        let n = out.entry((l.initiator_ip.clone(), l.target_ip.clone(), l.op.clone())).or_default();
        *n = (*n).max(l.count);
    }
    out
}

impl ViewBuilder {
    /// A builder whose first view has rates averaged from `first_ns` (the final view).
    pub fn over_run(first_ns: Option<u64>) -> Self {
        Self { prev_ns: first_ns, ..Self::default() }
    }

    /// `now_ns`: the packet time the summary reaches (the end of the interval it closes, or
    /// the run's last packet for the final view).
    pub fn build(&mut self, summary: Summary, now_ns: Option<u64>, finished: bool) -> View {
        let secs = match (self.prev_ns, now_ns) {
            (Some(a), Some(b)) if b > a => Some((b - a) as f64 / 1e9),
            _ => None,
        };
        let bytes: HashMap<FlowId, u64> =
            summary.flows.iter().map(|f| (flow_id(f), f.counts.bytes)).collect();
        let ios = io_counts(&summary.latency);
        let rate = |now: u64, before: Option<&u64>, scale: f64| match secs {
            Some(s) => (now - before.copied().unwrap_or(0).min(now)) as f64 * scale / s,
            None => 0.0,
        };
        let flow_gbps =
            bytes.iter().map(|(k, &b)| (k.clone(), rate(b, self.prev_bytes.get(k), 8e-9))).collect();
        let io_rate = ios.iter().map(|(k, &n)| (k.clone(), rate(n, self.prev_ios.get(k), 1.0))).collect();
        let io_bytes: HashMap<IoId, u64> = summary
            .ios
            .by_pair
            .iter()
            .map(|p| ((p.initiator_ip.clone(), p.target_ip.clone(), p.op.clone()), p.counts.bytes))
            .collect();
        let io_mbps =
            io_bytes.iter().map(|(k, &b)| (k.clone(), rate(b, self.prev_io_bytes.get(k), 1e-6))).collect();
        if now_ns.is_some() {
            self.prev_ns = now_ns;
        }
        self.prev_bytes = bytes;
        self.prev_ios = ios;
        self.prev_io_bytes = io_bytes;
        View { summary, flow_gbps, io_rate, io_mbps, finished }
    }
}

/// How the flows are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortBy {
    #[default]
    Throughput,
    Retransmissions,
    Congestion,
}

impl SortBy {
    fn next(self) -> Self {
        match self {
            SortBy::Throughput => SortBy::Retransmissions,
            SortBy::Retransmissions => SortBy::Congestion,
            SortBy::Congestion => SortBy::Throughput,
        }
    }
    fn label(self) -> &'static str {
        match self {
            SortBy::Throughput => "throughput",
            SortBy::Retransmissions => "retx rate",
            SortBy::Congestion => "CNP+ECN",
        }
    }
}

/// What the keys change.
#[derive(Debug, Clone, Copy, Default)]
pub struct UiState {
    pub sort: SortBy,
    pub paused: bool,
}

/// A latency in µs in at most 4 characters (`m`: milliseconds, `s`: seconds).
fn us(v: f64) -> String {
    if v < 9.995 {
        format!("{v:.2}")
    } else if v < 99.95 {
        format!("{v:.1}")
    } else if v < 9999.5 {
        format!("{v:.0}")
    } else if v < 999_500.0 {
        format!("{:.0}m", v / 1e3)
    } else {
        format!("{:.0}s", v / 1e6)
    }
}

/// A rate in at most 5 characters.
fn rate(v: f64) -> String {
    if v < 9999.5 {
        format!("{v:.0}")
    } else if v < 999_500.0 {
        format!("{:.0}k", v / 1e3)
    } else {
        format!("{:.1}M", v / 1e6)
    }
}

/// Gbit/s in at most 8 columns with at least 3 significant digits: a collective's flows of
/// a few Mbit/s each are told apart (`0.004123`), a 400G link's shows whole (`398.1`).
fn gbit(v: f64) -> String {
    match v {
        0.0 => "0".to_owned(),
        100.0.. => format!("{v:.1}"),
        1.0.. => format!("{v:.3}"),
        _ => {
            let decimals = (3 - v.log10().floor() as i32).clamp(3, 6) as usize;
            format!("{v:.decimals$}")
        }
    }
}

/// MB/s in at most 5 characters; `-` where no I/O moved data.
fn mbps(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if v < 9.995 => format!("{v:.2}"),
        Some(v) if v < 99.95 => format!("{v:.1}"),
        Some(v) => rate(v),
    }
}

/// A count with thousands separators.
fn n(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn retx_rate(f: &FlowSummary) -> f64 {
    if f.counts.packets == 0 {
        0.0
    } else {
        f.counts.retx_packets as f64 / f.counts.packets as f64
    }
}

const SEGMENTS: [(&str, Color, char); 3] =
    [("compute", Color::Green, '█'), ("network", Color::Yellow, '▓'), ("storage", Color::Blue, '░')];

/// Terminal rows from which the slowest I/Os get a panel of their own (an 80x24 terminal
/// keeps its rows for the I/O latencies and the flows).
const SLOW_PANEL_FROM_ROWS: u16 = 36;

/// Draws the whole dashboard.
pub fn draw(f: &mut Frame<'_>, view: Option<&View>, ui: &UiState) {
    let slow_rows = match view {
        Some(v) if f.area().height >= SLOW_PANEL_FROM_ROWS => {
            v.summary.ios.latest_interval_slowest.len().min(5) as u16
        }
        _ => 0,
    };
    let job_rows = view.map_or(0, |v| v.summary.jobs.len().min(3) as u16);
    let totals_lines =
        view.map_or(Vec::new(), |v| flow_lines(totals_items(&v.summary), f.area().width.saturating_sub(2)));
    let totals_height = totals_lines.len() as u16 + 2;
    let slow_height = if slow_rows > 0 { slow_rows + 3 } else { 0 };
    let jobs_height = if job_rows > 0 { job_rows + 3 } else { 0 };
    // The I/O and flow panels share what is left: each gets what it needs while both fit,
    // else the I/O panel what it needs up to half (more if the flows need less), the flows
    // the rest.
    let left = f.area().height.saturating_sub(1 + totals_height + slow_height + jobs_height);
    let (io_need, flow_need) = view.map_or((0, 0), |v| {
        let rows = |n: usize| u16::try_from(n).unwrap_or(u16::MAX).saturating_add(3);
        (rows(io_counts(&v.summary.latency).len()), rows(v.summary.flows.len()))
    });
    let io_height = io_need.min(left.saturating_sub(flow_need).max(left / 2));
    let [head, totals, ios, slow, jobs, flows] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(totals_height),
        Constraint::Length(io_height),
        Constraint::Length(slow_height),
        Constraint::Length(jobs_height),
        Constraint::Fill(1),
    ])
    .areas(f.area());
    let state = match view {
        None => "waiting for packets",
        Some(v) if v.finished => match v.summary.ended {
            RunEnd::Complete => "finished",
            RunEnd::Stopped => "stopped",
            RunEnd::CutShort => "finished, an input file cut short",
            RunEnd::Failed => "stopped by an error (told on exit)",
        },
        Some(_) if ui.paused => "paused",
        Some(_) => "running",
    };
    let at = view.and_then(|v| v.summary.last_packet.clone()).unwrap_or_default();
    f.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled("roceprobe ", Style::new().add_modifier(Modifier::BOLD)),
            Span::raw(format!("{state}  {at}  ")),
            Span::styled("s:sort p:pause q:quit", Style::new().fg(Color::DarkGray)),
        ])),
        head,
    );
    let Some(v) = view else { return };
    f.render_widget(
        Paragraph::new(totals_lines).block(Block::new().borders(Borders::ALL).title(" totals ")),
        totals,
    );
    draw_ios(f, ios, v);
    if slow_rows > 0 {
        draw_slow_ios(f, slow, &v.summary, usize::from(slow_rows));
    }
    if job_rows > 0 {
        draw_jobs(f, jobs, &v.summary, usize::from(job_rows));
    }
    draw_flows(f, flows, v, ui.sort);
}

/// How many of `widths` (in order) fit in `room` columns, one column apart, leaving
/// `reserve` for what follows them; at least `keep` (the ones never left out).
fn columns_that_fit(widths: &[u16], keep: usize, room: u16, reserve: u16) -> usize {
    let mut used = 0u16;
    let mut n = 0;
    for (i, w) in widths.iter().enumerate() {
        let next = used + w + u16::from(i > 0);
        if i >= keep && next + reserve > room {
            break;
        }
        used = next;
        n += 1;
    }
    n
}

/// The widest of `cells` and `header`, in terminal columns.
fn widest<'a>(header: &str, cells: impl Iterator<Item = &'a str>) -> u16 {
    cells.map(|c| c.chars().count()).max().unwrap_or(0).max(header.chars().count()) as u16
}

/// What asks for attention: a bound that lost something, a flow's counter of trouble.
const ATTENTION: Style = Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD);

/// The totals' items, each a number with its name (never cut apart), in groups that each
/// begin a line: frames by kind; receive and report drops, evidence; time sources and the
/// bounds that lost something.
fn totals_items(s: &Summary) -> Vec<Vec<(String, Style)>> {
    let plain = Style::new();
    let malformed: u64 = s.decode_errors.values().sum();
    let ports = s.ports.values();
    let (missed, errors, nombuf) =
        ports.fold((0, 0, 0), |a, p| (a.0 + p.imissed, a.1 + p.ierrors, a.2 + p.rx_nombuf));
    let drops = missed + errors + nombuf + s.report_drops;
    let warn = if drops > 0 { Style::new().fg(Color::Red).add_modifier(Modifier::BOLD) } else { plain };
    let mut frames = vec![
        (format!("frames {}", n(s.packets)), plain),
        (format!("RoCEv2 {}", n(s.roce_packets)), plain),
        (format!("other {}", n(s.non_roce_packets)), plain),
        (format!("malformed {}", n(malformed)), plain),
    ];
    // What only some runs have, when they have it: packets of flows beyond --max-flows,
    // packets after the reorder window and the mirrors' second copies (compute/storage).
    let (late, dup) = (s.reorder.late_packets, s.mirror_duplicates);
    if s.untracked_packets > 0 {
        frames.push((format!("untracked {}", n(s.untracked_packets)), plain));
    }
    if late.compute + late.storage > 0 {
        frames.push((format!("late {}/{}", n(late.compute), n(late.storage)), plain));
    }
    if dup.compute + dup.storage > 0 {
        frames.push((format!("dup {}/{}", n(dup.compute), n(dup.storage)), plain));
    }
    let mut health = vec![(
        format!(
            "drops: rx missed {}  errors {}  no mbuf {}  reports {}",
            n(missed),
            n(errors),
            n(nombuf),
            n(s.report_drops)
        ),
        warn,
    )];
    // Evidence: events, the files written, and those a cap or a failure left without one.
    if let Some(e) = &s.evidence {
        let events: u64 = e.kinds.values().map(|c| c.events).sum();
        let without = events - e.files_written + e.events_dropped;
        let style = if without > 0 { Style::new().fg(Color::Yellow) } else { plain };
        health.push((
            format!("evidence {}/{} files, {} without", n(e.files_written), n(events), n(without)),
            style,
        ));
    }
    let time: Vec<String> =
        s.time_sources.iter().map(|(v, names)| format!("{v} {}", names.join("+"))).collect();
    let mut limits =
        vec![(format!("time: {}", if time.is_empty() { "-".into() } else { time.join(", ") }), plain)];
    // A bound was reached: what did not fit is not measured (RELIABILITY.md). Each bound
    // that lost something: the option, what it lost, and the value that would have lost
    // nothing (the exit report says more).
    let forgotten = s.forgotten.total();
    let mut prefix = "limits: ";
    if forgotten + s.latency_samples_dropped > 0 {
        limits.push((
            format!("{prefix}{} forgotten, {} samples dropped", n(forgotten), n(s.latency_samples_dropped)),
            ATTENTION,
        ));
        prefix = "";
    }
    for b in &s.bounds {
        let raise = match b.needed {
            Some(v) if b.needed_at_least => format!("raise above {v}"),
            Some(v) => format!("raise to {v}"),
            None => "(unanswered)".to_owned(),
        };
        // What was lost without its note in parentheses (the exit report has it).
        let what = b.what.split(" (").next().unwrap_or_default();
        limits.push((format!("{prefix}{} {}: {} {what}, {raise}", b.option, b.limit, n(b.lost)), ATTENTION));
        prefix = "";
    }
    vec![frames, health, limits]
}

/// Lines of at most `width` columns from groups of items, two spaces apart: each group
/// begins a line, and an item goes whole to the next line when it does not fit. An item
/// wider than a whole line goes on word by word (its numbers have no spaces: none is cut);
/// only a single word wider than the line is cut, with `…`.
fn flow_lines(groups: Vec<Vec<(String, Style)>>, width: u16) -> Vec<Line<'static>> {
    let width = usize::from(width.max(1));
    let mut lines = Vec::new();
    for group in groups {
        let mut line: Vec<Span<'static>> = Vec::new();
        let mut used = 0usize;
        for (text, style) in group {
            let len = text.chars().count();
            // The pieces that go whole, and the gap before each: the item, or its words.
            let pieces: Vec<(String, usize)> = if len > width {
                text.split(' ').enumerate().map(|(i, w)| (w.to_owned(), if i == 0 { 2 } else { 1 })).collect()
            } else {
                vec![(text, 2)]
            };
            for (mut piece, gap) in pieces {
                let len = piece.chars().count();
                if used > 0 && used + gap + len > width {
                    lines.push(Line::from(std::mem::take(&mut line)));
                    used = 0;
                }
                if used > 0 {
                    line.push(Span::raw(" ".repeat(gap)));
                    used += gap;
                }
                if len > width {
                    piece = piece.chars().take(width - 1).chain(std::iter::once('…')).collect();
                }
                used += piece.chars().count();
                line.push(Span::styled(piece, style));
            }
        }
        lines.push(Line::from(line));
    }
    lines
}

/// p50 and p99 of one segment of a series, if it has samples.
fn segment<'a>(s: &'a Summary, id: &IoId, seg: &str) -> Option<&'a LatencySummary> {
    s.latency
        .iter()
        .find(|l| l.initiator_ip == id.0 && l.target_ip == id.1 && l.op == id.2 && l.segment == seg)
}

fn draw_ios(f: &mut Frame<'_>, area: Rect, v: &View) {
    let mut ids: Vec<IoId> = io_counts(&v.summary.latency).into_keys().collect();
    ids.sort();
    let pairs: Vec<String> = ids.iter().map(|id| format!("{}>{}", id.0, id.1)).collect();
    let ops: Vec<&str> = ids.iter().map(|id| id.2.trim_start_matches("nvme_")).collect();
    let mut header = vec!["initiator>target", "op", "IO/s", "I/O", "compute", "network", "storage"];
    // Addresses are never cut: the pair column is as wide as its widest; the numbers follow
    // while they fit, the bar gets what they leave (at least 4 columns, or none), and MB/s
    // shows when there is room for it beside the bar.
    let mut widths = vec![
        widest(header[0], pairs.iter().map(String::as_str)),
        widest("op", ops.iter().copied()),
        5,
        9,
        9,
        9,
        9,
    ];
    let room = area.width.saturating_sub(2);
    let all = widths.iter().sum::<u16>() + widths.len() as u16;
    let with_mbps = room >= all + 6 + 4;
    if with_mbps {
        header.insert(3, "MB/s");
        widths.insert(3, 5);
    }
    let shown = columns_that_fit(&widths, 1, room, 0);
    let used: u16 = widths[..shown].iter().sum::<u16>() + shown as u16;
    let bar_width = if shown == widths.len() && room >= used + 4 { room - used } else { 0 };
    // The bar's header as its width allows (the bar is at least 4 columns).
    header.push(match bar_width {
        9.. => "p50 split",
        5.. => "split",
        _ => "p50",
    });
    let rows = ids.iter().zip(&pairs).zip(&ops).map(|((id, pair), op)| {
        let mut cells = vec![
            Line::from(pair.clone()),
            Line::from(op.to_string()),
            Line::from(rate(v.io_rate.get(id).copied().unwrap_or(0.0))),
        ];
        if with_mbps {
            cells.push(Line::from(mbps(v.io_mbps.get(id).copied())));
        }
        // End to end: at the compute vantage where it was seen there, else at storage.
        let io = segment(&v.summary, id, "io@compute").or_else(|| segment(&v.summary, id, "io@storage"));
        cells.push(Line::from(io.map_or("-".into(), |l| format!("{}/{}", us(l.p50_us), us(l.p99_us)))));
        let mut p50s = [0.0f64; 3];
        let mut known = 0;
        for (i, (seg, _, _)) in SEGMENTS.iter().enumerate() {
            cells.push(Line::from(match segment(&v.summary, id, seg) {
                Some(l) => {
                    p50s[i] = l.p50_us;
                    known += 1;
                    format!("{}/{}", us(l.p50_us), us(l.p99_us))
                }
                None => "-".into(),
            }));
        }
        // Where the median I/O's time goes: compute, network and storage side by side;
        // only with all three (one vantage gives the compute segment alone, which a bar
        // showed as the whole I/O).
        let total: f64 = p50s.iter().sum();
        let mut bar = Vec::new();
        if known == SEGMENTS.len() && total > 0.0 && bar_width > 0 {
            let mut used = 0u16;
            for (i, (_, color, ch)) in SEGMENTS.iter().enumerate() {
                let w = if i == 2 {
                    bar_width - used
                } else {
                    ((p50s[i] / total) * f64::from(bar_width)).round() as u16
                }
                .min(bar_width - used);
                used += w;
                bar.push(Span::styled(ch.to_string().repeat(usize::from(w)), Style::new().fg(*color)));
            }
        }
        cells.push(Line::from(bar));
        cells.truncate(shown + usize::from(bar_width > 0));
        Row::new(cells)
    });
    let mut constraints: Vec<Constraint> = widths[..shown].iter().map(|&w| Constraint::Length(w)).collect();
    if bar_width > 0 {
        constraints.push(Constraint::Fill(1));
    }
    let header = &header[..constraints.len()];
    // Rows beyond the panel's height are not shown: the title says how many are.
    let fit = usize::from(area.height.saturating_sub(3));
    let of = if ids.len() > fit { format!(" ({fit} of {})", ids.len()) } else { String::new() };
    let title = format!(" I/O latency{of}, µs p50/p99 (█ compute ▓ network ░ storage) ");
    f.render_widget(table(rows, constraints, header, title), area);
}

/// Collective jobs (the most steps first): the last step's duration, the p99 over the run,
/// and who held the last step back, by how much and why.
fn draw_jobs(f: &mut Frame<'_>, area: Rect, s: &Summary, rows: usize) {
    let mut jobs: Vec<&crate::report::summary::JobSummary> = s.jobs.iter().collect();
    jobs.sort_by(|a, b| b.steps.cmp(&a.steps).then(a.name.cmp(&b.name)));
    let cells: Vec<[String; 7]> = jobs
        .iter()
        .take(rows)
        .map(|j| {
            let last = j.last_step.as_ref();
            [
                j.name.clone(),
                n(j.steps),
                last.map_or("-".into(), |l| us(l.duration_us)),
                j.step_p99_us.map_or("-".into(), us),
                last.map_or("-".into(), |l| l.straggler_host.clone()),
                last.map_or("-".into(), |l| us(l.lag_us)),
                last.map_or("-".into(), |l| l.reason.clone()),
            ]
        })
        .collect();
    let header = ["job", "steps", "last", "p99", "straggler", "lag", "why"];
    let widths: Vec<u16> =
        header.iter().enumerate().map(|(i, h)| widest(h, cells.iter().map(|c| c[i].as_str()))).collect();
    let shown = columns_that_fit(&widths, 1, area.width.saturating_sub(2), 0);
    let rows = cells.iter().map(|c| Row::new(c[..shown].to_vec()));
    let constraints = widths[..shown].iter().map(|&w| Constraint::Length(w)).collect();
    let title = " collective jobs: step µs, last step's straggler ".to_owned();
    f.render_widget(table(rows, constraints, &header[..shown], title), area);
}

/// The slowest I/Os of the latest interval, slowest first, with their segments.
fn draw_slow_ios(f: &mut Frame<'_>, area: Rect, s: &Summary, rows: usize) {
    let list = &s.ios.latest_interval_slowest[..rows.min(s.ios.latest_interval_slowest.len())];
    let opt = |v: Option<f64>| v.map_or("-".into(), us);
    let cells: Vec<[String; 10]> = list
        .iter()
        .map(|io| {
            [
                format!("{}>{}", io.initiator_ip, io.target_ip),
                io.op.trim_start_matches("nvme_").to_owned(),
                format!("{:#08x}", io.qpn),
                io.cid.to_string(),
                n(u64::from(io.bytes)),
                us(io.io_us),
                opt(io.compute_us),
                opt(io.network_us),
                opt(io.storage_us),
                io.completed_at.get(11..26).unwrap_or_default().to_owned(),
            ]
        })
        .collect();
    let header = [
        "initiator>target",
        "op",
        "qpn",
        "cid",
        "bytes",
        "I/O",
        "compute",
        "network",
        "storage",
        "completed",
    ];
    let widths: Vec<u16> =
        header.iter().enumerate().map(|(i, h)| widest(h, cells.iter().map(|c| c[i].as_str()))).collect();
    let shown = columns_that_fit(&widths, 1, area.width.saturating_sub(2), 0);
    let rows = cells.iter().map(|c| Row::new(c[..shown].to_vec()));
    let constraints = widths[..shown].iter().map(|&w| Constraint::Length(w)).collect();
    let title = " slowest I/Os of the last interval, µs ".to_owned();
    f.render_widget(table(rows, constraints, &header[..shown], title), area);
}

/// A table with a bold header in a titled box.
fn table<'a>(
    rows: impl IntoIterator<Item = Row<'a>>,
    widths: Vec<Constraint>,
    header: &[&'a str],
    title: String,
) -> Table<'a> {
    Table::new(rows, widths)
        .header(Row::new(header.to_vec()).style(Style::new().add_modifier(Modifier::BOLD)))
        .column_spacing(1)
        .block(Block::new().borders(Borders::ALL).title(title))
}

fn draw_flows(f: &mut Frame<'_>, area: Rect, v: &View, sort: SortBy) {
    let gbps = |fl: &FlowSummary| v.flow_gbps.get(&flow_id(fl)).copied().unwrap_or(0.0);
    let mut flows: Vec<&FlowSummary> = v.summary.flows.iter().collect();
    match sort {
        SortBy::Throughput => {
            flows.sort_by(|a, b| gbps(b).total_cmp(&gbps(a)).then(b.counts.bytes.cmp(&a.counts.bytes)))
        }
        SortBy::Retransmissions => flows.sort_by(|a, b| retx_rate(b).total_cmp(&retx_rate(a))),
        SortBy::Congestion => {
            flows.sort_by_key(|f| std::cmp::Reverse(f.counts.cnp + f.counts.ecn_ce));
        }
    }
    let room = area.width.saturating_sub(2);
    let id = |fl: &FlowSummary| {
        let v = fl.vantage.chars().next().unwrap_or('?');
        (format!("{v} {}>", fl.src_ip), format!("{} {:#08x}", fl.dst_ip, fl.dst_qpn))
    };
    // A flow takes one line, or two when its addresses are too long for one (IPv6 on a
    // narrow terminal): "v src>" above "  dst qpn".
    let two_lines = flows.iter().any(|fl| {
        let (a, b) = id(fl);
        (a.chars().count() + b.chars().count()) as u16 > room
    });
    let per_row: u16 = if two_lines { 2 } else { 1 };
    let cells: Vec<[String; 7]> = flows
        .iter()
        .take(usize::from(area.height.saturating_sub(3) / per_row))
        .map(|fl| {
            let (a, b) = id(fl);
            [
                if two_lines { format!("{a}\n  {b}") } else { format!("{a}{b}") },
                gbit(gbps(fl)),
                format!("{:.2}", retx_rate(fl) * 100.0),
                n(fl.counts.gap_psns),
                n(fl.counts.nak_seq + fl.counts.nak_rnr + fl.counts.nak_other),
                n(fl.counts.cnp),
                n(fl.counts.ecn_ce),
            ]
        })
        .collect();
    let header = ["flow (vantage src>dst qpn)", "Gbit/s", "retx%", "gaps", "NAK", "CNP", "ECN"];
    // The flow column is never cut; the counters follow while they fit, and the last one
    // shown takes the rest of the width.
    let first = widest(header[0], cells.iter().flat_map(|c| c[0].lines()));
    let widths = [first, 8, 6, 6, 5, 6, 6];
    let shown = columns_that_fit(&widths, 1, room, 0);
    // A counter of trouble that is not zero (retransmissions, gaps, NAKs, CNPs, ECN marks)
    // stands out in yellow.
    let rows = cells.iter().map(|c| {
        let cells = c[..shown].iter().enumerate().map(|(i, v)| {
            let zero = v.chars().all(|ch| matches!(ch, '0' | '.' | ','));
            let style = if i >= 2 && !zero { ATTENTION } else { Style::new() };
            Cell::from(v.clone()).style(style)
        });
        Row::new(cells).height(per_row)
    });
    let mut constraints: Vec<Constraint> = widths[..shown].iter().map(|&w| Constraint::Length(w)).collect();
    constraints[0] = Constraint::Min(first);
    // Gbit/s is the last interval's (the final view's: the run's, first to last packet),
    // the counters the run's: the title says so.
    // Whole in 80 columns: at most 73 characters with a million flows.
    let over = if v.finished { "Gbit/s and counts: run" } else { "Gbit/s: last interval, counts: run" };
    let title = format!(" top flows of {} by {} ({over}) ", v.summary.flows.len(), sort.label());
    f.render_widget(table(rows, constraints, &header[..shown], title), area);
}

/// Restores the terminal however the UI thread ends.
struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        ratatui::restore();
        crate::release_notes();
    }
}

/// Takes over the terminal (raw mode, alternate screen) for [`run_ui`]: called before any
/// work, so that a terminal that cannot do it is an error at start-up. Notes wait until
/// the terminal is given back (they would be written over the screen).
pub fn open_terminal() -> Result<ratatui::DefaultTerminal> {
    let t = ratatui::try_init()?;
    crate::hold_notes();
    Ok(t)
}

/// Gives the terminal back when [`run_ui`] never ran (its thread could not start).
pub fn close_terminal() {
    drop(TerminalGuard);
}

/// Runs the dashboard on this thread until the views stop coming and, if the run finished
/// (a final view came), the user has pressed `q`: the final view stays on screen until then.
/// `q` also sets `stop`, which ends a live capture (a replay ends by itself). The terminal
/// is restored however this ends.
pub fn run_ui(
    mut terminal: ratatui::DefaultTerminal,
    views: Receiver<View>,
    stop: Arc<AtomicBool>,
) -> Result<()> {
    let _guard = TerminalGuard;
    let mut ui = UiState::default();
    let mut view: Option<View> = None;
    let (mut quit, mut ended) = (false, false);
    // Without a final view the run failed: its error is for the plain terminal. A run ended
    // by a signal (or one that comes while the final view waits for q) ends the screen too.
    while !(ended && (quit || stop.load(Ordering::Relaxed) || !view.as_ref().is_some_and(|v| v.finished))) {
        loop {
            match views.try_recv() {
                Ok(v) if v.finished || !ui.paused || view.is_none() => view = Some(v),
                Ok(_) => {}
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    ended = true;
                    break;
                }
            }
        }
        terminal.draw(|f| draw(f, view.as_ref(), &ui))?;
        if event::poll(Duration::from_millis(100))? {
            if let Event::Key(k) = event::read()? {
                if k.kind != KeyEventKind::Press {
                    continue;
                }
                match k.code {
                    KeyCode::Char('q') | KeyCode::Esc => quit = true,
                    KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => quit = true,
                    KeyCode::Char('s') => ui.sort = ui.sort.next(),
                    KeyCode::Char('p') => ui.paused = !ui.paused,
                    _ => {}
                }
                if quit {
                    stop.store(true, Ordering::Relaxed);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Totals;

    #[test]
    fn numbers_fit_their_columns() {
        assert_eq!(
            [us(4.0), us(4.671), us(66.04), us(144.6), us(9999.4), us(12_345.0), us(2.6e6)],
            ["4.00", "4.67", "66.0", "145", "9999", "12m", "3s"]
        );
        assert_eq!([rate(2417.0), rate(24_168.0), rate(3.25e6)], ["2417", "24k", "3.2M"]);
        assert_eq!(
            [gbit(0.0), gbit(0.004123), gbit(0.04), gbit(0.5), gbit(5.382), gbit(398.12), gbit(1e-9)],
            ["0", "0.004123", "0.04000", "0.5000", "5.382", "398.1", "0.000000"]
        );
        assert_eq!([n(0), n(999), n(1000), n(1_234_567)], ["0", "999", "1,000", "1,234,567"]);
    }

    #[test]
    fn rates_are_the_difference_over_packet_time() {
        let mut s = Summary::build(&Totals::default(), &[], &Default::default());
        let flow = |bytes| {
            serde_json::from_value::<FlowSummary>(serde_json::json!({
                "vantage": "compute", "src_ip": "10.0.0.1", "dst_ip": "10.0.0.2", "dst_qpn": 7,
                "transport": "RC", "packets": 1, "bytes": bytes, "payload_bytes": 0, "messages": 0,
                "retx_packets": 0, "retx_bytes": 0, "retx_episodes": 0, "gap_psns": 0,
                "out_of_window": 0, "nak_seq": 0, "nak_rnr": 0, "nak_other": 0, "cnp": 0,
                "cnp_unattributed": 0, "ecn_ce": 0, "icrc_errors": 0, "nvme_commands": 0,
                "nvme_completions": 0, "late_packets": 0, "opcodes": {}, "fabric_loss_psns": null, "transmissions": 0
            }))
            .unwrap()
        };
        let id = ("compute".to_string(), "10.0.0.1".to_string(), "10.0.0.2".to_string(), 7);
        let mut b = ViewBuilder::default();
        s.flows = vec![flow(1_000)];
        // The first view has nothing to compare with.
        assert_eq!(b.build(s.clone(), Some(10_000_000_000), false).flow_gbps[&id], 0.0);
        // 125,000,000 more bytes in 2 s: 0.5 Gbit/s.
        s.flows = vec![flow(125_001_000)];
        assert_eq!(b.build(s.clone(), Some(12_000_000_000), false).flow_gbps[&id], 0.5);
        // Over the run: all bytes since the first packet.
        let v = ViewBuilder::over_run(Some(10_000_000_000)).build(s, Some(12_000_000_000), true);
        assert_eq!(v.flow_gbps[&id], 125_001_000.0 * 8.0 / 2e9);
    }

    #[test]
    fn the_feed_rates_each_interval_over_its_length_and_the_screen_gets_the_latest() {
        // Rates were taken over the time between the intervals' last packets, which can be
        // a fraction of the interval or more than it: 40 % off flows.csv in a review's run.
        // And a view the screen had not taken kept the newer ones out: it showed the first
        // of a burst of intervals for as long as no more came.
        use super::super::Subscriber;
        let (tx, rx) = crossbeam_channel::bounded::<View>(1);
        let mut feed = Feed::new(tx, rx.clone());
        let mut s = Summary::build(&Totals::default(), &[], &Default::default());
        let flow = |bytes: u64| {
            let mut f: FlowSummary = serde_json::from_value(serde_json::json!({
                "vantage": "compute", "src_ip": "10.0.0.1", "dst_ip": "10.0.0.2", "dst_qpn": 7,
                "transport": "RC", "packets": 1, "bytes": 0, "payload_bytes": 0, "messages": 0,
                "retx_packets": 0, "retx_bytes": 0, "retx_episodes": 0, "gap_psns": 0,
                "out_of_window": 0, "nak_seq": 0, "nak_rnr": 0, "nak_other": 0, "cnp": 0,
                "cnp_unattributed": 0, "ecn_ce": 0, "icrc_errors": 0, "nvme_commands": 0,
                "nvme_completions": 0, "late_packets": 0, "opcodes": {}, "fabric_loss_psns": null, "transmissions": 0
            }))
            .unwrap();
            f.counts.bytes = bytes;
            f
        };
        let id = ("compute".to_string(), "10.0.0.1".to_string(), "10.0.0.2".to_string(), 7);
        // 1 ms intervals: 1,000 bytes in the first (8 Mbit/s), 3,000 more in the second.
        s.flows = vec![flow(1_000)];
        feed.update(s.clone(), (5_000_000, 6_000_000));
        s.flows = vec![flow(4_000)];
        feed.update(s.clone(), (6_000_000, 7_000_000));
        let v = rx.try_recv().expect("the latest view");
        assert!(rx.try_recv().is_err(), "one view waits, the latest");
        assert_eq!(v.flow_gbps[&id], 3_000.0 * 8.0 / 1e-3 / 1e9);
        // Two intervals later (none reported between): over both.
        s.flows = vec![flow(10_000)];
        feed.update(s, (8_000_000, 9_000_000));
        assert_eq!(rx.try_recv().unwrap().flow_gbps[&id], 6_000.0 * 8.0 / 2e-3 / 1e9);
    }
}
