//! Runtime: one pipeline for both sources. The worker polls its source, decodes and tracks
//! every frame, and at each interval boundary of packet time hands a snapshot to the stats
//! side over a channel; the stats side merges snapshots into the reports. The worker owns
//! all per-packet state, so nothing on the per-packet path is shared or locked.

pub mod cpus;
pub mod dispatch;
pub mod reorder;
pub mod rss;
pub mod worker;

use crate::capture::{Capture, Poll, SourceStats};
use crate::defaults;
use crate::metrics::latency::LatencyBatch;
use crate::metrics::steps::{JobRule, Steps};
use crate::metrics::totals::Progress;
use crate::metrics::{IntervalSnapshot, Totals};
use crate::report::csv::CsvHealth;
use crate::report::evidence::EvidenceWriter;
use crate::report::{Reports, Summary};
use crate::track::flow::FlowDelta;
use crate::track::io::{IoCountsByPair, Slowest};
use crate::track::{Transmission, VantageMap};
use anyhow::Result;
use crossbeam_channel::Sender;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub use worker::Worker;

/// Settings shared by every worker.
#[derive(Debug, Clone)]
pub struct PipelineConfig {
    /// Report interval in packet time.
    pub interval: Duration,
    /// Bound on tracked flows per worker.
    pub max_flows: usize,
    pub vantages: VantageMap,
    /// Verify every RoCEv2 packet's ICRC (`--check-icrc`).
    pub check_icrc: bool,
    /// A transmission ends after this long without a packet of its flow (`--flow-idle`).
    pub flow_idle: Duration,
    /// Transmissions of fewer packets (and no NAK) are counted per flow and interval, not
    /// reported one by one (`--min-transmission-packets`).
    pub min_transmission_packets: u64,
    /// A flow without a packet for this long gives its slot to a new flow when the table is
    /// full (`--flow-expire`).
    pub flow_expire: Duration,
    /// Path MTU for READ spans (`--mtu`); learned per QP when absent.
    pub mtu: Option<u32>,
    /// An I/O without a completion after this long is counted as timed out (`--io-timeout`).
    pub io_timeout: Duration,
    /// Frames are analysed in packet-time order within this window (`--reorder-window`);
    /// zero: in arrival order.
    pub reorder_window: Duration,
    /// A lower-TTL copy of a packet this soon after its flow's last is the mirror's second
    /// (`--duplicate-window`); zero: never.
    pub duplicate_window: Duration,
    /// Bound on I/Os awaiting their completion (`--max-ios`).
    pub max_ios: usize,
    /// Bound on latency series, (initiator, target, op, segment), and on the I/O counts'
    /// (initiator, target, op).
    pub max_latency_series: usize,
    /// Bound on NVMe commands awaiting their completion (`--max-pending-commands`).
    pub max_pending_commands: usize,
    /// Bound on CM ConnectRequests awaiting their reply (`--max-cm-requests`).
    pub max_cm_requests: usize,
    /// The slowest NVMe I/Os listed per interval and kept for the run (`--slow-ios`).
    pub slow_ios: usize,
    /// Collective jobs named by the operator (`--job`); the others are found.
    pub jobs: Vec<JobRule>,
    /// A job's step ends after this long without any of its flows sending (`--step-gap`).
    pub step_gap: Duration,
    /// Bound on the collective jobs with run totals (`--max-jobs`).
    pub max_jobs: usize,
    /// Bound on flows announced by CM awaiting their first packet (`--max-announced-flows`).
    pub max_announced_flows: usize,
    /// Worker threads (`--workers`): 1 analyses on the capture thread; more dispatch by
    /// IP pair.
    pub workers: usize,
    /// Receive on the capture thread and analyse on worker threads even with one worker
    /// (`live --rx-core`).
    pub dedicated_rx: bool,
    /// Never wait for the stats side: drop and count what it has no room for (live). When
    /// false, workers wait, and nothing is lost (replay).
    pub never_wait: bool,
    /// CPUs to pin workers to, in turn (live: EAL's lcores besides the main one); empty:
    /// the cores after the capture thread's.
    pub worker_cpus: Vec<usize>,
    /// CPUs for the stats thread (live: see [`control_cpus`]); empty: where it starts.
    pub control_cpus: Vec<usize>,
    /// What each capture source's timestamps are made of (`Capture::time_sources`), for
    /// the summaries published to the live outputs.
    pub source_times: Vec<&'static str>,
    /// `--evidence-dir` and its bounds.
    pub evidence: Option<crate::report::evidence::EvidenceSettings>,
}

