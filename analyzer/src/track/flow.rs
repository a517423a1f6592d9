//! The flow table: one entry per (vantage, src IP, dst IP, destination QPN), SPEC §2.
//!
//! Capacity is fixed at start-up (`--max-flows`): the table is allocated once and a packet
//! of a new flow beyond the bound is counted as untracked, so the per-packet path never
//! allocates. Entries hold the counters of the current interval; `drain_interval` hands
//! them over and zeroes them.

use super::vantage::Vantage;
use crate::wire::bth::Transport;
use crate::wire::RocePacket;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::net::IpAddr;

/// Default bound on tracked flows. At ~0.5 KB per entry (see [`FlowTable::bytes_per_flow`])
/// this is ~32 MiB, allocated up front.
pub const DEFAULT_MAX_FLOWS: usize = 65_536;

/// One direction of one QP at one vantage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    pub vantage: Vantage,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub dst_qpn: u32,
}

/// Distinct opcodes outside a flow's own transport group kept per interval; more than this
/// (only hostile traffic does that) are counted in `other`.
const FOREIGN_SLOTS: usize = 4;

/// Exact per-opcode packet counts, compact: a flow's packets share one transport (the
/// opcode's top three bits), so 32 counters indexed by the low five bits cover it; CNPs and
/// any other opcode go to a few spill slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpcodeCounts {
    group: u8,
    own: [u64; 32],
    foreign: [(u8, u64); FOREIGN_SLOTS],
    foreign_used: u8,
    /// Packets whose opcode found no slot.
    pub other: u64,
}

impl OpcodeCounts {
    pub fn new(first_opcode: u8) -> Self {
        Self {
            group: first_opcode >> 5,
            own: [0; 32],
            foreign: [(0, 0); FOREIGN_SLOTS],
            foreign_used: 0,
            other: 0,
        }
    }

    #[inline]
    pub fn add(&mut self, opcode: u8) {
        if opcode >> 5 == self.group && opcode != crate::wire::bth::opcode::CNP {
            self.own[usize::from(opcode & 0x1F)] += 1;
            return;
        }
        let used = usize::from(self.foreign_used);
        if let Some(slot) = self.foreign[..used].iter_mut().find(|(op, _)| *op == opcode) {
            slot.1 += 1;
        } else if used < FOREIGN_SLOTS {
            self.foreign[used] = (opcode, 1);
            self.foreign_used += 1;
        } else {
            self.other += 1;
        }
    }

    /// (opcode, count) for every opcode with a non-zero count.
    pub fn iter(&self) -> impl Iterator<Item = (u8, u64)> + '_ {
        let base = self.group << 5;
        self.own
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(move |(i, &n)| (base | i as u8, n))
            .chain(self.foreign[..usize::from(self.foreign_used)].iter().copied())
    }

    fn clear(&mut self) {
        self.own = [0; 32];
        self.foreign_used = 0;
        self.other = 0;
    }
}

/// The scalar counters of a flow (an interval's deltas, or whole-run totals).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowCounts {
    pub packets: u64,
    /// Frame bytes on the wire, without FCS (for a mirrored frame: the mirrored frame's).
    pub bytes: u64,
    /// RoCE payload bytes (after extension headers, before pad and ICRC).
    pub payload_bytes: u64,
    /// Packets whose ICRC was wrong (with `--check-icrc`).
    pub icrc_errors: u64,
    /// NVMe/RDMA commands (SQEs) sent on this flow.
    pub nvme_commands: u64,
    /// NVMe/RDMA completions (CQEs) on this flow that matched a command seen the other way.
    pub nvme_completions: u64,
}

impl FlowCounts {
    pub fn add(&mut self, o: &FlowCounts) {
        self.packets += o.packets;
        self.bytes += o.bytes;
        self.payload_bytes += o.payload_bytes;
        self.icrc_errors += o.icrc_errors;
        self.nvme_commands += o.nvme_commands;
        self.nvme_completions += o.nvme_completions;
    }
}

