//! The command line (README.md, docs/DEPLOYMENT.md): `roceprobe live [OPTIONS] -- [EAL ARGS]`,
//! `roceprobe replay [OPTIONS] FILE...`, `plot` and `evidence DIR`. Every bad input is one line on stderr and a
//! non-zero exit before any work starts.

use crate::capture::dpdk::{DpdkCapture, StopWhen};
use crate::capture::pcap::Replay;
use crate::capture::Capture;
use crate::defaults;
use crate::report::csv::{Compression, CsvWriter, Rotation};
use crate::report::csv_files::size_text;
use crate::report::dashboard::{self, View, ViewBuilder};
use crate::report::evidence::{EvidenceOutput, EvidenceSettings};
use crate::report::prometheus::{self, Exporter, Page};
use crate::report::summary::{RunEnd, Summary, SummarySink};
use crate::report::table;
use crate::report::{Reports, Subscriber};
use crate::runtime::{self, PipelineConfig};
use crate::track::evidence::EvidenceConfig;
use crate::track::vantage::{Rule, Selector, SourceKind};
use crate::track::VantageMap;
use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(
    name = "roceprobe",
    version,
    about = "Line-rate RoCEv2 telemetry probe: NVMe-oF I/O latency split into host, network and storage time, and every RDMA queue pair's throughput, retransmissions, loss, NAKs and congestion, from mirrored traffic, live through DPDK or from capture files"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Capture from DPDK ports: a NIC bound to DPDK, or a vdev such as net_pcap0,rx_pcap=FILE.
    Live(LiveArgs),
    /// Analyse pcap / pcapng files offline (no DPDK); several files are merged by timestamp.
    Replay(ReplayArgs),
    /// Draw SVG and PNG plots from the CSV reports of a run (--csv-dir): latency CDFs per segment,
    /// the segment split over time, the busiest flows' throughput, each collective job's steps.
    Plot(PlotArgs),
    /// List the evidence files a run kept (its --evidence-dir): time, event, flow, packets,
    /// verdict, file.
    Evidence(EvidenceArgs),
}

