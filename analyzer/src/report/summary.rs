//! The summary JSON written at exit (`--summary FILE`, `-` = stdout): whole-run totals,
//! in the field names and shapes docs/METRICS.md lists. Field order is kept stable.

use crate::capture::SourceStats;
use crate::metrics::latency::Segment;
use crate::metrics::snapshot::TimeUse;
use crate::metrics::Totals;
use crate::report::time::rfc3339_nanos;
use crate::track::io::{IoCounts, IoCountsByPair, SlowIo};
use crate::track::Vantage;
use crate::track::{FlowCounts, ShortTransmissions};
use crate::wire::DecodeError;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::IpAddr;
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowSummary {
    pub vantage: String,
    pub src_ip: String,
    pub dst_ip: String,
    pub dst_qpn: u32,
    pub transport: String,
    /// packets, bytes, payload_bytes, messages, retx_packets, retx_bytes, retx_episodes,
    /// gap_psns, out_of_window, nak_seq, nak_rnr, nak_other, cnp, cnp_unattributed, ecn_ce,
    /// icrc_errors, nvme_commands, nvme_completions, late_packets, mirror_duplicates,
    /// nak_invalid_request, nak_remote_access_error, nak_remote_operational_error,
    /// nak_invalid_rd_request (see docs/METRICS.md).
    #[serde(flatten)]
    pub counts: FlowCounts,
    /// Packets per BTH opcode, keyed by the opcode in decimal; `other` for those that found
    /// no counter (when any did).
    pub opcodes: BTreeMap<String, u64>,
    /// Gap PSNs here that the other vantage did not have: lost between the two taps.
    /// `null` when the flow was seen at one vantage only.
    pub fabric_loss_psns: Option<u64>,
    /// Transmissions (bursts) of this flow that ended, those too short to be written to
    /// transmissions.csv (`short_transmissions`) included.
    pub transmissions: u64,
    /// short_transmissions, short_transmission_packets, short_transmission_bytes.
    #[serde(flatten)]
    pub short: ShortTransmissions,
}

/// One latency series over the whole run, in microseconds (3 decimals).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub initiator_ip: String,
    pub target_ip: String,
    pub op: String,
    pub segment: String,
    pub count: u64,
    pub min_us: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    /// The samples' sum in ns as the histogram holds them, exact and never smaller than on
    /// an earlier page (Prometheus's `_sum`; `mean_us × count` is rounded, and can go back).
    #[serde(skip)]
    pub sum_ns: u64,
}

/// I/O outcomes of one (initiator, target, op).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoPairSummary {
    pub initiator_ip: String,
    pub target_ip: String,
    pub op: String,
    #[serde(flatten)]
    pub counts: IoCounts,
}

/// NVMe/RDMA I/O outcomes: totals, and per (initiator, target, op); the run's slowest I/Os.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IosSummary {
    #[serde(flatten)]
    pub counts: IoCounts,
    pub by_pair: Vec<IoPairSummary>,
    /// The slowest completed I/Os of the run (`--slow-ios`), slowest first.
    #[serde(default)]
    pub slowest: Vec<SlowIoSummary>,
    /// The slowest of the latest interval, for the dashboard (not in the JSON: slow_ios.csv
    /// has every interval's).
    #[serde(skip)]
    pub latest_interval_slowest: Vec<SlowIoSummary>,
}

/// One of the slowest I/Os: who, which queue and command, how big, and each segment (µs;
/// null where the vantages seen do not give it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlowIoSummary {
    /// When its completion was seen (RFC 3339, the packets' time base).
    pub completed_at: String,
    pub initiator_ip: String,
    pub target_ip: String,
    pub op: String,
    /// The target's QP (the I/O queue) and the command identifier.
    pub qpn: u32,
    pub cid: u16,
    pub bytes: u32,
    /// Command to completion at the compute vantage (at the storage vantage when compute
    /// did not see both).
    pub io_us: f64,
    #[serde(rename = "io@compute_us")]
    pub io_compute_us: Option<f64>,
    #[serde(rename = "io@storage_us")]
    pub io_storage_us: Option<f64>,
    pub compute_us: Option<f64>,
    pub network_us: Option<f64>,
    pub storage_us: Option<f64>,
}

