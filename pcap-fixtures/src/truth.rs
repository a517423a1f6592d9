//! Ground truth, computed from what each tap emitted (not from the probe): per-flow
//! counters, the PSN analysis of docs/METRICS.md written out plainly, and each NVMe I/O's segment
//! latencies from the times the probe will see; for scenarios with collectives, the jobs,
//! steps and stragglers (see [`collective`]).

pub mod collective;

use crate::render::Delivered;
use crate::sim::{Packet, Role, Spec, Wire, COMPUTE, STORAGE};
use roceprobe::wire::bth::opcode as op;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
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
    /// Request messages: packets that end one (docs/METRICS.md, "Per flow").
    pub messages: u64,
    pub retx_packets: u64,
    pub retx_bytes: u64,
    /// Runs of retransmissions (go-back-N episodes).
    pub retx_episodes: u64,
    pub gap_psns: u64,
    pub nak_seq: u64,
    pub nak_rnr: u64,
    pub nak_other: u64,
    pub cnp: u64,
    /// CNPs on this flow whose throttled flow the probe cannot know.
    pub cnp_unattributed: u64,
    pub ecn_ce: u64,
    pub icrc_errors: u64,
    pub nvme_commands: u64,
    pub nvme_completions: u64,
    /// Bursts: runs of packets no more than `--flow-idle` (1 ms) apart.
    pub transmissions: u64,
    /// The mirror's second copies of this flow's packets (a routed hop mirrored at both
    /// ports), counted nowhere else; absent where there are none.
    #[serde(skip_serializing_if = "is_zero")]
    pub mirror_duplicates: u64,
    /// Fabric loss (docs/METRICS.md): gap PSNs at this tap that the same flow at the other tap did
    /// not have; absent for a flow seen at one tap only.
    pub fabric_loss_psns: Option<u64>,
    /// Request packets of their first transmission that the fabric dropped between the
    /// taps, counted at the tap that missed them. A loss shows as a gap (and so as fabric
    /// loss) only if a later packet arrives before the lost one is sent again.
    pub dropped_between_taps: Option<u64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// An NVMe I/O as the scenario made it: the wire packets that anchor its segments.
#[derive(Debug, Clone)]
pub struct IoRecord {
    /// `nvme_read`, `nvme_write` (data by RDMA READ) or `nvme_write` with in-capsule data.
    pub op: &'static str,
    pub in_capsule: bool,
    pub host: IpAddr,
    pub target: IpAddr,
    /// The target's QP: the I/O queue the command went to.
    pub target_qpn: u32,
    pub cid: u16,
    /// The data the command moves (its SGL's length).
    pub bytes: u32,
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
    pub target_qpn: u32,
    pub cid: u16,
    pub bytes: u32,
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
    /// The collectives' jobs and steps at the compute vantage (see [`collective`]), for
    /// scenarios that have collectives.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs: Option<Vec<collective::JobTruth>>,
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

/// Request packets that end a message: SEND Last/Only (0x02-0x05, 0x16, 0x17), RDMA WRITE
/// Last/Only (0x08-0x0B), READ Request (0x0C) and the atomics (0x13, 0x14), as the IBTA's
/// opcode table lists them.
fn ends_message(opcode: u8) -> bool {
    is_request(opcode) && matches!(opcode & 0x1F, 0x02..=0x05 | 0x08..=0x0C | 0x13 | 0x14 | 0x16 | 0x17)
}

/// Responses, which tell the probe which QP sent the requests they answer: READ Response
/// First/Middle/Last/Only, ACKNOWLEDGE and ATOMIC ACKNOWLEDGE (0x0D-0x12) of RC and XRC.
fn is_response(opcode: u8) -> bool {
    matches!(opcode >> 5, 0 | 5) && matches!(opcode & 0x1F, 0x0D..=0x12)
}

/// What an AETH says, read from its syndrome as the IBTA defines it: bits 7-5 are 000 for an
/// ACK, 001 for an RNR NAK and 011 for a NAK whose low five bits give the code (0 = PSN
/// sequence error).
#[derive(Debug, PartialEq, Eq)]
enum Syndrome {
    Ack,
    RnrNak,
    SequenceNak,
    OtherNak,
    Reserved,
}

fn syndrome(byte: u8) -> Syndrome {
    match (byte >> 5, byte & 0x1F) {
        (0b000, _) => Syndrome::Ack,
        (0b001, _) => Syndrome::RnrNak,
        (0b011, 0) => Syndrome::SequenceNak,
        (0b011, _) => Syndrome::OtherNak,
        _ => Syndrome::Reserved,
    }
}

/// The probe's default `--flow-idle`, which ends a transmission (docs/METRICS.md,
/// "Transmissions"); no scenario sets another.
const FLOW_IDLE_NS: u64 = 1_000_000;

/// Per flow and tap: the expected next PSN, and whether the last request packet was a
/// retransmission (a run of them is one go-back-N episode).
#[derive(Default)]
struct PsnState {
    expected: Option<u32>,
    in_retx: bool,
}

/// What one request packet was, by its PSN.
#[derive(Debug, PartialEq, Eq)]
struct PsnVerdict {
    retx: bool,
    /// The first retransmission after a packet that was not one.
    episode: bool,
    gap: u64,
}

const MOD: u32 = 1 << 24;
const HALF: u32 = 1 << 23;

impl PsnState {
    fn observe(&mut self, psn: u32, span: u32) -> PsnVerdict {
        let (retx, gap) = self.classify(psn, span);
        let episode = retx && !self.in_retx;
        self.in_retx = retx;
        PsnVerdict { retx, episode, gap }
    }