impl PipelineConfig {
    /// The bytes of each frame that are kept (held by a reorder window, handed to a worker
    /// by a dispatcher) beyond those the analysis reads (see [`reorder::kept_len`]): the
    /// evidence's snap length, or the whole frame when its ICRC is checked.
    pub fn kept_at_least(&self) -> usize {
        if self.check_icrc {
            return usize::MAX;
        }
        self.evidence.as_ref().map_or(0, |e| e.track.snaplen as usize)
    }

    /// What the analysis (`track::Analyzer`) needs of these settings.
    pub fn analyzer(&self) -> crate::track::AnalyzerConfig {
        crate::track::AnalyzerConfig {
            vantages: self.vantages.clone(),
            max_flows: self.max_flows,
            flow_idle_ns: self.flow_idle.as_nanos() as u64,
            flow_expire_ns: self.flow_expire.as_nanos() as u64,
            min_transmission_packets: self.min_transmission_packets,
            mtu: self.mtu,
            max_announced_flows: self.max_announced_flows,
            max_ios: self.max_ios,
            io_timeout_ns: self.io_timeout.as_nanos() as u64,
            reorder_window_ns: self.reorder_window.as_nanos() as u64,
            duplicate_window_ns: self.duplicate_window.as_nanos() as u64,
            max_latency_series: self.max_latency_series,
            max_pending_commands: self.max_pending_commands,
            max_cm_requests: self.max_cm_requests,
            check_icrc: self.check_icrc,
            slow_ios: self.slow_ios,
            evidence: self.evidence.as_ref().map(|e| crate::track::evidence::EvidenceConfig {
                wait_for_records: !self.never_wait,
                ..e.track
            }),
        }
    }

    /// The defaults of the command line, with these vantages.
    pub fn new(vantages: VantageMap) -> Self {
        Self {
            interval: Duration::from_nanos(defaults::INTERVAL_NS),
            max_flows: defaults::MAX_FLOWS,
            vantages,
            check_icrc: false,
            flow_idle: Duration::from_nanos(defaults::FLOW_IDLE_NS),
            flow_expire: Duration::from_nanos(defaults::FLOW_EXPIRE_NS),
            min_transmission_packets: defaults::MIN_TRANSMISSION_PACKETS,
            mtu: None,
            io_timeout: Duration::from_nanos(defaults::IO_TIMEOUT_NS),
            reorder_window: Duration::from_nanos(defaults::REORDER_WINDOW_NS),
            duplicate_window: Duration::from_nanos(defaults::DUPLICATE_WINDOW_NS),
            max_ios: defaults::MAX_IOS,
            max_latency_series: defaults::MAX_LATENCY_SERIES,
            max_pending_commands: defaults::MAX_PENDING_COMMANDS,
            max_cm_requests: defaults::MAX_CM_REQUESTS,
            slow_ios: defaults::SLOW_IOS,
            jobs: Vec::new(),
            step_gap: Duration::from_nanos(defaults::STEP_GAP_NS),
            max_jobs: defaults::MAX_JOBS,
            max_announced_flows: defaults::MAX_ANNOUNCED_FLOWS,
            workers: 1,
            dedicated_rx: false,
            never_wait: false,
            worker_cpus: Vec::new(),
            control_cpus: Vec::new(),
            source_times: Vec::new(),
            evidence: None,
        }
    }
}

/// Buffers the stats side hands back, emptied, for the worker to fill again: in a steady
/// state the worker allocates nothing, not even per interval.
#[derive(Debug)]
pub enum Recycled {
    Interval {
        flows: Vec<FlowDelta>,
        latency: LatencyBatch,
        ios: crate::track::io::IoBatch,
        no_file: Vec<crate::track::evidence::NoFile>,
    },
    Transmissions(Vec<Transmission>),
}

/// Messages from workers to the stats side.
#[derive(Debug)]
// A snapshot travels inline: boxing it would allocate every interval, which the recycled
// buffers exist to avoid.
#[allow(clippy::large_enum_variant)]
pub enum ToStats {
    Interval(IntervalSnapshot),
    /// Transmissions that ended (sent in batches) by a worker, with the end of the interval
    /// it counts them in.
    Transmissions(usize, u64, Vec<Transmission>),
    /// An event's evidence (`--evidence-dir`) from a worker, or an event without a file.
    Evidence(usize, crate::track::evidence::EvidenceRecord),
    /// Receive statistics of every source over an interval (from the capture thread).
    Ports {
        start_ns: u64,
        end_ns: u64,
        sources: Vec<SourceStats>,
    },
}

/// The interval of `interval_ns` that holds packet time `ts`, as [start, end): aligned to
/// multiples of the interval since the epoch, so that reports of several probes (and of
/// several runs over one capture) line up. The last one before the 64-bit clock ends, whose
/// end would pass it, ends at `u64::MAX` and holds that time too (see [`is_past`]).
pub(crate) fn interval_at(ts: u64, interval_ns: u64) -> (u64, u64) {
    let start = ts - ts % interval_ns;
    (start, start.saturating_add(interval_ns))
}

