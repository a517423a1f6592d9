//! Ground truth, computed from what each tap emitted (not from the probe): per-flow
//! counters, the PSN analysis of docs/METRICS.md written out plainly, and each NVMe I/O's segment
//! latencies from the times the probe will see.

use crate::render::Delivered;
use crate::sim::{Packet, Role, Wire, COMPUTE, STORAGE};
use roceprobe::wire::bth::opcode as op;
use roceprobe::wire::ib_ext::AckKind;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

pub const VANTAGES: [&str; 2] = ["compute", "storage"];

#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct FlowTruth {
    pub vantage: String,
    pub src_ip: String,
    pub dst_ip: String,
    pub dst_qpn: u32,
    pub transport: String,
    pub packets: u64,
    pub bytes: u64,
    pub payload_bytes: u64,
    pub opcodes: BTreeMap<String, u64>,
    pub retx_packets: u64,
    pub retx_bytes: u64,
    pub gap_psns: u64,
    pub nak_seq: u64,
    pub nak_rnr: u64,
    pub nak_other: u64,
    pub cnp: u64,
    pub ecn_ce: u64,
    pub icrc_errors: u64,
    pub nvme_commands: u64,
    pub nvme_completions: u64,
    /// Fabric loss (docs/METRICS.md): gap PSNs at this tap that the same flow at the other tap did
    /// not have; absent for a flow seen at one tap only.
    pub fabric_loss_psns: Option<u64>,
    /// Request packets of their first transmission that the fabric dropped between the
    /// taps, counted at the tap that missed them. A loss shows as a gap (and so as fabric
    /// loss) only if a later packet arrives before the lost one is sent again.
    pub dropped_between_taps: Option<u64>,
}