#[derive(Debug, Args)]
pub struct EvidenceArgs {
    /// The directory a run kept its evidence in.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Where a run wrote its CSV reports (its --csv-dir).
    #[arg(long, value_name = "DIR")]
    pub csv_dir: PathBuf,
    /// Where to write the plots (created if needed).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Options common to `live` and `replay`.
#[derive(Debug, Args)]
pub struct CommonArgs {
    /// Report interval, in packet time (e.g. 1s, 250ms, 100us; every DUR takes a unit ns,
    /// us, ms, s, m or h, and a number without one is seconds).
    #[arg(long, allow_hyphen_values = true, value_name = "DUR", default_value = defaults::INTERVAL, value_parser = parse_interval)]
    pub interval: Duration,
    /// Write the summary JSON here at exit ('-' = stdout; the flow table then goes to stderr). Its folder is created if needed, and checked writable before any work starts.
    #[arg(long, value_name = "FILE")]
    pub summary: Option<PathBuf>,
    /// Map traffic to a vantage point: NAME is compute or storage, SELECTOR is port:N (live),
    /// file:N (replay, N-th input file from 0), vlan:N (outermost VLAN id) or erspan:N
    /// (ERSPAN session id). Repeatable.
    /// Unmapped traffic is compute.
    #[arg(long = "vantage", value_name = "NAME=SELECTOR", value_parser = parse_rule)]
    pub vantages: Vec<Rule>,
    /// Most flows tracked at once, per worker; a new flow takes the slot of one idle for
    /// --flow-expire, else its packets are counted as untracked.
    #[arg(long, allow_hyphen_values = true, value_name = "N", default_value_t = defaults::MAX_FLOWS, value_parser = parse_table_bound)]
    pub max_flows: usize,
    /// Write the CSV reports here, every interval: flows, transmissions, latency, io,
    /// slow_ios, steps, stragglers and ports.csv, and events.csv with --evidence-dir (the
    /// directory is created if needed; replay replaces an earlier run's current files, and its rotated files from the time this run's rows begin; live keeps an earlier run's current files as rotated files).
    #[arg(long, value_name = "DIR")]
    pub csv_dir: Option<PathBuf>,
    /// Start a new CSV file before one would grow past SIZE bytes (suffixes K, M, G); the
    /// full one is renamed <name>-<time of its first row>.csv, then compressed
    /// (--csv-compress). At most --csv-retain/8 (/9 with --evidence-dir). [default: 64M, or
    /// --csv-retain/16 when smaller]
    #[arg(long, requires = "csv_dir", allow_hyphen_values = true, value_name = "SIZE", value_parser = parse_size)]
    pub csv_rotate_size: Option<u64>,
    /// Start a new CSV file when the current one's first row is DUR of packet time old.
    #[arg(long, requires = "csv_dir", allow_hyphen_values = true, value_name = "DUR", default_value = defaults::CSV_ROTATE_AGE, value_parser = parse_interval)]
    pub csv_rotate_age: Duration,
    /// Compress rotated CSV files: none, gzip (<name>-<time>.csv.gz) or zstd (.csv.zst); the
    /// current <name>.csv stays plain.
    #[arg(long, requires = "csv_dir", value_name = "MODE", default_value = defaults::CSV_COMPRESS, value_parser = parse_compress)]
    pub csv_compress: Compression,
    /// The CSV files in --csv-dir (current and rotated, compressed or not, of every report)
    /// take at most SIZE bytes (suffixes K, M, G; at least 16K): the oldest rotated files
    /// are removed first (summary csv_output.files_removed).
    #[arg(long, requires = "csv_dir", allow_hyphen_values = true, value_name = "SIZE", default_value = defaults::CSV_RETAIN, value_parser = parse_retain)]
    pub csv_retain: u64,
    /// A transmission (burst) of a flow ends after this long without a packet of it.
    #[arg(long, allow_hyphen_values = true, value_name = "DUR", default_value = defaults::FLOW_IDLE, value_parser = parse_interval)]
    pub flow_idle: Duration,
    /// A transmission of fewer packets (and no NAK) is not written to transmissions.csv:
    /// flows.csv and the summary count it per flow and interval (short_transmissions, their
    /// packets and bytes). 1 writes every transmission.
    #[arg(long, allow_hyphen_values = true, value_name = "N", default_value_t = defaults::MIN_TRANSMISSION_PACKETS, value_parser = parse_min_packets)]
    pub min_transmission_packets: u64,
    /// When the flow table is full, a flow without a packet for this long (packet time)
    /// gives its slot to a new flow (summary: forgotten.idle_flows).
    #[arg(long, allow_hyphen_values = true, value_name = "DUR", default_value = defaults::FLOW_EXPIRE, value_parser = parse_interval)]
    pub flow_expire: Duration,
    /// Path MTU for counting the PSNs a READ Request reserves (256, 512, 1024, 2048 or
    /// 4096); learned per QP from its packets when not given.
    #[arg(long, allow_hyphen_values = true, value_name = "N", value_parser = parse_mtu)]
    pub mtu: Option<u32>,
    /// Put each worker's packets in packet-time order before analysing them, waiting this
    /// long (packet time) for mirror copies that arrive late (ERSPAN sessions with paths of
    /// different delay, queueing jitter, capture ports polled in turn); 0 analyses in
    /// arrival order. Packets later than this are counted in late_packets. At most 1s
    #[arg(long, allow_hyphen_values = true, value_name = "DUR", default_value = defaults::REORDER_WINDOW, value_parser = parse_window)]
    pub reorder_window: Duration,
    /// A packet with a lower TTL than its flow's packets had at most this long before, and
    /// (for a request) a PSN the flow saw already, is the mirror's second copy of one
    /// counted already (both ports of a routed hop mirrored): counted in
    /// mirror_duplicates, and nothing else. 0: every copy counts. At most 1s
    #[arg(long, allow_hyphen_values = true, value_name = "DUR", default_value = defaults::DUPLICATE_WINDOW, value_parser = parse_window)]
    pub duplicate_window: Duration,
    /// An NVMe I/O without a completion after this long (packet time) is counted as timed out. With two vantages it also bounds how long an I/O complete at one waits for the other's copies (see --reorder-window).
    #[arg(long, allow_hyphen_values = true, value_name = "DUR", default_value = defaults::IO_TIMEOUT, value_parser = parse_interval)]
    pub io_timeout: Duration,
    /// Most NVMe I/Os awaiting their completion at once, per worker; further commands are
    /// counted as overflowed. A quarter of it (at least 64) bounds the NVMe connections' state.
    #[arg(long, allow_hyphen_values = true, value_name = "N", default_value_t = defaults::MAX_IOS, value_parser = parse_table_bound)]
    pub max_ios: usize,
    /// Most latency series, (initiator, target, op, segment), per worker over the run
    /// (a few KiB each on the worker, 66 KiB in the totals); samples of further series
    /// are counted in latency_samples_dropped. Also bounds the (initiator, target, op) keys
    /// of the I/O counts (further pairs are counted under 0.0.0.0).
    #[arg(long, allow_hyphen_values = true, value_name = "N", default_value_t = defaults::MAX_LATENCY_SERIES, value_parser = parse_table_bound)]
    pub max_latency_series: usize,
    /// Most NVMe command identifiers (per host, target and vantage) with commands awaiting
    /// their completions per worker; beyond it the least recently used is forgotten with its
    /// commands (summary: forgotten.nvme_commands).
    #[arg(long, allow_hyphen_values = true, value_name = "N", default_value_t = defaults::MAX_PENDING_COMMANDS, value_parser = parse_table_bound)]
    pub max_pending_commands: usize,
    /// Most CM ConnectRequests awaiting their reply per worker; beyond it the oldest is
    /// forgotten (summary: forgotten.cm_requests).
    #[arg(long, allow_hyphen_values = true, value_name = "N", default_value_t = defaults::MAX_CM_REQUESTS, value_parser = parse_table_bound)]
    pub max_cm_requests: usize,
    /// Most flows announced by CM (two per connection) awaiting their first packet per
    /// worker; beyond it the oldest is forgotten (summary: forgotten.announced_flows).
    #[arg(long, allow_hyphen_values = true, value_name = "N", default_value_t = defaults::MAX_ANNOUNCED_FLOWS, value_parser = parse_table_bound)]
    pub max_announced_flows: usize,
    /// Analysis threads. 1: on the capture thread. More: the capture thread dispatches each
    /// frame by its inner IP pair to one of N workers pinned to cores (software dispatch).
    #[arg(long, allow_hyphen_values = true, value_name = "N", default_value_t = 1, value_parser = parse_workers)]
    pub workers: usize,
    /// Check every RoCEv2 packet's invariant CRC and count failures per flow (icrc_errors).
    #[arg(long)]
    pub check_icrc: bool,
    /// Serve the metrics for Prometheus at http://ADDR/metrics (e.g. 0.0.0.0:9464), updated
    /// every interval. A replay keeps serving its final metrics until SIGINT / SIGTERM.
    #[arg(long, value_name = "ADDR")]
    pub prometheus: Option<String>,
    /// The `probe` label of every Prometheus series (default: the host name).
    #[arg(long, requires = "prometheus", value_name = "ID", value_parser = parse_probe_id)]
    pub probe_id: Option<String>,
    /// Most flows exported to Prometheus (those with the most bytes); the rest are counted
    /// in roceprobe_flows_not_exported.
    #[arg(long, requires = "prometheus", allow_hyphen_values = true, value_name = "N", default_value_t = defaults::PROMETHEUS_MAX_FLOWS)]
    pub prometheus_max_flows: usize,
    /// Show a live dashboard in the terminal, refreshed every interval (s: sort flows,
    /// p: pause, q: quit, which ends a live capture as SIGTERM does). The exit report follows
    /// on stdout when it closes.
    #[arg(long)]
    pub dashboard: bool,
    /// The slowest NVMe I/Os listed per interval (slow_ios.csv) and kept for the run
    /// (summary ios.slowest, the exit report); 0: none.
    #[arg(long, allow_hyphen_values = true, value_name = "K", default_value_t = defaults::SLOW_IOS, value_parser = parse_slow_ios)]
    pub slow_ios: usize,
    /// A collective job's hosts, named (repeatable; rules of one NAME are one job):
    /// NAME=CIDR[,CIDR...] (a NAME without a comma, not an address), e.g. llm=10.1.0.0/16;
    /// two jobs' ranges may not overlap. A
    /// job's steps are the RC requests between its hosts. Hosts no rule names are grouped
    /// by themselves: those that RC requests (SEND, WRITE, READ, atomics; not NVMe)
    /// connect form one job per connected group, named by the lowest address of its first
    /// step (kept for the run).
    #[arg(long = "job", value_name = "NAME=CIDRS")]
    pub jobs: Vec<crate::metrics::steps::JobRule>,
    /// A job's step ends when none of its flows has sent for this long. 1us to 10s
    #[arg(long, allow_hyphen_values = true, value_name = "DUR", default_value = defaults::STEP_GAP, value_parser = parse_step_gap)]
    pub step_gap: Duration,
    /// Most collective jobs with run totals (the summary's jobs, the dashboard's job panel,
    /// Prometheus' per-job series); the steps of further jobs are still written to
    /// steps.csv and stragglers.csv (summary: bounds). At least the --job names given.
    #[arg(long, allow_hyphen_values = true, value_name = "N", default_value_t = defaults::MAX_JOBS, value_parser = parse_table_bound)]
    pub max_jobs: usize,
    /// Rows of each flow table in the exit report (flows with problems, busiest flows); the
    /// rest are in the summary and the CSV files.
    #[arg(long, allow_hyphen_values = true, value_name = "N", default_value_t = defaults::TOP)]
    pub top: usize,
    /// Do not print the exit report.
    #[arg(long, short)]
    pub quiet: bool,
    /// Keep evidence: for every loss episode, RNR NAK, CNP / ECN-CE burst, slow or timed-out
    /// NVMe I/O and ICRC error, a pcapng file here with the packets of the QP involved (both
    /// directions, both vantages) around it (created if needed). Off by default.
    #[arg(long, value_name = "DIR")]
    pub evidence_dir: Option<PathBuf>,
    /// Evidence: packets of each flow involved kept from before the event (at most 256).
    #[arg(long, requires = "evidence_dir", allow_hyphen_values = true, value_name = "N", default_value_t = defaults::EVIDENCE_BEFORE, value_parser = parse_evidence_before)]
    pub evidence_before: u32,
    /// Evidence: how long an event's file goes on after it: N more packets of its flows, or a
    /// duration of packet time (e.g. 2ms).
    #[arg(long, requires = "evidence_dir", allow_hyphen_values = true, value_name = "N|DUR", default_value = defaults::EVIDENCE_AFTER, value_parser = parse_evidence_after)]
    pub evidence_after: crate::track::evidence::After,
    /// Evidence: bytes kept of each packet (64 to 9216); the original length is kept too.
    #[arg(long, requires = "evidence_dir", allow_hyphen_values = true, value_name = "BYTES", default_value_t = defaults::EVIDENCE_SNAPLEN, value_parser = parse_evidence_snaplen)]
    pub evidence_snaplen: u32,
    /// Evidence: an NVMe I/O slower than this (command to completion) is an event.
    #[arg(long, requires = "evidence_dir", allow_hyphen_values = true, value_name = "DUR", default_value = defaults::EVIDENCE_SLOW_IO, value_parser = parse_interval)]
    pub evidence_slow_io: Duration,
    /// Evidence: at most N files per event kind and minute of packet time; the other events
    /// are counted and listed (capped_per_minute). 0: every event listed, no file written.
    #[arg(long, requires = "evidence_dir", allow_hyphen_values = true, value_name = "N", default_value_t = defaults::EVIDENCE_MAX_PER_MINUTE)]
    pub evidence_max_per_minute: u32,
    /// Evidence: the files in --evidence-dir take at most SIZE bytes (suffixes K, M, G; at
    /// least 64K); the oldest are removed first.
    #[arg(long, requires = "evidence_dir", allow_hyphen_values = true, value_name = "SIZE", default_value = defaults::EVIDENCE_MAX_BYTES, value_parser = parse_evidence_max_bytes)]
    pub evidence_max_bytes: u64,
}

#[derive(Debug, Args)]
pub struct LiveArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// DPDK port ids to capture from (repeatable); default: every port EAL found.
    #[arg(long = "port", value_name = "ID")]
    pub ports: Vec<u16>,
    /// Stop after this long (default: run until SIGINT / SIGTERM).
    #[arg(long, allow_hyphen_values = true, value_name = "DUR", value_parser = parse_interval)]
    pub duration: Option<Duration>,
    /// Size of the mbuf pool (default: enough for every RX ring, and for the frames of
    /// looped files; at least 384, one and a half times the per-lcore cache DPDK keeps). A
    /// net_pcap vdev with infinite_rx=1 keeps its whole file in mbufs and needs at least as
    /// many.
    #[arg(long, allow_hyphen_values = true, value_name = "N", default_value_t = 0, hide_default_value = true, value_parser = parse_mbufs)]
    pub mbufs: u32,
    /// Bytes of frame data per mbuf, headroom included (default: DPDK's, 2176). Larger
    /// frames are received in chains of mbufs, except by net_pcap with infinite_rx=1, which
    /// needs every frame to fit one: by default roceprobe sizes them for its file.
    #[arg(long, allow_hyphen_values = true, value_name = "BYTES", default_value_t = 0, hide_default_value = true, value_parser = parse_mbuf_size)]
    pub mbuf_size: u16,
    /// Stop when no frame has arrived for this long (for replaying files through a vdev).
    #[arg(long, allow_hyphen_values = true, value_name = "DUR", value_parser = parse_interval)]
    pub idle_exit: Option<Duration>,
    /// With --workers N: give every port N RX queues spread by the NIC's RSS on a symmetric
    /// hash of the IP pair, and let worker q poll queue q of every port (no software
    /// dispatch). For plain SPAN mirrors: the NIC hashes the outer header, which ERSPAN hides.
    /// A net_pcap vdev cannot hash: its queues are its rx_pcap files, each of which must
    /// then hold whole IP pairs.
    #[arg(long)]
    pub rss: bool,
    /// Receive (and dispatch) on the main lcore and analyse on other lcores, even with one
    /// worker: the capture thread then only moves frames, so the NIC's queue is drained at
    /// its own pace while the worker analyses. Give EAL an lcore per worker besides the
    /// main one (e.g. -l 0-1 for one worker).
    #[arg(long)]
    pub rx_core: bool,
    /// Time frames by the probe's clock when their burst is received (the frames of one
    /// poll, up to 32, share its time: a latency shorter than a burst's span reads as 0),
    /// ignoring NIC (and net_pcap file) timestamps: for NICs whose timestamps are not
    /// trusted. The NIC's timestamp offload is then left off.
    #[arg(long)]
    pub probe_clock: bool,
    /// The largest frame to receive whole, Ethernet header to FCS: sets each port's MTU and
    /// receives larger-than-mbuf frames in chains (scatter). The default takes 4 KiB RoCE
    /// frames inside ERSPAN and 9 KiB jumbo frames.
    #[arg(long, allow_hyphen_values = true, value_name = "BYTES", default_value_t = defaults::MAX_FRAME, value_parser = parse_max_frame)]
    pub max_frame: u32,
    /// Ethernet flow control on the probe's ports: off (a probe that falls behind drops,
    /// counted in imissed, rather than send PAUSE frames to the mirror port) or keep (as
    /// the driver set it).
    #[arg(long, value_name = "off|keep", default_value = "off", value_parser = parse_flow_control)]
    pub flow_control: crate::capture::dpdk::FlowControl,
    /// CPUs for the threads that do not touch packets (reports, CSV writer, Prometheus,
    /// dashboard), e.g. 1 or 4-7 or 2,3 (default: those this process may use that are not
    /// EAL lcores).
    #[arg(long, value_name = "LIST", value_parser = parse_cpu_list)]
    pub control_cpus: Option<CpuList>,
    /// DPDK EAL arguments, after `--` (e.g. -l 0 --no-huge -m 128 --no-pci --vdev ...).
    #[arg(last = true, value_name = "EAL ARGS")]
    pub eal_args: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// pcap or pcapng files of Ethernet frames.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

/// Parses a duration: a number (decimals allowed) and a unit ns, us, ms, s, m or h;
/// a bare number is seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().map_err(|_| format!("'{s}' is not a duration (e.g. 1s, 250ms, 100us)"))?;
    let scale = match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "" | "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("'{s}': unknown unit '{unit}' (use ns, us, ms, s, m or h)")),
    };
    let secs = value * scale;
    if !secs.is_finite() || secs > 1e9 {
        return Err(format!("'{s}' is too long (at most 1000000000s)"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A frame size the capture can reassemble: 64 bytes to 16 KiB.
fn parse_max_frame(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n) if (64..=16_384).contains(&n) => Ok(n),
        _ => Err(format!("'{s}' is not a frame size (64 to 16384 bytes)")),
    }
}

fn parse_flow_control(s: &str) -> Result<crate::capture::dpdk::FlowControl, String> {
    use crate::capture::dpdk::FlowControl;
    match s {
        "off" => Ok(FlowControl::Off),
        "keep" => Ok(FlowControl::Keep),
        _ => Err(format!("'{s}' is not a flow control setting (off or keep)")),
    }
}

/// CPUs by number, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

/// A CPU list as taskset and EAL's -l write it: 1, 4-7, 2,3,8-9.
pub fn parse_cpu_list(s: &str) -> Result<CpuList, String> {
    runtime::cpus::parse_list(s)
        .map(CpuList)
        .ok_or_else(|| format!("'{s}' is not a CPU list (e.g. 1, 4-7 or 2,3)"))
}

/// 0 (DPDK's default) or room for the headroom and a minimal frame.
fn parse_mbuf_size(s: &str) -> Result<u16, String> {
    match s.parse::<u16>() {
        Ok(n) if n == 0 || n >= 256 => Ok(n),
        _ => Err(format!("'{s}' is not an mbuf size (0 for the default, or 256 to 65535 bytes)")),
    }
}

/// At most 1000: they are kept per interval and compared per I/O.
fn parse_slow_ios(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n <= 1000 => Ok(n),
        _ => Err(format!("'{s}' is not a number of I/Os (0 to 1000)")),
    }
}