/// Whether packet time `ts` is past the interval that ends at `end` (from [`interval_at`]).
/// Nothing is past the last one: a time clamped to `u64::MAX` (a hostile capture's, or a
/// switch clock's) stays in it instead of closing it again at every frame.
#[inline]
pub(crate) fn is_past(ts: u64, end: u64) -> bool {
    ts >= end && end != u64::MAX
}

/// Reads the capture's receive statistics at each interval boundary of capture time and
/// hands the interval's differences to the stats side (ports.csv).
pub struct PortReport {
    interval_ns: u64,
    current: Option<(u64, u64)>,
    last: Vec<SourceStats>,
}

impl PortReport {
    pub fn new(interval: Duration) -> Self {
        Self { interval_ns: (interval.as_nanos() as u64).max(1), current: None, last: Vec::new() }
    }

    fn interval_of(&self, ts: u64) -> (u64, u64) {
        interval_at(ts, self.interval_ns)
    }

    fn send(&mut self, (start_ns, end_ns): (u64, u64), now: Vec<SourceStats>, tx: &Sender<ToStats>) {
        let sources = now
            .iter()
            .enumerate()
            .map(|(i, s)| s.since(&self.last.get(i).copied().unwrap_or_default()))
            .collect();
        self.last = now;
        let _ = tx.send(ToStats::Ports { start_ns, end_ns, sources });
    }

    /// After a poll that saw capture times up to `ts` (a frame's time, or the clock's while
    /// the link is silent: 0 is a time, of a file's frame before 1970 say); `stats` reads
    /// the sources' counters. A `ts` past the open interval closes it with the counters as
    /// read now: the poll's own frames count in it (live, a poll's frames cannot be told
    /// apart in the counters; replay reads no frame past an interval's end before it is
    /// observed, `Capture::next_ts`).
    pub fn observe(&mut self, ts: u64, stats: impl FnOnce() -> Vec<SourceStats>, tx: &Sender<ToStats>) {
        match self.current {
            None => self.current = Some(self.interval_of(ts)),
            Some(iv) if is_past(ts, iv.1) => {
                self.send(iv, stats(), tx);
                self.current = Some(self.interval_of(ts));
            }
            _ => {}
        }
    }

    /// The last, partial interval.
    pub fn finish(&mut self, stats: impl FnOnce() -> Vec<SourceStats>, tx: &Sender<ToStats>) {
        if let Some(iv) = self.current.take() {
            self.send(iv, stats(), tx);
        }
    }
}

/// What a run measured.
pub struct RunResult {
    pub totals: Totals,
    pub sources: Vec<SourceStats>,
    pub time_sources: Vec<&'static str>,
    /// How CSV writing went (with `--csv-dir`).
    pub csv: Option<CsvHealth>,
    /// NVMe I/O outcomes per (initiator, target, op).
    pub ios: IoCountsByPair,
    /// Where the packet times of each vantage (compute, storage) came from.
    pub time_use: [worker::TimeUse; 2],
    /// What ended the run early (a capture file damaged partway, a worker that failed):
    /// everything above is what was measured up to it, to be reported before the error.
    pub error: Option<anyhow::Error>,
}

/// A worker whose stats side does nothing but hand every buffer back at once (a stats side
/// that keeps up), for measuring the analysis alone: the worker, and the thread that ends
/// when the worker is dropped.
pub fn worker_with_draining_stats(cfg: &PipelineConfig) -> (Worker, std::thread::JoinHandle<()>) {
    let (tx, rx) = crossbeam_channel::bounded(1024);
    let (back_tx, back_rx) = crossbeam_channel::bounded(64);
    let drain = std::thread::spawn(move || {
        for m in rx {
            if let Some(r) = recycle(m) {
                let _ = back_tx.try_send(r);
            }
        }
    });
    (Worker::with_recycling(0, cfg, tx, back_rx), drain)
}

/// Empties a message's buffers for the worker that sent it to use again (`None` for a
/// message that is not a worker's).
pub fn recycle(msg: ToStats) -> Option<Recycled> {
    match msg {
        ToStats::Interval(mut s) => {
            s.flows.clear();
            s.latency.clear();
            s.ios.clear();
            s.evidence_no_file.clear();
            Some(Recycled::Interval {
                flows: s.flows,
                latency: s.latency,
                ios: s.ios,
                no_file: s.evidence_no_file,
            })
        }
        ToStats::Transmissions(_, _, mut t) => {
            t.clear();
            Some(Recycled::Transmissions(t))
        }
        ToStats::Evidence(_, r) => {
            // Evidence records go back to their worker's pool on a channel of their own.
            r.send_home();
            None
        }
        ToStats::Ports { .. } => None,
    }
}

