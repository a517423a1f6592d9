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
    /// NVMe capsules a vantage (compute, storage) saw first after the other vantage's
    /// copies had ended their I/O (more than `--reorder-window` later): their I/O is counted
    /// once, without this vantage's segments.
    pub io_copies_after_end: [u64; 2],
    /// Frames analysed before the reorder window had passed them, for want of room to hold
    /// them (the window was shorter for a while).
    pub released_early: u64,
    /// ERSPAN III packets whose timestamp has a granularity the probe cannot convert
    /// (platform specific): timed by the capture instead.
    pub erspan_untimed: u64,
    /// RoCE packets that came through an ERSPAN mirror (any type).
    pub erspan: u64,
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
        for (a, b) in self.io_copies_after_end.iter_mut().zip(o.io_copies_after_end.iter()) {
            *a += b;
        }
        self.released_early += o.released_early;
        self.erspan_untimed += o.erspan_untimed;
        self.erspan += o.erspan;
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
    /// Completions awaiting the host's ACK beyond 16 on one QP: the oldest one's ACK is no
    /// longer looked for (its read finishes without its compute segment).
    pub io_acks: u64,
    /// RDMA requests awaiting their answer beyond 8 on one flow (message ends awaiting an
    /// ACK, READs awaiting their last response): the oldest gives no `rc_ack` or
    /// `rdma_read` sample.
    #[serde(default)]
    pub rdma_requests: u64,
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
        self.io_acks += o.io_acks;
        self.rdma_requests += o.rdma_requests;
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
            io_acks: self.io_acks - earlier.io_acks,
            rdma_requests: self.rdma_requests - earlier.rdma_requests,
            idle_flows: self.idle_flows - earlier.idle_flows,
            summary_flows: self.summary_flows - earlier.summary_flows,
        }
    }

    pub fn total(&self) -> u64 {
        self.nvme_commands
            + self.cm_requests
            + self.announced_flows
            + self.io_connections
            + self.io_acks
            + self.rdma_requests
            + self.idle_flows
            + self.summary_flows
    }
}

/// Per bounded table, the bound that would have lost nothing (so far, per worker): 0 while
/// nothing was lost; `u64::MAX` when entries were forgotten but none of them was answered
/// later, so that no larger bound would have kept more. The others are estimates from
/// above (see `track::bounded`), unless marked [`Needed::FLOOR`]: the estimator's own room
/// filled, and the bound needed is at least that much.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Needed {
    pub max_flows: u64,
    pub max_latency_series: u64,
    pub max_pending_commands: u64,
    pub max_cm_requests: u64,
    pub max_announced_flows: u64,
    /// For the NVMe connections' state.
    pub max_ios: u64,
    /// For the I/Os followed at once (commands beyond them are not followed).
    pub max_ios_commands: u64,
}

impl Needed {
    /// Marks a value that is a floor, not an estimate from above.
    pub const FLOOR: u64 = 1 << 62;

    /// `u64::MAX` for "no bound would have helped".
    pub fn of(needed: Option<u64>) -> u64 {
        needed.unwrap_or(u64::MAX)
    }

    /// `needed` ([`Needed::of`]), marked a floor if `floor`.
    pub fn at_least(needed: u64, floor: bool) -> u64 {
        if floor && needed != u64::MAX {
            needed | Self::FLOOR
        } else {
            needed
        }
    }

    /// A value's number and whether it is a floor.
    fn parts(v: u64) -> (u64, bool) {
        if v == u64::MAX {
            (v, false)
        } else {
            (v & !Self::FLOOR, v & Self::FLOOR != 0)
        }
    }

    /// The larger of each (workers have a bound each).
    pub fn max(&mut self, o: &Needed) {
        let m = |a: &mut u64, b: u64| {
            // A worker that needed a number beats one for which nothing helped.
            *a = match (*a, b) {
                (u64::MAX, 0) | (0, u64::MAX) => u64::MAX,
                (u64::MAX, b) => b,
                (a, u64::MAX) => a,
                // The larger number; a floor if either was (what was needed is at least
                // the floor, and at least the other's).
                (a, b) => {
                    let ((a, fa), (b, fb)) = (Self::parts(a), Self::parts(b));
                    Self::at_least(a.max(b), fa || fb)
                }
            }
        };
        m(&mut self.max_flows, o.max_flows);
        m(&mut self.max_latency_series, o.max_latency_series);
        m(&mut self.max_pending_commands, o.max_pending_commands);
        m(&mut self.max_cm_requests, o.max_cm_requests);
        m(&mut self.max_announced_flows, o.max_announced_flows);
        m(&mut self.max_ios, o.max_ios);
        m(&mut self.max_ios_commands, o.max_ios_commands);
    }
}

/// A bound that lost something, for the operator: the option, its value, what it lost and
/// the value that would have lost nothing.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BoundAdvice {
    /// The option that sets the bound, e.g. `--max-latency-series`.
    pub option: String,
    /// Its value in this run (per worker).
    pub limit: u64,
    /// How much was lost, and what (`packets untracked`, `latency samples dropped`,
    /// `commands forgotten`...).
    pub lost: u64,
    pub what: String,
    /// The value that would have lost nothing (an estimate from above); absent when what
    /// was forgotten was never answered later, so that no value would have kept more.
    pub needed: Option<u64>,
    /// `needed` is a floor, not an estimate from above: the estimate's own room filled
    /// (many more entries were lost than it can count), and more would be needed.
    #[serde(default)]
    pub needed_at_least: bool,
}

