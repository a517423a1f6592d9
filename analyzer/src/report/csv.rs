//! Periodic CSV reports in `--csv-dir` (docs/CSV.md): `flows.csv` (one row per flow active in
//! an interval, deltas for the interval), `transmissions.csv` (one row per ended
//! transmission of at least `--min-transmission-packets` packets or with a NAK),
//! `latency.csv` (one row per latency series with samples in an interval), `io.csv` (NVMe
//! I/O outcomes, bytes and sizes per (initiator, target, op) and interval), `slow_ios.csv`
//! (each interval's slowest I/Os) and `ports.csv`. RFC 4180: CRLF line ends, a header row,
//! fields quoted when they hold a comma, quote or line break. Times are RFC 3339 UTC with
//! nanoseconds, rates Gbit/s.
//! The contract's columns come first, in their documented order; more are only appended.

use super::text::{push_fixed6, push_ip, push_padded, push_u64};
use super::time::{rfc3339_nanos, write_rfc3339_nanos};
use crate::capture::SourceStats;
use crate::metrics::latency::bucket_stats;
use crate::metrics::steps::{Reason, Step, Straggling};
use crate::metrics::totals::{fabric_loss, other_vantage, Totals};
use crate::metrics::IntervalSnapshot;
use crate::track::io::{IoDelta, SlowIo, Slowest, SIZE_CLASSES, SIZE_CLASS_BOUNDS};
use crate::track::{FlowCounts, FlowKey, Transmission};
use anyhow::{Context, Result};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

pub const FLOWS_HEADER: &str = "interval_start,interval_end,vantage,src_ip,dst_ip,dst_qpn,transport,packets,bytes,payload_bytes,retx_packets,retx_bytes,gap_psns,nak_seq,nak_rnr,nak_other,cnp,ecn_ce,throughput_gbps";
/// Appended after the contract's columns.
pub const FLOWS_EXTRA: &str = "fabric_loss_psns,messages,retx_episodes,out_of_window,cnp_unattributed,icrc_errors,nvme_commands,nvme_completions,late_packets,short_transmissions,short_transmission_packets,short_transmission_bytes,mirror_duplicates,nak_invalid_request,nak_remote_access_error,nak_remote_operational_error,nak_invalid_rd_request";
pub const TRANSMISSIONS_HEADER: &str = "start,end,vantage,src_ip,dst_ip,dst_qpn,transport,duration_s,packets,bytes,payload_bytes,retx_packets,retx_bytes,retx_rate,gap_psns,nak_seq,nak_rnr,cnp,ecn_ce,effective_gbps,raw_gbps";
pub const TRANSMISSIONS_EXTRA: &str = "messages,nak_other,icrc_errors";
pub const PORTS_HEADER: &str = "interval_start,interval_end,source,ipackets,ibytes,imissed,ierrors,rx_nombuf";
pub const LATENCY_HEADER: &str =
    "interval_start,interval_end,initiator_ip,target_ip,op,segment,count,min_us,mean_us,p50_us,p90_us,p99_us,p999_us,max_us";

pub const IO_HEADER: &str = "interval_start,interval_end,initiator_ip,target_ip,op,completed,timed_out,retransmitted,overflowed,unfinished,bytes,iops,mb_per_s,mean_size_bytes";
pub const STEPS_HEADER: &str = "start,end,job,duration_s,flows,bytes,straggler_src_ip,straggler_dst_ip,straggler_dst_qpn,straggler_host,lag_us,reason,straggler_gbps,median_gbps,closed_by";
pub const STRAGGLERS_HEADER: &str = "interval_start,interval_end,job,host,reason,steps,lag_us";
pub const EVENTS_HEADER: &str = "time,event,vantage,src_ip,dst_ip,dst_qpn,verdict,status,file,packets";
pub const SLOW_IOS_HEADER: &str = "interval_start,interval_end,rank,completed_at,initiator_ip,target_ip,op,qpn,cid,bytes,io_us,io_compute_us,io_storage_us,compute_us,network_us,storage_us";

/// The size-class columns that end io.csv's header: `size_le_512`, `size_le_1k`, ...,
/// `size_le_1m`, `size_gt_1m` (I/Os that moved data, by their commands' SGL length).
pub fn size_class_columns() -> String {
    let label = |b: u64| {
        if b < 1024 {
            b.to_string()
        } else if b < 1 << 20 {
            format!("{}k", b >> 10)
        } else {
            format!("{}m", b >> 20)
        }
    };
    let mut cols: Vec<String> = SIZE_CLASS_BOUNDS.iter().map(|&b| format!("size_le_{}", label(b))).collect();
    cols.push(format!("size_gt_{}", label(SIZE_CLASS_BOUNDS[SIZE_CLASSES - 2])));
    cols.join(",")
}

/// Intervals whose rows and slowest I/Os wait for the workers that have not reported them
/// yet; beyond this, the oldest is written with what came.
const INTERVALS_PENDING: usize = 64;

/// The same bound in a replay, whose rows wait for every worker (the same files every
/// time): the channels to and from the workers bound how far one can be behind another,
/// so this is a guard, not a bound a replay meets (at 20 µs intervals, four workers were
/// more than 64 intervals apart).
const INTERVALS_PENDING_REPLAY: usize = 1 << 16;