impl SlowIoSummary {
    fn of(io: &SlowIo) -> Self {
        let us = |ns: u64| ns as f64 / 1e3;
        let seg = |s: Segment| io.segments[s.index()].map(us);
        SlowIoSummary {
            completed_at: rfc3339_nanos(io.completed_ns),
            initiator_ip: io.initiator.to_string(),
            target_ip: io.target.to_string(),
            op: io.op.as_str().into(),
            qpn: io.qpn,
            cid: io.cid,
            bytes: io.bytes,
            io_us: us(io.io_ns),
            io_compute_us: seg(Segment::IoCompute),
            io_storage_us: seg(Segment::IoStorage),
            compute_us: seg(Segment::Compute),
            network_us: seg(Segment::Network),
            storage_us: seg(Segment::Storage),
        }
    }
}

/// A collective job over the run (docs/METRICS.md, "Collective steps and stragglers").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSummary {
    pub name: String,
    pub hosts: Vec<String>,
    pub steps: u64,
    /// Of the steps' durations; `null` for a job without a step (a `--job` rule whose
    /// hosts sent nothing between them).
    pub step_p50_us: Option<f64>,
    pub step_p99_us: Option<f64>,
    pub step_max_us: Option<f64>,
    /// The hosts that held steps back: the most steps first, then the most lag.
    pub stragglers: Vec<StragglerSummary>,
    /// The latest step: its duration, the host that finished last, its lag and why.
    pub last_step: Option<LastStep>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastStep {
    pub start: String,
    pub duration_us: f64,
    pub straggler_host: String,
    pub lag_us: f64,
    pub reason: String,
    /// `pause` (the job paused for `--step-gap` after it) or `input_end` (the input ended
    /// first: the step may have gone on).
    #[serde(default)]
    pub closed_by: String,
}

/// A host that held a job's steps back: how often, by how much in all, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StragglerSummary {
    pub host: String,
    pub steps: u64,
    pub lag_us: f64,
    /// Steps per reason: loss, nak, congestion, none.
    pub reasons: BTreeMap<String, u64>,
}

fn jobs(steps: &crate::metrics::steps::Steps) -> Vec<JobSummary> {
    let us = |ns: u64| (ns as f64 / 1e3 * 1000.0).round() / 1000.0;
    steps
        .jobs
        .iter()
        .map(|(name, j)| {
            let mut by_host: BTreeMap<IpAddr, (u64, u64, BTreeMap<String, u64>)> = BTreeMap::new();
            for ((host, reason), s) in &j.stragglers {
                let e = by_host.entry(*host).or_default();
                e.0 += s.steps;
                e.1 += s.lag_ns;
                *e.2.entry(reason.as_str().to_owned()).or_insert(0) += s.steps;
            }
            let mut stragglers: Vec<StragglerSummary> = by_host
                .into_iter()
                .map(|(host, (steps, lag_ns, reasons))| StragglerSummary {
                    host: host.to_string(),
                    steps,
                    lag_us: us(lag_ns),
                    reasons,
                })
                .collect();
            stragglers.sort_by(|a, b| b.steps.cmp(&a.steps).then(b.lag_us.total_cmp(&a.lag_us)));
            JobSummary {
                name: name.clone(),
                hosts: j.hosts.iter().map(IpAddr::to_string).collect(),
                steps: j.steps,
                // Exact, or to three significant digits and never past the longest step.
                step_p50_us: j.durations.quantile(0.5).map(|d| us(d.min(j.max_ns))),
                step_p99_us: j.durations.quantile(0.99).map(|d| us(d.min(j.max_ns))),
                step_max_us: (j.steps > 0).then(|| us(j.max_ns)),
                stragglers,
                last_step: j.last.as_ref().map(|l| LastStep {
                    start: rfc3339_nanos(l.start_ns),
                    duration_us: us(l.duration_ns()),
                    straggler_host: l.straggler.src.to_string(),
                    lag_us: us(l.lag_ns()),
                    reason: l.reason.as_str().to_owned(),
                    closed_by: l.closed_by().to_owned(),
                }),
            }
        })
        .collect()
}