    /// Returns (retransmission, gap PSNs).
    fn classify(&mut self, psn: u32, span: u32) -> (bool, u64) {
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
                    && spec.ext.aeth.is_some_and(|a| syndrome(a.syndrome) == Syndrome::Ack)
                    && (spec.bth.psn.wrapping_sub(cqe.bth.psn) & (MOD - 1)) < (1 << 16) =>
            {
                probe_time.get(&(COMPUTE, i)).copied().filter(|&t| t >= cqe_at)
            }
            _ => None,
        })
        .min()
}

/// The per-tap counting of every delivered packet, in each tap's own order.
#[derive(Default)]
struct Tally {
    path_mtu: usize,
    flows: BTreeMap<Key, FlowTruth>,
    psn: HashMap<Key, PsnState>,
    decode_errors: BTreeMap<String, u64>,
    roce: u64,
    non_roce: u64,
    /// (tap, wire packet) → the time the probe gives it.
    probe_time: HashMap<(usize, usize), u64>,
    completions_seen: HashSet<(usize, IpAddr, IpAddr, u32, u32)>,
    /// Each flow's latest packet time, for its transmissions.
    last_seen: HashMap<Key, u64>,
    /// Flows that carried a response: the probe knows which QP their requests came from.
    answered: HashSet<Key>,
    /// Per tap and (source, destination) hosts: the QPNs their request flows go to.
    requesters: HashMap<(usize, IpAddr, IpAddr), BTreeSet<u32>>,
}

impl Tally {
    fn count(&mut self, d: &Delivered, wire: &Wire) {
        if d.duplicate {
            // Counted as a frame, and as its flow's duplicate: nothing else.
            let Packet::Roce { spec, .. } = &wire.packets[d.packet] else { unreachable!("copies are RoCE") };
            self.roce += 1;
            let key: Key = (d.tap, spec.src, spec.dst, spec.bth.dest_qp);
            self.flow(key, spec.bth.opcode).mirror_duplicates += 1;
            return;
        }
        self.probe_time.insert((d.tap, d.packet), d.probe_ns);
        let (spec, ecn) = match &wire.packets[d.packet] {
            Packet::Raw { error: Some(kind), .. } => {
                *self.decode_errors.entry((*kind).into()).or_insert(0) += 1;
                return;
            }
            Packet::Raw { error: None, .. } => {
                self.non_roce += 1;
                return;
            }
            Packet::Roce { spec, ecn, .. } => (spec, ecn[d.tap]),
        };
        self.roce += 1;
        let key: Key = (d.tap, spec.src, spec.dst, spec.bth.dest_qp);
        self.count_frame(key, d, spec, ecn);
        self.count_transmission(key, d.probe_ns);
        let opcode = spec.bth.opcode;
        if is_request(opcode) {
            self.count_request(key, spec);
        }
        if is_response(opcode) {
            self.answered.insert(key);
        }
        if let Role::Cnp { throttled_src, throttled_dst, throttled_qpn } = spec.role {
            self.count_cnp(key, (d.tap, throttled_src, throttled_dst, throttled_qpn));
        }
    }

    fn flow(&mut self, key: Key, opcode: u8) -> &mut FlowTruth {
        self.flows.entry(key).or_insert_with(|| FlowTruth {
            vantage: VANTAGES[key.0].into(),
            src_ip: key.1.to_string(),
            dst_ip: key.2.to_string(),
            dst_qpn: key.3,
            transport: transport_name(opcode).into(),
            ..Default::default()
        })
    }