/// A label value an operator can read: 1 to 128 printable characters.
fn parse_probe_id(s: &str) -> Result<String, String> {
    if s.is_empty() || s.chars().count() > 128 || s.chars().any(char::is_control) {
        return Err(format!("'{}' is not a probe id (1 to 128 printable characters)", s.escape_debug()));
    }
    Ok(s.to_owned())
}

/// Bytes, with an optional K, M or G (powers of 1024); at least 1 KiB.
pub fn parse_size(s: &str) -> Result<u64, String> {
    parse_size_min(s, 1 << 10)
}

/// [`parse_size`], at least `min` bytes (the one bound each option names).
fn parse_size_min(s: &str, min: u64) -> Result<u64, String> {
    let (num, mult) = match s.char_indices().last() {
        Some((i, 'K' | 'k')) => (&s[..i], 1u64 << 10),
        Some((i, 'M' | 'm')) => (&s[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    let digits = !num.is_empty() && num.bytes().all(|b| b.is_ascii_digit());
    match num.parse::<u64>().ok().and_then(|n| n.checked_mul(mult)) {
        Some(b) if b >= min => Ok(b),
        Some(_) => Err(format!("'{s}' is too small (at least {})", size_text(min))),
        // A number, but more bytes than 64 bits count.
        None if digits => Err(format!("'{s}' is too large (at most {}G)", u64::MAX >> 30)),
        None => Err(format!("'{s}' is not a size (a number of bytes, optionally with K, M or G)")),
    }
}

/// `--csv-retain`: a size of at least 16 KiB (the reports' current files, eight or nine with
/// events.csv, need room).
fn parse_retain(s: &str) -> Result<u64, String> {
    parse_size_min(s, defaults::CSV_RETAIN_MIN_BYTES)
}

/// `--evidence-max-bytes`: at least 64 KiB.
fn parse_evidence_max_bytes(s: &str) -> Result<u64, String> {
    parse_size_min(s, 64 << 10)
}

fn parse_compress(s: &str) -> Result<Compression, String> {
    Compression::parse(s).ok_or_else(|| format!("'{s}' is not a compression (none, gzip or zstd)"))
}

fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_micros(1) {
        return Err(format!("'{s}' is too short (at least 1us)"));
    }
    Ok(d)
}

/// `--step-gap`: 1 µs to 10 s. A step is written only once the job has paused that long
/// after it, so a longer gap would hold every step until the end of the run.
fn parse_step_gap(s: &str) -> Result<Duration, String> {
    let too_long =
        || format!("'{s}' is too long (at most 10s: a step is written once its job has paused that long)");
    // A duration past any (its own message names the longest duration, not this option's).
    let d = parse_interval(s).map_err(|e| if e.contains("too long") { too_long() } else { e })?;
    if d > Duration::from_secs(10) {
        return Err(too_long());
    }
    Ok(d)
}

fn parse_window(s: &str) -> Result<Duration, String> {
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let d = parse_duration(s)?;
    // Below a nanosecond, but not 0: turning the window off takes saying so.
    if d.is_zero() && s.contains(|c: char| ('1'..='9').contains(&c)) {
        return Err(format!("'{s}' is too short (at least 1ns; 0 turns it off)"));
    }
    if d > Duration::from_secs(1) {
        return Err(format!("'{s}' is too long (at most 1s: frames are held that long)"));
    }
    Ok(d)
}

/// `--mbufs`: 0 (sized by the probe) or enough for DPDK's pool with its per-lcore cache.
fn parse_mbufs(s: &str) -> Result<u32, String> {
    let min = crate::capture::dpdk::MEMPOOL_MIN;
    match s.parse::<u32>() {
        Ok(n) if n == 0 || n >= min => Ok(n),
        Ok(_) => Err(format!(
            "'{s}' is too few (at least {min}: DPDK's pool must hold one and a half times the {} mbufs it caches per lcore; 0 sizes it by itself)",
            crate::capture::dpdk::MEMPOOL_CACHE
        )),
        Err(_) => Err(format!("'{s}' is not a number of mbufs")),
    }
}

fn parse_workers(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n @ 1..=128) => Ok(n),
        _ => Err(format!("'{s}' is not a number of workers from 1 to 128")),
    }
}