/// Counters of one flow over one interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowCounters {
    pub counts: FlowCounts,
    pub opcodes: OpcodeCounts,
}

impl FlowCounters {
    fn new(first_opcode: u8) -> Self {
        Self { counts: FlowCounts::default(), opcodes: OpcodeCounts::new(first_opcode) }
    }
}

#[derive(Debug)]
struct FlowEntry {
    transport: Transport,
    interval: FlowCounters,
}

/// A flow's counters for one interval, as handed to the stats side.
#[derive(Debug, Clone)]
pub struct FlowDelta {
    pub key: FlowKey,
    pub transport: Transport,
    pub counters: FlowCounters,
}

/// The worker's flow table.
pub struct FlowTable {
    flows: HashMap<FlowKey, FlowEntry, ahash::RandomState>,
    max_flows: usize,
    /// Packets of flows that did not fit (the table was full).
    pub untracked_packets: u64,
}

impl FlowTable {
    pub fn new(max_flows: usize) -> Self {
        Self {
            flows: HashMap::with_capacity_and_hasher(max_flows, ahash::RandomState::new()),
            max_flows,
            untracked_packets: 0,
        }
    }

    /// Memory per tracked flow, key and value (the hash map adds a control byte and its
    /// load factor on top).
    pub const fn bytes_per_flow() -> usize {
        std::mem::size_of::<FlowKey>() + std::mem::size_of::<FlowEntry>()
    }

    pub fn len(&self) -> usize {
        self.flows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// Counts one RoCE packet and returns the flow's interval counters for the trackers
    /// that follow (`None` if the table is full and the flow is untracked). Never allocates:
    /// the table was sized at construction.
    #[inline]
    pub fn record(&mut self, key: FlowKey, p: &RocePacket<'_>, wire_len: u32) -> Option<&mut FlowCounts> {
        let opcode = p.bth.opcode();
        let full = self.flows.len() >= self.max_flows;
        // `entry` reserves room for one more, which never allocates below the capacity
        // reserved at construction.
        let entry = match self.flows.entry(key) {
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(_) if full => {
                self.untracked_packets += 1;
                return None;
            }
            Entry::Vacant(v) => {
                v.insert(FlowEntry { transport: p.bth.transport(), interval: FlowCounters::new(opcode) })
            }
        };
        let c = &mut entry.interval;
        c.counts.packets += 1;
        c.counts.bytes += u64::from(wire_len);
        c.counts.payload_bytes += u64::from(p.payload_len);
        c.opcodes.add(opcode);
        Some(&mut c.counts)
    }

    /// The interval counters of a tracked flow.
    #[inline]
    pub fn counts_mut(&mut self, key: &FlowKey) -> Option<&mut FlowCounts> {
        self.flows.get_mut(key).map(|e| &mut e.interval.counts)
    }

    /// Hands over every flow active in the interval and zeroes its counters.
    pub fn drain_interval(&mut self, out: &mut Vec<FlowDelta>) {
        for (key, e) in self.flows.iter_mut() {
            if e.interval.counts == FlowCounts::default() {
                continue;
            }
            out.push(FlowDelta { key: *key, transport: e.transport, counters: e.interval.clone() });
            e.interval.counts = FlowCounts::default();
            e.interval.opcodes.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcode_counts_are_exact_across_groups() {
        let mut c = OpcodeCounts::new(0x06);
        for op in [0x06, 0x07, 0x07, 0x08, 0x11, 0x81, 0x81, 0x64, 0x2A, 0xA4, 0x40, 0x41] {
            c.add(op);
        }
        let mut v: Vec<_> = c.iter().collect();
        v.sort();
        assert_eq!(
            v,
            vec![(0x06, 1), (0x07, 2), (0x08, 1), (0x11, 1), (0x2A, 1), (0x64, 1), (0x81, 2), (0xA4, 1)]
        );
        assert_eq!(c.other, 2, "0x40 and 0x41 found no free slot");
    }
}
