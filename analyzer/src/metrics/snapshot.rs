//! Interval snapshots: the worker's counters for one interval of packet time.

use crate::metrics::latency::LatencyBatch;
use crate::track::flow::FlowDelta;
use crate::wire::DecodeError;

/// Frame-level counters of one interval.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GlobalCounters {
    /// Every frame received.
    pub packets: u64,
    /// Frames decoded as RoCEv2 (UDP destination port 4791 with a valid BTH).
    pub roce_packets: u64,
    /// Well-formed frames that are not RoCEv2.
    pub non_roce_packets: u64,
    /// Malformed frames, by [`DecodeError::index`]. packets = roce + non_roce + errors.
    pub decode_errors: [u64; DecodeError::ALL.len()],
    /// RoCE packets that reached the probe after the reorder window had passed them, per
    /// vantage (compute, storage): analysed out of time order.
    pub late_packets: [u64; 2],
    /// Frames analysed before the reorder window had passed them, for want of room to hold
    /// them (the window was shorter for a while).
    pub released_early: u64,
}

impl GlobalCounters {
    pub fn add(&mut self, o: &GlobalCounters) {
        self.packets += o.packets;
        self.roce_packets += o.roce_packets;
        self.non_roce_packets += o.non_roce_packets;
        for (a, b) in self.decode_errors.iter_mut().zip(o.decode_errors.iter()) {
            *a += b;
        }
        for (a, b) in self.late_packets.iter_mut().zip(o.late_packets.iter()) {
            *a += b;
        }
        self.released_early += o.released_early;
    }

    pub fn decode_error_total(&self) -> u64 {
        self.decode_errors.iter().sum()
    }
}

/// Entries the bounded tables forgot to make room for newer ones (the oldest gives way).
/// Each is state still waiting for an answer: what it would have measured is lost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Forgotten {
    /// NVMe commands awaiting their completion (`--max-pending-commands`).
    pub nvme_commands: u64,
    /// CM ConnectRequests awaiting their reply (`--max-cm-requests`).
    pub cm_requests: u64,
    /// Flows announced by CM awaiting their first packet (`--max-announced-flows`).
    pub announced_flows: u64,
    /// NVMe/RDMA connections' state (multi-packet capsules, READ phases, completions awaiting
    /// their ACK), bounded with `--max-ios`.
    pub io_connections: u64,
    /// Flows without a packet for `--flow-expire` whose slot went to a new flow when the
    /// table was full (everything they counted had been handed over; their PSN and pairing
    /// state is what is forgotten).
    pub idle_flows: u64,
    /// Flows that left the whole-run table (the summary's, the dashboard's and Prometheus'
    /// flows) because it was full: those idle longest (stats side; their intervals are in
    /// flows.csv, their packets in the totals).
    pub summary_flows: u64,
}

impl Forgotten {
    pub fn add(&mut self, o: &Forgotten) {
        self.nvme_commands += o.nvme_commands;
        self.cm_requests += o.cm_requests;
        self.announced_flows += o.announced_flows;
        self.io_connections += o.io_connections;
        self.idle_flows += o.idle_flows;
        self.summary_flows += o.summary_flows;
    }

    /// What was forgotten since `earlier`.
    pub fn since(&self, earlier: &Forgotten) -> Forgotten {
        Forgotten {
            nvme_commands: self.nvme_commands - earlier.nvme_commands,
            cm_requests: self.cm_requests - earlier.cm_requests,
            announced_flows: self.announced_flows - earlier.announced_flows,
            io_connections: self.io_connections - earlier.io_connections,
            idle_flows: self.idle_flows - earlier.idle_flows,
            summary_flows: self.summary_flows - earlier.summary_flows,
        }
    }

    pub fn total(&self) -> u64 {
        self.nvme_commands
            + self.cm_requests
            + self.announced_flows
            + self.io_connections
            + self.idle_flows
            + self.summary_flows
    }
}

/// Everything one worker measured in [start_ns, end_ns).
#[derive(Debug, Clone, Default)]
pub struct IntervalSnapshot {
    pub worker: usize,
    pub start_ns: u64,
    pub end_ns: u64,
    pub counters: GlobalCounters,
    /// Earliest and latest frame timestamp seen in the interval (`None` if no frame).
    pub first_ts_ns: Option<u64>,
    pub last_ts_ns: Option<u64>,
    /// Packets of flows beyond `--max-flows` in this interval.
    pub untracked_packets: u64,
    pub flows: Vec<FlowDelta>,
    /// Latency histograms with samples in the interval.
    pub latency: LatencyBatch,
    /// NVMe I/O outcomes that changed in the interval, and its slowest I/Os.
    pub ios: crate::track::io::IoBatch,
    /// Earlier snapshots and transmission batches this worker dropped because the stats
    /// side had no room (live capture never waits for reports).
    pub dropped_snapshots: u64,
    pub dropped_batches: u64,
    /// Latency samples of series beyond the bound on series, in this interval.
    pub dropped_latency_samples: u64,
    /// Entries of bounded tables forgotten in this interval.
    pub forgotten: Forgotten,
    /// Where this worker's packet times came from so far, per vantage (cumulative).
    pub time_use: [TimeUse; 2],
}

/// Where the packet times of one vantage came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeUse {
    /// Some packets carried an ERSPAN III switch timestamp.
    pub switch_clock: bool,
    /// Sources (port ids / file indices; 63 stands for 63 and above) whose capture time was
    /// used.
    pub capture_sources: u64,
}

impl TimeUse {
    pub fn merge(&mut self, o: &TimeUse) {
        self.switch_clock |= o.switch_clock;
        self.capture_sources |= o.capture_sources;
    }
}