fn parse_mtu(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n @ (256 | 512 | 1024 | 2048 | 4096)) => Ok(n),
        _ => Err(format!("'{s}' is not a RoCE path MTU (256, 512, 1024, 2048 or 4096)")),
    }
}

fn parse_rule(s: &str) -> Result<Rule, String> {
    s.parse()
}

fn parse_min_packets(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n) if (1..=1 << 32).contains(&n) => Ok(n),
        Ok(n) => Err(format!("{n} is out of range 1-{}", 1u64 << 32)),
        Err(_) => Err(format!("'{s}' is not a whole number")),
    }
}

fn parse_table_bound(s: &str) -> Result<usize, String> {
    let n: usize = s.parse().map_err(|_| format!("'{s}' is not a whole number"))?;
    if n == 0 || n > 1 << 26 {
        return Err(format!("{n} is out of range 1-{}", 1usize << 26));
    }
    Ok(n)
}

/// Refuses bounds whose tables (allocated at start, one set per worker: `--max-flows`,
/// `--max-ios`, `--max-cm-requests`...) need more memory than the machine has: said before
/// any work starts, naming the option that takes the most, not as an allocation failure
/// after the outputs were opened.
fn check_memory(common: &CommonArgs) -> Result<()> {
    let cfg = pipeline_config(common, VantageMap::default(), Mode::Replay, Vec::new()).analyzer();
    let by = crate::track::Analyzer::allocated_bytes(&cfg);
    let workers = common.workers.max(1) as u64;
    let need = by.iter().map(|&(_, _, b)| b as u64).sum::<u64>() * workers;
    let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        let kib = m
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))?
            .trim()
            .strip_suffix("kB")?
            .trim()
            .parse::<u64>();
        kib.ok().map(|k| k * 1024)
    });
    if let Some(total) = total.filter(|&t| need > t) {
        let gib = |b: u64| format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64);
        let (option, value, most) = by[0];
        // One bound alone too large for the workers asked, or many workers at bounds that
        // each would fit.
        let cause = if most as u64 * workers > total {
            format!("{option} {value} takes {} of it a worker", gib(most as u64))
        } else if workers == 1 {
            format!("lower bounds ({option} {value} takes the most, {})", gib(most as u64))
        } else {
            format!(
                "fewer --workers, or lower bounds ({option} {value} takes the most, {} a worker)",
                gib(most as u64)
            )
        };
        bail!(
            "the tables of {workers} worker(s) need {} of memory (as allocated: what they take full), more than this machine's {}: {cause}",
            gib(need),
            gib(total),
        );
    }
    Ok(())
}

/// An error and its causes on one line, as the command line tells them.
fn one_line(e: &anyhow::Error) -> String {
    format!("{e:#}").replace('\n', " ")
}

/// Runs the command line; returns the process exit code.
pub fn main_with_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> i32 {
    crate::capture::dpdk::return_large_blocks();
    let args: Vec<std::ffi::OsString> = args.into_iter().collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return 0;
            }
            // No subcommand: clap would show the help, whose first paragraph says what the
            // tool is, not what is wrong.
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                crate::note!(
                    "roceprobe: error: a subcommand is needed: replay, live, plot or evidence (see roceprobe --help)"
                );
                return 2;
            }
            // clap names the problem in its first paragraph (a missing argument on the lines
            // after), then adds tips and usage: the first paragraph, on one line.
            let text = e.render().to_string();
            let first: Vec<&str> = text.lines().map(str::trim).take_while(|l| !l.is_empty()).collect();
            let first = if first.is_empty() { "error: bad arguments".to_owned() } else { first.join(" ") };
            // The subcommand's own help names its options; `live`'s EAL arguments, which
            // clap takes for unknown options of its own, go after `--`.
            let sub = args.iter().skip(1).filter_map(|a| a.to_str()).find(|a| !a.starts_with('-'));
            let help = match sub {
                Some(sub @ ("replay" | "live" | "plot" | "evidence")) => format!("roceprobe {sub} --help"),
                _ => "roceprobe --help".to_owned(),
            };
            // An option given without the one it refines: named with it (clap names only the
            // one missing).
            if e.kind() == ErrorKind::MissingRequiredArgument {
                if let Some((given, needs)) = needs_another(&args) {
                    crate::note!("roceprobe: error: {given} needs {needs} (see {help})");
                    return 2;
                }
            }
            let eal = sub == Some("live")
                && e.kind() == ErrorKind::UnknownArgument
                && !args.iter().any(|a| a == "--");
            let tip = if eal { "; DPDK EAL arguments go after --" } else { "" };
            crate::note!("roceprobe: {first} (see {help}{tip})");
            return 2;
        }
    };
    match run(cli) {
        Ok(()) => 0,
        Err(e) => {
            crate::note!("roceprobe: error: {}", one_line(&e));
            1
        }
    }
}

/// The first option given that refines another option not given: the evidence's bounds
/// without `--evidence-dir`, the CSV files' rotation, compression and retention without
/// `--csv-dir`, the Prometheus labels and bound without `--prometheus`.
fn needs_another(args: &[std::ffi::OsString]) -> Option<(String, &'static str)> {
    let given: Vec<&str> =
        args.iter().filter_map(|a| a.to_str()).map(|a| a.split('=').next().unwrap_or(a)).collect();
    let has = |o: &str| given.contains(&o);
    given.iter().find_map(|&a| {
        let needs = match a {
            "--probe-id" | "--prometheus-max-flows" => "--prometheus",
            _ if a.starts_with("--evidence-") && a != "--evidence-dir" => "--evidence-dir",
            _ if a.starts_with("--csv-") && a != "--csv-dir" => "--csv-dir",
            _ => return None,
        };
        (!has(needs)).then(|| (a.to_owned(), needs))
    })
}

/// Set by SIGINT / SIGTERM / SIGHUP, from the first call on: made before EAL and the ports
/// start, so that a signal while they do ends the run as one during it does (with its
/// summary and a zero exit), not the process. SIGHUP is a terminal that went away (an SSH
/// connection that dropped under the dashboard, its tmux session closed): the run ends and
/// writes everything, as on SIGTERM (run it under nohup or systemd to keep it going).
fn stop_flag() -> Result<Arc<AtomicBool>> {
    static STOP: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();
    if let Some(stop) = STOP.get() {
        return Ok(Arc::clone(stop));
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    signal_hook::flag::register(signal_hook::consts::SIGHUP, Arc::clone(hung_up()))?;
    crate::capture::pcap::stop_streams_with(Arc::clone(&stop));
    Ok(Arc::clone(STOP.get_or_init(|| stop)))
}

/// Set by SIGHUP: the terminal is gone. The dashboard's thread is then not waited for: its
/// terminal library polls a terminal that went away without end (and without returning),
/// and there is nothing left to restore.
fn hung_up() -> &'static Arc<AtomicBool> {
    static HUNG_UP: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();
    HUNG_UP.get_or_init(|| Arc::new(AtomicBool::new(false)))
}

/// Where the results go, opened (and checked) before any work starts.
struct Outputs {
    sink: Option<SummarySink>,
    csv: Option<CsvWriter>,
    prometheus: Option<std::net::TcpListener>,
}

