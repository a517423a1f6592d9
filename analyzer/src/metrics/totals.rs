//! Whole-run totals, merged on the stats side from interval snapshots and ended
//! transmissions.

use super::latency::{RunHist, SeriesKey};
use super::snapshot::{GlobalCounters, IntervalSnapshot};
use crate::track::io::{IoCountsByPair, Slowest};
use crate::track::{FlowCounts, FlowKey, ShortTransmissions, Transmission, Vantage};
use crate::wire::bth::Transport;
use std::collections::{BTreeMap, HashMap};

/// A flow's counters over the whole run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowTotals {
    pub transport: Transport,
    pub counts: FlowCounts,
    pub opcodes: BTreeMap<u8, u64>,
    /// Packets whose opcode could not be kept per opcode (see `OpcodeCounts`).
    pub other_opcodes: u64,
    /// Transmissions that ended, short ones included.
    pub transmissions: u64,
    /// Transmissions too short to be reported one by one.
    pub short: ShortTransmissions,
    /// End of the last interval with packets of the flow.
    pub last_ns: u64,
    /// The worker that reports the flow (each flow is one worker's).
    worker: usize,
}

impl FlowTotals {
    fn new(transport: Transport, worker: usize) -> Self {
        Self {
            transport,
            counts: FlowCounts::default(),
            opcodes: BTreeMap::new(),
            other_opcodes: 0,
            transmissions: 0,
            short: ShortTransmissions::default(),
            last_ns: 0,
            worker,
        }
    }
}

/// How far every worker has reported: per worker, the end of the latest interval it handed
/// over. What waits for the workers' late contributions (an interval's slowest I/Os, a
/// collective step) is complete once [`Progress::done`] has passed it.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    ends: Vec<u64>,
}

impl Progress {
    pub fn new(workers: usize) -> Self {
        Self { ends: vec![0; workers.max(1)] }
    }

    pub fn note(&mut self, worker: usize, end_ns: u64) {
        if self.ends.len() <= worker {
            self.ends.resize(worker + 1, 0);
        }
        self.ends[worker] = self.ends[worker].max(end_ns);
    }

    /// The end of the intervals `worker` has reported.
    pub fn of(&self, worker: usize) -> u64 {
        self.ends.get(worker).copied().unwrap_or(0)
    }

    /// The end of the intervals every worker has reported.
    pub fn done(&self) -> u64 {
        self.ends.iter().copied().min().unwrap_or(0)
    }
}

#[derive(Default)]
pub struct Totals {
    /// Whole-run latency histograms per series.
    pub latency: HashMap<SeriesKey, RunHist, ahash::RandomState>,
    pub counters: GlobalCounters,
    pub untracked_packets: u64,
    /// The mirrors' second copies of packets, per vantage (compute, storage).
    pub mirror_duplicates: [u64; 2],
    pub flows: HashMap<FlowKey, FlowTotals, ahash::RandomState>,
    /// Bound on each worker's flows in `flows` (`None`: unbounded). Beyond it, that
    /// worker's flows idle longest leave the whole-run table (counted in
    /// `forgotten.summary_flows`). Per worker, so that what leaves depends on that worker's
    /// reports alone, which come in their order, and not on how the workers' reports
    /// interleave: the same replay keeps the same flows every time.
    pub max_flows: Option<usize>,
    /// Flows in `flows`, per worker.
    pub(crate) worker_flows: Vec<usize>,
    pub intervals: u64,
    /// Snapshots and transmission batches workers dropped because reports fell behind.
    pub dropped_snapshots: u64,
    pub dropped_batches: u64,
    pub dropped_latency_samples: u64,
    pub forgotten: super::snapshot::Forgotten,
    /// The bounds of the run (`--max-flows`, ...), and those that would have lost nothing
    /// (the largest any worker needed).
    pub limits: super::snapshot::Needed,
    pub needed: super::snapshot::Needed,
    /// Where the packet times came from, per vantage (compute, storage).
    pub time_use: [super::snapshot::TimeUse; 2],
    /// Earliest and latest frame timestamp of the run.
    pub first_ts_ns: Option<u64>,
    pub last_ts_ns: Option<u64>,
    /// NVMe I/O outcomes per (initiator, target, op) so far.
    pub ios: IoCountsByPair,
    /// The slowest NVMe I/Os of the run so far (as many as `--slow-ios`).
    pub slow_ios: Slowest,
    /// The latest interval reported (its start) and its slowest I/Os, for the dashboard.
    pub latest_slow_ios: (u64, Slowest),
    /// Collective jobs, their steps and stragglers.
    pub steps: super::steps::Steps,
    /// How far the workers have reported.
    pub progress: Progress,
    /// With `--evidence-dir`: the events, their files and the bounds' counts.
    pub evidence: Option<super::evidence::EvidenceTotals>,
}