/// An interval some worker has not reported yet: its end, the slowest I/Os the workers
/// reported so far (each reports its own), and in a replay their rows of flows.csv,
/// latency.csv and io.csv, by worker (written in the workers' order, whichever reported
/// first, so that a replay gives the same files every time).
struct Waiting {
    end_ns: u64,
    slowest: Slowest,
    rows: Vec<(usize, [String; 3])>,
}

/// A transmission's duration D (docs/METRICS.md, "Transmissions"): last − first packet
/// time, and at least one packet time (its average frame at 100 Gb/s), so a one-packet
/// burst has a finite rate.
pub fn duration_ns(start_ns: u64, end_ns: u64, c: &FlowCounts) -> u64 {
    end_ns.saturating_sub(start_ns).max(crate::metrics::packet_time_ns(c.bytes, c.packets))
}

/// Bits per nanosecond is Gbit/s.
pub fn gbps(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        (bytes as f64 * 8.0) / ns as f64
    }
}

/// Effective throughput: payload not counting retransmitted payload, over D.
pub fn effective_gbps(c: &FlowCounts, d_ns: u64) -> f64 {
    gbps(c.payload_bytes.saturating_sub(c.retx_bytes), d_ns)
}

fn field(out: &mut String, s: &str) {
    if s.contains([',', '"', '\r', '\n']) {
        out.push('"');
        out.push_str(&s.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(s);
    }
}

/// The flow's columns. Addresses, numbers and the names here never need quoting, so they
/// are written as they are, without a string of their own per field.
fn key_fields(out: &mut String, k: &FlowKey, transport: &str) {
    out.push_str(k.vantage.as_str());
    out.push(',');
    push_ip(out, k.src);
    out.push(',');
    push_ip(out, k.dst);
    out.push(',');
    push_u64(out, u64::from(k.dst_qpn));
    out.push(',');
    out.push_str(transport);
    out.push(',');
}

pub use super::csv_files::{open_report, report_files, Compression, Rotation};
use super::csv_files::{Job, Link};

/// One report's rows on the stats thread: the row-formatting code pushes whole rows into
/// `rows`, and [`CsvFile::commit`] hands them to the `roceprobe-csv` thread, which writes
/// them to `<stem>.csv` in one write, rotates, compresses and keeps the directory under
/// `--csv-retain` (`report/csv_files.rs`).
struct CsvFile {
    /// The report's index on the writer thread.
    id: usize,
    /// Rows waiting for [`CsvFile::commit`].
    rows: String,
    link: Link,
}

impl CsvFile {
    /// Hands the pending rows, which belong to packet time `ts_ns`, to the writer thread
    /// (waiting while its queue is full), and takes an emptied buffer back for the next
    /// ones. The writer thread rotates by `Rotation` and counts its failures in its own
    /// health; `health` here counts rows that could not be handed over (the writer thread
    /// gone).
    fn commit(&mut self, ts_ns: u64, _rot: &Rotation, health: &mut CsvHealth) -> Result<()> {
        if self.rows.is_empty() {
            return Ok(());
        }
        if let Err(rows) = self.link.send(self.id, ts_ns, &mut self.rows) {
            health.failed_writes += 1;
            health.rows_lost += rows.matches("\r\n").count() as u64;
            anyhow::bail!("the CSV writer thread has stopped");
        }
        Ok(())
    }
}

/// How CSV writing went: writes that failed (their rows lost, the run going on), reports
/// started again because their file had been removed, and rotated files removed to stay
/// under `--csv-retain`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CsvHealth {
    pub failed_writes: u64,
    pub rows_lost: u64,
    pub files_recreated: u64,
    /// Rotated files removed, oldest first, to keep the directory under `--csv-retain`.
    #[serde(default)]
    pub files_removed: u64,
    /// Their bytes.
    #[serde(default)]
    pub bytes_removed: u64,
    /// Rotated files of an earlier run removed because this run's rows replace them (from
    /// the time each report's rows begin on).
    #[serde(default)]
    pub files_replaced: u64,
    /// Writes that took the directory past `--csv-retain`: the current files alone did not
    /// fit under it (a tiny `--csv-retain`, an interval of many rows), or a rotated file
    /// could not be removed.
    #[serde(default)]
    pub over_retain: u64,
}

impl CsvHealth {
    fn add(&mut self, o: &CsvHealth) {
        self.failed_writes += o.failed_writes;
        self.rows_lost += o.rows_lost;
        self.files_recreated += o.files_recreated;
        self.files_removed += o.files_removed;
        self.bytes_removed += o.bytes_removed;
        self.files_replaced += o.files_replaced;
        self.over_retain += o.over_retain;
    }
}

/// The report files, in the order of their index on the writer thread.
const STEMS: [&str; 9] =
    ["flows", "transmissions", "latency", "io", "slow_ios", "steps", "stragglers", "ports", "events"];

/// Before any work: that no other run writes reports in `dir` and that every report file
/// an earlier run left there can be written (see [`super::csv_files::check_dir`]).
pub fn check_dir(dir: &Path) -> Result<()> {
    super::csv_files::check_dir(dir, STEMS)
}