/// What the reorder window could not put in time order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReorderSummary {
    /// RoCE packets that came after the window had passed them, per vantage: counted in
    /// their flows (and in each flow's `late_packets`), not analysed for PSNs, latencies
    /// or I/Os.
    pub late_packets: LateByVantage,
    /// NVMe capsules a vantage saw first after the other vantage's copies had ended their
    /// I/O (the two vantages' copies more than the window apart): their I/O is counted
    /// once, without this vantage's segments.
    #[serde(default)]
    pub io_copies_after_end: LateByVantage,
    /// Frames analysed before the window had passed them, for want of room to hold them.
    pub released_early: u64,
}

/// A count per vantage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LateByVantage {
    pub compute: u64,
    pub storage: u64,
}

/// How a run ended, for a reader of its summary to know whether the totals cover all of
/// its input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunEnd {
    /// Every input file read to its end; live, `--duration` or `--idle-exit` reached.
    #[default]
    Complete,
    /// Stopped before that by SIGINT, SIGTERM or the dashboard's `q`: the totals hold the
    /// frames received until then.
    Stopped,
    /// The capture failed partway (a damaged file, a port's error, told on stderr): the
    /// totals hold the frames received before it.
    Failed,
    /// Every input read, but a capture file ended at a damaged record or inside one (a
    /// file cut short, a capture still being written): read up to it, the rest lost (told
    /// on stderr).
    CutShort,
}

impl RunEnd {
    /// The name the summary JSON gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::Stopped => "stopped",
            Self::Failed => "failed",
            Self::CutShort => "cut_short",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub packets: u64,
    pub roce_packets: u64,
    pub non_roce_packets: u64,
    pub decode_errors: BTreeMap<String, u64>,
    /// Timestamps of the first and last frame (RFC 3339, UTC, ns), in the packets' time base.
    pub first_packet: Option<String>,
    pub last_packet: Option<String>,
    /// Seconds of packet time from the first frame to the last.
    #[serde(default)]
    pub duration_s: f64,
    /// How the run ended: whether these totals cover all of its input.
    #[serde(default)]
    pub ended: RunEnd,
    /// RoCE packets of flows beyond `--max-flows` (counted above, not in `flows`).
    pub untracked_packets: u64,
    /// Interval snapshots and batches of ended transmissions that workers dropped because the
    /// reports fell behind (live capture never waits for them): their counts are missing
    /// from these totals. 0 in a healthy run, and always in replay.
    pub report_drops: u64,
    /// Latency samples not recorded because their series was beyond `--max-latency-series`.
    pub latency_samples_dropped: u64,
    /// What the reorder window (`--reorder-window`) could not put in time order.
    #[serde(default)]
    pub reorder: ReorderSummary,
    /// The mirrors' second copies of packets (both ports of a routed hop mirrored), per
    /// vantage: counted in their flows' `mirror_duplicates`, nowhere else.
    #[serde(default)]
    pub mirror_duplicates: LateByVantage,
    /// ERSPAN III packets whose timestamp granularity is platform specific: timed by the
    /// capture instead of the switch.
    #[serde(default)]
    pub erspan_untimed_packets: u64,
    /// RoCE packets that came through an ERSPAN mirror (any type), timed or not.
    #[serde(default)]
    pub erspan_packets: u64,
    /// Entries of bounded tables forgotten to make room for newer ones, per table.
    pub forgotten: crate::metrics::snapshot::Forgotten,
    /// Each bound that lost something: its option and value, what it lost, and the value
    /// that would have lost nothing (`null` when no value would have).
    #[serde(default)]
    pub bounds: Vec<crate::metrics::snapshot::BoundAdvice>,
    /// With `--csv-dir`: writes that failed (their rows lost), reports started again
    /// because their file had been removed, and rotated files removed to stay under
    /// `--csv-retain`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub csv_output: Option<crate::report::csv::CsvHealth>,
    /// With `--prometheus`: scrapes answered and failed (what counts as failed:
    /// `prometheus::ScrapeStats`) until the run ended.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub prometheus: Option<crate::report::prometheus::ScrapeStats>,
    pub flows: Vec<FlowSummary>,
    /// Latency per (initiator, target, op, segment) over the run (docs/METRICS.md, "I/O quality").
    pub latency: Vec<LatencySummary>,
    pub ios: IosSummary,
    /// Collective jobs: their steps and the hosts that held them back.
    #[serde(default)]
    pub jobs: Vec<JobSummary>,
    /// Transmissions the step analysis could not take (beyond its bound on hosts).
    #[serde(default)]
    pub step_transmissions_dropped: u64,
    /// Transmissions between a `--job` rule's host and a host outside that rule: in no
    /// job's steps.
    #[serde(default)]
    pub step_transmissions_outside_jobs: u64,
    /// With `--evidence-dir`: every event, its file or why it has none, and the counts of
    /// the bounds (docs/EVIDENCE.md).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub evidence: Option<crate::metrics::evidence::EvidenceTotals>,
    /// Receive statistics per source: DPDK port id, or input file index.
    pub ports: BTreeMap<String, SourceStats>,
    /// Where each vantage's packet times came from: `erspan` (the switch's ERSPAN III
    /// timestamp), `nic` (the NIC's RX timestamp), `tsc` (the probe's clock at RX), `pcap`
    /// (the capture file's timestamps).
    pub time_sources: BTreeMap<String, Vec<String>>,
}