/// The same direction of the same QP at the other vantage.
pub fn other_vantage(k: &FlowKey) -> FlowKey {
    let vantage = match k.vantage {
        Vantage::Compute => Vantage::Storage,
        Vantage::Storage => Vantage::Compute,
    };
    FlowKey { vantage, ..*k }
}

/// PSNs lost between the two vantages, seen at `k`'s: the gaps here that the other vantage
/// did not see (a loss upstream of both taps shows at both). `None` with one vantage only.
pub fn fabric_loss(gaps: u64, other_gaps: Option<u64>) -> Option<u64> {
    other_gaps.map(|o| gaps.saturating_sub(o))
}

impl Totals {
    pub fn add(&mut self, s: &IntervalSnapshot) {
        self.intervals += 1;
        self.dropped_snapshots += s.dropped_snapshots;
        self.dropped_batches += s.dropped_batches;
        self.dropped_latency_samples += s.dropped_latency_samples;
        if let Some(e) = self.evidence.as_mut() {
            e.events_dropped += s.dropped_evidence;
        }
        self.forgotten.add(&s.forgotten);
        self.needed.max(&s.needed);
        for (t, u) in self.time_use.iter_mut().zip(s.time_use.iter()) {
            t.merge(u);
        }
        self.counters.add(&s.counters);
        self.untracked_packets += s.untracked_packets;
        if let Some(f) = s.first_ts_ns {
            self.first_ts_ns = Some(self.first_ts_ns.map_or(f, |x| x.min(f)));
        }
        if let Some(l) = s.last_ts_ns {
            self.last_ts_ns = Some(self.last_ts_ns.map_or(l, |x| x.max(l)));
        }
        for (k, buckets) in s.latency.iter() {
            self.latency.entry(k).or_default().merge(buckets);
        }
        self.progress.note(s.worker, s.end_ns);
        for d in &s.flows {
            if let Some(start) = d.open_since.filter(|_| d.transport == Transport::Rc) {
                self.steps.open_reported(&d.key, start, s.end_ns);
            }
        }
        self.steps.reported(s.end_ns);
        self.steps.advance(self.progress.done());
        for d in &s.ios.pairs {
            self.ios.entry((d.initiator, d.target, d.op)).or_default().add(&d.counts);
        }
        for io in &s.ios.slowest {
            self.slow_ios.offer(*io);
        }
        if s.start_ns > self.latest_slow_ios.0 || self.intervals == 1 {
            self.latest_slow_ios = (s.start_ns, Slowest::new(self.slow_ios.k()));
        }
        if s.start_ns == self.latest_slow_ios.0 {
            for io in &s.ios.slowest {
                self.latest_slow_ios.1.offer(*io);
            }
        }
        if self.worker_flows.len() <= s.worker {
            self.worker_flows.resize(s.worker + 1, 0);
        }
        for d in &s.flows {
            self.mirror_duplicates[d.key.vantage as usize] += d.counts.mirror_duplicates;
            let t = self.flows.entry(d.key).or_insert_with(|| {
                self.worker_flows[s.worker] += 1;
                FlowTotals::new(d.transport, s.worker)
            });
            if t.transport == Transport::Cnp {
                t.transport = d.transport;
            }
            t.counts.add(&d.counts);
            // Transmissions too short to be reported one by one end here.
            t.short.add(&d.short);
            t.transmissions += d.short.count + d.reported;
            t.last_ns = t.last_ns.max(s.end_ns);
            t.other_opcodes += d.opcodes.other;
            for (op, n) in d.opcodes.iter() {
                *t.opcodes.entry(op).or_insert(0) += n;
            }
        }
        self.trim_flows(s.worker);
    }

    /// Keeps a worker's flows in the whole-run table under their bound: past it, that
    /// worker's flows idle longest leave, down to three quarters of the bound (so that
    /// trimming, a sort, is rare).
    fn trim_flows(&mut self, worker: usize) {
        let Some(max) = self.max_flows else { return };
        let n = self.worker_flows[worker];
        if n <= max {
            return;
        }
        let mut by_age: Vec<(u64, FlowKey)> =
            self.flows.iter().filter(|(_, f)| f.worker == worker).map(|(k, f)| (f.last_ns, *k)).collect();
        by_age.sort_unstable();
        let remove = n - (max - max / 4);
        for (_, k) in &by_age[..remove] {
            self.flows.remove(k);
        }
        self.worker_flows[worker] -= remove;
        self.forgotten.summary_flows += remove as u64;
    }