pub struct CsvWriter {
    dir: PathBuf,
    rotation: Rotation,
    health: CsvHealth,
    flows: CsvFile,
    transmissions: CsvFile,
    latency: CsvFile,
    io: CsvFile,
    slow_ios: CsvFile,
    steps: CsvFile,
    stragglers: CsvFile,
    ports: CsvFile,
    events: CsvFile,
    line: String,
    /// The intervals some worker has not reported yet, by their start (see [`Waiting`]);
    /// each is written once every worker has reported up to its end (or the oldest when
    /// more wait than [`INTERVALS_PENDING`], or at the end of the run).
    waiting: BTreeMap<u64, Waiting>,
    /// An interval's rows of flows.csv, latency.csv and io.csv wait for every worker's (a
    /// replay), so that a rotation never splits them and the files follow in time. Live,
    /// they are written as each worker hands them over: a worker without traffic reports no
    /// interval, and rows must not wait for it.
    wait_for_workers: bool,
    /// Emptied row buffers of written intervals, for the intervals to come.
    spare_rows: Vec<[String; 3]>,
    /// A replay's ended transmissions not written yet, by the end of the last interval
    /// their worker had reported when it sent them: each group is written, sorted by end,
    /// once every worker has reported past it (none can send more of it then), so that the
    /// file is the same however the workers' batches interleave.
    transmissions_waiting: BTreeMap<u64, Vec<Transmission>>,
    /// How many to list per interval (`--slow-ios`).
    slow_k: usize,
    interval_ns: u64,
    /// Per interval (by its start, the interval a step ended in): per (job, host, reason),
    /// the steps that host held back and their lag, until no open step can end in it.
    straggling: BTreeMap<u64, BTreeMap<(String, std::net::IpAddr, Reason), Straggling>>,
    /// The `roceprobe-csv` thread, until [`CsvWriter::finish`]: it returns its health.
    writer: Option<std::thread::JoinHandle<CsvHealth>>,
    /// The writer thread until [`CsvWriter::start_writer`] starts it.
    unstarted: Option<super::csv_files::Unstarted>,
    link: Link,
}

/// Whether `name` is a file this writer makes in its folder: a report's current file
/// (`flows.csv`) or a rotated one (`flows-<time>.csv`, compressed or not).
pub fn is_report_file(name: &str) -> bool {
    super::csv_files::is_report_file(name, STEMS)
}

impl CsvWriter {
    /// Creates the directory if needed and the files with their headers (replacing files
    /// of an earlier run), so an unwritable place is an error before any work starts.
    pub fn create(dir: &Path, rotation: Rotation) -> Result<Self> {
        Self::create_with_events(dir, rotation, false, false)
    }

    /// As [`CsvWriter::create`], with events.csv too when `events` (`--evidence-dir`); with
    /// `keep_earlier` (a live probe), an earlier run's current files with rows become
    /// rotated files instead of being replaced.
    pub fn create_with_events(
        dir: &Path,
        rotation: Rotation,
        events: bool,
        keep_earlier: bool,
    ) -> Result<Self> {
        let made_dir = !dir.exists();
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--csv-dir: cannot create {}", dir.display()))?;
        let headers = [
            format!("{FLOWS_HEADER},{FLOWS_EXTRA}"),
            format!("{TRANSMISSIONS_HEADER},{TRANSMISSIONS_EXTRA}"),
            LATENCY_HEADER.to_owned(),
            format!("{IO_HEADER},{},opcodes", size_class_columns()),
            SLOW_IOS_HEADER.to_owned(),
            STEPS_HEADER.to_owned(),
            STRAGGLERS_HEADER.to_owned(),
            PORTS_HEADER.to_owned(),
            EVENTS_HEADER.to_owned(),
        ];
        // events.csv is the last report: without evidence it is left out.
        let reports = if events { STEMS.len() } else { STEMS.len() - 1 };
        let prepared = super::csv_files::prepare_writer(
            dir,
            rotation,
            STEMS.into_iter().zip(headers).take(reports).collect(),
            &STEMS,
            keep_earlier,
        );
        let (link, unstarted) = match prepared {
            Ok(p) => p,
            Err(e) => {
                // The reports could not all be started (a full disk): a folder this run
                // made is not left behind with files cut short in it.
                if made_dir {
                    for stem in STEMS {
                        let _ = std::fs::remove_file(dir.join(format!("{stem}.csv")));
                    }
                    let _ = std::fs::remove_dir(dir);
                }
                return Err(e);
            }
        };
        let file = |stem: &str| CsvFile {
            id: STEMS.iter().position(|s| *s == stem).expect("a report's stem"),
            rows: String::new(),
            link: link.clone(),
        };
        Ok(Self {
            dir: dir.to_owned(),
            rotation,
            health: CsvHealth::default(),
            flows: file("flows"),
            transmissions: file("transmissions"),
            latency: file("latency"),
            io: file("io"),
            slow_ios: file("slow_ios"),
            steps: file("steps"),
            stragglers: file("stragglers"),
            ports: file("ports"),
            events: file("events"),
            line: String::with_capacity(512),
            waiting: BTreeMap::new(),
            wait_for_workers: false,
            spare_rows: Vec::new(),
            transmissions_waiting: BTreeMap::new(),
            slow_k: crate::defaults::SLOW_IOS,
            interval_ns: crate::defaults::INTERVAL_NS,
            straggling: BTreeMap::new(),
            writer: None,
            unstarted: Some(unstarted),
            link,
        })
    }

    /// The line that tells the operator where the reports go and how they are bounded.
    pub fn describe(&self) -> String {
        self.rotation.describe(&self.dir)
    }