impl BoundAdvice {
    /// The bounds that lost something: `limits` their values, `needed` what would have
    /// sufficed, and what each lost.
    /// `overflowed`: the NVMe commands not followed for want of room.
    pub fn list(
        limits: &Needed,
        needed: &Needed,
        untracked: u64,
        samples: u64,
        overflowed: u64,
        f: &Forgotten,
    ) -> Vec<Self> {
        [
            (
                "--max-flows",
                limits.max_flows,
                needed.max_flows,
                untracked,
                "RoCE packets of flows not tracked",
            ),
            (
                "--max-latency-series",
                limits.max_latency_series,
                needed.max_latency_series,
                samples,
                "latency samples dropped",
            ),
            (
                "--max-pending-commands",
                limits.max_pending_commands,
                needed.max_pending_commands,
                f.nvme_commands,
                "NVMe commands forgotten",
            ),
            (
                "--max-cm-requests",
                limits.max_cm_requests,
                needed.max_cm_requests,
                f.cm_requests,
                "CM requests forgotten",
            ),
            (
                "--max-announced-flows",
                limits.max_announced_flows,
                needed.max_announced_flows,
                f.announced_flows,
                "announced flows forgotten",
            ),
            (
                "--max-ios",
                limits.max_ios,
                needed.max_ios,
                f.io_connections,
                "NVMe connections' state forgotten",
            ),
            (
                "--max-ios",
                limits.max_ios_commands,
                needed.max_ios_commands,
                overflowed,
                "NVMe command sightings not followed (ios.overflowed)",
            ),
        ]
        .into_iter()
        .filter(|&(_, _, _, lost, _)| lost > 0)
        .map(|(option, limit, n, lost, what)| {
            let (n, floor) = Needed::parts(n);
            BoundAdvice {
                option: option.into(),
                limit,
                lost,
                what: what.into(),
                needed: (n != u64::MAX).then_some(n.max(limit + 1)),
                needed_at_least: floor && n != u64::MAX,
            }
        })
        .collect()
    }

    /// One line: what was lost and what to do.
    pub fn line(&self) -> String {
        match self.needed {
            Some(n) if self.needed_at_least => format!(
                "{} {}: {} {}; {} above {n} would be needed to keep them (more were lost than the estimate can count; docs/RELIABILITY.md has what each costs)",
                self.option, self.limit, self.lost, self.what, self.option
            ),
            Some(n) => format!(
                "{} {}: {} {}; {} {n} would have kept them (docs/RELIABILITY.md has what each costs)",
                self.option, self.limit, self.lost, self.what, self.option
            ),
            None => format!(
                "{} {}: {} {}, none of them answered later, so a larger bound would not have kept them",
                self.option, self.limit, self.lost, self.what
            ),
        }
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
    /// Evidence records the stats side had no room for, and signals beyond the analysis's
    /// buffer for them (`--evidence-dir`).
    pub dropped_evidence: u64,
    /// Evidence events that got no file, and why (`--evidence-dir`).
    pub evidence_no_file: Vec<crate::track::evidence::NoFile>,
    /// Latency samples of series beyond the bound on series, in this interval.
    pub dropped_latency_samples: u64,
    /// Entries of bounded tables forgotten in this interval.
    pub forgotten: Forgotten,
    /// The bounds that would have lost nothing, so far.
    pub needed: Needed,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Two workers' needs for `--max-cm-requests`: 19,457 as a floor (its estimate's room
    /// filled) and 5,000 from above: at least 19,457, told as such; a floor of 3,000 and
    /// 5,000 from above: at least 5,000. Neither helped and a floor: the floor.
    #[test]
    fn a_floor_stays_a_floor_through_the_workers_and_the_advice() {
        let advice = |a: u64, b: u64| {
            let mut n = Needed { max_cm_requests: a, ..Default::default() };
            n.max(&Needed { max_cm_requests: b, ..Default::default() });
            let limits = Needed { max_cm_requests: 1_024, ..Default::default() };
            let f = Forgotten { cm_requests: 7, ..Default::default() };
            let list = BoundAdvice::list(&limits, &n, 0, 0, 0, &f);
            assert_eq!(list.len(), 1);
            list[0].clone()
        };
        let b = advice(Needed::at_least(19_457, true), 5_000);
        assert_eq!((b.needed, b.needed_at_least), (Some(19_457), true));
        assert_eq!(
            b.line(),
            "--max-cm-requests 1024: 7 CM requests forgotten; --max-cm-requests above 19457 would be needed to keep them (more were lost than the estimate can count; docs/RELIABILITY.md has what each costs)"
        );
        let b = advice(Needed::at_least(3_000, true), 5_000);
        assert_eq!((b.needed, b.needed_at_least), (Some(5_000), true));
        let b = advice(u64::MAX, Needed::at_least(3_000, true));
        assert_eq!((b.needed, b.needed_at_least), (Some(3_000), true));
        let b = advice(u64::MAX, 5_000);
        assert_eq!((b.needed, b.needed_at_least), (Some(5_000), false));
        assert!(b.line().ends_with(
            "--max-cm-requests 5000 would have kept them (docs/RELIABILITY.md has what each costs)"
        ));
        assert_eq!(Needed::at_least(u64::MAX, true), u64::MAX, "nothing would have helped stays so");
    }
}