/// An NVMe I/O as the scenario made it: the wire packets that anchor its segments.
#[derive(Debug, Clone)]
pub struct IoRecord {
    /// `nvme_read`, `nvme_write` (data by RDMA READ) or `nvme_write` with in-capsule data.
    pub op: &'static str,
    pub in_capsule: bool,
    pub host: IpAddr,
    pub target: IpAddr,
    pub cid: u16,
    pub sqe_first: usize,
    pub sqe_last: usize,
    pub cqe: usize,
    pub read_request: Option<usize>,
    pub last_read_response: Option<usize>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct IoTruth {
    pub op: String,
    pub in_capsule: bool,
    pub initiator_ip: String,
    pub target_ip: String,
    pub cid: u16,
    /// Segment latencies in ns as docs/METRICS.md defines them; absent where a vantage is missing.
    pub io_compute_ns: Option<u64>,
    pub io_storage_ns: Option<u64>,
    pub compute_ns: Option<u64>,
    pub network_ns: Option<i64>,
    pub storage_ns: Option<u64>,
    /// The anchor times (ns, probe time base) the segments come from, e.g.
    /// `sqe_first@compute`, `cqe@storage`, `ack@compute`.
    pub anchors: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Truth {
    pub scenario: String,
    pub seed: u64,
    pub files: Vec<String>,
    /// Options that map the files' traffic to vantages (and any other the scenario needs).
    pub args: Vec<String>,
    pub path_mtu: usize,
    pub packets: u64,
    pub roce_packets: u64,
    pub non_roce_packets: u64,
    pub decode_errors: BTreeMap<String, u64>,
    pub flows: Vec<FlowTruth>,
    pub ios: Vec<IoTruth>,
    /// I/O outcomes the scenario was made to produce (with its `args`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io_outcomes: Option<crate::scenarios::IoOutcomes>,
}

type Key = (usize, IpAddr, IpAddr, u32);

fn transport_name(opcode: u8) -> &'static str {
    match opcode >> 5 {
        0 => "RC",
        1 => "UC",
        2 => "RD",
        3 => "UD",
        5 => "XRC",
        _ => "CNP",
    }
}

/// Request opcodes whose PSNs advance the requester's sequence (docs/METRICS.md, "PSN analysis").
fn is_request(opcode: u8) -> bool {
    matches!(opcode >> 5, 0 | 1 | 5) && matches!(opcode & 0x1F, 0x00..=0x0C | 0x13 | 0x14 | 0x16 | 0x17)
}

/// Per flow and tap: the expected next PSN.
#[derive(Default)]
struct PsnState {
    expected: Option<u32>,
}

const MOD: u32 = 1 << 24;
const HALF: u32 = 1 << 23;

impl PsnState {
    /// Returns (retransmission, gap PSNs).
    fn observe(&mut self, psn: u32, span: u32) -> (bool, u64) {
        let Some(exp) = self.expected else {
            self.expected = Some((psn + span) % MOD);
            return (false, 0);
        };
        let ahead = psn.wrapping_sub(exp) % MOD;
        if ahead == 0 {
            self.expected = Some((psn + span) % MOD);
            (false, 0)
        } else if ahead < HALF {
            self.expected = Some((psn + span) % MOD);
            (false, u64::from(ahead))
        } else {
            // Behind: a retransmission. The expected PSN stays at the high-water mark unless
            // this packet's span reaches past it.
            let end = (psn + span) % MOD;
            if end.wrapping_sub(exp) % MOD < HALF && end != exp {
                self.expected = Some(end);
            }
            (true, 0)
        }
    }
}

/// What the truth file says about the scenario besides what is measured.
pub struct Meta {
    pub io_outcomes: Option<crate::scenarios::IoOutcomes>,
    pub scenario: String,
    pub seed: u64,
    pub files: Vec<String>,
    pub args: Vec<String>,
    pub path_mtu: usize,
}

/// The compute-tap time of the first ACK that covers an I/O's completion: on the same
/// connection (host to the target's QP), acknowledging the CQE's PSN or a later one (an ACK
/// covers every PSN up to its own), seen at compute no earlier than the CQE.
fn covering_ack(wire: &Wire, probe_time: &HashMap<(usize, usize), u64>, io: &IoRecord) -> Option<u64> {
    let (Packet::Roce { spec: sqe, .. }, Packet::Roce { spec: cqe, .. }) =
        (&wire.packets[io.sqe_first], &wire.packets[io.cqe])
    else {
        return None;
    };
    let cqe_at = *probe_time.get(&(COMPUTE, io.cqe))?;
    wire.packets
        .iter()
        .enumerate()
        .filter_map(|(i, p)| match p {
            Packet::Roce { spec, .. }
                if spec.bth.opcode == op::ACKNOWLEDGE
                    && spec.src == sqe.src
                    && spec.dst == sqe.dst
                    && spec.bth.dest_qp == sqe.bth.dest_qp
                    && matches!(spec.ext.aeth.map(|a| a.kind()), Some(AckKind::Ack { .. }))
                    && (spec.bth.psn.wrapping_sub(cqe.bth.psn) & (MOD - 1)) < (1 << 16) =>
            {
                probe_time.get(&(COMPUTE, i)).copied().filter(|&t| t >= cqe_at)
            }
            _ => None,
        })
        .min()
}

pub fn compute(meta: Meta, wire: &Wire, delivered: &[Delivered], ios: &[IoRecord]) -> Truth {
    let path_mtu = meta.path_mtu;
    let mut flows: BTreeMap<Key, FlowTruth> = BTreeMap::new();
    let mut psn: HashMap<Key, PsnState> = HashMap::new();
    let mut decode_errors: BTreeMap<String, u64> = BTreeMap::new();
    let (mut roce, mut non_roce) = (0u64, 0u64);
    let mut probe_time: HashMap<(usize, usize), u64> = HashMap::new();
    let mut completions_seen: std::collections::HashSet<(usize, IpAddr, IpAddr, u32, u32)> =
        Default::default();
    let new_flow = |k: &Key, opcode: u8| FlowTruth {
        vantage: VANTAGES[k.0].into(),
        src_ip: k.1.to_string(),
        dst_ip: k.2.to_string(),
        dst_qpn: k.3,
        transport: transport_name(opcode).into(),
        ..Default::default()
    };
    // Each tap's packets in the order the tap saw them, whatever order the mirror paths
    // delivered them in.
    let mut in_tap_order: Vec<&Delivered> = delivered.iter().collect();
    in_tap_order.sort_by_key(|d| (d.tap, d.tap_ns, d.packet));
    for d in in_tap_order {
        probe_time.insert((d.tap, d.packet), d.probe_ns);
        let (spec, ecn) = match &wire.packets[d.packet] {
            Packet::Raw { error: Some(kind), .. } => {
                *decode_errors.entry((*kind).into()).or_insert(0) += 1;
                continue;
            }
            Packet::Raw { error: None, .. } => {
                non_roce += 1;
                continue;
            }
            Packet::Roce { spec, ecn, .. } => (spec, ecn[d.tap]),
        };
        roce += 1;
        let opcode = spec.bth.opcode;
        let key: Key = (d.tap, spec.src, spec.dst, spec.bth.dest_qp);
        let f = flows.entry(key).or_insert_with(|| new_flow(&key, opcode));
        f.packets += 1;
        f.bytes += u64::from(d.wire_len);
        f.payload_bytes += spec.payload.len() as u64;
        *f.opcodes.entry(opcode.to_string()).or_insert(0) += 1;
        if ecn == 3 {
            f.ecn_ce += 1;
        }
        if spec.corrupt_icrc {
            f.icrc_errors += 1;
        }
        match spec.role {
            // Every command capsule sent (a resent one again); a completion once per tap,
            // since a resent copy answers a command already answered.
            Role::NvmeCommand => f.nvme_commands += 1,
            Role::NvmeCompletion
                if completions_seen.insert((d.tap, spec.src, spec.dst, spec.bth.dest_qp, spec.bth.psn)) =>
            {
                f.nvme_completions += 1
            }
            _ => {}
        }
        if opcode & 0x1F == op::ACKNOWLEDGE && opcode >> 5 != 4 {
            match spec.ext.aeth.map(|a| a.kind()) {
                Some(AckKind::Nak { code: 0 }) => f.nak_seq += 1,
                Some(AckKind::Nak { .. }) => f.nak_other += 1,
                Some(AckKind::RnrNak { .. }) => f.nak_rnr += 1,
                _ => {}
            }
        }
        if is_request(opcode) {
            let span = if opcode & 0x1F == op::READ_REQUEST {
                let len = spec.ext.reth.map_or(0, |r| r.dma_len) as usize;
                len.div_ceil(path_mtu).max(1) as u32
            } else {
                1
            };
            let (retx, gap) = psn.entry(key).or_default().observe(spec.bth.psn, span);
            if retx {
                f.retx_packets += 1;
                f.retx_bytes += spec.payload.len() as u64;
            }
            f.gap_psns += gap;
        }
        if let Role::Cnp { throttled_src, throttled_dst, throttled_qpn } = spec.role {
            let k: Key = (d.tap, throttled_src, throttled_dst, throttled_qpn);
            flows.entry(k).or_insert_with(|| new_flow(&k, 0)).cnp += 1;
        }
    }
    // Fabric loss: first transmissions seen at one tap and dropped before the other. A
    // retransmission is the same spec again: only the first copy of a PSN counts.
    if delivered.iter().any(|d| d.tap == STORAGE) {
        let mut first_copy: std::collections::HashSet<(IpAddr, IpAddr, u32, u32)> = Default::default();
        let mut lost: HashMap<Key, u64> = HashMap::new();
        for p in &wire.packets {
            let Packet::Roce { spec, seen, .. } = p else { continue };
            let id = (spec.src, spec.dst, spec.bth.dest_qp, spec.bth.psn);
            if !is_request(spec.bth.opcode) || !first_copy.insert(id) {
                continue;
            }
            if let [Some(_), None] | [None, Some(_)] = seen {
                let missed = if seen[COMPUTE].is_none() { COMPUTE } else { STORAGE };
                *lost.entry((missed, spec.src, spec.dst, spec.bth.dest_qp)).or_insert(0) += 1;
            }
        }
        let gaps: HashMap<Key, u64> = flows.iter().map(|(k, f)| (*k, f.gap_psns)).collect();
        for (k, f) in flows.iter_mut() {
            let other: Key = (1 - k.0, k.1, k.2, k.3);
            if let Some(other_gaps) = gaps.get(&other) {
                f.fabric_loss_psns = Some(f.gap_psns.saturating_sub(*other_gaps));
                f.dropped_between_taps = Some(lost.get(k).copied().unwrap_or(0));
            }
        }
    }
    let total = delivered.len() as u64;
    let ios = ios
        .iter()
        .map(|io| {
            let t = |tap: usize, i: Option<usize>| i.and_then(|i| probe_time.get(&(tap, i)).copied());
            let (c, s) = (COMPUTE, STORAGE);
            let io_c = t(c, Some(io.cqe)).zip(t(c, Some(io.sqe_first))).map(|(a, b)| a - b);
            let io_s = t(s, Some(io.cqe)).zip(t(s, Some(io.sqe_last))).map(|(a, b)| a - b);
            let (compute_ns, storage_ns, network_ns) = if io.op == "nvme_read" {
                let compute = covering_ack(wire, &probe_time, io).zip(t(c, Some(io.cqe))).map(|(a, b)| a - b);
                let network = io_c.zip(io_s).map(|(a, b)| a as i64 - b as i64);
                (compute, io_s, network)
            } else if io.in_capsule {
                let network = io_c.zip(io_s).map(|(a, b)| a as i64 - b as i64);
                (io_c.map(|_| 0), io_s, network)
            } else {
                let compute = t(c, io.last_read_response).zip(t(c, io.read_request)).map(|(a, b)| a - b);
                let storage = match (
                    t(s, io.read_request),
                    t(s, Some(io.sqe_last)),
                    t(s, Some(io.cqe)),
                    t(s, io.last_read_response),
                ) {
                    (Some(rr), Some(sl), Some(cq), Some(lr)) => Some((rr - sl) + (cq - lr)),
                    _ => None,
                };
                let network = match (io_c, compute, storage) {
                    (Some(a), Some(b), Some(c)) => Some(a as i64 - b as i64 - c as i64),
                    _ => None,
                };
                (compute, storage, network)
            };
            let mut anchors = BTreeMap::new();
            for (name, index) in [
                ("sqe_first", Some(io.sqe_first)),
                ("sqe_last", Some(io.sqe_last)),
                ("read_request", io.read_request),
                ("last_read_response", io.last_read_response),
                ("cqe", Some(io.cqe)),
            ] {
                for (tap, v) in [(c, "compute"), (s, "storage")] {
                    if let Some(at) = t(tap, index) {
                        anchors.insert(format!("{name}@{v}"), at);
                    }
                }
            }
            if let Some(at) = covering_ack(wire, &probe_time, io) {
                anchors.insert("ack@compute".into(), at);
            }
            IoTruth {
                anchors,
                op: io.op.into(),
                in_capsule: io.in_capsule,
                initiator_ip: io.host.to_string(),
                target_ip: io.target.to_string(),
                cid: io.cid,
                io_compute_ns: io_c,
                io_storage_ns: io_s,
                compute_ns,
                network_ns,
                storage_ns,
            }
        })
        .collect();
    Truth {
        scenario: meta.scenario,
        seed: meta.seed,
        files: meta.files,
        args: meta.args,
        path_mtu,
        packets: total,
        roce_packets: roce,
        non_roce_packets: non_roce,
        decode_errors,
        flows: flows.into_values().collect(),
        ios,
        io_outcomes: meta.io_outcomes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psn_reference_rules() {
        let mut s = PsnState::default();
        assert_eq!(s.observe(MOD - 2, 1), (false, 0));
        assert_eq!(s.observe(MOD - 1, 1), (false, 0));
        assert_eq!(s.observe(0, 1), (false, 0), "wraps");
        assert_eq!(s.observe(3, 1), (false, 2), "1 and 2 missing");
        assert_eq!(s.observe(1, 1), (true, 0), "go-back-N from 1");
        assert_eq!(s.observe(2, 1), (true, 0));
        assert_eq!(s.observe(3, 1), (true, 0));
        assert_eq!(s.observe(4, 3), (false, 0), "a READ spanning 3");
        assert_eq!(s.observe(7, 1), (false, 0));
    }
}