impl Outputs {
    /// Checks the output options, creating nothing and emptying nothing: done first, so
    /// that a run refused for any of its options leaves an earlier run's outputs as they
    /// were. `inputs`: the files the run reads. Takes the Prometheus port (which changes no
    /// file), handed to [`Outputs::open`].
    fn check(common: &CommonArgs, inputs: &[PathBuf]) -> Result<Option<std::net::TcpListener>> {
        if common.dashboard && !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            bail!("--dashboard needs a terminal, and stdout is not one");
        }
        crate::metrics::steps::check_job_rules(&common.jobs).map_err(anyhow::Error::msg)?;
        let names: std::collections::BTreeSet<&str> = common.jobs.iter().map(|r| r.name.as_str()).collect();
        if names.len() > common.max_jobs {
            bail!(
                "--job names {} jobs, more than --max-jobs {}: raise --max-jobs to at least {}",
                names.len(),
                common.max_jobs,
                names.len()
            );
        }
        csv_rotation(common)?;
        let place = |option: &str, path: &Path, dir: bool, what: &str| {
            // A folder that is there already is used, not made.
            let what = if dir && path.is_dir() { "use" } else { what };
            can_make(path, dir)
                .map_err(|why| anyhow::anyhow!("{option}: cannot {what} {} ({why})", path.display()))
        };
        if let Some(d) = &common.csv_dir {
            place("--csv-dir", d, true, "create")?;
            crate::report::csv::check_dir(d)?;
        }
        if let Some(d) = &common.evidence_dir {
            place("--evidence-dir", d, true, "create")?;
        }
        if let Some(p) = common.summary.as_deref().filter(|p| p.as_os_str() != "-") {
            place("--summary", p, false, "write")?;
        }
        check_clashes(common, inputs)?;
        common.prometheus.as_deref().map(prometheus::bind).transpose()
    }

    /// Opens them once the inputs are checked too: the evidence folder, the summary
    /// (written in its place at the end) and the CSV files, which replace an earlier run's.
    /// `live`: an earlier run's current CSV files are kept as rotated files (a probe
    /// restarted loses none of its rows), where a replay replaces them.
    fn open(common: &CommonArgs, prometheus: Option<std::net::TcpListener>, live: bool) -> Result<Self> {
        if let Some(e) = evidence_settings(common) {
            e.output.check()?;
        }
        let sink = common.summary.as_deref().map(SummarySink::open).transpose()?;
        let csv = common
            .csv_dir
            .as_deref()
            .map(|d| {
                CsvWriter::create_with_events(d, csv_rotation(common)?, common.evidence_dir.is_some(), live)
            })
            .transpose()?;
        Ok(Self { sink, csv, prometheus })
    }
}

/// Whether a file (or, with `dir`, a folder) can be made at `path`, or why not, checked
/// without making it: the nearest folder on the way that exists must be a folder this process can write in
/// (a file made there and removed). A path that is neither a file nor a folder
/// (`/dev/stdout`) is left to be opened.
fn can_make(path: &Path, dir: bool) -> Result<(), String> {
    let writable = |d: &Path| {
        crate::report::can_write_in(d).map_err(|e| format!("cannot write in {}: {e}", d.display()))
    };
    if let Ok(m) = std::fs::metadata(path) {
        return match (dir, m.is_dir(), m.is_file()) {
            (true, true, _) => writable(path),
            (true, false, _) => Err("it is there and is not a directory".to_owned()),
            (false, true, _) => Err("it is a directory".to_owned()),
            (false, false, false) => Ok(()),
            (false, false, true) => {
                writable(path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")))
            }
        };
    }
    let mut up = path.parent();
    while let Some(p) = up {
        let p = if p.as_os_str().is_empty() { Path::new(".") } else { p };
        if let Ok(m) = std::fs::metadata(p) {
            return match m.is_dir() {
                true => writable(p),
                false => Err(format!("{} is not a directory", p.display())),
            };
        }
        // "." has the parent "", which is "." again.
        up = p.parent().filter(|_| p != Path::new("."));
    }
    Err("no folder above it can be read".to_owned())
}

/// `path` made absolute, with every part of it that exists resolved (links, `..` after
/// them) and the rest as written: two paths to one place compare equal whether or not it
/// exists yet.
fn resolved(path: &Path) -> PathBuf {
    use std::path::Component;
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            // `out` has its links followed where it exists: `..` goes up from where they
            // point, as the system's does.
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
        if let Ok(r) = out.canonicalize() {
            out = r;
        }
    }
    out
}

/// The folder `path` names an entry of (resolved), and the entry's name as given (a link
/// there is the entry, not where it points: writing the entry's name writes through it).
fn place_of(path: &Path) -> (PathBuf, Option<&str>) {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    (resolved(parent), path.file_name().and_then(|n| n.to_str()))
}

/// Refuses a run whose outputs would land on something it reads or writes (the places
/// need not exist yet): `--summary` on an input file, on the `--csv-dir` or
/// `--evidence-dir` folder, on a CSV report or an evidence file; an input file that is a
/// CSV report (the run empties it) or an evidence file (the run may remove it to keep
/// within `--evidence-max-bytes`).
fn check_clashes(common: &CommonArgs, inputs: &[PathBuf]) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let csv = common.csv_dir.as_deref().map(|d| (resolved(d), d));
    let evidence = common.evidence_dir.as_deref().map(|d| (resolved(d), d));
    // What the run makes in its folders: the CSV reports, the evidence files.
    let made = |path: &Path| -> Option<String> {
        let (folder, name) = place_of(path);
        let name = name?;
        match (&csv, &evidence) {
            (Some((d, given)), _) if *d == folder && crate::report::csv::is_report_file(name) => {
                Some(format!("a file --csv-dir {} writes", given.display()))
            }
            (_, Some((d, given))) if *d == folder && crate::report::evidence::is_evidence_file(name) => Some(
                format!("named as the evidence files --evidence-dir {} keeps and removes", given.display()),
            ),
            _ => None,
        }
    };
    // A path as given (a link there is written through) and where it leads.
    let places = |p: &Path| [Some(p.to_path_buf()), p.canonicalize().ok()].into_iter().flatten();
    for input in inputs {
        if let Some(what) = places(input).find_map(|p| made(&p)) {
            bail!("the input file {} is {what}: the run would write over it", input.display());
        }
    }
    let Some(path) = common.summary.as_deref().filter(|p| p.as_os_str() != "-") else { return Ok(()) };
    if path.as_os_str().as_encoded_bytes().ends_with(b"/") {
        bail!("--summary {} names a folder: give a file", path.display());
    }
    let at = resolved(path);
    for (folder, option) in [(&csv, "--csv-dir"), (&evidence, "--evidence-dir")] {
        if folder.as_ref().is_some_and(|(d, _)| *d == at) {
            bail!("--summary {} is the folder {option} writes in: give a file", path.display());
        }
    }
    let same_file = |p: &PathBuf| match (std::fs::metadata(path), std::fs::metadata(p)) {
        (Ok(s), Ok(m)) => (m.dev(), m.ino()) == (s.dev(), s.ino()),
        _ => resolved(p) == at,
    };
    if let Some(input) = inputs.iter().find(|p| same_file(p)) {
        bail!(
            "--summary {} is the input file {}: the run would write over it",
            path.display(),
            input.display()
        );
    }
    if let Some(what) = places(path).find_map(|p| made(&p)) {
        bail!("--summary {} is {what}: give the summary another name", path.display());
    }
    Ok(())
}

/// What becomes of the CSV files as they grow (checked before any work starts).
fn csv_rotation(common: &CommonArgs) -> Result<Rotation> {
    let retain = common.csv_retain;
    // Every report's current file must fit: eight, nine with events.csv (--evidence-dir).
    let (reports, part) = if common.evidence_dir.is_some() { (9, "a ninth") } else { (8, "an eighth") };
    if let Some(size) = common.csv_rotate_size.filter(|s| *s > retain / reports) {
        bail!(
            "--csv-rotate-size {} is larger than {part} of --csv-retain {} (the {reports} reports' current files must fit in it): give a smaller --csv-rotate-size or a larger --csv-retain",
            size_text(size),
            size_text(retain)
        );
    }
    Ok(Rotation {
        max_bytes: Some(common.csv_rotate_size.unwrap_or(defaults::csv_rotate_size(retain))),
        max_age_ns: Some(common.csv_rotate_age.as_nanos() as u64),
        compression: common.csv_compress,
        retain_bytes: Some(retain),
    })
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Plot(a) => {
            let plots = crate::report::plot::plot(&a.csv_dir, &a.out)?;
            print_out(&plots.iter().map(|p| format!("{}\n", p.display())).collect::<String>())
        }
        Command::Evidence(a) => {
            if !a.dir.exists() {
                bail!("evidence: {} does not exist", a.dir.display());
            }
            if !a.dir.is_dir() {
                bail!("evidence: {} is not a directory", a.dir.display());
            }
            let (table, unreadable) = crate::report::evidence::list(&a.dir)?;
            print_out(&table)?;
            // Listed all the same; the status tells a script that some could not be read.
            if unreadable > 0 {
                bail!(
                    "evidence: {unreadable} file(s) in {} could not be read whole (marked above)",
                    a.dir.display()
                );
            }
            Ok(())
        }
        Command::Replay(a) => replay(a),
        Command::Live(a) => live(a),
    }
}

