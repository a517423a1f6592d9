//! Runtime: one pipeline for both sources. The worker polls its source, decodes and tracks
//! every frame, and at each interval boundary of packet time hands a snapshot to the stats
//! side over a channel; the stats side merges snapshots into the reports. The worker owns
//! all per-packet state, so nothing on the per-packet path is shared or locked.

pub mod dispatch;
pub mod worker;

use crate::capture::{Capture, Poll, SourceStats};
use crate::metrics::latency::{IntervalHist, SeriesKey};
use crate::metrics::{IntervalSnapshot, Totals};
use crate::report::csv::CsvWriter;
use crate::track::flow::FlowDelta;
use crate::track::io::IoCountsByPair;
use crate::track::{Transmission, VantageMap};
use anyhow::Result;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub use worker::Worker;

/// Default bound on latency series: each holds a ~135 KiB histogram (1 ns to 1 h at 3
/// significant digits, 32-bit counts).
pub const DEFAULT_MAX_LATENCY_SERIES: usize = 1024;

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
    /// Path MTU for READ spans (`--mtu`); learned per QP when absent.
    pub mtu: Option<u32>,
    /// An I/O without a completion after this long is counted as timed out (`--io-timeout`).
    pub io_timeout: Duration,
    /// Bound on I/Os awaiting their completion (`--max-ios`).
    pub max_ios: usize,
    /// Bound on latency series, (initiator, target, op, segment).
    pub max_latency_series: usize,
    /// Worker threads (`--workers`): 1 analyses on the capture thread; more dispatch by
    /// IP pair.
    pub workers: usize,
}

impl PipelineConfig {
    /// The defaults of the command line, with these vantages.
    pub fn new(vantages: VantageMap) -> Self {
        Self {
            interval: Duration::from_secs(1),
            max_flows: crate::track::flow::DEFAULT_MAX_FLOWS,
            vantages,
            check_icrc: false,
            flow_idle: Duration::from_nanos(crate::track::flow::DEFAULT_FLOW_IDLE_NS),
            mtu: None,
            io_timeout: Duration::from_nanos(crate::track::io::DEFAULT_IO_TIMEOUT_NS),
            max_ios: crate::track::io::DEFAULT_MAX_IOS,
            max_latency_series: DEFAULT_MAX_LATENCY_SERIES,
            workers: 1,
        }
    }
}

/// Buffers the stats side hands back, emptied, for the worker to fill again: in a steady
/// state the worker allocates nothing, not even per interval.
#[derive(Debug)]
pub enum Recycled {
    Interval { flows: Vec<FlowDelta>, latency: Vec<(SeriesKey, IntervalHist)> },
    Transmissions(Vec<Transmission>),
}

/// Messages from workers to the stats side.
#[derive(Debug)]
// A snapshot travels inline: boxing it would allocate every interval, which the recycled
// buffers exist to avoid.
#[allow(clippy::large_enum_variant)]
pub enum ToStats {
    Interval(IntervalSnapshot),
    /// Transmissions that ended (sent in batches) by a worker.
    Transmissions(usize, Vec<Transmission>),
}

/// What a run measured.
pub struct RunResult {
    pub totals: Totals,
    pub sources: Vec<SourceStats>,
    pub time_sources: Vec<&'static str>,
    /// Why CSV output stopped, if it failed during the run.
    pub csv_error: Option<String>,
    /// NVMe I/O outcomes per (initiator, target, op).
    pub ios: IoCountsByPair,
}

/// Empties a message's buffers for the worker to use again.
pub fn recycle(msg: ToStats) -> Recycled {
    match msg {
        ToStats::Interval(mut s) => {
            s.flows.clear();
            // The histograms go back with their samples; the worker clears them.
            Recycled::Interval { flows: s.flows, latency: s.latency }
        }
        ToStats::Transmissions(_, mut t) => {
            t.clear();
            Recycled::Transmissions(t)
        }
    }
}

/// Runs the pipeline until the source ends or `stop` is set (SIGINT / SIGTERM). The last,
/// partial interval is closed and merged, so nothing measured is lost on either path.
pub fn run<C: Capture>(
    capture: &mut C,
    cfg: &PipelineConfig,
    stop: &AtomicBool,
    mut csv: Option<CsvWriter>,
) -> Result<RunResult> {
    // Bounded so a stalled stats side cannot grow memory without limit; intervals are
    // rare (one message per worker per interval), so the worker never waits in practice.
    let (tx, rx) = crossbeam_channel::bounded::<ToStats>(256);
    // Each worker gets its buffers back on its own channel.
    let workers = cfg.workers.max(1);
    let (backs_tx, backs_rx): (Vec<_>, Vec<_>) =
        (0..workers).map(|_| crossbeam_channel::bounded::<Recycled>(64)).unzip();
    let two_vantages = cfg.vantages.maps_storage();
    let stats = std::thread::Builder::new().name("roceprobe-stats".into()).spawn(move || {
        let mut totals = Totals::default();
        let mut csv_error = None;
        for msg in rx {
            let from = match &msg {
                ToStats::Interval(s) => s.worker,
                ToStats::Transmissions(w, _) => *w,
            };
            let written = match &msg {
                ToStats::Interval(s) => {
                    totals.add(s);
                    csv.as_mut().map(|w| w.write_interval(s, two_vantages))
                }
                ToStats::Transmissions(_, t) => {
                    totals.add_transmissions(t);
                    csv.as_mut().map(|w| w.write_transmissions(t))
                }
            };
            if let Some(Err(e)) = written {
                // Measuring goes on; the summary still gets everything.
                let dir = csv.take().map(|w| w.dir().display().to_string()).unwrap_or_default();
                eprintln!(
                    "roceprobe: warning: writing CSV reports in {dir} failed ({e:#}); CSV output stopped"
                );
                csv_error = Some(e);
            }
            if let Some(back) = backs_tx.get(from) {
                let _ = back.try_send(recycle(msg));
            }
        }
        (totals, csv_error.map(|e| format!("{e:#}")))
    })?;

    let (result, ios) = if workers > 1 {
        dispatch::run(capture, cfg, stop, tx, backs_rx)
    } else {
        // One worker analyses on the capture thread itself.
        let back = backs_rx.into_iter().next().expect("one channel per worker");
        let mut worker = Worker::with_recycling(0, cfg, tx, back);
        let result = loop {
            if stop.load(Ordering::Relaxed) {
                break Ok(());
            }
            match capture.poll(|f| worker.handle(f)) {
                Ok(Poll::Frames(_)) => {}
                Ok(Poll::Idle) => std::hint::spin_loop(),
                Ok(Poll::End) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        worker.finish();
        (result, worker.io_counts().clone())
    };
    let (totals, csv_error) = stats.join().map_err(|_| anyhow::anyhow!("the stats thread panicked"))?;
    result?;
    Ok(RunResult { totals, sources: capture.stats(), time_sources: capture.time_sources(), csv_error, ios })
}