    /// The counters every packet touches: size, opcode, ECN, ICRC, NVMe capsules, NAKs.
    fn count_frame(&mut self, key: Key, d: &Delivered, spec: &Spec, ecn: u8) {
        let opcode = spec.bth.opcode;
        // A completion counts once per tap: a resent copy answers a command already answered.
        let new_completion = spec.role == Role::NvmeCompletion
            && self.completions_seen.insert((d.tap, spec.src, spec.dst, spec.bth.dest_qp, spec.bth.psn));
        let f = self.flow(key, opcode);
        f.packets += 1;
        f.bytes += u64::from(d.wire_len);
        f.payload_bytes += spec.payload.len() as u64;
        *f.opcodes.entry(opcode.to_string()).or_insert(0) += 1;
        f.ecn_ce += u64::from(ecn == 3);
        f.icrc_errors += u64::from(spec.corrupt_icrc);
        // Every command capsule sent counts (a resent one again).
        f.nvme_commands += u64::from(spec.role == Role::NvmeCommand);
        f.nvme_completions += u64::from(new_completion);
        if opcode & 0x1F == op::ACKNOWLEDGE && opcode >> 5 != 4 {
            match spec.ext.aeth.map(|a| syndrome(a.syndrome)) {
                Some(Syndrome::SequenceNak) => f.nak_seq += 1,
                Some(Syndrome::OtherNak) => f.nak_other += 1,
                Some(Syndrome::RnrNak) => f.nak_rnr += 1,
                _ => {}
            }
        }
    }

    /// A packet after the flow was idle longer than `--flow-idle` starts a transmission.
    fn count_transmission(&mut self, key: Key, at: u64) {
        let starts = match self.last_seen.get(&key) {
            Some(&last) => at > last + FLOW_IDLE_NS,
            None => true,
        };
        let last = self.last_seen.entry(key).or_insert(at);
        *last = (*last).max(at);
        self.flows.get_mut(&key).expect("counted").transmissions += u64::from(starts);
    }

    fn count_request(&mut self, key: Key, spec: &Spec) {
        let opcode = spec.bth.opcode;
        let span = if opcode & 0x1F == op::READ_REQUEST {
            let len = spec.ext.reth.map_or(0, |r| r.dma_len) as usize;
            len.div_ceil(self.path_mtu).max(1) as u32
        } else {
            1
        };
        let v = self.psn.entry(key).or_default().observe(spec.bth.psn, span);
        self.requesters.entry((key.0, key.1, key.2)).or_default().insert(key.3);
        let f = self.flows.get_mut(&key).expect("counted");
        f.messages += u64::from(ends_message(opcode));
        if v.retx {
            f.retx_packets += 1;
            f.retx_bytes += spec.payload.len() as u64;
        }
        f.retx_episodes += u64::from(v.episode);
        f.gap_psns += v.gap;
    }

    /// A CNP (on flow `key`) throttles `throttled`. The probe can tell which flow that is
    /// when it has seen a response on the CNP's flow (which pairs it with the requests it
    /// answers) or when only one request flow goes between the two hosts that way; else it
    /// is unattributed, counted on the CNP's own flow. (No scenario sends a CNP on a
    /// connection made by CM, the third way the probe learns a pair.)
    fn count_cnp(&mut self, key: Key, throttled: Key) {
        let only = match self.requesters.get(&(throttled.0, throttled.1, throttled.2)) {
            Some(qpns) if qpns.len() == 1 => qpns.first().copied(),
            _ => None,
        };
        let target = if self.answered.contains(&key) {
            Some(throttled)
        } else {
            only.map(|qpn| (throttled.0, throttled.1, throttled.2, qpn))
        };
        match target {
            Some(t) => self.flow(t, 0).cnp += 1,
            None => self.flows.get_mut(&key).expect("counted").cnp_unattributed += 1,
        }
    }

    /// Fabric loss: first transmissions seen at one tap and dropped before the other. A
    /// retransmission is the same spec again: only the first copy of a PSN counts.
    fn fabric_loss(&mut self, wire: &Wire) {
        let mut first_copy: HashSet<(IpAddr, IpAddr, u32, u32)> = Default::default();
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
        let gaps: HashMap<Key, u64> = self.flows.iter().map(|(k, f)| (*k, f.gap_psns)).collect();
        for (k, f) in self.flows.iter_mut() {
            let other: Key = (1 - k.0, k.1, k.2, k.3);
            if let Some(other_gaps) = gaps.get(&other) {
                f.fabric_loss_psns = Some(f.gap_psns.saturating_sub(*other_gaps));
                f.dropped_between_taps = Some(lost.get(k).copied().unwrap_or(0));
            }
        }
    }
}