/// How the run's source behaves.
enum Mode {
    /// Files: workers wait for the stats side, so that nothing is lost.
    Replay,
    /// DPDK ports: nothing ever waits for reports (what finds no room is dropped and
    /// counted); workers are pinned to these CPUs in turn, the threads that do not touch
    /// packets to `control_cpus` (none: where they start).
    Live { worker_cpus: Vec<usize>, control_cpus: Vec<usize> },
}

fn replay(a: ReplayArgs) -> Result<()> {
    let prometheus = Outputs::check(&a.common, &a.files)?;
    check_memory(&a.common)?;
    // Before the inputs are opened: a pipe's first bytes may be long in coming, and a signal
    // meanwhile ends the run as one during it does.
    stop_flag()?;
    // The checks of the names first: opening reads ahead into every file.
    let ids: Vec<u16> = (0..a.files.len() as u16).collect();
    let vantages = VantageMap::new(&a.common.vantages, SourceKind::File, &ids)?;
    check_distinct_inputs(&a.files, &vantages)?;
    let mut replay = Replay::open(&a.files)?;
    let out = Outputs::open(&a.common, prometheus, false)?;
    let times = replay.time_sources();
    execute(&a.common, vantages, out, Mode::Replay, times, |cfg, stop, reports| {
        runtime::run(&mut replay, cfg, stop, reports)
    })
}

/// Refuses a capture given twice (by path or through a link) for one vantage: its packets
/// would be counted twice, every request a retransmission of itself. The same file as two
/// vantages (`--vantage storage=file:1`) is two taps that saw the same packets, and stays.
fn check_distinct_inputs(files: &[PathBuf], vantages: &VantageMap) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let mut seen: Vec<((u64, u64), usize)> = Vec::with_capacity(files.len());
    for (i, f) in files.iter().enumerate() {
        let Some(m) = std::fs::metadata(f).ok().filter(|m| m.is_file()) else { continue };
        let vantage = |k: usize| vantages.resolve(k as u16, None, None);
        if let Some(&(_, first)) =
            seen.iter().find(|(id, k)| *id == (m.dev(), m.ino()) && vantage(*k) == vantage(i))
        {
            if files[first] == *f {
                bail!("{} is given twice: its packets would be counted twice", f.display());
            }
            bail!(
                "{} and {} are the same file: its packets would be counted twice",
                files[first].display(),
                f.display()
            );
        }
        seen.push(((m.dev(), m.ino()), i));
    }
    Ok(())
}

/// The combinations of `live` options that cannot work, refused before DPDK starts.
fn check_live_options(a: &LiveArgs) -> Result<()> {
    VantageMap::check_kind(&a.common.vantages, SourceKind::Port)?;
    if a.rss && a.rx_core {
        bail!("--rx-core and --rss cannot go together: with --rss every worker receives its own queue");
    }
    if a.rss && a.common.workers < 2 {
        bail!("--rss needs --workers 2 or more (one RX queue per worker)");
    }
    if a.rss && a.common.vantages.iter().any(|r| matches!(r.selector, Selector::Erspan(_))) {
        bail!("--rss cannot see inside ERSPAN (the NIC hashes the outer header): drop --rss for software dispatch");
    }
    if let Some((_, p)) = a.ports.iter().enumerate().find(|(i, p)| a.ports[..*i].contains(p)) {
        bail!("--port {p} is given twice: each port is captured from once");
    }
    // An lcore for the capture thread and one per worker, of DPDK's 128 at most.
    let lcores = if a.rss || a.rx_core || a.common.workers > 1 { a.common.workers + 1 } else { 1 };
    if lcores > MAX_LCORES {
        bail!(
            "--workers {} needs {lcores} EAL lcores (the capture thread's and one per worker): DPDK runs at most {MAX_LCORES}, so live takes --workers {} at most",
            a.common.workers,
            MAX_LCORES - 1
        );
    }
    check_vdevs(&a.eal_args, &a.common.vantages)
}

/// DPDK's most lcores (`RTE_MAX_LCORE` of Debian's build).
const MAX_LCORES: usize = 128;

/// Refuses two vdevs of one name (EAL would make the first and drop the second without a
/// word) and, unless `--vantage port:N` rules tell the ports apart, one capture file read
/// by two net_pcap vdevs: its packets would be counted twice (every request a
/// retransmission of itself), as replay refuses a file given twice. (One vdev reading a
/// file on several queues, for `--rss`, is what it is asked to do.)
fn check_vdevs(eal_args: &[String], vantages: &[Rule]) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let names: Vec<&str> =
        crate::capture::dpdk::vdev_specs(eal_args).map(|s| s.split(',').next().unwrap_or_default()).collect();
    if let Some((_, n)) = names.iter().enumerate().find(|(i, n)| names[..*i].contains(n)) {
        bail!("--vdev {n} is given twice: DPDK would make the first and leave the second out");
    }
    if vantages.iter().any(|r| matches!(r.selector, Selector::Port(_))) {
        return Ok(());
    }
    let mut seen: Vec<((u64, u64), &str, &str)> = Vec::new();
    for v in crate::capture::dpdk::pcap_vdevs(eal_args) {
        for f in &v.files {
            let Some(m) = std::fs::metadata(f).ok().filter(|m| m.is_file()) else { continue };
            let id = (m.dev(), m.ino());
            if let Some((_, first, vdev)) = seen.iter().find(|(i, _, vdev)| *i == id && *vdev != v.name) {
                bail!(
                    "{f} is read by --vdev {vdev} ({first}) and --vdev {}: its packets would be counted twice (for two taps that saw the same packets, map the ports to two vantages, e.g. --vantage storage=port:1)",
                    v.name
                );
            }
            seen.push((id, f, v.name));
        }
    }
    Ok(())
}

