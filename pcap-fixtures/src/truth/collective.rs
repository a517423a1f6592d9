//! The truth about collectives: jobs, their steps and each step's straggler, computed from the
//! packets the compute tap saw (the times the probe gives them), never from roceprobe's
//! analysis. The step analysis is to follow exactly these definitions:
//!
//! - A **job** is a set of hosts whose RC RDMA WRITE / SEND traffic (not NVMe) connects
//!   them: one job per connected group of hosts, where two hosts are connected when a
//!   request flow goes from one to the other. A host pair that carried an NVMe/RDMA command
//!   or completion capsule (either way) connects nothing. A job is named by its lowest host
//!   address; its hosts are listed in numeric order (10.9.0.9 before 10.9.0.10).
//! - A flow is (vantage, source IP, destination IP, destination QPN), as everywhere in
//!   roceprobe. Only **request flows** count for steps: flows that carry RC SEND or RDMA
//!   WRITE request packets (opcodes 0x00-0x0B), not the direction that acknowledges them.
//! - A flow's **transmission** is a burst: its packets no more than `--flow-idle` (default
//!   1 ms) apart (docs/METRICS.md, "Transmissions"); start = first packet time, end = last
//!   packet time.
//! - A **step** of a job, at one vantage (the truth gives the compute vantage's): the
//!   transmissions of the job's request flows taken by start time; a transmission that
//!   starts more than the step gap (default 2 ms) after the latest end so far begins a new
//!   step. Step start = earliest transmission start, end = latest transmission end, `flows`
//!   = request flows with a transmission in it, `bytes` = the wire bytes (as the probe
//!   receives them) of those transmissions' packets.
//! - In a step, a flow's **finish** is the end of its transmission(s) in the step. The
//!   **straggler** is the flow that finished last (ties: the lowest (source, destination,
//!   QPN), addresses compared as numbers); its **host** is its source address. **lag_ns** =
//!   the straggler's finish − the median finish of the step's flows (with an even count, the
//!   lower of the two middle values).
//! - The straggler's **reason**, from the step: `loss` if its request packets in the step
//!   include retransmissions or PSN gaps (docs/METRICS.md, "PSN analysis", the PSN state
//!   running over the whole flow); else `nak` if the flow that answers it (the other
//!   direction of its QP) carried NAKs (PSN sequence error or RNR) seen from the step's
//!   start to its end; else `congestion` if CNPs that throttle it were seen from the step's
//!   start to its end, or its packets in the step were ECN-CE marked; else `none` (the host
//!   itself, or an imbalance).
//!
//! `injected` says what the scenario did to hold a host back in that step, if anything.

use super::{is_request, syndrome, PsnState, Syndrome, FLOW_IDLE_NS};
use crate::render::Delivered;
use crate::sim::{Packet, Role, Wire, COMPUTE};
use roceprobe::wire::bth::opcode as op;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::IpAddr;

/// The probe's default step gap: a pause of a job's request flows longer than this ends a
/// step.
pub const STEP_GAP_NS: u64 = 2_000_000;

/// How a scenario holds a host back in a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// A packet of its flow is lost in the fabric: NAK and go-back-N.
    Loss,
    /// Its packets are CE-marked, answered by CNPs, and it sends more slowly.
    Congestion,
    /// It starts late: no loss, no marks.
    SlowHost,
}

impl Cause {
    pub fn name(self) -> &'static str {
        match self {
            Cause::Loss => "loss",
            Cause::Congestion => "congestion",
            Cause::SlowHost => "slow_host",
        }
    }

    /// The reason the truth must give the straggler this cause makes.
    pub fn reason(self) -> &'static str {
        match self {
            Cause::Loss => "loss",
            Cause::Congestion => "congestion",
            Cause::SlowHost => "none",
        }
    }
}

/// An RC connection of a job: which QP sends requests and which answers them.
#[derive(Debug, Clone, Copy)]
pub struct QpPair {
    pub requester: IpAddr,
    pub requester_qpn: u32,
    pub responder: IpAddr,
    pub responder_qpn: u32,
}