/// Runs the pipeline until the source ends or `stop` is set (SIGINT / SIGTERM). The last,
/// partial interval is closed and merged, so nothing measured is lost on either path.
pub fn run<C: Capture>(
    capture: &mut C,
    cfg: &PipelineConfig,
    stop: &AtomicBool,
    reports: Reports,
) -> Result<RunResult> {
    capture.split_bursts_at((cfg.interval.as_nanos() as u64).max(1));
    let finished = pipeline(cfg, reports, |tx, backs, ports| {
        let ports_tx = tx.clone();
        let out = if backs.len() > 1 || cfg.dedicated_rx {
            dispatch::run(capture, cfg, stop, tx, backs, ports)
        } else {
            // One worker analyses on the capture thread itself.
            let back = backs.into_iter().next().expect("one channel per worker");
            let mut worker = Worker::with_recycling(0, cfg, tx, back);
            let result =
                drive(capture, &mut worker, stop, |seen, c| ports.observe(seen, || c.stats(), &ports_tx));
            worker.finish();
            (result, worker.io_counts(), worker.time_use())
        };
        ports.finish(|| capture.stats(), &ports_tx);
        out
    })?;
    Ok(finished.with_sources(capture))
}

/// Live capture with `--rss`: worker q polls RX queue q of every port (the NICs spread
/// frames by a symmetric hash of the IP pair), so there is no dispatch; this thread only
/// reads the port statistics each interval.
pub fn run_rss(
    capture: &mut crate::capture::dpdk::DpdkCapture,
    cfg: &PipelineConfig,
    stop: &AtomicBool,
    reports: Reports,
) -> Result<RunResult> {
    let mut nic_ts = Vec::new();
    let shared = &*capture;
    let finished = pipeline(cfg, reports, |tx, backs, ports| {
        let out = rss::run(shared, cfg, stop, tx.clone(), backs, ports, &mut nic_ts);
        ports.finish(|| shared.port_stats(), &tx);
        out
    })?;
    for seen in &nic_ts {
        capture.note_nic_timestamps(seen);
    }
    Ok(finished.with_sources(capture))
}

/// Once `stop` is set, what the capture's rings still hold (received, and counted by the
/// port) is analysed, up to the frames they held then ([`Capture::backlog`]), and the run
/// ends; a file stops where it is (no backlog). Kept by both polling loops, [`drive`] and the
/// dispatcher's.
#[derive(Debug, Default)]
struct Drain {
    /// Frames still to take after the stop (`None`: not stopped).
    left: Option<u64>,
}

impl Drain {
    /// Whether the loop ends before its next poll: stopped, and the backlog taken.
    fn done(&mut self, stop: &AtomicBool, capture: &impl Capture) -> bool {
        if self.left.is_none() && stop.load(Ordering::Relaxed) {
            self.left = Some(capture.backlog());
        }
        self.left == Some(0)
    }

    /// A poll took `n` frames.
    fn took(&mut self, n: usize) {
        if let Some(l) = &mut self.left {
            *l = l.saturating_sub(n as u64);
        }
    }

    /// Whether a poll that found the rings empty ends the loop: stopped.
    fn ends_at_idle(&self) -> bool {
        self.left.is_some()
    }
}