impl Summary {
    pub fn build(t: &Totals, sources: &[SourceStats], ios: &IoCountsByPair) -> Self {
        let r3 = |x: f64| (x * 1000.0).round() / 1000.0;
        let mut series: Vec<_> = t.latency.iter().collect();
        series.sort_by_key(|(k, _)| **k);
        let latency = series
            .into_iter()
            .map(|(k, h)| {
                let s = h.stats();
                LatencySummary {
                    initiator_ip: k.initiator.to_string(),
                    target_ip: k.target.to_string(),
                    op: k.op.as_str().into(),
                    segment: k.segment.as_str().into(),
                    count: s.count,
                    min_us: r3(s.min_us),
                    mean_us: r3(s.mean_us),
                    p50_us: r3(s.p50_us),
                    p90_us: r3(s.p90_us),
                    p99_us: r3(s.p99_us),
                    p999_us: r3(s.p999_us),
                    max_us: r3(s.max_us),
                    sum_ns: h.sum_ns(),
                }
            })
            .collect();
        let mut total = IoCounts::default();
        let by_pair = ios
            .iter()
            .map(|((i, t, op), c)| {
                total.add(c);
                IoPairSummary {
                    initiator_ip: i.to_string(),
                    target_ip: t.to_string(),
                    op: op.as_str().into(),
                    counts: *c,
                }
            })
            .collect();
        let slowest = t.slow_ios.sorted().iter().map(SlowIoSummary::of).collect();
        let latest_interval_slowest = t.latest_slow_ios.1.sorted().iter().map(SlowIoSummary::of).collect();
        let ios = IosSummary { counts: total, by_pair, slowest, latest_interval_slowest };
        let decode_errors = DecodeError::ALL
            .iter()
            .map(|e| (e.as_str().to_owned(), t.counters.decode_errors[e.index()]))
            .collect();
        let flows = t
            .sorted_flows()
            .into_iter()
            .map(|(k, f)| {
                let mut opcodes: BTreeMap<String, u64> =
                    f.opcodes.iter().map(|(op, n)| (op.to_string(), *n)).collect();
                if f.other_opcodes > 0 {
                    opcodes.insert("other".to_owned(), f.other_opcodes);
                }
                FlowSummary {
                    vantage: k.vantage.to_string(),
                    src_ip: k.src.to_string(),
                    dst_ip: k.dst.to_string(),
                    dst_qpn: k.dst_qpn,
                    transport: f.transport.to_string(),
                    counts: f.counts,
                    opcodes,
                    fabric_loss_psns: t.fabric_loss(k),
                    transmissions: f.transmissions,
                    short: f.short,
                }
            })
            .collect();
        let ports = sources
            .iter()
            .enumerate()
            .filter(|(_, s)| s.captured)
            .map(|(i, s)| (i.to_string(), *s))
            .collect();
        Summary {
            packets: t.counters.packets,
            roce_packets: t.counters.roce_packets,
            non_roce_packets: t.counters.non_roce_packets,
            decode_errors,
            first_packet: t.first_ts_ns.map(rfc3339_nanos),
            last_packet: t.last_ts_ns.map(rfc3339_nanos),
            duration_s: match (t.first_ts_ns, t.last_ts_ns) {
                (Some(a), Some(b)) => b.saturating_sub(a) as f64 / 1e9,
                _ => 0.0,
            },
            ended: RunEnd::Complete,
            untracked_packets: t.untracked_packets,
            report_drops: t.dropped_snapshots + t.dropped_batches,
            latency_samples_dropped: t.dropped_latency_samples,
            reorder: ReorderSummary {
                late_packets: LateByVantage {
                    compute: t.counters.late_packets[0],
                    storage: t.counters.late_packets[1],
                },
                io_copies_after_end: LateByVantage {
                    compute: t.counters.io_copies_after_end[0],
                    storage: t.counters.io_copies_after_end[1],
                },
                released_early: t.counters.released_early,
            },
            erspan_untimed_packets: t.counters.erspan_untimed,
            erspan_packets: t.counters.erspan,
            mirror_duplicates: LateByVantage {
                compute: t.mirror_duplicates[0],
                storage: t.mirror_duplicates[1],
            },
            forgotten: t.forgotten,
            bounds: t.bounds(),
            csv_output: None,
            prometheus: None,
            flows,
            latency,
            ios,
            jobs: jobs(&t.steps),
            step_transmissions_dropped: t.steps.dropped,
            step_transmissions_outside_jobs: t.steps.outside_jobs,
            evidence: t.evidence.clone().map(|mut e| {
                // By time (then kind and flow), not in the order the workers' events were
                // done with: the same list whatever `--workers`.
                e.events.sort_by(|a, b| {
                    (a.ts_ns, &a.kind, &a.src_ip, &a.dst_ip, a.dst_qpn)
                        .cmp(&(b.ts_ns, &b.kind, &b.src_ip, &b.dst_ip, b.dst_qpn))
                });
                e
            }),
            ports,
            time_sources: BTreeMap::new(),
        }
    }

