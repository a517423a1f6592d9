//! Runtime: one pipeline for both sources. The worker polls its source, decodes and tracks
//! every frame, and at each interval boundary of packet time hands a snapshot to the stats
//! side over a channel; the stats side merges snapshots into the reports. The worker owns
//! all per-packet state, so nothing on the per-packet path is shared or locked.

pub mod worker;

use crate::capture::{Capture, Poll, SourceStats};
use crate::metrics::{IntervalSnapshot, Totals};
use crate::track::VantageMap;
use anyhow::Result;
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
}

/// Messages from workers to the stats side.
#[derive(Debug)]
pub enum ToStats {
    Interval(IntervalSnapshot),
}

/// What a run measured.
#[derive(Debug)]
pub struct RunResult {
    pub totals: Totals,
    pub sources: Vec<SourceStats>,
    pub time_sources: Vec<&'static str>,
}

/// Runs the pipeline until the source ends or `stop` is set (SIGINT / SIGTERM). The last,
/// partial interval is closed and merged, so nothing measured is lost on either path.
pub fn run<C: Capture>(capture: &mut C, cfg: &PipelineConfig, stop: &AtomicBool) -> Result<RunResult> {
    // Bounded so a stalled stats side cannot grow memory without limit; intervals are
    // rare (one message per worker per interval), so the worker never waits in practice.
    let (tx, rx) = crossbeam_channel::bounded::<ToStats>(256);
    let stats = std::thread::Builder::new().name("roceprobe-stats".into()).spawn(move || {
        let mut totals = Totals::default();
        for msg in rx {
            match msg {
                ToStats::Interval(s) => totals.add(&s),
            }
        }
        totals
    })?;

    let mut worker = Worker::new(0, cfg, tx);
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
    drop(worker);
    let totals = stats.join().map_err(|_| anyhow::anyhow!("the stats thread panicked"))?;
    result?;
    Ok(RunResult { totals, sources: capture.stats(), time_sources: capture.time_sources() })
}