/// Polls `capture` into `worker` until the source ends or `stop` is set (and the rings are
/// drained, see [`Drain`]); `after` runs after each poll that delivered frames, with the
/// latest capture time seen, and while the link is silent, with the capture's clock (see
/// [`SilentLink`]).
fn drive<C: Capture>(
    capture: &mut C,
    worker: &mut Worker,
    stop: &AtomicBool,
    mut after: impl FnMut(u64, &mut C),
) -> Result<()> {
    let mut seen = 0u64;
    let mut silent = SilentLink::default();
    let mut drain = Drain::default();
    loop {
        if drain.done(stop, capture) {
            return Ok(());
        }
        // A file's next frame may open an interval: the statistics so far go to the one
        // before (see `Capture::split_bursts_at`).
        if let Some(t) = capture.next_ts() {
            after(t, capture);
        }
        let polled = capture.poll_burst(|frames| {
            seen = frames.iter().fold(seen, |s, f| s.max(f.ts_ns));
            worker.handle_burst(frames)
        });
        match polled {
            Ok(Poll::Frames(n)) => {
                after(seen, capture);
                drain.took(n);
            }
            Ok(Poll::Idle) if drain.ends_at_idle() => return Ok(()),
            Ok(Poll::Idle) => {
                if let Some(now) = silent.tick(capture, worker.saw_switch_clock()) {
                    worker.observe_time(now);
                    after(now, capture);
                }
                std::hint::spin_loop()
            }
            Ok(Poll::End) => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// Time goes on while a live link is silent. Intervals follow packet time, so without
/// frames the open interval would stay open (the dashboard and Prometheus showing the last
/// one) until the next frame. When the capture's frames are timed by the probe's clock, an
/// idle poll offers that clock, at most every millisecond and a millisecond behind (for
/// frames still on their way through other ports), as the time to close intervals, end
/// transmissions and time I/Os out with. Not when a switch's ERSPAN clock times frames.
#[derive(Debug, Default)]
pub struct SilentLink {
    next_ns: u64,
}

impl SilentLink {
    const STEP_NS: u64 = 1_000_000;

    pub fn tick(&mut self, capture: &impl Capture, switch_clock: bool) -> Option<u64> {
        if switch_clock {
            return None;
        }
        let now = capture.clock_ns()?;
        if now < self.next_ns {
            return None;
        }
        self.next_ns = now.saturating_add(Self::STEP_NS);
        Some(now.saturating_sub(Self::STEP_NS))
    }
}

type Drove = (Result<()>, IoCountsByPair, [worker::TimeUse; 2]);

/// What the pipeline measured, before the capture's own statistics are added.
struct Finished {
    totals: Totals,
    csv: Option<CsvHealth>,
    ios: IoCountsByPair,
    time_use: [worker::TimeUse; 2],
    error: Option<anyhow::Error>,
}

impl Finished {
    fn with_sources<C: Capture>(self, capture: &mut C) -> RunResult {
        RunResult {
            totals: self.totals,
            sources: capture.stats(),
            time_sources: capture.time_sources(),
            csv: self.csv,
            ios: self.ios,
            time_use: self.time_use,
            error: self.error,
        }
    }
}

/// The CPU of worker `id` among the CPUs given for the workers (EAL's lcores), in turn;
/// `None` if none is given.
pub fn given_worker_cpu(worker_cpus: &[usize], id: usize) -> Option<usize> {
    (!worker_cpus.is_empty()).then(|| worker_cpus[id % worker_cpus.len()])
}

/// The CPU worker `id` is pinned to: the CPUs given (EAL's lcores) in turn, else the cores
/// after the capture thread's.
fn worker_core(
    cfg: &PipelineConfig,
    cores: &[core_affinity::CoreId],
    id: usize,
) -> Option<core_affinity::CoreId> {
    match given_worker_cpu(&cfg.worker_cpus, id) {
        Some(id) => Some(core_affinity::CoreId { id }),
        None => (!cores.is_empty()).then(|| cores[(id + 1) % cores.len()]),
    }
}

/// The CPUs for threads that do not touch packets (the stats side) in a live capture: those
/// the process was allowed before EAL started (`allowed`), but for the one EAL pinned the
/// capture thread to and the workers', as DPDK places its own control threads, so that
/// reports never take time from capture or analysis. Empty (stay where inherited) when the
/// capture thread is not pinned to one CPU or no CPU is left.
pub fn control_cpus(allowed: &[usize], worker_cpus: &[usize]) -> Vec<usize> {
    match crate::capture::dpdk::thread_cpus().as_deref() {
        Some(&[main]) => allowed.iter().copied().filter(|c| *c != main && !worker_cpus.contains(c)).collect(),
        _ => Vec::new(),
    }
}

/// Adds what one worker found at the end of its run to what the others found.
fn merge_worker(
    ios: &mut IoCountsByPair,
    time_use: &mut [worker::TimeUse; 2],
    counts: IoCountsByPair,
    used: [worker::TimeUse; 2],
) {
    for (k, c) in counts {
        ios.entry(k).or_default().add(&c);
    }
    for (t, u) in time_use.iter_mut().zip(used.iter()) {
        t.merge(u);
    }
}

/// The live views (dashboard, Prometheus) take at most about one part in this many of the
/// stats side's time: each is built from the whole run's summary, which takes tens of ms
/// with tens of thousands of flows, so after a build that took `d` the next interval is
/// shown no sooner than `LIVE_VIEW_SHARE × d` later (a later one in its place; the last
/// one always). Small tables build in microseconds: every interval is shown.
const LIVE_VIEW_SHARE: u32 = 10;

/// Messages from each worker the stats side holds at most in replay (see [`pipeline`]).
const REPLAY_QUEUE: usize = 4;

/// Starts the stats side, lets `drive` run the workers (it gets the workers' channel, one
/// recycling channel per worker, and the port report), then joins the stats side.
fn pipeline(
    cfg: &PipelineConfig,
    reports: Reports,
    drive: impl FnOnce(Sender<ToStats>, Vec<crossbeam_channel::Receiver<Recycled>>, &mut PortReport) -> Drove,
) -> Result<Finished> {
    // Bounded so a stalled stats side cannot grow memory without limit. Live, a worker
    // that finds no room drops the message and counts it: room for a stats side's pause
    // (intervals are rare, one message per worker each, and transmissions come in
    // batches). A worker that may wait (replay) waits instead: a few messages each keep
    // both sides busy, and a stats side that falls behind holds few intervals (one can
    // carry tens of MB of flows: a replay of 8M new flows peaked at 1.8 GB with 256 queued,
    // 470 MB with 4, in the same time).
    let workers = cfg.workers.max(1);
    let depth = if cfg.never_wait { 256 } else { REPLAY_QUEUE * workers };
    let (tx, rx) = crossbeam_channel::bounded::<ToStats>(depth);
    // Each worker gets its buffers back on its own channel.
    let (backs_tx, backs_rx): (Vec<_>, Vec<_>) =
        (0..workers).map(|_| crossbeam_channel::bounded::<Recycled>(64)).unzip();
    let two_vantages = cfg.vantages.maps_storage();
    let Reports { csv, live } = reports;
    let interval_ns = cfg.interval.as_nanos() as u64;
    let mut csv = csv.map(|w| w.for_run(cfg.slow_ios, interval_ns, !cfg.never_wait));
    // A transmission reaches the stats side at most two flow-idle times (found idle) and
    // an interval (its batch) after it ends; one of the step starts up to a step gap after
    // the step's end.
    let gap_ns = cfg.step_gap.as_nanos() as u64;
    let settle_ns = gap_ns + 2 * cfg.flow_idle.as_nanos() as u64 + 2 * interval_ns;
    let steps = Steps::new(cfg.jobs.clone(), gap_ns, settle_ns, cfg.max_jobs);
    let mut live = Reports { csv: None, live };
    let live_views = !live.live.is_empty();
    let source_times = cfg.source_times.clone();
    let max_flows = cfg.max_flows;
    let slow_ios = cfg.slow_ios;
    let limits = crate::metrics::snapshot::Needed {
        max_flows: cfg.max_flows as u64,
        max_latency_series: cfg.max_latency_series as u64,
        max_pending_commands: cfg.max_pending_commands as u64,
        max_cm_requests: cfg.max_cm_requests as u64,
        max_announced_flows: cfg.max_announced_flows as u64,
        max_ios: cfg.max_ios as u64,
        max_ios_commands: cfg.max_ios as u64,
    };
    // Each bound that loses something is told once on stderr, when it first does.
    let mut told = std::collections::HashSet::new();
    let control = cfg.control_cpus.clone();
    let evidence_settings = cfg.evidence.clone();
    // The stats thread starts on the control CPUs, and the CSV writer thread where it is.
    let spawn = || {
        std::thread::Builder::new().name("roceprobe-stats".into()).spawn(move || {
        let mut csv_failed = false;
        if let Some(Err(e)) = csv.as_mut().map(|w| w.start_writer()) {
            crate::note!("roceprobe: warning: {e:#}; the CSV rows are lost (summary csv_output)");
            csv_failed = true;
        }
        // Whole-run flows: room for every flow each worker can track, twice over, so that
        // flows whose slots were taken by new ones stay in the summary for a while.
        let (mut evidence, evidence_totals) = evidence_settings.as_ref().map(EvidenceWriter::new).unzip();
        let mut totals = Totals {
            evidence: evidence_totals,
            max_flows: Some(2 * max_flows),
            limits,
            slow_ios: Slowest::new(slow_ios),
            steps,
            progress: Progress::new(workers),
            ..Totals::default()
        };
        // Whether a CSV write has failed (told once per run; every failure is counted).
        // Receive statistics so far, per source, and the dashboard's rates.
        let mut received: Vec<SourceStats> = Vec::new();
        // The live views show an interval once both its snapshot (from the first worker)
        // and its receive counters (ports) have come, in whichever order: shown at the
        // snapshot alone, a page would count more frames analysed than received.
        let (mut viewed_to, mut analysed_to, mut received_to) = (0u64, 0u64, 0u64);
        // The end of the first interval analysed: before any counters came, what a source
        // whose counters stopped coming is judged against.
        let mut first_analysed = None;
        // An interval to show that is not shown yet, and the wall time before which the
        // next is not built (see LIVE_VIEW_SHARE).
        let (mut view_pending, mut view_due) = (false, std::time::Instant::now());
        // Shows the views up to `to`; returns when the next may be built.
        let show = |totals: &Totals, received: &[SourceStats], live: &mut Reports, to: u64| {
            let now = std::time::Instant::now();
            let mut summary = Summary::build(totals, received, &totals.ios);
            summary.set_time_sources(&totals.time_use, &source_times);
            live.publish(summary, (to.saturating_sub(interval_ns), to));
            now + now.elapsed() * LIVE_VIEW_SHARE
        };
        loop {
            // A view held back is shown when its time comes, whether or not a message comes
            // (a link gone quiet), as long as no snapshot of a later interval was taken in
            // since (its frames' receive counters may not be in yet).
            let held = view_pending && analysed_to <= viewed_to;
            let next = if held {
                rx.recv_timeout(view_due.saturating_duration_since(std::time::Instant::now()))
            } else {
                rx.recv().map_err(|_| crossbeam_channel::RecvTimeoutError::Disconnected)
            };
            let msg = match next {
                Ok(msg) => msg,
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                    (view_due, view_pending) = (show(&totals, &received, &mut live, viewed_to), false);
                    continue;
                }
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
            };
            let written = match &msg {
                ToStats::Interval(s) => {
                    totals.add(s);
                    let listed = match (evidence.as_mut(), s.evidence_no_file.is_empty()) {
                        (Some(w), false) => {
                            let t = totals.evidence.get_or_insert_with(Default::default);
                            let rows: Vec<_> = s.evidence_no_file.iter().map(|n| w.take_no_file(n, t)).collect();
                            csv.as_mut().map(|c| c.write_events(&rows))
                        }
                        _ => None,
                    };
                    let writes = totals.steps.take_writes();
                    let done = totals.progress.done();
                    csv.as_mut()
                        .map(|w| {
                            let interval = w.write_interval(s, two_vantages.then_some(&totals), done);
                            interval.and(w.write_steps_each(&writes))
                        })
                        .map(|r| r.and(listed.unwrap_or(Ok(()))))
                }
                ToStats::Transmissions(worker, interval_end, t) => {
                    totals.add_transmissions(t, *interval_end);
                    let (reported, done) = (totals.progress.of(*worker), totals.progress.done());
                    csv.as_mut().map(|w| w.write_transmissions(t, reported, done))
                }
                ToStats::Evidence(_, r) => match evidence.as_mut() {
                    Some(w) => {
                        let t = totals.evidence.get_or_insert_with(Default::default);
                        let row = w.take(r, t);
                        csv.as_mut().map(|c| c.write_events(std::slice::from_ref(&row)))
                    }
                    None => None,
                },
                ToStats::Ports { start_ns, end_ns, sources } => {
                    received.resize(received.len().max(sources.len()), SourceStats::default());
                    for (r, s) in received.iter_mut().zip(sources) {
                        r.add(s);
                    }
                    csv.as_mut().map(|w| w.write_ports(*start_ns, *end_ns, sources))
                }
            };
            if let Some(Err(e)) = written {
                if !csv_failed {
                    // Measuring goes on; the summary still gets everything, and writing is
                    // tried again with the next rows.
                    let dir = csv.as_ref().map(|w| w.dir().display().to_string()).unwrap_or_default();
                    crate::note!(
                        "roceprobe: warning: writing CSV reports in {dir} failed ({e:#}); lost rows are counted (summary csv_output) and writing is retried"
                    );
                    csv_failed = true;
                }
            }
            if let ToStats::Interval(_) = &msg {
                for b in totals.bounds() {
                    // Once per bound and loss (--max-ios has two: connection state and
                    // commands not followed).
                    if told.insert((b.option.clone(), b.what.clone())) {
                        crate::note!(
                            "roceprobe: warning: {} (told once; the summary's bounds and the exit report give the final figures)",
                            b.line()
                        );
                    }
                }
            }
            match &msg {
                ToStats::Interval(s) => {
                    analysed_to = analysed_to.max(s.end_ns);
                    first_analysed.get_or_insert(s.end_ns);
                }
                ToStats::Ports { end_ns, .. } => received_to = received_to.max(*end_ns),
                _ => {}
            }
            // The live outputs (dashboard, Prometheus), once per interval: when its snapshot
            // and its receive counters are both in, or when the snapshots have gone an
            // interval past the last counters (a source whose counters stopped coming; before
            // any came, past the first interval analysed: the first page waits for them too).
            let counted_to = if received_to == 0 { first_analysed.unwrap_or(0) } else { received_to };
            let shown = if analysed_to > counted_to.saturating_add(interval_ns) {
                analysed_to
            } else {
                analysed_to.min(received_to)
            };
            // Shown as it closes (as its page was before views were held back), or later
            // while still all that was analysed.
            let advanced = live_views && shown > viewed_to;
            if advanced {
                viewed_to = shown;
                view_pending = true;
            }
            if view_pending && std::time::Instant::now() >= view_due && (advanced || analysed_to <= viewed_to) {
                (view_due, view_pending) = (show(&totals, &received, &mut live, viewed_to), false);
            }
            let from = match &msg {
                ToStats::Interval(s) => Some(s.worker),
                ToStats::Transmissions(w, ..) | ToStats::Evidence(w, _) => Some(*w),
                ToStats::Ports { .. } => None,
            };
            if let (Some(back), Some(r)) = (from.and_then(|w| backs_tx.get(w)), recycle(msg)) {
                let _ = back.try_send(r);
            }
        }
        if view_pending {
            show(&totals, &received, &mut live, viewed_to);
        }
        if let (Some(w), Some(t)) = (evidence.as_mut(), totals.evidence.as_mut()) {
            w.recount(t);
        }
        totals.steps.finish(totals.last_ts_ns);
        let writes = totals.steps.take_writes();
        let csv = csv.map(|mut w| {
            let intervals = w.flush_intervals();
            // The last write has nothing pending after it: every stragglers.csv row goes.
            let steps = w.write_steps_each(&writes);
            // Told once per run, as during it.
            if let (Err(e), false) = (intervals.and(steps), csv_failed) {
                crate::note!("roceprobe: warning: writing CSV reports in {} failed ({e:#}); lost rows are counted (summary csv_output)", w.dir().display());
            }
            // Everything handed to the writer thread is written before it ends.
            w.finish()
        });
        (totals, csv)
    })
    };
    let stats = crate::capture::dpdk::on_cpus(&control, spawn)?;

    let mut ports = PortReport::new(cfg.interval);
    let (result, ios, time_use) = drive(tx, backs_rx, &mut ports);
    let (totals, csv) = stats.join().map_err(|_| anyhow::anyhow!("the stats thread panicked"))?;
    Ok(Finished { totals, csv, ios, time_use, error: result.err() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::Frame;

    /// A port whose ring holds `frames` frames, handed over two a poll, then idle.
    struct Ring {
        frames: usize,
        backlog: u64,
        handed: usize,
    }

    impl Capture for Ring {
        fn poll<F: FnMut(Frame<'_>)>(&mut self, mut f: F) -> Result<Poll> {
            let data = [0u8; 60];
            let n = (self.frames - self.handed).min(2);
            for k in 0..n {
                f(Frame { data: &data, wire_len: 60, ts_ns: (self.handed + k) as u64, source: 0 });
            }
            self.handed += n;
            Ok(if n == 0 { Poll::Idle } else { Poll::Frames(n) })
        }
        fn stats(&mut self) -> Vec<SourceStats> {
            Vec::new()
        }
        fn time_sources(&self) -> Vec<&'static str> {
            Vec::new()
        }
        fn backlog(&self) -> u64 {
            self.backlog
        }
    }

    /// Stopped, a live port's rings are emptied first (the frames it received and counted
    /// are analysed), up to what they can hold, not beyond; a file stops where it is.
    #[test]
    fn a_stopped_capture_analyses_what_its_rings_hold() {
        let stop = AtomicBool::new(true);
        let (tx, _rx) = crossbeam_channel::unbounded();
        let cfg = PipelineConfig::new(crate::track::VantageMap::default());
        for (frames, backlog, handed) in [(8, 100, 8), (8, 5, 6), (8, 0, 0)] {
            let mut worker = Worker::new(0, &cfg, tx.clone());
            let mut ring = Ring { frames, backlog, handed: 0 };
            drive(&mut ring, &mut worker, &stop, |_, _| {}).unwrap();
            assert_eq!(ring.handed, handed, "{frames} frames in a ring of {backlog}");
        }
    }

    #[test]
    fn port_reports_close_the_last_interval_before_the_clock_ends_once() {
        // Capture times clamped to u64::MAX (a hostile pcapng) stay in the last interval,
        // which ends there: the sources' counters are read once, at the end, not at every
        // poll that saw such a time.
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut ports = PortReport::new(Duration::from_secs(1));
        let mut reads = 0;
        for ts in [u64::MAX - 1, u64::MAX, u64::MAX, u64::MAX] {
            ports.observe(
                ts,
                || {
                    reads += 1;
                    Vec::new()
                },
                &tx,
            );
        }
        ports.finish(Vec::new, &tx);
        let sent: Vec<(u64, u64)> = rx
            .try_iter()
            .filter_map(|m| match m {
                ToStats::Ports { start_ns, end_ns, .. } => Some((start_ns, end_ns)),
                _ => None,
            })
            .collect();
        assert_eq!(reads, 0);
        assert_eq!(sent, vec![(18_446_744_073_000_000_000, u64::MAX)]);
    }
}
