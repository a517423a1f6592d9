//! Whole-run totals, merged on the stats side from interval snapshots.

use super::snapshot::{GlobalCounters, IntervalSnapshot};
use crate::track::flow::FlowCounts;
use crate::track::FlowKey;
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
}

#[derive(Debug, Default)]
pub struct Totals {
    pub counters: GlobalCounters,
    pub untracked_packets: u64,
    pub flows: HashMap<FlowKey, FlowTotals>,
    pub intervals: u64,
    /// Earliest and latest frame timestamp of the run.
    pub first_ts_ns: Option<u64>,
    pub last_ts_ns: Option<u64>,
}

impl Totals {
    pub fn add(&mut self, s: &IntervalSnapshot) {
        self.intervals += 1;
        self.counters.add(&s.counters);
        self.untracked_packets += s.untracked_packets;
        if let Some(f) = s.first_ts_ns {
            self.first_ts_ns = Some(self.first_ts_ns.map_or(f, |x| x.min(f)));
        }
        if let Some(l) = s.last_ts_ns {
            self.last_ts_ns = Some(self.last_ts_ns.map_or(l, |x| x.max(l)));
        }
        for d in &s.flows {
            let t = self.flows.entry(d.key).or_insert_with(|| FlowTotals {
                transport: d.transport,
                counts: FlowCounts::default(),
                opcodes: BTreeMap::new(),
                other_opcodes: 0,
            });
            t.counts.add(&d.counters.counts);
            t.other_opcodes += d.counters.opcodes.other;
            for (op, n) in d.counters.opcodes.iter() {
                *t.opcodes.entry(op).or_insert(0) += n;
            }
        }
    }

    /// Flows in a stable order: vantage, source, destination, QPN.
    pub fn sorted_flows(&self) -> Vec<(&FlowKey, &FlowTotals)> {
        let mut v: Vec<_> = self.flows.iter().collect();
        v.sort_by_key(|(k, _)| **k);
        v
    }
}