    /// Starts the writer thread on the CPUs of the calling thread (the stats thread's).
    /// Rows handed over before wait for it; [`CsvWriter::finish`] starts it if nothing did.
    pub fn start_writer(&mut self) -> Result<()> {
        if let Some(u) = self.unstarted.take() {
            self.writer = Some(u.spawn()?);
        }
        Ok(())
    }

    /// Waits until the writer thread has written every row handed to it, ends it, and
    /// returns how writing went over the run.
    pub fn finish(mut self) -> CsvHealth {
        let mut health = self.health;
        if let Some(h) = self.stop_writer() {
            health.add(&h);
        }
        health
    }

    fn stop_writer(&mut self) -> Option<CsvHealth> {
        if let Err(e) = self.start_writer() {
            crate::note!("roceprobe: warning: {e:#}: the CSV rows handed over are lost");
        }
        let writer = self.writer.take()?;
        self.link.control(Job::Finish);
        match writer.join() {
            Ok(h) => Some(h),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The slowest I/Os to list per interval, and the interval.
    /// `wait_for_workers`: a replay's rows of an interval are written together once every
    /// worker has reported it (see `rows`).
    pub fn for_run(mut self, slow_ios: usize, interval_ns: u64, wait_for_workers: bool) -> Self {
        self.slow_k = slow_ios;
        self.interval_ns = interval_ns.max(1);
        self.wait_for_workers = wait_for_workers;
        // A replay's rerun into the directory replaces the earlier run's rotated files from
        // its first row on; a live probe's earlier files stay, whatever its clock says.
        if let Some(u) = self.unstarted.as_mut() {
            u.replace_earlier(wait_for_workers);
        }
        self
    }

    /// Intervals (and groups of transmissions) that wait for a worker before the oldest is
    /// written as it is.
    fn intervals_pending(&self) -> usize {
        if self.wait_for_workers {
            INTERVALS_PENDING_REPLAY
        } else {
            INTERVALS_PENDING
        }
    }

    /// events.csv: a row per event (`--evidence-dir`), with its file or why it has none.
    pub fn write_events(&mut self, rows: &[crate::metrics::evidence::EventRow]) -> Result<()> {
        for r in rows {
            let l = &mut self.line;
            l.clear();
            let _ = write!(l, "{},{},{},{},{},{},", r.time, r.kind, r.vantage, r.src_ip, r.dst_ip, r.dst_qpn);
            field(l, &r.verdict);
            let _ = write!(l, ",{},", r.status);
            field(l, &r.file);
            let _ = write!(l, ",{}\r\n", r.packets);
            self.events.rows.push_str(l);
        }
        let first = rows.iter().map(|r| r.ts_ns).min().unwrap_or(0);
        self.events.commit(first, &self.rotation, &mut self.health)
    }

    /// [`CsvWriter::write_steps`] for each of the writes the step analysis made
    /// ([`crate::metrics::steps::Steps::take_writes`]): each is made, the first failure
    /// returned.
    pub fn write_steps_each(&mut self, writes: &[(Vec<Step>, Option<u64>)]) -> Result<()> {
        writes
            .iter()
            .map(|(closed, open_from)| self.write_steps(closed, *open_from))
            .fold(Ok(()), Result::and)
    }

    /// steps.csv: a row per closed step; stragglers.csv: per interval, job, host and
    /// reason, once no step still open (none starts before `open_from`) can end in it.
    pub fn write_steps(&mut self, closed: &[Step], open_from: Option<u64>) -> Result<()> {
        // By end (then start, then job): steps close once every worker is past their end,
        // so the steps of one write end no earlier than the last write's, and the file's
        // order is one however the workers' reports interleave.
        let mut sorted: Vec<&Step> = closed.iter().collect();
        sorted.sort_by(|a, b| (a.end_ns, a.start_ns, &a.job).cmp(&(b.end_ns, b.start_ns, &b.job)));
        for s in sorted {
            let d = s.duration_ns();
            let k = &s.straggler;
            let l = &mut self.line;
            l.clear();
            write_rfc3339_nanos(l, s.start_ns);
            l.push(',');
            write_rfc3339_nanos(l, s.end_ns);
            l.push(',');
            field(l, &s.job);
            let _ = write!(
                l,
                ",{}.{:09},{},{},{},{},{},{},{:.3},{},{:.6},{:.6},{}\r\n",
                d / 1_000_000_000,
                d % 1_000_000_000,
                s.flows,
                s.bytes,
                k.src,
                k.dst,
                k.dst_qpn,
                k.src,
                s.lag_ns() as f64 / 1e3,
                s.reason.as_str(),
                s.straggler_gbps,
                s.median_gbps,
                s.closed_by()
            );
            self.steps.rows.push_str(l);
            let at = s.end_ns - s.end_ns % self.interval_ns;
            let e =
                self.straggling.entry(at).or_default().entry((s.job.clone(), k.src, s.reason)).or_default();
            e.steps += 1;
            e.lag_ns += s.lag_ns();
        }
        // The first row's end: rows go by end, and a rotated file is named by its first.
        let first = closed.iter().map(|s| s.end_ns).min().unwrap_or(0);
        let steps = self.steps.commit(first, &self.rotation, &mut self.health);
        steps.and(self.write_stragglers(open_from))
    }

    fn write_stragglers(&mut self, open_from: Option<u64>) -> Result<()> {
        let mut written = Ok(());
        while let Some((&start, _)) = self.straggling.first_key_value() {
            let end = start + self.interval_ns;
            if open_from.is_some_and(|o| o < end) {
                break;
            }
            let Some((_, rows)) = self.straggling.pop_first() else { break };
            let (a, b) = (rfc3339_nanos(start), rfc3339_nanos(end));
            for ((job, host, reason), s) in rows {
                let l = &mut self.line;
                l.clear();
                let _ = write!(l, "{a},{b},");
                field(l, &job);
                let _ = write!(l, ",{host},{},{},{:.3}\r\n", reason.as_str(), s.steps, s.lag_ns as f64 / 1e3);
                self.stragglers.rows.push_str(l);
            }
            written = written.and(self.stragglers.commit(start, &self.rotation, &mut self.health));
        }
        written
    }

    /// One row per flow active in the interval. With two vantages mapped (`two`: the run's
    /// totals so far, this interval's included), fabric loss compares the flow's gaps with
    /// the same flow's at the other vantage in the same interval; it is empty for a flow
    /// the other vantage has not seen in the run so far, as the summary's is for a flow seen
    /// at one vantage (and with one vantage mapped). `done`: the end of the intervals every
    /// worker has reported, after which an interval's slowest I/Os are complete (and, in a
    /// replay, its rows are written).
    pub fn write_interval(&mut self, s: &IntervalSnapshot, two: Option<&Totals>, done: u64) -> Result<()> {
        // Only two vantages compare a flow's gaps with its other vantage's.
        let gaps: HashMap<FlowKey, u64, ahash::RandomState> = if two.is_some() {
            s.flows.iter().map(|d| (d.key, d.counts.gap_psns)).collect()
        } else {
            HashMap::default()
        };
        let (start, end) = (rfc3339_nanos(s.start_ns), rfc3339_nanos(s.end_ns));
        // A flow whose interval only ended a transmission it had counted before (idle
        // since) has nothing for a row.
        let mut rows: Vec<_> =
            s.flows.iter().filter(|d| d.counts != FlowCounts::default() || d.short.count > 0).collect();
        rows.sort_by_key(|d| d.key);
        for d in rows {
            let c = &d.counts;
            let l = &mut self.line;
            l.clear();
            let _ = write!(l, "{start},{end},");
            key_fields(l, &d.key, d.transport.as_str());
            let _ = write!(
                l,
                "{},{},{},{},{},{},{},{},{},{},{},{:.6},",
                c.packets,
                c.bytes,
                c.payload_bytes,
                c.retx_packets,
                c.retx_bytes,
                c.gap_psns,
                c.nak_seq,
                c.nak_rnr,
                c.nak_other,
                c.cnp,
                c.ecn_ce,
                gbps(c.bytes, s.end_ns - s.start_ns)
            );
            let other_key = other_vantage(&d.key);
            let other = two
                .filter(|t| t.flows.contains_key(&other_key))
                .map(|_| gaps.get(&other_key).copied().unwrap_or(0));
            if let Some(f) = fabric_loss(c.gap_psns, other) {
                let _ = write!(l, "{f}");
            }
            let _ = write!(
                l,
                ",{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\r\n",
                c.messages,
                c.retx_episodes,
                c.out_of_window,
                c.cnp_unattributed,
                c.icrc_errors,
                c.nvme_commands,
                c.nvme_completions,
                c.late_packets,
                d.short.count,
                d.short.packets,
                d.short.bytes,
                c.mirror_duplicates,
                c.nak_invalid_request,
                c.nak_remote_access_error,
                c.nak_remote_operational_error,
                c.nak_invalid_rd_request
            );
            self.flows.rows.push_str(l);
        }
        let mut series: Vec<_> = s.latency.iter().collect();
        series.sort_by_key(|(k, _)| *k);
        for (k, buckets) in series {
            let st = bucket_stats(buckets);
            let l = &mut self.line;
            l.clear();
            let _ = write!(l, "{start},{end},");
            // Addresses and these names never need quoting (see `key_fields`).
            let _ = write!(l, "{},{},{},{},", k.initiator, k.target, k.op.as_str(), k.segment.as_str());
            let _ = write!(
                l,
                "{},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3}\r\n",
                st.count, st.min_us, st.mean_us, st.p50_us, st.p90_us, st.p99_us, st.p999_us, st.max_us
            );
            self.latency.rows.push_str(l);
        }
        self.write_io(s);
        let mut written = Ok(());
        if !self.wait_for_workers {
            // Live: every worker's rows go as they come.
            for to in [&mut self.flows, &mut self.latency, &mut self.io] {
                written = written.and(to.commit(s.start_ns, &self.rotation, &mut self.health));
            }
            if self.slow_k == 0 {
                return written;
            }
        }
        let (k, spare) = (self.slow_k, &mut self.spare_rows);
        let w = self.waiting.entry(s.start_ns).or_insert_with(|| Waiting {
            end_ns: s.end_ns,
            slowest: Slowest::new(k),
            rows: Vec::new(),
        });
        for io in &s.ios.slowest {
            w.slowest.offer(*io);
        }
        if self.wait_for_workers {
            let at = match w.rows.binary_search_by_key(&s.worker, |(worker, _)| *worker) {
                Ok(at) => at,
                Err(at) => {
                    w.rows.insert(at, (s.worker, spare.pop().unwrap_or_default()));
                    at
                }
            };
            for (to, from) in w.rows[at].1.iter_mut().zip([&mut self.flows, &mut self.latency, &mut self.io])
            {
                to.push_str(&from.rows);
                from.rows.clear();
            }
        }
        written.and(self.write_reported(done))
    }

    /// Writes the intervals every worker has reported (up to `done`), oldest first:
    /// their rows (a replay's) and slowest I/Os; `u64::MAX`: every interval. Their row
    /// buffers are kept for the intervals to come.
    fn write_reported(&mut self, done: u64) -> Result<()> {
        let mut written = Ok(());
        while let Some((&start, w)) = self.waiting.first_key_value() {
            if w.end_ns > done && self.waiting.len() <= self.intervals_pending() {
                break;
            }
            let Some(w) = self.waiting.remove(&start) else { break };
            let mut files = [&mut self.flows, &mut self.latency, &mut self.io];
            for (_, mut rows) in w.rows {
                for (from, to) in rows.iter_mut().zip(files.iter_mut()) {
                    to.rows.push_str(from);
                    from.clear();
                }
                self.spare_rows.push(rows);
            }
            for to in files {
                written = written.and(to.commit(start, &self.rotation, &mut self.health));
            }
            written = written.and(self.write_slow_ios(start, w.end_ns, &w.slowest));
        }
        written.and(self.write_waiting_transmissions(done))
    }

    /// io.csv: one row per (initiator, target, op) whose I/O outcomes changed (into the
    /// report's pending rows).
    fn write_io(&mut self, s: &IntervalSnapshot) {
        let (start, end) = (rfc3339_nanos(s.start_ns), rfc3339_nanos(s.end_ns));
        let secs = (s.end_ns - s.start_ns) as f64 / 1e9;
        let mut rows: Vec<&IoDelta> = s.ios.pairs.iter().collect();
        rows.sort_by_key(|d| (d.initiator, d.target, d.op));
        for d in rows {
            let c = &d.counts;
            let l = &mut self.line;
            l.clear();
            let _ = write!(l, "{start},{end},");
            let _ = write!(l, "{},{},{},", d.initiator, d.target, d.op.as_str());
            let _ = write!(
                l,
                "{},{},{},{},{},{},{:.3},{:.6},",
                c.completed,
                c.timed_out,
                c.retransmitted,
                c.overflowed,
                c.unfinished,
                c.bytes,
                c.completed as f64 / secs,
                c.bytes as f64 / 1e6 / secs
            );
            if c.completed > 0 {
                let _ = write!(l, "{:.1}", c.bytes as f64 / c.completed as f64);
            }
            for n in &c.size_classes {
                let _ = write!(l, ",{n}");
            }
            l.push(',');
            for (k, (command, n)) in c.opcodes.named().enumerate() {
                let _ = write!(l, "{}{command}={n}", if k == 0 { "" } else { " " });
            }
            l.push_str("\r\n");
            self.io.rows.push_str(l);
        }
    }

    /// Writes the rows and slowest I/Os of the intervals still waiting for a worker (end of
    /// the run).
    pub fn flush_intervals(&mut self) -> Result<()> {
        self.write_reported(u64::MAX)
    }

    fn write_slow_ios(&mut self, start_ns: u64, end_ns: u64, list: &Slowest) -> Result<()> {
        let (start, end) = (rfc3339_nanos(start_ns), rfc3339_nanos(end_ns));
        for (rank, io) in list.sorted().iter().enumerate() {
            let SlowIo { io_ns, completed_ns, initiator, target, op, qpn, cid, bytes, segments } = *io;
            let l = &mut self.line;
            l.clear();
            let _ = write!(l, "{start},{end},{},", rank + 1);
            write_rfc3339_nanos(l, completed_ns);
            l.push(',');
            let _ = write!(
                l,
                "{initiator},{target},{},{qpn},{cid},{bytes},{:.3}",
                op.as_str(),
                io_ns as f64 / 1e3
            );
            for v in segments {
                match v {
                    Some(ns) => write!(l, ",{:.3}", ns as f64 / 1e3),
                    None => write!(l, ","),
                }
                .ok();
            }
            l.push_str("\r\n");
            self.slow_ios.rows.push_str(l);
        }
        self.slow_ios.commit(start_ns, &self.rotation, &mut self.health)
    }

    /// Receive statistics of each source (DPDK port id / input file index) over an interval.
    pub fn write_ports(&mut self, start_ns: u64, end_ns: u64, sources: &[SourceStats]) -> Result<()> {
        let (start, end) = (rfc3339_nanos(start_ns), rfc3339_nanos(end_ns));
        for (i, s) in sources.iter().enumerate().filter(|(_, s)| s.captured) {
            let _ = write!(
                self.ports.rows,
                "{start},{end},{i},{},{},{},{},{}\r\n",
                s.ipackets, s.ibytes, s.imissed, s.ierrors, s.rx_nombuf
            );
        }
        self.ports.commit(start_ns, &self.rotation, &mut self.health)?;
        Ok(())
    }

    /// transmissions.csv: a batch of ended transmissions from a worker that had reported
    /// its intervals up to `reported` (its last interval's end), while every worker has
    /// reported up to `done`. Live, written as it comes; a replay's wait for every worker
    /// (see `transmissions_waiting`).
    pub fn write_transmissions(&mut self, ts: &[Transmission], reported: u64, done: u64) -> Result<()> {
        if !self.wait_for_workers {
            return self.render_transmissions(ts);
        }
        self.transmissions_waiting.entry(reported).or_default().extend_from_slice(ts);
        self.write_waiting_transmissions(done)
    }

    /// Writes the waiting transmissions every worker has reported past (up to `done`;
    /// `u64::MAX`: all), oldest group first, each sorted by end, start and flow.
    fn write_waiting_transmissions(&mut self, done: u64) -> Result<()> {
        let mut written = Ok(());
        // Beyond the bound on groups (a worker far behind), the oldest goes as it is.
        let most = self.intervals_pending();
        while self.transmissions_waiting.first_key_value().is_some_and(|(&from, _)| {
            from < done || done == u64::MAX || self.transmissions_waiting.len() > most
        }) {
            let Some((_, mut ts)) = self.transmissions_waiting.pop_first() else { break };
            ts.sort_by_key(|a| (a.end_ns, a.start_ns, a.key));
            written = written.and(self.render_transmissions(&ts));
        }
        written
    }

    fn render_transmissions(&mut self, ts: &[Transmission]) -> Result<()> {
        for t in ts {
            let c = &t.counts;
            let d = duration_ns(t.start_ns, t.end_ns, c);
            let l = &mut self.line;
            l.clear();
            write_rfc3339_nanos(l, t.start_ns);
            l.push(',');
            write_rfc3339_nanos(l, t.end_ns);
            l.push(',');
            key_fields(l, &t.key, t.transport.as_str());
            let retx_rate = if c.packets == 0 { 0.0 } else { c.retx_packets as f64 / c.packets as f64 };
            // As `write!` with "{}.{:09}" for the duration, "{:.6}" for the rates and "{}"
            // for the counts would (report/text.rs), at a fraction of its cost.
            push_u64(l, d / 1_000_000_000);
            l.push('.');
            push_padded(l, d % 1_000_000_000, 9);
            for v in [c.packets, c.bytes, c.payload_bytes, c.retx_packets, c.retx_bytes] {
                l.push(',');
                push_u64(l, v);
            }
            l.push(',');
            push_fixed6(l, retx_rate);
            for v in [c.gap_psns, c.nak_seq, c.nak_rnr, c.cnp, c.ecn_ce] {
                l.push(',');
                push_u64(l, v);
            }
            for v in [effective_gbps(c, d), gbps(c.bytes, d)] {
                l.push(',');
                push_fixed6(l, v);
            }
            for v in [c.messages, c.nak_other, c.icrc_errors] {
                l.push(',');
                push_u64(l, v);
            }
            l.push_str("\r\n");
            self.transmissions.rows.push_str(l);
        }
        // The batch's time is when its first transmission ended (and was written), not
        // when it began, which for a long one is hours before the rows around it.
        if let Some(first) = ts.first() {
            self.transmissions.commit(first.end_ns, &self.rotation, &mut self.health)?;
        }
        Ok(())
    }
}

impl Drop for CsvWriter {
    /// Nothing handed to the writer thread is lost: it writes everything before it ends.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.stop_writer();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_rates() {
        let c = FlowCounts { packets: 1, bytes: 1250, payload_bytes: 1000, ..Default::default() };
        // One packet: at least one packet time, 1250 B at 100 Gb/s = 100 ns.
        assert_eq!(duration_ns(5, 5, &c), 100);
        assert!((gbps(1250, 100) - 100.0).abs() < 1e-9);
        let c = FlowCounts {
            packets: 10,
            bytes: 10_000,
            payload_bytes: 8_000,
            retx_bytes: 2_000,
            ..Default::default()
        };
        assert_eq!(duration_ns(0, 1_000_000, &c), 1_000_000);
        assert!((effective_gbps(&c, 1_000_000) - 0.048).abs() < 1e-12);
    }

    /// A transmission hours long ends, then a short one half a second later: with
    /// `--csv-rotate-age 1s` both rows are in one file, named by the first one's end. (By
    /// its start, the file was named hours before the rows around it and rotated after the
    /// first batch, its name sorting before older files.)
    #[test]
    fn transmissions_files_go_by_when_their_rows_ended() {
        use crate::track::Vantage;
        use crate::wire::bth::Transport;
        let dir = tempfile::tempdir().unwrap();
        let rotation = Rotation {
            max_age_ns: Some(1_000_000_000),
            compression: Compression::None,
            ..Default::default()
        };
        let mut csv = CsvWriter::create(dir.path(), rotation).unwrap();
        csv.start_writer().unwrap();
        let hour = 3_600_000_000_000u64;
        let t0 = 1_764_547_200_000_000_000u64; // 2025-12-01T00:00:00Z
        let tx = |start_ns, end_ns| Transmission {
            key: FlowKey {
                vantage: Vantage::Compute,
                src: "10.0.0.1".parse().unwrap(),
                dst: "10.0.0.2".parse().unwrap(),
                dst_qpn: 7,
            },
            transport: Transport::Rc,
            start_ns,
            end_ns,
            last_message_ns: None,
            nvme: false,
            peer_qpn: None,
            counts: FlowCounts { packets: 2, bytes: 200, ..Default::default() },
        };
        csv.write_transmissions(&[tx(t0, t0 + 3 * hour)], 0, 0).unwrap();
        csv.write_transmissions(&[tx(t0 + 3 * hour + 400_000_000, t0 + 3 * hour + 500_000_000)], 0, 0)
            .unwrap();
        csv.write_transmissions(&[tx(t0 + 3 * hour + 1_000_000_000, t0 + 3 * hour + 1_200_000_000)], 0, 0)
            .unwrap();
        let health = csv.finish();
        assert_eq!(health.failed_writes, 0);
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with("transmissions"))
            .collect();
        names.sort();
        assert_eq!(names, ["transmissions-2025-12-01T030000.000000000Z.csv", "transmissions.csv"]);
        let rows = |n: &str| std::fs::read_to_string(dir.path().join(n)).unwrap().lines().count() - 1;
        assert_eq!((rows(&names[0]), rows(&names[1])), (2, 1));
    }