/// One I/O's segments (docs/METRICS.md, "I/O quality: segment latency") from its anchors'
/// times at each tap.
fn io_truth(io: &IoRecord, wire: &Wire, probe_time: &HashMap<(usize, usize), u64>) -> IoTruth {
    let t = |tap: usize, i: Option<usize>| i.and_then(|i| probe_time.get(&(tap, i)).copied());
    let (c, s) = (COMPUTE, STORAGE);
    let io_c = t(c, Some(io.cqe)).zip(t(c, Some(io.sqe_first))).map(|(a, b)| a - b);
    let io_s = t(s, Some(io.cqe)).zip(t(s, Some(io.sqe_last))).map(|(a, b)| a - b);
    let network = io_c.zip(io_s).map(|(a, b)| a as i64 - b as i64);
    let (compute_ns, storage_ns, network_ns) = if io.op == "nvme_read" {
        let compute = covering_ack(wire, probe_time, io).zip(t(c, Some(io.cqe))).map(|(a, b)| a - b);
        (compute, io_s, network)
    } else if io.in_capsule {
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
    IoTruth {
        anchors: anchors(io, wire, probe_time),
        op: io.op.into(),
        in_capsule: io.in_capsule,
        initiator_ip: io.host.to_string(),
        target_ip: io.target.to_string(),
        target_qpn: io.target_qpn,
        cid: io.cid,
        bytes: io.bytes,
        io_compute_ns: io_c,
        io_storage_ns: io_s,
        compute_ns,
        network_ns,
        storage_ns,
    }
}

/// The times each tap gave an I/O's anchor packets, by `name@vantage`.
fn anchors(io: &IoRecord, wire: &Wire, probe_time: &HashMap<(usize, usize), u64>) -> BTreeMap<String, u64> {
    let mut anchors = BTreeMap::new();
    for (name, index) in [
        ("sqe_first", Some(io.sqe_first)),
        ("sqe_last", Some(io.sqe_last)),
        ("read_request", io.read_request),
        ("last_read_response", io.last_read_response),
        ("cqe", Some(io.cqe)),
    ] {
        for (tap, v) in [(COMPUTE, "compute"), (STORAGE, "storage")] {
            if let Some(&at) = index.and_then(|i| probe_time.get(&(tap, i))) {
                anchors.insert(format!("{name}@{v}"), at);
            }
        }
    }
    if let Some(at) = covering_ack(wire, probe_time, io) {
        anchors.insert("ack@compute".into(), at);
    }
    anchors
}

pub fn compute(
    meta: Meta,
    wire: &Wire,
    delivered: &[Delivered],
    ios: &[IoRecord],
    collectives: Option<&collective::Collectives>,
) -> Truth {
    assert!(!meta.args.iter().any(|a| a == "--flow-idle"), "the truth assumes the default --flow-idle");
    let mut tally = Tally { path_mtu: meta.path_mtu, ..Default::default() };
    // Each tap's packets in the order the tap saw them, whatever order the mirror paths
    // delivered them in.
    let mut in_tap_order: Vec<&Delivered> = delivered.iter().collect();
    in_tap_order.sort_by_key(|d| (d.tap, d.tap_ns, d.packet, d.duplicate));
    for d in in_tap_order {
        tally.count(d, wire);
    }
    if delivered.iter().any(|d| d.tap == STORAGE) {
        tally.fabric_loss(wire);
    }
    let ios = ios.iter().map(|io| io_truth(io, wire, &tally.probe_time)).collect();
    let jobs = collectives.map(|c| collective::jobs(wire, delivered, meta.path_mtu, c));
    Truth {
        scenario: meta.scenario,
        seed: meta.seed,
        files: meta.files,
        args: meta.args,
        path_mtu: meta.path_mtu,
        packets: delivered.len() as u64,
        roce_packets: tally.roce,
        non_roce_packets: tally.non_roce,
        decode_errors: tally.decode_errors,
        flows: tally.flows.into_values().collect(),
        ios,
        io_outcomes: meta.io_outcomes,
        jobs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psn_reference_rules() {
        let mut s = PsnState::default();
        let v = |retx, episode, gap| PsnVerdict { retx, episode, gap };
        assert_eq!(s.observe(MOD - 2, 1), v(false, false, 0));
        assert_eq!(s.observe(MOD - 1, 1), v(false, false, 0));
        assert_eq!(s.observe(0, 1), v(false, false, 0), "wraps");
        assert_eq!(s.observe(3, 1), v(false, false, 2), "1 and 2 missing");
        assert_eq!(s.observe(1, 1), v(true, true, 0), "go-back-N from 1");
        assert_eq!(s.observe(2, 1), v(true, false, 0));
        assert_eq!(s.observe(3, 1), v(true, false, 0));
        assert_eq!(s.observe(4, 3), v(false, false, 0), "a READ spanning 3");
        assert_eq!(s.observe(7, 1), v(false, false, 0));
        assert_eq!(s.observe(5, 1), v(true, true, 0), "a second episode");
    }

    #[test]
    fn aeth_syndromes() {
        assert_eq!(syndrome(0x1F), Syndrome::Ack);
        assert_eq!(syndrome(0x3F), Syndrome::RnrNak);
        assert_eq!(syndrome(0x60), Syndrome::SequenceNak);
        assert_eq!(syndrome(0x62), Syndrome::OtherNak);
        assert_eq!(syndrome(0x40), Syndrome::Reserved);
    }
}