fn live(a: LiveArgs) -> Result<()> {
    // The files net_pcap vdevs read are inputs as replay's are: no output may be one.
    let prometheus = Outputs::check(&a.common, &crate::capture::dpdk::vdev_files(&a.eal_args))?;
    check_live_options(&a)?;
    check_memory(&a.common)?;
    stop_flag()?;
    let looped = crate::capture::dpdk::looped_vdevs(&a.eal_args, a.mbuf_size)?;
    // A looped net_pcap keeps its file's frames in the pool, and receives into more. (With
    // --port, the vdevs left out are counted too: the default pool is then larger than
    // needed, and a --mbufs given is left to DPDK to judge.)
    let least = looped.frames + crate::capture::BURST as u64;
    if let (1.., Some(file), true) = (a.mbufs, &looped.file, a.ports.is_empty()) {
        if u64::from(a.mbufs) < least {
            let files =
                if looped.files > 1 { format!("{file} and the other looped files") } else { file.clone() };
            bail!(
                "--mbufs {} is too small: net_pcap with infinite_rx=1 keeps every frame of its file in an mbuf for the whole run ({} frames in {files}); use --mbufs {least} or more, or leave --mbufs out",
                a.mbufs,
                looped.frames,
            );
        }
    }
    let Ok(looped_frames) = u32::try_from(least) else {
        bail!("net_pcap with infinite_rx=1: {} frames are more than one mbuf pool can hold", looped.frames);
    };
    let mbuf_size = looped.mbuf_size;
    if let Some(note) = &looped.note {
        crate::note!("{note}");
    }
    let queues = if a.rss { a.common.workers as u16 } else { 1 };
    // The CPUs the process may use, before EAL pins this thread to its main lcore.
    let allowed = crate::capture::dpdk::thread_cpus().unwrap_or_default();
    // EAL first (it pins this thread to the main lcore), to check its lcores against the
    // workers before any port starts.
    crate::capture::dpdk::eal_init(&a.eal_args)?;
    let cpus = crate::capture::dpdk::eal_worker_cpus();
    // Every worker (and the analysis with --rx-core) on an lcore of its own.
    let needed = if a.rss || a.rx_core || a.common.workers > 1 { a.common.workers } else { 0 };
    if cpus.len() < needed {
        // Named as given: `--rx-core` alone runs one worker without the user saying so.
        let mode = if a.rx_core {
            "--rx-core"
        } else if a.rss {
            "--rss"
        } else {
            ""
        };
        let asked = match (a.common.workers, mode) {
            (1, m) if !m.is_empty() => m.to_owned(),
            (w, "") => format!("--workers {w}"),
            (w, m) => format!("--workers {w} {m}"),
        };
        bail!(
            "{asked} needs {} EAL lcores (the capture thread's and one per worker), EAL was given {}: e.g. -l 0-{needed}, or --lcores to map several onto one CPU",
            needed + 1,
            cpus.len() + 1
        );
    }
    // The capture thread's CPU, where EAL pinned it (its main lcore).
    let main = crate::capture::dpdk::thread_cpus().unwrap_or_default();
    let control = match a.control_cpus.as_ref().map(|c| &c.0) {
        Some(given) => {
            if let Some(c) = given.iter().find(|c| cpus.contains(c) || main == [**c]) {
                bail!("--control-cpus {c} is an EAL lcore's CPU: the control threads would take time from capture or analysis");
            }
            if let Some(c) = given.iter().find(|c| !allowed.contains(c)) {
                bail!("--control-cpus {c} is not a CPU this process may use (allowed: {allowed:?})");
            }
            given.clone()
        }
        None => runtime::control_cpus(&allowed, &cpus),
    };
    // Frames handed from the receiving lcore to workers in another last-level cache cost
    // several times as much: told, not refused (the lcores are the operator's to choose).
    let handed_over = a.rx_core || (a.common.workers > 1 && !a.rss);
    if let (true, &[main]) = (handed_over, main.as_slice()) {
        // Where the runtime will pin each worker (`Mode::Live`'s `worker_cpus` below).
        let workers: Vec<usize> =
            (0..a.common.workers).filter_map(|i| runtime::given_worker_cpu(&cpus, i)).collect();
        let root = std::path::Path::new(runtime::cpus::SYSFS_CPUS);
        if let Some(w) = runtime::cpus::split_from_receiving(root, main, &workers) {
            crate::note!("roceprobe: warning: {w}");
        }
    }
    let setup = crate::capture::dpdk::PortSetup {
        max_frame: a.max_frame,
        flow_control: a.flow_control,
        probe_clock: a.probe_clock,
        looped_frames: if looped.frames > 0 { looped_frames } else { 0 },
    };
    // The ports the capture takes: a --vantage rule naming another is refused before any
    // port starts. No port at all is the capture's to tell, with DPDK's own diagnosis (it
    // refuses to start without one).
    let ids = crate::capture::dpdk::ports_to_capture(&a.ports);
    let vantages =
        (!ids.is_empty()).then(|| VantageMap::new(&a.common.vantages, SourceKind::Port, &ids)).transpose()?;
    let mut cap = DpdkCapture::start(
        &a.eal_args,
        &a.ports,
        StopWhen { idle: a.idle_exit, duration: a.duration },
        a.mbufs,
        mbuf_size,
        queues,
        setup,
    )?;
    let vantages = vantages.unwrap_or_default();
    let out = Outputs::open(&a.common, prometheus, true)?;
    if a.duration.is_none() && a.idle_exit.is_none() && !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        // Fine for a service; noted so a script that forgot a stop condition is not a mystery.
        crate::note!("roceprobe: capturing until SIGINT / SIGTERM");
    }
    let times = cap.expected_time_sources();
    let mode = Mode::Live { worker_cpus: cpus, control_cpus: control.clone() };
    let r = execute(&a.common, vantages, out, mode, times, |cfg, stop, reports| {
        let cfg = PipelineConfig { dedicated_rx: a.rx_core, control_cpus: control, ..cfg.clone() };
        if a.rss {
            let r = runtime::run_rss(&mut cap, &cfg, stop, reports);
            // The NIC hashed the outer header of mirrored frames: what needs a QP's two
            // directions or two vantages on one worker may have been split.
            if let Ok(n @ 1..) = r.as_ref().map(|r| r.totals.counters.erspan) {
                crate::note!(
                    "roceprobe: warning: --rss: {n} RoCE packets came through ERSPAN, whose outer header the NIC hashed: a QP's two directions, and its two vantages, may have gone to different workers (pairing, latencies and the I/O joins then incomplete); capture ERSPAN without --rss (software dispatch reads the inner header)"
                );
            }
            r
        } else {
            runtime::run(&mut cap, &cfg, stop, reports)
        }
    });
    drop(cap);
    crate::capture::dpdk::eal_cleanup();
    r
}

/// The data plane's settings from the options.
fn pipeline_config(
    common: &CommonArgs,
    vantages: VantageMap,
    mode: Mode,
    source_times: Vec<&'static str>,
) -> PipelineConfig {
    let (never_wait, worker_cpus) = match mode {
        Mode::Replay => (false, Vec::new()),
        Mode::Live { worker_cpus, .. } => (true, worker_cpus),
    };
    PipelineConfig {
        interval: common.interval,
        max_flows: common.max_flows,
        vantages,
        check_icrc: common.check_icrc,
        flow_idle: common.flow_idle,
        min_transmission_packets: common.min_transmission_packets,
        flow_expire: common.flow_expire,
        mtu: common.mtu,
        io_timeout: common.io_timeout,
        reorder_window: common.reorder_window,
        duplicate_window: common.duplicate_window,
        max_ios: common.max_ios,
        max_latency_series: common.max_latency_series,
        max_pending_commands: common.max_pending_commands,
        max_cm_requests: common.max_cm_requests,
        max_announced_flows: common.max_announced_flows,
        slow_ios: common.slow_ios,
        jobs: common.jobs.clone(),
        step_gap: common.step_gap,
        max_jobs: common.max_jobs,
        workers: common.workers,
        dedicated_rx: false,
        worker_cpus,
        control_cpus: Vec::new(),
        never_wait,
        source_times,
        evidence: evidence_settings(common),
    }
}

/// `--evidence-*`, when `--evidence-dir` turns it on.
fn evidence_settings(common: &CommonArgs) -> Option<EvidenceSettings> {
    let dir = common.evidence_dir.clone()?;
    Some(EvidenceSettings {
        track: EvidenceConfig {
            before: common.evidence_before,
            after: common.evidence_after,
            snaplen: common.evidence_snaplen,
            slow_io_ns: common.evidence_slow_io.as_nanos() as u64,
            max_per_minute: common.evidence_max_per_minute,
            burst_gap_ns: common.flow_idle.as_nanos() as u64,
            wait_for_records: false,
        },
        output: EvidenceOutput { dir, max_bytes: common.evidence_max_bytes },
    })
}

fn parse_evidence_before(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n) if n <= 256 => Ok(n),
        _ => Err(format!("'{s}' is not a number of packets (0 to 256)")),
    }
}

/// A number of packets (1 to 512), or a duration.
fn parse_evidence_after(s: &str) -> Result<crate::track::evidence::After, String> {
    use crate::track::evidence::After;
    if s.chars().all(|c| c.is_ascii_digit()) {
        return match s.parse::<u32>() {
            Ok(n) if (1..=512).contains(&n) => Ok(After::Packets(n)),
            _ => Err(format!("'{s}' is not a number of packets (1 to 512) or a duration (e.g. 2ms)")),
        };
    }
    // As with packets, at least something after the event: `0s` would keep none.
    match parse_duration(s)? {
        d if d.is_zero() => {
            Err(format!("'{s}' keeps nothing after the event (a duration above 0, at most 10s)"))
        }
        d if d <= Duration::from_secs(10) => Ok(After::Time(d.as_nanos() as u64)),
        _ => Err(format!("'{s}' is too long (at most 10s)")),
    }
}

fn parse_evidence_snaplen(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n) if (64..=9216).contains(&n) => Ok(n),
        _ => Err(format!("'{s}' is not a snap length (64 to 9216 bytes)")),
    }
}

/// The dashboard's channel of views (the sending end, and the receiving end through which
/// a newer view replaces one not shown yet) and its UI thread.
type Screen =
    (crossbeam_channel::Sender<View>, crossbeam_channel::Receiver<View>, std::thread::JoinHandle<Result<()>>);

/// The outputs that follow the run while it lasts: the Prometheus page (served from its
/// own thread) and the dashboard (drawn by its own thread).
struct LiveOutputs {
    exporter: Option<Exporter>,
    ui: Option<Screen>,
}

impl LiveOutputs {
    fn start(
        common: &CommonArgs,
        listener: Option<std::net::TcpListener>,
        stop: &Arc<AtomicBool>,
    ) -> Result<Self> {
        let exporter = match listener {
            Some(l) => {
                let e = Exporter {
                    page: Page::default(),
                    probe: common.probe_id.clone().unwrap_or_else(prometheus::host_name),
                    max_flows: common.prometheus_max_flows,
                };
                prometheus::serve(l, e.page.clone())?;
                Some(e)
            }
            None => None,
        };
        let ui = if common.dashboard {
            let terminal = dashboard::open_terminal()?;
            let (tx, rx) = crossbeam_channel::bounded::<View>(1);
            let (stop_ui, views) = (Arc::clone(stop), rx.clone());
            let h = std::thread::Builder::new()
                .name("roceprobe-ui".into())
                .spawn(move || dashboard::run_ui(terminal, views, stop_ui))
                .inspect_err(|_| dashboard::close_terminal())?;
            Some((tx, rx, h))
        } else {
            None
        };
        Ok(Self { exporter, ui })
    }