    /// Names the time sources of each vantage from what the workers used and what each
    /// capture source (port / file) provides.
    pub fn set_time_sources(&mut self, used: &[TimeUse; 2], per_source: &[&str]) {
        for (v, u) in [(Vantage::Compute, used[0]), (Vantage::Storage, used[1])] {
            let mut names: Vec<String> = Vec::new();
            if u.switch_clock {
                names.push("erspan".into());
            }
            for (i, name) in per_source.iter().enumerate() {
                if u.capture_sources & (1 << i.min(63)) != 0 && !names.iter().any(|n| n == name) {
                    names.push((*name).into());
                }
            }
            if !names.is_empty() {
                self.time_sources.insert(v.as_str().into(), names);
            }
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("summary serialises")
    }
}

/// Where the summary goes, opened before any work starts so that an unwritable path is an
/// error at start-up, not after the run.
pub enum SummarySink {
    Stdout,
    File(PartFile),
}

/// The summary file while the run lasts: written beside its path and renamed onto it at the
/// end, so that a run that fails (or is refused) leaves an earlier summary there as it was.
/// A path that is not a regular file (`/dev/stdout`, a FIFO) is written directly.
pub struct PartFile {
    file: std::fs::File,
    /// The file written until the end, if not the path itself.
    part: Option<std::path::PathBuf>,
    path: std::path::PathBuf,
    done: bool,
}

impl Drop for PartFile {
    fn drop(&mut self) {
        if let (false, Some(part)) = (self.done, &self.part) {
            let _ = std::fs::remove_file(part);
        }
    }
}

impl SummarySink {
    pub fn open(path: &Path) -> Result<Self> {
        if path.as_os_str() == "-" {
            return Ok(Self::Stdout);
        }
        // Its directory is made as --csv-dir's is.
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("--summary: cannot create the directory of {}", path.display()))?;
        }
        let special = std::fs::metadata(path).is_ok_and(|m| !m.is_file());
        let part = (!special).then(|| super::part_path(path));
        let file = match &part {
            // A name of the probe's own beside the summary: a regular file only (see
            // `create_regular`), never written through a link left there.
            Some(p) => super::create_regular(p, false),
            None => std::fs::OpenOptions::new().write(true).open(path),
        }
        .with_context(|| format!("--summary: cannot write {}", path.display()))?;
        Ok(Self::File(PartFile { file, part, path: path.to_owned(), done: false }))
    }

    pub fn write(self, s: &Summary) -> Result<()> {
        let mut text = s.to_json();
        text.push('\n');
        match self {
            Self::Stdout => {
                std::io::stdout().write_all(text.as_bytes()).context("writing the summary to stdout")
            }
            Self::File(f) => f.write(&text),
        }
    }
}