    /// A replay with two workers: whichever worker reports an interval first, and however
    /// the workers' transmission batches interleave, the files are the same bytes.
    #[test]
    fn a_replays_files_do_not_depend_on_the_order_its_workers_report_in() {
        use crate::track::Vantage;
        use crate::wire::bth::Transport;
        let t0 = 1_764_547_200_000_000_000u64;
        let ms = 1_000_000u64;
        let key = |src: &str, qpn: u32| FlowKey {
            vantage: Vantage::Compute,
            src: src.parse().unwrap(),
            dst: "10.0.9.9".parse().unwrap(),
            dst_qpn: qpn,
        };
        let delta = |src: &str, qpn: u32| crate::track::flow::FlowDelta {
            key: key(src, qpn),
            transport: Transport::Rc,
            counts: FlowCounts { packets: 3, bytes: 300, ..Default::default() },
            short: Default::default(),
            reported: 0,
            opcodes: crate::track::flow::OpcodeCounts::new(0x0A),
            open_since: None,
        };
        // Worker 0 has 10.0.0.2's flow, worker 1 10.0.0.1's (sorted, 10.0.0.1 goes first).
        let snap = |worker: usize, src: &str, start: u64| IntervalSnapshot {
            worker,
            start_ns: start,
            end_ns: start + ms,
            flows: vec![delta(src, 7)],
            ..Default::default()
        };
        let tx = |src: &str, start_ns: u64, end_ns: u64| Transmission {
            key: key(src, 7),
            transport: Transport::Rc,
            start_ns,
            end_ns,
            last_message_ns: None,
            nvme: false,
            peer_qpn: None,
            counts: FlowCounts { packets: 4, bytes: 400, ..Default::default() },
        };
        let run = |worker_first: usize| {
            let dir = tempfile::tempdir().unwrap();
            let rotation = Rotation { compression: Compression::None, ..Default::default() };
            let mut csv = CsvWriter::create(dir.path(), rotation).unwrap().for_run(10, ms, true);
            csv.start_writer().unwrap();
            let src = ["10.0.0.2", "10.0.0.1"];
            let (a, b) = (worker_first, 1 - worker_first);
            // Each worker's batch before its first interval, then the intervals: the
            // second worker to report closes the interval.
            let times = [(t0 + 200, t0 + 900), (t0 + 100, t0 + 800)];
            csv.write_transmissions(&[tx(src[a], times[a].0, times[a].1)], 0, 0).unwrap();
            csv.write_transmissions(&[tx(src[b], times[b].0, times[b].1)], 0, 0).unwrap();
            csv.write_interval(&snap(a, src[a], t0), None, 0).unwrap();
            csv.write_interval(&snap(b, src[b], t0), None, t0 + ms).unwrap();
            csv.flush_intervals().unwrap();
            assert_eq!(csv.finish().failed_writes, 0);
            let read = |n: &str| std::fs::read_to_string(dir.path().join(n)).unwrap();
            (read("flows.csv"), read("transmissions.csv"))
        };
        let (flows, transmissions) = run(0);
        assert_eq!(run(1), (flows.clone(), transmissions.clone()));
        // A batch sent after a worker reported an interval ending at the last time there is
        // (a hostile capture's clamped times) is still written at the end.
        let dir = tempfile::tempdir().unwrap();
        let rotation = Rotation { compression: Compression::None, ..Default::default() };
        let mut csv = CsvWriter::create(dir.path(), rotation).unwrap().for_run(10, ms, true);
        csv.start_writer().unwrap();
        csv.write_transmissions(&[tx("10.0.0.1", t0, t0 + 1)], u64::MAX, 0).unwrap();
        csv.flush_intervals().unwrap();
        assert_eq!(csv.finish().failed_writes, 0);
        let rows = std::fs::read_to_string(dir.path().join("transmissions.csv")).unwrap();
        assert_eq!(rows.lines().count(), 2, "{rows}");
        // Worker 0's row first, then worker 1's; transmissions by end.
        let rows: Vec<&str> = flows.lines().skip(1).collect();
        assert_eq!(rows.len(), 2);
        assert!(rows[0].contains(",10.0.0.2,") && rows[1].contains(",10.0.0.1,"), "{flows}");
        let rows: Vec<&str> = transmissions.lines().skip(1).collect();
        assert_eq!(rows.len(), 2);
        assert!(rows[0].contains(",10.0.0.1,") && rows[1].contains(",10.0.0.2,"), "{transmissions}");
    }

    #[test]
    fn headers_are_the_contract() {
        assert_eq!(FLOWS_HEADER.split(',').count(), 19);
        assert_eq!(TRANSMISSIONS_HEADER.split(',').count(), 21);
        let mut s = String::new();
        field(&mut s, "a,\"b\"");
        assert_eq!(s, "\"a,\"\"b\"\"\"");
    }
}