    /// Their subscriptions to what the stats side publishes every interval.
    fn subscribers(&self) -> Vec<Box<dyn Subscriber>> {
        let mut live: Vec<Box<dyn Subscriber>> = Vec::new();
        if let Some(e) = &self.exporter {
            live.push(Box::new(e.clone()));
        }
        if let Some((tx, rx, _)) = &self.ui {
            live.push(Box::new(dashboard::Feed::new(tx.clone(), rx.clone())));
        }
        live
    }

    /// Shows the run's final numbers: the last Prometheus page, and the dashboard's final
    /// view (rates averaged over the run), which stays until the user quits it. The summary
    /// file is written before that wait, since nothing but the screen waits for `q`, and
    /// before the final view shows: "finished" on the screen means the file is there.
    fn finish(self, summary: &mut Result<Final>, sink: &mut Option<SummarySink>) -> Result<()> {
        if let (Some(e), Ok(f)) = (&self.exporter, &mut *summary) {
            e.publish(&mut f.summary);
        }
        let Some((tx, rx, h)) = self.ui else { return Ok(()) };
        drop(rx);
        let mut written = Ok(());
        let gone = || hung_up().load(std::sync::atomic::Ordering::Relaxed);
        if let Ok(f) = &*summary {
            if let Some(SummarySink::File(..)) = sink {
                written = sink.take().map_or(Ok(()), |s| s.write(&f.summary));
            }
            // No screen takes a view after a hangup: it would wait for room for ever.
            let mut view = ViewBuilder::over_run(f.first_ts_ns).build(f.summary.clone(), f.last_ts_ns, true);
            while let Err(crossbeam_channel::SendTimeoutError::Timeout(v)) =
                tx.send_timeout(view, std::time::Duration::from_millis(20))
            {
                if gone() {
                    break;
                }
                view = v;
            }
        }
        drop(tx);
        // The screen ends with `q` (a finished replay's waits for it) or a signal; a hangup,
        // now or while it waits, leaves it: everything is written, and the process ends
        // without the screen's thread.
        while !h.is_finished() {
            if gone() {
                crate::release_notes();
                return written;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // The terminal is restored before any error is told.
        let closed = h.join().map_err(|_| anyhow::anyhow!("the dashboard thread panicked"));
        crate::release_notes();
        written?;
        closed?
    }
}

/// The run's summary and the packet times it spans.
struct Final {
    summary: Summary,
    first_ts_ns: Option<u64>,
    last_ts_ns: Option<u64>,
}

fn final_summary(result: runtime::RunResult, exporter: Option<&Exporter>) -> Final {
    let mut summary = Summary::build(&result.totals, &result.sources, &result.ios);
    summary.set_time_sources(&result.time_use, &result.time_sources);
    summary.csv_output = result.csv;
    summary.prometheus = exporter.map(|e| e.page.scrapes());
    Final { summary, first_ts_ns: result.totals.first_ts_ns, last_ts_ns: result.totals.last_ts_ns }
}

/// The summary, then the per-flow table (on stderr when the summary JSON goes to stdout):
/// the summary first, so that a table that cannot be printed (a closed pipe, a full disk)
/// takes nothing measured with it, and the table whether or not the summary could be
/// written. The first failure is the error.
fn print_and_write(common: &CommonArgs, summary: &Summary, sink: Option<SummarySink>) -> Result<()> {
    let to_stdout = matches!(sink, Some(SummarySink::Stdout));
    let written = sink.map_or(Ok(()), |s| s.write(summary));
    let printed = if common.quiet {
        Ok(())
    } else {
        let t = table::render(summary, common.top);
        if to_stdout {
            // The table goes to standard error when the summary takes standard output; lost
            // there if standard error cannot be written (see `note!`).
            let _ = std::io::Write::write_all(&mut std::io::stderr(), t.as_bytes());
            Ok(())
        } else {
            print_out(&t)
        }
    };
    written.and(printed)
}

/// Writes `text` to standard output. A reader that went away (`| head`) ends the output
/// quietly, as it would any Unix tool's; another failure is an error that says so, never a
/// panic.
fn print_out(text: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing to standard output"),
    }
}

/// A replay is over in moments: its final metrics stay up to be scraped until SIGINT / SIGTERM.
fn serve_final_metrics(at: &str, stop: &AtomicBool) {
    crate::note!("roceprobe: serving the final metrics at http://{at}/metrics until SIGINT / SIGTERM");
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Runs the pipeline (`run`) with the options given, then prints and writes the summary.
fn execute(
    common: &CommonArgs,
    vantages: VantageMap,
    out: Outputs,
    mode: Mode,
    source_times: Vec<&'static str>,
    run: impl FnOnce(&PipelineConfig, &AtomicBool, Reports) -> Result<runtime::RunResult>,
) -> Result<()> {
    let replaying = matches!(mode, Mode::Replay);
    // Steps are made of transmissions: with transmissions that span the pauses between
    // steps, a job's steps run together (a review's run with --flow-idle 10ms: one step).
    if common.flow_idle >= common.step_gap {
        crate::note!(
            "roceprobe: warning: --flow-idle {:?} is not shorter than --step-gap {:?}: a transmission spans the pauses between a job's steps, which run together",
            common.flow_idle,
            common.step_gap
        );
    }
    let stop = stop_flag()?;
    let Outputs { mut sink, csv, prometheus: listener } = out;
    if let Some(w) = &csv {
        crate::note!("{}", w.describe());
    }
    // Where the metrics are served: with port 0 the system chose the port, told here.
    let served = listener.as_ref().and_then(|l| l.local_addr().ok());
    if let (Some(addr), Some(given)) = (served, &common.prometheus) {
        if addr.port() != 0 && given.ends_with(":0") {
            crate::note!("roceprobe: --prometheus {given}: serving the metrics at http://{addr}/metrics");
        }
    }
    // The Prometheus and dashboard threads start where this thread runs: on the control
    // CPUs, not on the capture lcore EAL pinned this thread to.
    let control = match &mode {
        Mode::Live { control_cpus, .. } => control_cpus.clone(),
        Mode::Replay => Vec::new(),
    };
    let live = crate::capture::dpdk::on_cpus(&control, || LiveOutputs::start(common, listener, &stop))?;
    let exporter = live.exporter.clone();
    let cfg = pipeline_config(common, vantages, mode, source_times);
    let reports = Reports { csv, live: live.subscribers() };
    // A run stopped early (a capture file damaged partway) still reports what it measured
    // up to then; an output that fails at the end does not keep the others from theirs.
    let (mut summary, stopped) = match run(&cfg, &stop, reports) {
        Ok(mut r) => {
            let stopped = r.error.take();
            // (Read as the run ends: a finished replay's dashboard waits for its q after it.)
            let ended = match (&stopped, stop.load(Ordering::Relaxed)) {
                (Some(_), _) => RunEnd::Failed,
                (None, true) => RunEnd::Stopped,
                (None, false) if r.sources.iter().any(|s| s.cut_short) => RunEnd::CutShort,
                (None, false) => RunEnd::Complete,
            };
            let mut f = final_summary(r, exporter.as_ref());
            f.summary.ended = ended;
            (Ok(f), stopped)
        }
        Err(e) => (Err(e), None),
    };
    // A replay ends at the end of its files; one stopped sooner (SIGINT, SIGTERM, the
    // dashboard's q) is told on stderr too, as its table looks complete otherwise.
    let stopped_early = replaying && summary.as_ref().is_ok_and(|f| f.summary.ended == RunEnd::Stopped);
    let shown = live.finish(&mut summary, &mut sink);
    if stopped_early {
        if let Ok(s) = &summary {
            crate::note!(
                "roceprobe: warning: the replay was stopped before the end of its input: the summary and reports hold the {} frames read before it",
                s.summary.packets
            );
        }
    }
    let written = print_and_write(common, &summary?.summary, sink);
    let stopped = stopped
        .map(|e| e.context("the run stopped early: the summary and reports hold what was measured before"));
    let mut errors = [stopped, shown.err(), written.err()].into_iter().flatten();
    let first = errors.next();
    // All but the first told here; the first is the run's error, told as it ends.
    for e in errors {
        crate::note!("roceprobe: error: {}", one_line(&e));
    }
    if exporter.is_some() && replaying {
        if let Some(e) = &first {
            crate::note!("roceprobe: error: {}", one_line(e));
        }
        let at = served.map_or_else(|| common.prometheus.clone().unwrap_or_default(), |a| a.to_string());
        serve_final_metrics(&at, &stop);
    }
    first.map_or(Ok(()), Err)
}
