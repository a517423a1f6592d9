//! Whole-run totals, merged on the stats side from interval snapshots and ended
//! transmissions.

use super::latency::{total_hist, SeriesKey, TotalHist};
use super::snapshot::{GlobalCounters, IntervalSnapshot};
use crate::track::{FlowCounts, FlowKey, Transmission, Vantage};
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
    /// Transmissions that ended.
    pub transmissions: u64,
}

impl FlowTotals {
    fn new(transport: Transport) -> Self {
        Self {
            transport,
            counts: FlowCounts::default(),
            opcodes: BTreeMap::new(),
            other_opcodes: 0,
            transmissions: 0,
        }
    }
}

#[derive(Default)]
pub struct Totals {
    /// Whole-run latency histograms per series.
    pub latency: HashMap<SeriesKey, TotalHist>,
    pub counters: GlobalCounters,
    pub untracked_packets: u64,
    pub flows: HashMap<FlowKey, FlowTotals>,
    pub intervals: u64,
    /// Snapshots and transmission batches workers dropped because reports fell behind.
    pub dropped_snapshots: u64,
    pub dropped_batches: u64,
    pub dropped_latency_samples: u64,
    pub forgotten: super::snapshot::Forgotten,
    /// Where the packet times came from, per vantage (compute, storage).
    pub time_use: [crate::runtime::worker::TimeUse; 2],
    /// Earliest and latest frame timestamp of the run.
    pub first_ts_ns: Option<u64>,
    pub last_ts_ns: Option<u64>,
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
        self.forgotten.add(&s.forgotten);
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
            let t = self.latency.entry(k).or_insert_with(total_hist);
            for &(v, n) in buckets {
                // Grows the histogram to `v` (never beyond MAX_NS: workers clamp).
                if t.record_n(v, n).is_err() {
                    t.saturating_record_n(v, n);
                }
            }
        }
        for d in &s.flows {
            let t = self.flows.entry(d.key).or_insert_with(|| FlowTotals::new(d.transport));
            if t.transport == Transport::Cnp {
                t.transport = d.transport;
            }
            t.counts.add(&d.counts);
            t.other_opcodes += d.opcodes.other;
            for (op, n) in d.opcodes.iter() {
                *t.opcodes.entry(op).or_insert(0) += n;
            }
        }
    }

    pub fn add_transmissions(&mut self, ts: &[Transmission]) {
        for t in ts {
            self.flows.entry(t.key).or_insert_with(|| FlowTotals::new(t.transport)).transmissions += 1;
        }
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