impl PartFile {
    /// Writes `text` (the summary) whole, in place at the end; if that fails (a full disk,
    /// its folder replaced by a file), the summary goes to standard error instead, so that
    /// what the run measured is not lost (unless it is whole in the part file, which the
    /// error then names).
    fn write(mut self, text: &str) -> Result<()> {
        let result = self.put(text);
        if result.is_err() && !self.done {
            let path = self.path.display();
            let _ = std::io::stderr().write_all(
                format!("roceprobe: the summary, which {path} could not take:\n{text}").as_bytes(),
            );
            return result.context("the summary went to standard error instead");
        }
        result
    }

    /// Writes `text` into the part file and renames it into place (or into the path, when
    /// that is no regular file); `done` once the summary is whole somewhere.
    fn put(&mut self, text: &str) -> Result<()> {
        let what = || format!("writing the summary to {}", self.path.display());
        match &self.part {
            // Its folder was removed during the run (with the part file in it): made again,
            // and the summary written in place.
            Some(part) if !part.exists() => {
                if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).with_context(what)?;
                }
                std::fs::write(&self.path, text.as_bytes()).with_context(what)?;
            }
            Some(part) => {
                self.file.write_all(text.as_bytes()).with_context(what)?;
                self.file.sync_all().with_context(what)?;
                if let Err(e) = std::fs::rename(part, &self.path) {
                    // The part file holds the whole summary: kept, and named.
                    self.done = true;
                    return Err(e)
                        .with_context(|| format!("{} (the whole summary is in {})", what(), part.display()));
                }
            }
            None => self.file.write_all(text.as_bytes()).with_context(what)?,
        }
        self.done = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The summary's place became a directory during the run (the rename that puts it there
    /// fails): the error names the part file, which is kept with the whole summary.
    #[test]
    fn a_summary_that_cannot_be_put_in_place_is_kept_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        let sink = SummarySink::open(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("x"), "x").unwrap();
        let s = crate::report::table::tests::summary(vec![]);
        let err = format!("{:#}", sink.write(&s).unwrap_err());
        let part = dir.path().join(format!(".s.json.{}.roceprobe-part", std::process::id()));
        assert!(err.contains(&format!("(the whole summary is in {})", part.display())), "{err}");
        let kept: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&part).unwrap()).unwrap();
        assert_eq!(kept["packets"], 10);
    }
}