    /// Transmissions reported one by one, for the collective step analysis (each flow's
    /// interval counts how many of its own ended: [`crate::track::flow::FlowDelta::reported`]),
    /// counted by their worker in the interval that ends at `interval_end`.
    pub fn add_transmissions(&mut self, ts: &[Transmission], interval_end: u64) {
        for t in ts {
            self.steps.offer_reported(t, interval_end);
        }
    }

    /// The bounds that lost something so far, each with the value that would not have.
    pub fn bounds(&self) -> Vec<super::snapshot::BoundAdvice> {
        let mut v = super::snapshot::BoundAdvice::list(
            &self.limits,
            &self.needed,
            self.untracked_packets,
            self.dropped_latency_samples,
            self.ios.values().map(|c| c.overflowed).sum(),
            &self.forgotten,
        );
        v.extend(self.steps.bound());
        v
    }

    /// Fabric loss of a flow over the whole run (see [`fabric_loss`]).
    pub fn fabric_loss(&self, k: &FlowKey) -> Option<u64> {
        let here = self.flows.get(k)?.counts.gap_psns;
        fabric_loss(here, self.flows.get(&other_vantage(k)).map(|o| o.counts.gap_psns))
    }

    /// Flows in a stable order: vantage, source, destination, QPN.
    pub fn sorted_flows(&self) -> Vec<(&FlowKey, &FlowTotals)> {
        let mut v: Vec<_> = self.flows.iter().collect();
        v.sort_by_key(|(k, _)| **k);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::track::flow::{FlowDelta, OpcodeCounts};

    fn snapshot(end_ns: u64, qpns: &[u32]) -> IntervalSnapshot {
        let flows = qpns
            .iter()
            .map(|&q| FlowDelta {
                key: FlowKey {
                    vantage: Vantage::Compute,
                    src: "10.0.0.1".parse().unwrap(),
                    dst: "10.0.0.2".parse().unwrap(),
                    dst_qpn: q,
                },
                transport: Transport::Rc,
                counts: FlowCounts { packets: 1, ..Default::default() },
                short: ShortTransmissions::default(),
                reported: 0,
                opcodes: OpcodeCounts::new(0x04),
                open_since: None,
            })
            .collect();
        IntervalSnapshot { end_ns, flows, ..Default::default() }
    }

    #[test]
    fn a_full_whole_run_table_lets_the_flows_idle_longest_go() {
        let mut t = Totals { max_flows: Some(8), ..Totals::default() };
        t.add(&snapshot(1, &[1, 2, 3, 4]));
        t.add(&snapshot(2, &[5, 6, 7, 8, 1]));
        assert_eq!((t.flows.len(), t.forgotten.summary_flows), (8, 0));
        // A ninth flow: down to 6, the three idle longest (2, 3, 4) go; 1 was seen again.
        t.add(&snapshot(3, &[9]));
        let mut left: Vec<u32> = t.flows.keys().map(|k| k.dst_qpn).collect();
        left.sort();
        assert_eq!(left, [1, 5, 6, 7, 8, 9]);
        assert_eq!(t.forgotten.summary_flows, 3);
        assert_eq!(t.flows[&snapshot(0, &[1]).flows[0].key].counts.packets, 2);
    }

    #[test]
    fn what_leaves_a_full_table_does_not_depend_on_how_the_workers_reports_interleave() {
        // Two workers, each with its own flows and a bound of 4 each; worker 1's reports
        // come before, between or after worker 0's: the same flows stay every time.
        let of =
            |worker: usize, end_ns: u64, qpns: &[u32]| IntervalSnapshot { worker, ..snapshot(end_ns, qpns) };
        let w0 = [of(0, 1, &[1, 2, 3]), of(0, 2, &[4, 5]), of(0, 3, &[1])];
        let w1 = [of(1, 1, &[101, 102]), of(1, 2, &[103, 104, 105]), of(1, 3, &[106])];
        let orders: [Vec<&IntervalSnapshot>; 3] = [
            w0.iter().chain(w1.iter()).collect(),
            w1.iter().chain(w0.iter()).collect(),
            w0.iter().zip(w1.iter()).flat_map(|(a, b)| [b, a]).collect(),
        ];
        let mut first = None;
        for order in orders {
            let mut t = Totals { max_flows: Some(4), ..Totals::default() };
            for s in order {
                t.add(s);
            }
            let mut left: Vec<u32> = t.flows.keys().map(|k| k.dst_qpn).collect();
            left.sort();
            let got = (left, t.forgotten.summary_flows);
            match &first {
                None => first = Some(got),
                Some(f) => assert_eq!(&got, f),
            }
        }
        // Worker 0 past 4 at its fifth flow: down to 3, its idle longest (1, 2) go, then 1
        // comes back; worker 1 past 4 at its fifth: down to 3 (101, 102 go), then 106.
        assert_eq!(first, Some((vec![1, 3, 4, 5, 103, 104, 105, 106], 4)));
    }
}