/// A host held back in one step of its job.
#[derive(Debug, Clone, Copy)]
pub struct Injection {
    pub host: IpAddr,
    pub cause: Cause,
    /// The step's number in its job, as the scenario made it (from 0).
    pub step: usize,
    /// The first packet the held-back flow sent in that step (an index in `Wire::packets`):
    /// the truth puts the injection on the step that holds it.
    pub first_packet: usize,
}

/// What the generator knows about a scenario's collectives.
#[derive(Debug, Clone, Default)]
pub struct Collectives {
    pub connections: Vec<QpPair>,
    pub injections: Vec<Injection>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FlowId {
    pub src_ip: String,
    pub dst_ip: String,
    pub dst_qpn: u32,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct StepTruth {
    pub start_ns: u64,
    pub end_ns: u64,
    pub duration_ns: u64,
    pub flows: u64,
    pub bytes: u64,
    pub straggler: FlowId,
    pub straggler_host: String,
    pub lag_ns: u64,
    /// `loss`, `nak`, `congestion` or `none`.
    pub reason: String,
    /// What the scenario did in this step: `loss`, `congestion`, `slow_host`, or null.
    pub injected: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct JobTruth {
    /// The job's lowest host address.
    pub name: String,
    /// Its hosts, lowest first.
    pub hosts: Vec<String>,
    /// Its steps at the compute vantage, in time order.
    pub steps: Vec<StepTruth>,
}

/// (source, destination, destination QPN): a flow at the compute vantage.
type Flow = (IpAddr, IpAddr, u32);

/// One transmission of a request flow.
struct Tx {
    flow: Flow,
    start: u64,
    end: u64,
    bytes: u64,
    /// Its packets, as positions in the compute tap's list.
    packets: Vec<usize>,
}

/// A packet at the compute tap.
struct Seen {
    at: u64,
    wire_len: u64,
    packet: usize,
}

/// RC SEND and RDMA WRITE requests (First, Middle, Last, Only, with Immediate or Invalidate).
fn is_send_or_write(opcode: u8) -> bool {
    opcode >> 5 == 0 && opcode & 0x1F <= 0x0B
}

/// The jobs, steps and stragglers of the traffic the compute tap saw.
pub fn jobs(wire: &Wire, delivered: &[Delivered], path_mtu: usize, c: &Collectives) -> Vec<JobTruth> {
    // The compute tap's packets in the order it saw them.
    let mut at_tap: Vec<&Delivered> = delivered.iter().filter(|d| d.tap == COMPUTE && !d.duplicate).collect();
    at_tap.sort_by_key(|d| (d.tap_ns, d.packet));
    let seen: Vec<Seen> = at_tap
        .iter()
        .map(|d| Seen { at: d.probe_ns, wire_len: u64::from(d.wire_len), packet: d.packet })
        .collect();
    let spec = |s: &Seen| match &wire.packets[s.packet] {
        Packet::Roce { spec, ecn, .. } => Some((spec, ecn[COMPUTE])),
        Packet::Raw { .. } => None,
    };

    // Request flows, and the host pairs NVMe/RDMA capsules went between.
    let mut request_flows: BTreeSet<Flow> = BTreeSet::new();
    let mut nvme_pairs: HashSet<(IpAddr, IpAddr)> = HashSet::new();
    for s in &seen {
        let Some((sp, _)) = spec(s) else { continue };
        if is_send_or_write(sp.bth.opcode) {
            request_flows.insert((sp.src, sp.dst, sp.bth.dest_qp));
        }
        if matches!(sp.role, Role::NvmeCommand | Role::NvmeCompletion) {
            nvme_pairs.insert((sp.src.min(sp.dst), sp.src.max(sp.dst)));
        }
    }
    request_flows.retain(|f| !nvme_pairs.contains(&(f.0.min(f.1), f.0.max(f.1))));

    // Jobs: hosts joined by request flows (a union-find over addresses).
    let mut parent: BTreeMap<IpAddr, IpAddr> = BTreeMap::new();
    fn root(parent: &mut BTreeMap<IpAddr, IpAddr>, h: IpAddr) -> IpAddr {
        let p = *parent.entry(h).or_insert(h);
        if p == h {
            return h;
        }
        let r = root(parent, p);
        parent.insert(h, r);
        r
    }
    for &(src, dst, _) in &request_flows {
        let (a, b) = (root(&mut parent, src), root(&mut parent, dst));
        // The lower address is the root, so a job's root is its name.
        parent.insert(a.max(b), a.min(b));
    }
    let hosts: Vec<IpAddr> = parent.keys().copied().collect();
    let mut members: BTreeMap<IpAddr, Vec<IpAddr>> = BTreeMap::new();
    for h in hosts {
        let r = root(&mut parent, h);
        members.entry(r).or_default().push(h);
    }

    // Each request flow's transmissions, and which of its request packets were
    // retransmissions or followed a gap.
    let mut txs: BTreeMap<Flow, Vec<Tx>> = BTreeMap::new();
    let mut psn: HashMap<Flow, PsnState> = HashMap::new();
    let mut irregular: HashSet<usize> = HashSet::new();
    for (i, s) in seen.iter().enumerate() {
        let Some((sp, _)) = spec(s) else { continue };
        let flow = (sp.src, sp.dst, sp.bth.dest_qp);
        if !request_flows.contains(&flow) {
            continue;
        }
        let list = txs.entry(flow).or_default();
        match list.last_mut() {
            Some(tx) if s.at <= tx.end + FLOW_IDLE_NS => {
                tx.end = tx.end.max(s.at);
                tx.bytes += s.wire_len;
                tx.packets.push(i);
            }
            _ => list.push(Tx { flow, start: s.at, end: s.at, bytes: s.wire_len, packets: vec![i] }),
        }
        let opcode = sp.bth.opcode;
        if is_request(opcode) {
            let span = if opcode & 0x1F == op::READ_REQUEST {
                let len = sp.ext.reth.map_or(0, |r| r.dma_len) as usize;
                len.div_ceil(path_mtu).max(1) as u32
            } else {
                1
            };
            let v = psn.entry(flow).or_default().observe(sp.bth.psn, span);
            if v.retx || v.gap > 0 {
                irregular.insert(i);
            }
        }
    }

    // The flow that answers each request flow: the other direction of its QP.
    let answering: HashMap<Flow, Flow> = c
        .connections
        .iter()
        .map(|q| ((q.requester, q.responder, q.responder_qpn), (q.responder, q.requester, q.requester_qpn)))
        .collect();
    // NAKs (sequence error, RNR) by the flow that carries them, and CNPs by the flow they
    // throttle, with their times.
    let mut naks: HashMap<Flow, Vec<u64>> = HashMap::new();
    let mut cnps: HashMap<Flow, Vec<u64>> = HashMap::new();
    for s in &seen {
        let Some((sp, _)) = spec(s) else { continue };
        let opcode = sp.bth.opcode;
        if opcode & 0x1F == op::ACKNOWLEDGE
            && opcode >> 5 != 4
            && matches!(
                sp.ext.aeth.map(|a| syndrome(a.syndrome)),
                Some(Syndrome::SequenceNak | Syndrome::RnrNak)
            )
        {
            naks.entry((sp.src, sp.dst, sp.bth.dest_qp)).or_default().push(s.at);
        }
        if let Role::Cnp { throttled_src, throttled_dst, throttled_qpn } = sp.role {
            cnps.entry((throttled_src, throttled_dst, throttled_qpn)).or_default().push(s.at);
        }
    }
    let within = |times: Option<&Vec<u64>>, start: u64, end: u64| {
        times.is_some_and(|v| v.iter().any(|&t| t >= start && t <= end))
    };

    let mut out = Vec::new();
    for (name, hosts) in &members {
        let in_job: BTreeSet<IpAddr> = hosts.iter().copied().collect();
        let mut job_txs: Vec<&Tx> =
            txs.iter().filter(|(f, _)| in_job.contains(&f.0)).flat_map(|(_, v)| v.iter()).collect();
        job_txs.sort_by_key(|x| (x.start, x.flow));
        // Steps: a transmission starting more than the step gap after the latest end so far
        // begins a new one.
        let mut steps: Vec<Vec<&Tx>> = Vec::new();
        let mut latest_end = 0;
        for x in job_txs {
            match steps.last_mut() {
                Some(step) if x.start <= latest_end + STEP_GAP_NS => {
                    step.push(x);
                    latest_end = latest_end.max(x.end);
                }
                _ => {
                    steps.push(vec![x]);
                    latest_end = x.end;
                }
            }
        }
        let steps = steps
            .iter()
            .map(|step| {
                let start = step.iter().map(|x| x.start).min().expect("a step has a transmission");
                let end = step.iter().map(|x| x.end).max().expect("a step has a transmission");
                let mut finish: BTreeMap<Flow, u64> = BTreeMap::new();
                for x in step {
                    let f = finish.entry(x.flow).or_insert(x.end);
                    *f = (*f).max(x.end);
                }
                // The latest finish; the map is in flow order, so a tie keeps the lowest flow.
                let (mut straggler, mut last) = (*finish.keys().next().expect("a flow"), 0);
                for (&f, &t) in &finish {
                    if t > last {
                        (straggler, last) = (f, t);
                    }
                }
                let mut times: Vec<u64> = finish.values().copied().collect();
                times.sort_unstable();
                let median = times[(times.len() - 1) / 2];
                let own: Vec<usize> = step
                    .iter()
                    .filter(|x| x.flow == straggler)
                    .flat_map(|x| x.packets.iter().copied())
                    .collect();
                let reason = if own.iter().any(|i| irregular.contains(i)) {
                    "loss"
                } else if within(answering.get(&straggler).and_then(|a| naks.get(a)), start, end) {
                    "nak"
                } else if within(cnps.get(&straggler), start, end)
                    || own.iter().any(|&i| spec(&seen[i]).is_some_and(|(_, ecn)| ecn == 3))
                {
                    "congestion"
                } else {
                    "none"
                };
                StepTruth {
                    start_ns: start,
                    end_ns: end,
                    duration_ns: end - start,
                    flows: finish.len() as u64,
                    bytes: step.iter().map(|x| x.bytes).sum(),
                    straggler: FlowId {
                        src_ip: straggler.0.to_string(),
                        dst_ip: straggler.1.to_string(),
                        dst_qpn: straggler.2,
                    },
                    straggler_host: straggler.0.to_string(),
                    lag_ns: last - median,
                    reason: reason.into(),
                    injected: None,
                }
            })
            .collect();
        out.push(JobTruth {
            name: name.to_string(),
            hosts: hosts.iter().map(IpAddr::to_string).collect(),
            steps,
        });
    }

    // Each injection on the step of its host's job that holds its first packet.
    let time_of: HashMap<usize, u64> = seen.iter().map(|s| (s.packet, s.at)).collect();
    for inj in &c.injections {
        let at = time_of[&inj.first_packet];
        let host = inj.host.to_string();
        let job = out.iter_mut().find(|j| j.hosts.contains(&host)).expect("the held-back host is in a job");
        let step = job
            .steps
            .iter_mut()
            .find(|s| s.start_ns <= at && at <= s.end_ns)
            .expect("the injection's packet is in a step");
        assert!(step.injected.is_none(), "two injections in one step of {}", job.name);
        step.injected = Some(inj.cause.name().into());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::{Conn, Endpoint, Msg};
    use crate::render::Delivery;
    use crate::sim::{Fate, Side};
    use roceprobe::wire::ib_ext::{Aeth, Reth};

    const T0: u64 = 1_000_000_000;

    /// One-way RC connections between `(from, to)` hosts, each sending a 64-byte WRITE at each
    /// of its times (ns after `T0`), acknowledged 3 µs later; the jobs of what the compute tap
    /// saw.
    fn jobs_of(flows: &[(&str, &str, &[u64])]) -> Vec<JobTruth> {
        let mut wire = Wire::new(2_000);
        let mut c = Collectives::default();
        for (i, (from, to, times)) in flows.iter().enumerate() {
            let qpn = 0x10 + i as u32;
            let mut conn = Conn::new(
                Endpoint::new(from, Side::Compute, qpn, 0),
                Endpoint::new(to, Side::Compute, qpn + 0x100, 0),
                1024,
            );
            c.connections.push(QpPair {
                requester: conn.a.ip,
                requester_qpn: qpn,
                responder: conn.b.ip,
                responder_qpn: qpn + 0x100,
            });
            for &t in times.iter() {
                let reth = Reth { va: 0, rkey: 1, dma_len: 64 };
                let sent = conn.message(
                    &mut wire,
                    true,
                    Msg::Write(reth),
                    &[0; 64],
                    T0 + t,
                    None,
                    Role::Plain,
                    &mut |_| Fate::Delivered,
                );
                conn.complete_message(false);
                conn.ack(&mut wire, false, sent.last_psn, Aeth::ack(31, 0), T0 + t + 3_000, Fate::Delivered);
            }
        }
        let delivered = Delivery::ComputeOnly.render(&wire);
        jobs(&wire, &delivered, 1024, &c)
    }

    #[test]
    fn a_step_ends_at_a_pause_longer_than_the_step_gap() {
        let gap = STEP_GAP_NS;
        let j = jobs_of(&[
            ("10.9.0.1", "10.9.0.2", &[0, 10_000]),
            ("10.9.0.2", "10.9.0.3", &[5_000]),
            // Exactly the step gap after the latest end (10 µs): the same step.
            ("10.9.0.3", "10.9.0.1", &[10_000 + gap]),
            // Longer: the next step.
            ("10.9.0.1", "10.9.0.3", &[10_000 + 2 * gap + 1]),
        ]);
        assert_eq!(j.len(), 1);
        let s = &j[0].steps;
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].start_ns, s[0].end_ns, s[0].flows), (T0, T0 + 10_000 + gap, 3));
        assert_eq!((s[1].start_ns, s[1].flows, s[1].lag_ns), (T0 + 10_000 + 2 * gap + 1, 1, 0));
        // The WRITE Only frames of 14 + 20 + 8 + 12 + 16 + 64 + 4 bytes; no ACK counts.
        assert_eq!(s[0].bytes, 4 * 138);
    }

    #[test]
    fn the_straggler_is_the_lowest_of_the_last_and_lags_the_lower_median() {
        let j = jobs_of(&[
            ("10.9.0.1", "10.9.0.2", &[0, 10_000]),
            ("10.9.0.2", "10.9.0.3", &[0, 20_000]),
            ("10.9.0.4", "10.9.0.1", &[0, 30_000]),
            ("10.9.0.3", "10.9.0.4", &[0, 30_000]),
        ]);
        let s = &j[0].steps[0];
        // Two flows finish last; the lower one is named. The median of four finishes is the
        // second.
        assert_eq!(
            s.straggler,
            FlowId { src_ip: "10.9.0.3".into(), dst_ip: "10.9.0.4".into(), dst_qpn: 0x113 }
        );
        assert_eq!((s.straggler_host.as_str(), s.lag_ns, s.reason.as_str()), ("10.9.0.3", 10_000, "none"));
    }

    #[test]
    fn jobs_are_connected_hosts_named_by_the_lowest_address() {
        let j = jobs_of(&[
            ("10.9.0.10", "10.9.0.9", &[0]),
            ("10.9.0.9", "10.9.0.100", &[0]),
            ("10.8.0.2", "10.8.0.1", &[0]),
        ]);
        let got: Vec<(&str, Vec<&str>)> =
            j.iter().map(|j| (j.name.as_str(), j.hosts.iter().map(String::as_str).collect())).collect();
        assert_eq!(
            got,
            [
                ("10.8.0.1", vec!["10.8.0.1", "10.8.0.2"]),
                ("10.9.0.9", vec!["10.9.0.9", "10.9.0.10", "10.9.0.100"])
            ]
        );
    }
}
